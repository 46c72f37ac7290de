"""The whole controller in-process: p4sim's P4Runtime service (fake engine), 8 fake NF runtimes on
loopback, a real etcd. Start, install, configure; restart and resume with the same slot map."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from contract.proto import nf_control_pb2 as pb
from controlplane.config import parse_config
from controlplane.controller import Controller
from controlplane.pipeline_state import entry_args
from mgmt.pki import local_pki
from p4sim.server.device import Device
from p4sim.server.service import Server, serve, tls_credentials
from tests.controlplane.fake_engine import FakeEngine, fake_engine_factory
from tests.controlplane.fake_nf import FakeNf, FakeNfServer
from tests.support.procs import free_port

# P4Runtime over mutual TLS, as the controller connects by default (docs/security.md)
SWITCH_TLS = tls_credentials(local_pki())

pytestmark = pytest.mark.etcd

ROOT = Path(__file__).resolve().parents[2]
P4INFO = Path(__file__).parent / "data" / "nfcluster.p4info.txtpb"
_prefix = itertools.count()


async def wait_until(cond: Any, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.02)


def loopback_config(switch_port: int, etcd: str, slot_bits: int) -> tuple[Any, dict[int, int]]:
    """The example topology with every address on loopback and a fresh etcd prefix."""
    data = yaml.safe_load((ROOT / "topo" / "nfcluster.yaml").read_text())
    data["switch"].update(address=f"127.0.0.1:{switch_port}", slot_bits=slot_bits)
    data["etcd"] = {"endpoints": [etcd], "prefix": f"/test-controller/{next(_prefix)}"}
    data.setdefault("security", {})["etcd_tls"] = False  # (the shared etcd: plaintext)
    data["heartbeat"] = {"interval_ms": 100, "timeout_ms": 100, "misses": 5}  # tolerant of a busy CI
    ports = {nf["id"]: free_port() for nf in data["nfs"]}
    for nf in data["nfs"]:
        nf["mgmt"] = f"127.0.0.1:{ports[nf['id']]}"
    return parse_config(data), ports


def flow_frame() -> bytes:
    """One frame of the real-program tests' flow (10.0.0.1:4000 -> 10.0.0.2:5000, UDP)."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
                 / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=4000, dport=5000) / (b"x" * 20))


def inject(server: Server, out: list[tuple[int, bytes]], frame: bytes) -> dict[int, Any]:
    """`frame` in on port 1 of the switch whose `port_sender` appends to `out`; the shims of
    its copies, by the port they left on."""
    from contract.shim import decap

    out.clear()
    server.device.inject(1, frame)
    return {port: decap(data)[0] for port, data in out}


@contextlib.asynccontextmanager
async def controller_running(cfg: Any, fakes: dict[int, FakeNf], ports: dict[int, int],
                             **kwargs: Any) -> AsyncIterator[Controller]:
    """The fake NFs served on their ports and a Controller(cfg, **kwargs) running; the
    controller cancelled and the NFs stopped on the way out."""
    servers = [FakeNfServer(fakes[i], ports[i]) for i in ports]
    for s in servers:
        await s.start()
    task: asyncio.Task[None] | None = None
    try:
        c = Controller(cfg, **kwargs)
        task = asyncio.create_task(c.run())
        yield c
    finally:
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        for s in servers:
            await s.stop()


def test_controller_installs_configures_and_resumes(etcd_server):
    engines: list[FakeEngine] = []
    server = serve(Device(device_id=1, cpu_port=510, engine_factory=fake_engine_factory(engines)),
                   "127.0.0.1:0", tls=SWITCH_TLS)
    cfg, ports = loopback_config(server.port, etcd_server.endpoint, slot_bits=8)
    fakes = {i: FakeNf(i) for i in ports}

    async def run_controller(check: Any) -> Any:
        c = Controller(cfg, p4info=P4INFO, device_config=b"blob", counter_interval=0.1,
                       load_interval=0.1)
        task = asyncio.create_task(c.run())
        try:
            await wait_until(lambda: c.session.is_primary and c.last_reconcile is not None
                             and len(c.nfs_configured) == 10)
            return await check(c)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def first(c: Controller) -> Any:
        assert not c.resumed
        assert c.last_reconcile is not None and c.last_reconcile["insert"] == 256 + 13 + 10 + 2 + 4
        engine = engines[-1]
        slot_table = next(t.preamble.id for t in engine.p4info.tables if t.preamble.alias == "slot_owner")
        assert len(engine.tables[slot_table]) == 256
        assert sorted(engine.mcast) == [1, 2, 3, 4] and sorted(engine.mcast[1]) == [(3, 1), (7, 2)]
        assert fakes[1].role == pb.PRIMARY and fakes[5].role == pb.BACKUP
        assert set(fakes[1].slots) == set(c.slot_map.slots_of(1))
        assert set(fakes[5].slots) == set(c.slot_map.slots_of(1)) and fakes[5].backed_up_for == 1
        # every assignment says where the slot's numbering stands (the switch's slot_seq + 1)
        assert fakes[1].next_seqs == dict.fromkeys(c.slot_map.slots_of(1), 1)
        assert fakes[5].next_seqs == dict.fromkeys(c.slot_map.slots_of(1), 1)
        await wait_until(lambda: all(s.alive for s in c.registry.nfs.values()))
        entry = await c.move_slot(3, 4 if c.slot_map.owner(3) != 4 else 1)
        assert c.slot_map.entry(3) == entry
        switch_entry = next(e for e in await c.session.read_tables(["slot_owner"])
                            if dict(e.match or {}).get("slot") == 3)
        assert entry_args(switch_entry)["epoch"] == 2
        assert entry_args(switch_entry)["primary"] == entry.owner
        # a primary that restarts (uptime went backwards) holds nothing of its slots: its
        # backup, which holds their state, is failed over to, and it becomes a spare (it used to
        # get its slots again, empty: docs/simulation.md, seed 5)
        slots_of_2 = set(c.slot_map.slots_of(2))
        fakes[2].restart()
        await wait_until(lambda: c.slot_map.slots_of(2) == [] and 2 not in c.pairs
                         and fakes[2].role == pb.IDLE)
        assert set(c.slot_map.slots_of(6)) == slots_of_2 and fakes[6].role == pb.PRIMARY
        # a new-flow digest reaches the flow table (and is acknowledged)
        digest_id = next(d.preamble.id for d in engine.p4info.digests)
        members = [(7).to_bytes(2, "big"), bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]),
                   (1234).to_bytes(2, "big"), (80).to_bytes(2, "big"), bytes([6])]
        engine.pending_digests.append((digest_id, members))
        server.device.inject(1, b"\x00" * 60)
        await wait_until(lambda: len(c.flows) == 1)
        row = c.flow_rows()[0]
        assert (row["slot"], row["src"], row["dst"], row["protocol"]) == (7, "10.0.0.1:1234", "10.0.0.2:80", "tcp")
        assert c.metrics.registry.get_sample_value("nfc_digest_lists_total") == 1
        return c.slot_map.copy()

    async def second(c: Controller) -> Any:
        assert c.resumed
        # the switch kept its state: the restarted controller finds nothing to fix but the
        # `primary` parameter of the failed-over NF 2's slots (a fail-over rewrites only their
        # group, in place: one write; a new leader writes the entries as its map has them)
        assert c.last_reconcile == {"insert": 0, "modify": len(c.slot_map.slots_of(6)),
                                    "delete": 0}
        return c.slot_map.copy()

    async def run() -> None:
        servers = [FakeNfServer(fakes[i], ports[i]) for i in ports]
        for s in servers:
            await s.start()
        try:
            before = await run_controller(first)
            after = await run_controller(second)
            assert after == before and after.epoch(3) == 2
        finally:
            for s in servers:
                await s.stop()

    try:
        asyncio.run(run())
    finally:
        server.stop(grace=None)


def with_leader_and_standby(etcd_server: Any, body: Callable[
        [Controller, Controller, asyncio.Task[None], dict[int, FakeNf], Any], Awaitable[None]]) -> None:
    """A leader (election id 20) that has configured all 10 fake NFs and a standby (10) that
    watches, on a fake p4sim device and a real etcd; `body(leader, standby, leader's task, fakes,
    cfg)` runs, then everything is stopped."""
    engines: list[FakeEngine] = []
    server = serve(Device(device_id=1, cpu_port=510, engine_factory=fake_engine_factory(engines)),
                   "127.0.0.1:0", tls=SWITCH_TLS)
    cfg, ports = loopback_config(server.port, etcd_server.endpoint, slot_bits=6)
    fakes = {i: FakeNf(i) for i in ports}

    async def run() -> None:
        servers = [FakeNfServer(fakes[i], ports[i]) for i in ports]
        for s in servers:
            await s.start()
        primary = Controller(cfg, election_id=20, p4info=P4INFO, device_config=b"blob")
        standby = Controller(cfg, election_id=10, p4info=P4INFO, device_config=b"blob")
        p_task = asyncio.create_task(primary.run())
        s_task: asyncio.Task[None] | None = None
        try:
            await wait_until(lambda: primary.session.is_primary and len(primary.nfs_configured) == 10)
            s_task = asyncio.create_task(standby.run())
            await wait_until(lambda: standby.store is not None)
            await body(primary, standby, p_task, fakes, cfg)
        finally:
            tasks = [t for t in (p_task, s_task) if t is not None]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for s in servers:
                await s.stop()

    try:
        asyncio.run(run())
    finally:
        server.stop(grace=None)


def test_standby_controller_takes_over_with_the_primarys_slot_map(etcd_server):
    async def body(primary: Controller, standby: Controller, p_task: asyncio.Task[None],
                   fakes: dict[int, FakeNf], cfg: Any) -> None:
        assert not standby.session.is_primary and not standby.nfs_configured
        moved = await primary.move_slot(5, 2 if primary.slot_map.owner(5) != 2 else 3)
        calls_before = len(fakes[1].calls)
        p_task.cancel()
        await asyncio.gather(p_task, return_exceptions=True)
        await wait_until(lambda: standby.session.is_primary and standby.last_reconcile is not None)
        assert standby.slot_map.entry(5) == moved
        assert standby.last_reconcile == {"insert": 0, "modify": 0, "delete": 0}
        await wait_until(lambda: len(standby.nfs_configured) == 10)
        assert len(fakes[1].calls) > calls_before
        owned = await standby.session.read_slot_owner()
        assert owned[5] == moved

    with_leader_and_standby(etcd_server, body)


def test_packets_follow_the_installed_slot_map_on_the_real_program(etcd_server, tmp_path):
    """Real data-plane program: after the controller installs the switch, a client packet reaches
    its slot's primary (kind PRIMARY, nf_id = owner) and backup (kind BACKUP), and after a
    `move_slot` the same flow goes to the new owner with the next epoch."""
    from contract.shim import Kind
    from tests.controlplane.test_switch_session import compile_program
    from topo.launch.hot import slot_of

    p4info, blob = compile_program(tmp_path)
    server = serve(Device(device_id=1, cpu_port=510), "127.0.0.1:0", tls=SWITCH_TLS)
    cfg, ports = loopback_config(server.port, etcd_server.endpoint, slot_bits=12)
    out: list[tuple[int, bytes]] = []
    server.device.port_sender = lambda port, data: out.append((port, data))
    fakes = {i: FakeNf(i) for i in ports}
    frame = flow_frame()

    def send() -> dict[int, Any]:
        return inject(server, out, frame)

    async def run() -> None:
        async with controller_running(cfg, fakes, ports, p4info=p4info, device_config=blob) as c:
            await wait_until(lambda: c.session.is_primary and c.last_reconcile is not None, 30)
            shims = await asyncio.to_thread(send)
            assert len(shims) == 2, shims
            primary_port, backup_port = sorted(shims, key=lambda p: shims[p].kind)
            slot = shims[primary_port].slot
            # the scenario's prediction of a flow's slot (make run --hot) agrees with the program
            assert slot == slot_of("10.0.0.1", "10.0.0.2", 4000, 5000, 17, 4096)
            assert slot == slot_of("10.0.0.2", "10.0.0.1", 5000, 4000, 17, 4096)  # symmetric
            owner = c.slot_map.owner(slot)
            assert primary_port == cfg.nf(owner).port and shims[primary_port].kind == Kind.PRIMARY
            assert shims[primary_port].nf_id == owner and shims[primary_port].epoch == 1
            backup = c.pairs[owner]
            assert backup is not None and backup_port == cfg.nf(backup).port
            assert shims[backup_port].kind == Kind.BACKUP
            new_owner = 1 if owner != 1 else 2
            await c.move_slot(slot, new_owner)
            shims = await asyncio.to_thread(send)
            new_backup = c.pairs[new_owner]
            assert new_backup is not None
            got = {p: (s.kind, s.epoch, s.slot) for p, s in shims.items()}
            assert got == {cfg.nf(new_owner).port: (Kind.PRIMARY, 2, slot),
                           cfg.nf(new_backup).port: (Kind.BACKUP, 2, slot)}
            assert shims[cfg.nf(new_owner).port].nf_id == new_owner

    try:
        asyncio.run(run())
    finally:
        server.stop(grace=None)


def test_a_standby_finishes_the_move_a_dead_leader_left_between_the_switch_and_etcd(etcd_server):
    """The leader journals a move, has B adopt it, writes the switch (B, e+1) and dies before
    etcd's write and A's release. The standby that takes over keeps the switch at B's entry
    (its reconcile changes nothing; before the journal it put A's entry back, stranding the
    packets stamped e+1 at B), tells B `Adopt` again, has A release, and clears the journal."""
    from controlplane.slot_map import SlotEntry
    from controlplane.slot_store import MoveIntent

    async def body(primary: Controller, standby: Controller, p_task: asyncio.Task[None],
                   fakes: dict[int, FakeNf], cfg: Any) -> None:
        slot = 5
        src = primary.slot_map.owner(slot)
        dst = 2 if src != 2 else 3
        epoch = primary.slot_map.epoch(slot)
        await primary.registry.call(dst, "Adopt", pb.AdoptRequest(
            slot=slot, epoch=epoch + 1, from_nf_id=src,
            from_address=cfg.nf(src).replication_address()))
        await primary.open_move(MoveIntent(slot, src, dst, epoch + 1, primary.groups.get(src, src)))
        entry = SlotEntry(slot, dst, epoch + 1)
        await primary.session.write_slot(entry, primary.groups.get(dst, dst))
        p_task.cancel()  # dies before etcd's write and A's Release
        await asyncio.gather(p_task, return_exceptions=True)
        for f in fakes.values():
            f.calls.clear()
        await wait_until(lambda: standby.session.is_primary and standby.last_reconcile is not None)
        assert standby.slot_map.entry(slot) == entry
        assert (await standby.session.read_slot_owner())[slot] == entry
        await wait_until(lambda: not standby.open_moves and len(standby.moves) == 1)
        [res] = list(standby.moves)
        assert res.ok and res.epoch == epoch + 1
        assert ("Adopt", (slot, epoch + 1, src)) in fakes[dst].calls
        assert [r[:2] for r in fakes[src].released] == [(slot, dst)]
        assert standby.store is not None and await standby.store.load_moves(standby.groups) == {}
        assert (await standby.session.read_slot_owner())[slot] == entry

    with_leader_and_standby(etcd_server, body)
