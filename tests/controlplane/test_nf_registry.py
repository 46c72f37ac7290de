"""NF registry against fake NfControl servers: configuration pushed, heartbeats, failure events, load."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from contract.proto import nf_control_pb2 as pb
from controlplane.config import parse_config
from controlplane.nf_registry import NfControlError, NfRegistry
from controlplane.nf_state import NfEvent
from controlplane.slot_map import SlotMap
from tests.controlplane.fake_nf import FakeNf, FakeNfServer
from tests.support.procs import free_port

pytestmark = pytest.mark.unit


def small_config(ports: dict[int, int]) -> Any:
    def nf(i: int, node: str, role: str, backup: int | None = None) -> dict[str, Any]:
        return {"id": i, "name": f"nf{i}", "node": node, "cluster": "c1", "role": role,
                "backup": backup, "port": 2 + i, "mac": f"02:00:00:00:01:0{i}",
                "mgmt": f"127.0.0.1:{ports[i]}", "replication": f"127.0.0.1:{9000 + i}"}
    return parse_config({
        "clusters": [{"name": "c1"}],
        "nfs": [nf(1, "a", "primary", 3), nf(2, "b", "primary", 4), nf(3, "b", "backup"),
                nf(4, "a", "backup")],
        "heartbeat": {"interval_ms": 100, "misses": 3, "timeout_ms": 100},
    })


async def with_fakes(body: Any) -> None:
    ports = {i: free_port() for i in (1, 2, 3, 4)}
    fakes = {i: FakeNf(i) for i in ports}
    servers = {i: FakeNfServer(fakes[i], ports[i]) for i in ports}
    for s in servers.values():
        await s.start()
    registry = NfRegistry(small_config(ports))
    try:
        await body(registry, fakes, servers)
    finally:
        await registry.close()
        for s in servers.values():
            await s.stop()


async def wait_until(cond: Any, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.01)


def test_configure_pushes_roles_backups_peers_and_slots():
    async def body(registry, fakes, servers):
        slot_map = SlotMap.build([1, 2], 256)
        await registry.configure({1: 3, 2: 4}, slot_map)
        assert fakes[1].role == pb.PRIMARY and fakes[3].role == pb.BACKUP
        assert fakes[1].backup == 3 and fakes[2].backup == 4
        assert ("SetBackup", (3, "127.0.0.1:9003")) in fakes[1].calls
        assert sorted(fakes[1].peers) == [2, 3, 4]
        assert set(fakes[1].slots) == set(slot_map.slots_of(1))
        assert set(fakes[3].slots) == set(slot_map.slots_of(1)) and fakes[3].backed_up_for == 1
        assert set(fakes[4].slots) == set(slot_map.slots_of(2)) and fakes[4].backed_up_for == 2
        assert all(e == 1 for e in fakes[2].slots.values())

    asyncio.run(with_fakes(body))


def test_heartbeats_detect_failure_after_n_misses_and_recovery():
    async def body(registry, fakes, servers):
        events: list[NfEvent] = []
        registry.add_listener(events.append)
        assert await registry.detector.heartbeat_round() == {1: True, 2: True, 3: True, 4: True}
        assert all(s.alive for s in registry.nfs.values())
        loop = asyncio.create_task(registry.detector.heartbeat_loop())
        try:
            await servers[2].stop()
            await wait_until(lambda: any(e.kind == "down" for e in events))
            assert events == [NfEvent("down", 2, 3)]
            assert registry.nfs[2].alive is False and registry.nfs[1].alive
            # the stuck NF: answers too late count as misses too
            fakes[4].mute = True
            await wait_until(lambda: len(events) >= 2)
            assert events[1] == NfEvent("down", 4, 3)
            fakes[4].mute = False
            await servers[2].start()
            await wait_until(lambda: sum(e.kind == "up" for e in events) == 2, timeout=10)
            assert {e.nf_id for e in events if e.kind == "up"} == {2, 4}
            assert registry.events.qsize() == 4
        finally:
            loop.cancel()

    asyncio.run(with_fakes(body))


def test_a_round_most_nfs_miss_is_not_counted_against_them():
    """A stall of the controller or of the whole machine makes every NF miss at once: such a
    round counts no miss (a hung NF misses while the others answer)."""
    async def body(registry, fakes, servers):
        events: list[NfEvent] = []
        registry.add_listener(events.append)
        assert all((await registry.detector.heartbeat_round()).values())
        for nf in (1, 2, 3):
            fakes[nf].slow = 0.2  # three of four late: beyond the heartbeat deadline
        for _ in range(4):
            assert sum((await registry.detector.heartbeat_round()).values()) == 1
        assert events == [] and registry.detector.inconclusive_rounds == 4
        assert all(registry.nfs[nf].misses == 0 for nf in (1, 2, 3))
        fakes[1].slow = fakes[2].slow = 0.0  # now only 3 misses, while the others answer
        for _ in range(3):
            await registry.detector.heartbeat_round()
        assert events == [NfEvent("down", 3, 3)]
        # most NFs silent for longer than a stall lasts: then their misses count
        fakes[1].slow = fakes[2].slow = 0.2
        assert sum((await registry.detector.heartbeat_round()).values()) == 1  # not counted yet
        registry.detector._last_conclusive -= registry.detector.stall_limit + 1  # (as if a second went by)
        for _ in range(3):
            await registry.detector.heartbeat_round()
        assert {e.nf_id for e in events if e.kind == "down"} == {1, 2, 3}

    asyncio.run(with_fakes(body))


def test_load_collection_and_errors():
    async def body(registry, fakes, servers):
        await registry.configure({1: 3, 2: 4}, SlotMap.build([1, 2], 64))
        fakes[1].packet_rate = 1234.5
        loads = await registry.poll_all()
        assert loads[1] is not None and loads[1].packet_rate == 1234.5
        assert loads[1].slots == len(fakes[1].slots) and loads[1].queue_depth == 3
        summary = {s["id"]: s for s in registry.summaries()}
        assert summary[1]["packet_rate"] == 1234.5 and summary[1]["role"] == "primary"
        await servers[3].stop()
        assert (await registry.poll_all())[3] is None
        with pytest.raises(NfControlError, match="NF 3 SetRole: UNAVAILABLE"):
            await registry._call(3, "SetRole", pb.SetRoleRequest(role=pb.IDLE), timeout=0.5)

    asyncio.run(with_fakes(body))


def test_fast_restart_is_reported_from_the_uptime():
    async def body(registry, fakes, servers):
        events: list[NfEvent] = []
        registry.add_listener(events.append)
        await registry.detector.heartbeat_round()
        await registry.detector.heartbeat_round()
        assert events == []
        fakes[3].restart()
        await registry.detector.heartbeat_round()
        assert events == [NfEvent("restarted", 3)]
        await registry.detector.heartbeat_round()
        assert len(events) == 1

    asyncio.run(with_fakes(body))


def test_load_report_carries_cpu_workers_overload_drops_and_per_slot_state():
    async def body(registry, fakes, servers):
        slot_map = SlotMap.build([1, 2], 64)
        await registry.configure({1: 3, 2: 4}, slot_map)
        mine = sorted(fakes[1].slots)
        fakes[1].cpu_percent, fakes[1].workers, fakes[1].overload_drops = 150.0, 2, 7
        fakes[1].slot_flows = {mine[0]: 5, mine[1]: 3, mine[2]: 4}
        fakes[1].peer_version = {mine[0]: 5, mine[1]: 1}  # peers hold slot 0's version, lag on 1
        load = (await registry.poll_all())[1]
        assert load is not None
        assert (load.cpu_percent, load.workers, load.overload_drops) == (150.0, 2, 7)
        assert load.slot_flows[mine[0]] == 5 and load.slot_flows[mine[1]] == 3
        # behind: a peer acknowledged an older version (mine[1]) or none holds it (mine[2])
        assert load.slots_behind == {mine[1], mine[2]}

    asyncio.run(with_fakes(body))


def test_a_call_to_a_live_nf_whose_channel_reconnects_waits_for_it():
    """An NF that answers heartbeats while its control channel is down (a runtime that just
    started: its UDP responder answers before its gRPC server listens, or a reset connection in
    gRPC's reconnection back-off) is called once the channel is up again, within the call's
    deadline; an NF declared down is not waited for. (A live backup's replacement failed at
    start-up, its primary's channel still in back-off.)"""
    async def body(registry, fakes, servers):
        assert (await registry.detector.heartbeat_round())[1]
        await servers[1].stop()
        with pytest.raises(NfControlError):  # the channel fails, and backs off
            await registry.call(1, "SetBackup", pb.SetBackupRequest(backup_nf_id=3), timeout=1)
        assert registry.nfs[1].alive  # (its heartbeats, over UDP in a deployment, still answer)

        async def restart_later() -> None:
            await asyncio.sleep(0.3)
            await servers[1].start()
        later = asyncio.create_task(restart_later())
        await registry.call(1, "SetBackup", pb.SetBackupRequest(backup_nf_id=4), timeout=3)
        await later
        assert fakes[1].backup == 4

        await servers[2].stop()
        registry.nfs[2].declared_down, registry.nfs[2].alive = True, False
        started = asyncio.get_running_loop().time()
        with pytest.raises(NfControlError):
            await registry.call(2, "SetBackup", pb.SetBackupRequest(backup_nf_id=3), timeout=3)
        assert asyncio.get_running_loop().time() - started < 1.5  # failed fast, not at 3 s

    asyncio.run(with_fakes(body))
