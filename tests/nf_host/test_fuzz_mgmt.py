"""Fuzz of the management plane (docs/security.md), a fixed number of seeded cases (the same
sequence on any machine, so a failure replays), through mutual TLS as in a deployment:

* replication frames: mutated and random msgpack messages after a peer's hello, at a worker's
  replication server; it closes what it cannot use, counts it, and still replicates afterwards;
* control RPCs: mutated request bytes and random field values at every `NfControl` method; each
  call is answered (a reply, `ok=false`, or a refused request), no value out of range reaches the
  workers, and the server still answers afterwards.

Run: .venv/bin/pytest tests/nf_host/test_fuzz_mgmt.py
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
from collections.abc import Iterator
from typing import Any, TypeVar

import grpc
import msgpack
import pytest

from contract.commands import Returns, answer, as_command
from contract.proto import nf_control_pb2 as pb
from contract.replication import Ack, encode
from contract.results import FenceResult, PromoteResult, ReleaseResult, SlotFlows
from mgmt.pki import local_pki
from mgmt.tls import control_channel, nf_identity
from nf_host import replication
from nf_host.config import NfHostConfig
from nf_host.control import serve
from nf_host.peer_policy import hello
from nf_host.tls_streams import TlsStreams
from tests.nf_host.test_replication_robustness import delta, guarded
from tests.support.procs import free_port

pytestmark = [pytest.mark.unit, pytest.mark.slow]

FRAME_CASES = 150
RPC_CASES = 400
KINDS = ["h", "d", "a", "f", "r", "bye", "x", "m", "s", "t", ""]


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        op = rng.random()
        if op < 0.5 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op < 0.75:
            b.insert(rng.randrange(len(b) + 1), rng.randrange(256))
        elif b:
            del b[rng.randrange(len(b))]
    return bytes(b)


def _value(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.randrange(8 if depth < 3 else 5)
    if pick == 0:
        return rng.choice([0, 1, -1, 2 ** 16, 2 ** 63 - 1, -(2 ** 63), rng.randrange(1 << 32)])
    if pick == 1:
        return rng.random() * rng.choice([1, 1e300, -1])
    if pick == 2:
        return rng.randbytes(rng.randrange(20))
    if pick == 3:
        return rng.choice(["", "x", "127.0.0.1:1", "\u00e9" * 3])
    if pick == 4:
        return rng.choice([None, True, False])
    if pick == 5:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(["t", "b", "s", "f", "slot", "nf", 1, b"k"]): _value(rng, depth + 1)
            for _ in range(rng.randrange(4))}


def _frame(rng: random.Random) -> bytes:
    """One fuzzed frame: a valid message mutated, or a random message of a random kind."""
    if rng.random() < 0.5:
        return _mutate(rng, delta(rng.randrange(16), rng.randrange(1, 50)))
    msg = {"t": rng.choice(KINDS), **{k: _value(rng) for k in rng.sample("bsfwnp", 3)}}
    body: bytes = msgpack.packb(msg, use_bin_type=True)
    return len(body).to_bytes(4, "big") + body


def test_replication_server_survives_fuzzed_frames_over_tls() -> None:
    rng = random.Random(2024)

    async def body() -> None:
        saved = replication.TRANSPORT
        server_tls = TlsStreams(nf_identity(local_pki(), 1))
        replication.TRANSPORT = server_tls
        peer = TlsStreams(nf_identity(local_pki(), 9))
        errors: list[dict[str, Any]] = []
        asyncio.get_running_loop().set_exception_handler(lambda _l, ctx: errors.append(ctx))
        x = guarded(1)
        await x.w.start()
        try:
            await x.w.command("set_peers", {"peers": [[9, "127.0.0.1:1"]]})
            for _ in range(FRAME_CASES):
                r, w = await peer.open_connection("127.0.0.1", x.port)
                frames = [_frame(rng) for _ in range(rng.randint(1, 4))]
                w.write(encode(hello(9, 0, 1)) + b"".join(frames))
                await w.drain()
                w.close()  # (a truncated frame: the server sees the end of the stream)
                with contextlib.suppress(OSError, TimeoutError):
                    await asyncio.wait_for(w.wait_closed(), 2)
            # still replicating: a peer's delta is applied and acknowledged
            r, w = await peer.open_connection("127.0.0.1", x.port)
            w.write(encode(hello(9, 0, 1)) + delta(3, 10_000))
            assert await asyncio.wait_for(replication.read_message(r), 5) == Ack(10_000)
            w.close()
            st = x.w.status()
            assert st.repl_errors + st.repl_refused > 0  # what it could not use, counted
            assert server_tls.refused == 0
            assert errors == []  # nothing escaped to the event loop
        finally:
            await x.w.stop()
            replication.TRANSPORT = saved

    asyncio.run(asyncio.wait_for(body(), 180))


R = TypeVar("R")


class RecordingPool:
    """The worker pool's surface the control servicer uses: answers like workers, records
    every command that got through."""

    procs: list[Any] = []

    def __init__(self) -> None:
        self.commands: list[tuple[str, dict[str, Any]]] = []

    def broadcast(self, cmd: Returns[R]) -> list[R]:
        self.commands.append((cmd.NAME, dataclasses.asdict(as_command(cmd))))
        return []

    def request(self, worker: int, cmd: Returns[R], timeout: float = 10.0) -> R:
        name = cmd.NAME
        self.commands.append((name, dataclasses.asdict(as_command(cmd))))
        return answer(cmd, {"promote": PromoteResult(replayed=0, slots=[]),
                            "flows": SlotFlows(version=0, last_seq=0, flows=[]),
                            "release": ReleaseResult(0, 0, 0, delta=False),
                            "cancel_adopt": FenceResult(started=False)}.get(name))

    def alive(self) -> bool:
        return True

    def worker_of(self, slot: int) -> int:
        return 0

    def heartbeats_withheld(self) -> int:
        return 0


REQUESTS: dict[str, Any] = {
    "Status": pb.StatusRequest(),
    "Heartbeat": pb.HeartbeatRequest(counter=3),
    "SetRole": pb.SetRoleRequest(role=pb.BACKUP),
    "SetBackup": pb.SetBackupRequest(backup_nf_id=2, address="127.0.0.1:9002"),
    "SetClusterPeers": pb.SetClusterPeersRequest(
        peers=[pb.Peer(nf_id=2, address="127.0.0.1:9002")]),
    "AssignSlots": pb.AssignSlotsRequest(slots=[pb.SlotEpoch(slot=5, epoch=1, next_seq=1)],
                                         as_backup=True, primary_nf_id=2),
    "Adopt": pb.AdoptRequest(slot=5, epoch=2, from_nf_id=2, from_address="127.0.0.1:9002"),
    "CancelAdopt": pb.AdoptRequest(slot=5, epoch=2),
    "Release": pb.ReleaseRequest(slot=5, to_nf_id=2, to_address="127.0.0.1:9002"),
    "Promote": pb.PromoteRequest(slots=[5], dead_nf_id=2, backup_nf_id=3,
                                 backup_address="127.0.0.1:9003"),
    "SetSuccessor": pb.SetSuccessorRequest(primary_nf_id=2, successor_nf_id=3,
                                           successor_address="127.0.0.1:9003"),
    "DumpSlot": pb.DumpSlotRequest(slot=5),
    "UpdateNf": pb.UpdateNfRequest(params_json='{"a": 1}'),
}


@pytest.fixture
def control() -> Iterator[tuple[grpc.Channel, RecordingPool]]:
    address = f"127.0.0.1:{free_port()}"
    pool = RecordingPool()
    server = serve(NfHostConfig(nf_id=1, interface="lo", control=address,
                                pki_dir=str(local_pki())), pool)  # type: ignore[arg-type]
    channel = control_channel(address, 1, local_pki())
    try:
        yield channel, pool
    finally:
        channel.close()
        server.stop(None).wait()


def _in_range(args: Any) -> bool:
    """No slot, epoch or NF id that does not fit 16 bits in a command the workers got."""
    if isinstance(args, dict):
        return all(_in_range(v) and (not isinstance(v, int) or k not in
                   ("slot", "epoch", "nf_id", "from_nf", "copy_nf", "to_nf", "primary", "successor",
                    "backup", "dead") or 0 <= v <= 0xFFFF) for k, v in args.items())
    if isinstance(args, (list, tuple)):
        return all(_in_range(v) for v in args)
    return True


def test_control_api_answers_fuzzed_rpcs(control: tuple[grpc.Channel, RecordingPool]) -> None:
    channel, pool = control
    rng = random.Random(7)
    calls = {m: channel.unary_unary(f"/nfcluster.nf.NfControl/{m}") for m in REQUESTS}
    outcomes: dict[str, int] = {}
    well_formed: dict[str, int] = {}
    for _ in range(RPC_CASES):
        method = rng.choice(sorted(REQUESTS))
        data = REQUESTS[method].SerializeToString()
        mutated = rng.random() < 0.5
        if mutated:
            data = _mutate(rng, data)
        else:  # well-formed, with random values in every integer field
            req = type(REQUESTS[method])()
            req.CopyFrom(REQUESTS[method])
            for field in req.DESCRIPTOR.fields:
                if field.type in (field.TYPE_UINT32, field.TYPE_UINT64, field.TYPE_INT32) \
                        and not field.is_repeated and field.enum_type is None:
                    setattr(req, field.name, rng.choice([0, 1, 0xFFFF, 0x10000, 0xFFFFFFFF]))
            data = req.SerializeToString()
        try:
            calls[method](data, timeout=5)
            outcome = "answered"
        except grpc.RpcError as exc:
            outcome = exc.code().name
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if not mutated:
            well_formed[outcome] = well_formed.get(outcome, 0) + 1
    # every call answered, or refused as undecodable (INTERNAL) / a role out of range
    # (UNAVAILABLE is never seen: the server stayed up); no servicer crash (UNKNOWN); every
    # well-formed one answered (an out-of-range value in the reply's error, not a failed call)
    assert set(outcomes) <= {"answered", "INTERNAL"}, outcomes
    assert set(well_formed) == {"answered"} and well_formed["answered"] > RPC_CASES // 3, well_formed
    bad = [(name, args) for name, args in pool.commands if not _in_range(args)]
    assert bad == []
    reply = pb.HeartbeatReply.FromString(calls["Heartbeat"](
        pb.HeartbeatRequest(counter=99).SerializeToString(), timeout=5))
    assert reply.counter == 99 and reply.nf_id == 1
