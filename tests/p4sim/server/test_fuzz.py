"""Fuzz: malformed protobufs at every RPC and malformed packets at the pipeline, a fixed number of
seeded cases (the same sequence on any machine, so a failure replays); the server must keep
answering and forwarding.

Run: .venv/bin/pytest tests/p4sim/server/test_fuzz.py
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

import grpc
import pytest
from finsy.proto import U128, p4r
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from tests.p4sim.server.conftest import Harness, RealProgram
from tests.p4sim.server.entity_builders import mc_group, table

pytestmark = [pytest.mark.unit, pytest.mark.slow]

Real = tuple[Harness, object, RealProgram]

RPC_CASES = 400      # malformed unary requests
STREAM_MESSAGES = 300  # malformed stream messages after an arbitration
PACKET_CASES = 1000  # malformed packets on every port
METHODS = [
    "Write",
    "Read",
    "SetForwardingPipelineConfig",
    "GetForwardingPipelineConfig",
    "Capabilities",
]


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


def _route(prog: RealProgram, prefix: int, port: int) -> p4r.Update:
    return table(prog.route(prefix, 24, "ipv4_forward", dst_addr=0x020000000002, port=port))


def _seeds(prog: RealProgram) -> list[bytes]:
    w = p4r.WriteRequest(
        device_id=1,
        election_id=U128.encode(10),
        updates=[_route(prog, 0x0A000100, 1), mc_group(3, [(1, 1)]), _route(prog, 0x0A000300, 3)],
    )
    r = p4r.ReadRequest(
        device_id=1,
        entities=[
            p4r.Entity(table_entry=p4r.TableEntry()),
            p4r.Entity(
                counter_entry=p4r.CounterEntry(counter_id=prog.id_of("counters", "port_packets"))
            ),
        ],
    )
    return [w.SerializeToString(), r.SerializeToString()]


def _raw(channel: grpc.Channel, method: str) -> Callable[[bytes], object]:
    path = f"/p4.v1.P4Runtime/{method}"
    if method == "Read":
        call = channel.unary_stream(path)
        return lambda data: list(call(data, timeout=2))
    return channel.unary_unary(path)  # type: ignore[no-any-return]


def _fuzz_rpcs(h: Harness, prog: RealProgram, rng: random.Random, cases: int) -> int:
    calls = {m: _raw(h.channel, m) for m in METHODS}
    seeds = _seeds(prog)
    n = 0
    for _ in range(cases):
        method = rng.choice(METHODS)
        data = (
            _mutate(rng, rng.choice(seeds))
            if rng.random() < 0.8
            else rng.randbytes(rng.randrange(64))
        )
        try:
            calls[method](data)
        except grpc.RpcError as exc:
            assert exc.code() != grpc.StatusCode.UNAVAILABLE
        n += 1
    return n


def _fuzz_stream(h: Harness, rng: random.Random, messages: int) -> None:
    path = "/p4.v1.P4Runtime/StreamChannel"

    def requests() -> Iterator[bytes]:
        arb = p4r.StreamMessageRequest(
            arbitration=p4r.MasterArbitrationUpdate(device_id=1, election_id=U128.encode(10))
        )
        yield arb.SerializeToString()
        out = p4r.StreamMessageRequest(
            packet=p4r.PacketOut(
                payload=bytes(60), metadata=[p4r.PacketMetadata(metadata_id=1, value=b"\x02")]
            )
        ).SerializeToString()
        for _ in range(messages):
            yield _mutate(rng, out) if rng.random() < 0.9 else rng.randbytes(rng.randrange(40))

    call = h.channel.stream_stream(path)(requests())
    try:
        for _ in call:
            pass
    except grpc.RpcError:
        pass


def _ipv4(rng: random.Random) -> bytes:
    return bytes(
        Ether(dst="02:00:00:00:00:aa", src="02:00:00:00:00:01")
        / IP(src="10.0.1.1", dst=f"10.0.{rng.randrange(4)}.2", ttl=rng.randrange(4))
        / UDP(sport=1, dport=2)
        / bytes(rng.randrange(40))
    )


def test_server_survives_malformed_requests_and_packets(real: Real) -> None:
    h, _, prog = real
    rng = random.Random(4242)
    sent: list[tuple[int, bytes]] = []
    h.device.port_sender = lambda port, data: sent.append((port, data))
    assert _fuzz_rpcs(h, prog, rng, RPC_CASES) == RPC_CASES
    _fuzz_stream(h, rng, STREAM_MESSAGES)
    packets = 0
    for _ in range(PACKET_CASES):  # malformed packets on every port, the CPU port included
        r = rng.random()
        data = _mutate(rng, _ipv4(rng)) if r < 0.7 else rng.randbytes(rng.randrange(0, 200))
        h.device.inject(510 if r > 0.9 else rng.randrange(512), data)
        packets += 1
    assert packets == PACKET_CASES
    assert h.device.stats.engine_errors == 0  # the engine drops bad packets, never raises
    # still answering, still forwarding
    assert h.stub.Capabilities(p4r.CapabilitiesRequest()).p4runtime_api_version
    s = h.stream(1 << 64)
    assert s.receive("arbitration").arbitration.status.code == 0
    h.push(1 << 64)  # a fresh pipeline: whatever the fuzzed writes did is gone
    h.write(1 << 64, _route(prog, 0x0A000200, 4))
    sent.clear()
    frame = bytes(
        Ether(dst="02:00:00:00:00:aa", src="02:00:00:00:00:01")
        / IP(src="10.0.1.1", dst="10.0.2.2")
        / UDP(sport=1, dport=2)
    )
    h.device.inject(9, frame)
    assert [p for p, _ in sent] == [4]
