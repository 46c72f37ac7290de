"""Bounded flow state (nf_host/flow_table.py, nf_host/flow_bounds.py): idle timeouts by class, the
per-worker maximum, TCP close, never a flow whose output is held, the NF's DROP_FORGET, and
evictions replicated as deletions to the backup (which holds the same flows once promoted)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from nf_host.flow_table import FlowTable
from nf_host.global_state import MemoryStore
from nf_host.harness import Switch, checker_frame
from nf_host.nfs import make_nf
from nf_host.state_store import Replica, key_to_wire
from nf_host.worker import Worker, WorkerConfig
from tests.nf_host.nfs.packets import tcp
from tests.support.procs import free_port

pytestmark = pytest.mark.unit
SLOT = 5


class Node:
    def __init__(self, nf_id: int, nf: str = "checker", params: dict[str, Any] | None = None,
                 batch: int = 4) -> None:
        self.out: list[bytes | bytearray] = []
        self.port = free_port()
        self.w = Worker(WorkerConfig(nf_id=nf_id, batch_size=batch, batch_time=0,
                                     repl_port=self.port),
                        make_nf(nf, params), MemoryStore(), self.out.append)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"


async def until(cond: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.002)


def run(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(body(), 30))


def flows_of(rep: Replica) -> set[bytes | None]:
    return set(rep.flows)


# ------------------------------------------------------------------ the table alone
def test_expire_goes_oldest_first_per_class_and_never_past_a_held_flow() -> None:
    t = FlowTable()
    valid = lambda slot, key: True  # noqa: E731
    t.touch(1, (1, 2, 3, 4, 6), "idle", 10.0, now=0.0, batch=1)
    t.touch(1, (1, 2, 3, 5, 6), "closed", 1.0, now=1.0, batch=2)
    t.touch(2, (9, 9, 9, 9, 17), "idle", 10.0, now=2.0, batch=7)  # its output is held
    assert list(t.expire(5.0, released=6, valid=valid, limit=100)) == [(1, (1, 2, 3, 5, 6), "closed")]
    assert list(t.expire(50.0, released=6, valid=valid, limit=100)) == [(1, (1, 2, 3, 4, 6), "idle")]
    assert len(t) == 1  # the held flow stays, however old
    assert list(t.expire(50.0, released=7, valid=valid, limit=100)) == [(2, (9, 9, 9, 9, 17), "idle")]
    assert len(t) == 0


def test_victim_by_policy_skips_held_and_stale_flows() -> None:
    for policy, expected in (("lru", (1, (1, 1, 1, 1, 6))), ("expiry", (1, (2, 2, 2, 2, 6)))):
        t = FlowTable(max_flows=2, policy=policy)
        t.touch(1, (1, 1, 1, 1, 6), "idle", 100.0, now=0.0, batch=1)  # oldest use
        t.touch(1, (2, 2, 2, 2, 6), "closed", 1.0, now=5.0, batch=2)  # soonest to expire
        t.touch(1, (3, 3, 3, 3, 6), "idle", 100.0, now=6.0, batch=3)  # held
        assert t.victim(released=2, valid=lambda s, k: True) == expected
    t = FlowTable(max_flows=1)
    t.touch(1, (1, 1, 1, 1, 6), "idle", 100.0, now=0.0, batch=1)
    t.touch(1, (2, 2, 2, 2, 6), "idle", 100.0, now=1.0, batch=1)
    # the first is stale (its slot moved away): it goes without being the victim
    assert t.victim(released=1, valid=lambda s, k: k != (1, 1, 1, 1, 6)) == (1, (2, 2, 2, 2, 6))
    assert len(t) == 0
    with pytest.raises(ValueError, match="eviction policy"):
        FlowTable(policy="random")


# ------------------------------------------------------------------ a worker
def test_the_bound_holds_per_worker_and_evicts_oldest_idle_first() -> None:
    async def body() -> None:
        a = Node(1, params={"max_flows": 8})
        await a.w.start()
        try:
            a.w.assign([(SLOT, 1, 1)], as_backup=False)
            sw = Switch()
            for flow in range(1, 101):
                a.w.on_frame(sw.stamp(SLOT, checker_frame(flow, 1), 1)[0])
                # over the bound only by the flows of the open batch (their output is held)
                assert len(a.w.flow_table) <= 8 + 4
            a.w.close_batch()
            a.w.bounds.expire(time.monotonic())
            flows = a.w.slots[SLOT].state.flows
            assert len(flows) == len(a.w.flow_table) == 8
            # the newest eight flows stay: oldest idle first
            assert {k[0] & 0xFFFF for k in flows if k is not None} == set(range(93, 101))
            assert a.w.status().evictions == {"max": 92}
        finally:
            await a.w.stop()

    run(body)


def test_idle_eviction_is_replicated_and_never_takes_a_flow_whose_output_is_held() -> None:
    async def body() -> None:
        a, b = Node(1, params={"idle_timeout": 1.0}), Node(2)
        await a.w.start()  # b not started yet: nothing acknowledges a's output
        try:
            a.w.assign([(SLOT, 1, 1)], as_backup=False)
            b.w.assign([(SLOT, 1, 1)], as_backup=True)
            a.w.set_backup(2, b.addr)
            sw = Switch()
            for flow in range(1, 9):
                p, c = sw.stamp(SLOT, checker_frame(flow, 1), 1, 2)
                assert c is not None
                a.w.on_frame(p)
                b.w.on_frame(c)
            assert a.w.commit.held_outputs == 8
            # long idle, but held: none goes
            assert a.w.bounds.expire(time.monotonic() + 100) == 0
            assert len(a.w.slots[SLOT].state.flows) == 8
            await b.w.start()
            await until(lambda: len(a.out) == 8, "output released after the backup's sync")
            rep = b.w.replicas[SLOT]
            assert len(rep.flows) == 8
            # the first four flows see a packet again: fresh; the other four are idle
            for flow in range(1, 5):
                p, c = sw.stamp(SLOT, checker_frame(flow, 2), 1, 2)
                assert c is not None
                a.w.on_frame(p)
                b.w.on_frame(c)
            await until(lambda: len(a.out) == 12, "second output released")
            later = time.monotonic() + 1.5
            for flow in range(1, 5):  # (the fresh four, used just now, stay fresh at `later`)
                a.w.flow_table.touch(SLOT, next(k for k in a.w.slots[SLOT].state.flows
                                                if k is not None and k[0] & 0xFF == flow),
                                     "idle", 1.0, later, 0)
            assert a.w.bounds.expire(later) == 4
            assert a.w.status().evictions == {"idle": 4}
            kept = set(a.w.slots[SLOT].state.flows)
            assert len(kept) == 4
            await until(lambda: flows_of(b.w.replicas[SLOT]) == {key_to_wire(k) for k in kept},
                        "the deletions at the backup")
            # promoted, the backup owns exactly the primary's flows, with their states
            await a.w.stop()
            b.w.promote([SLOT])
            promoted = b.w.slots[SLOT].state.flows
            assert promoted == a.w.slots[SLOT].state.flows
        finally:
            await a.w.stop()
            await b.w.stop()

    run(body)


def test_a_closed_tcp_connection_goes_sooner_and_a_refused_scan_keeps_no_state() -> None:
    async def body() -> None:
        a = Node(1, nf="firewall", params={"closed_timeout": 2.0}, batch=1)
        await a.w.start()
        try:
            a.w.assign([(SLOT, 1, 1)], as_backup=False)
            sw = Switch()

            def send(src: str, dst: str, sport: int, dport: int, flags: str) -> None:
                a.w.on_frame(sw.stamp(SLOT, bytes(tcp(src, dst, sport, dport, flags)), 1)[0])

            for port in (40000, 40001):  # two connections from inside, established
                send("10.0.0.5", "198.51.100.9", port, 443, "S")
                send("198.51.100.9", "10.0.0.5", 443, port, "SA")
                send("10.0.0.5", "198.51.100.9", port, 443, "A")
            send("198.51.100.9", "10.0.0.5", 443, 40001, "R")  # the second one ends
            for port in range(1, 50):  # a scan from outside: dropped, no state kept
                send("198.51.100.66", "10.0.0.5", 7000, port, "S")
            assert len(a.w.slots[SLOT].state.flows) == len(a.w.flow_table) == 2
            assert a.w.bounds.expire(time.monotonic() + 3) == 1  # the closed one, not the open
            (left,) = a.w.slots[SLOT].state.flows.values()
            assert left["state"] == "ESTABLISHED"
            assert a.w.status().evictions == {"closed": 1, "nf": 49}
            assert a.w.bounds.expire(time.monotonic() + 3601) == 1
            assert a.w.status().evictions == {"closed": 1, "nf": 49, "idle": 1}
        finally:
            await a.w.stop()

    run(body)


def test_a_delta_move_after_evictions_carries_the_deletions() -> None:
    async def body() -> None:
        a, p = Node(1, params={"idle_timeout": 1.0}), Node(3)
        for n in (a, p):
            await n.w.start()
        try:
            a.w.assign([(SLOT, 1, 1)], as_backup=False)
            a.w.set_peers([(3, p.addr)])
            await until(lambda: 3 in a.w.links and a.w.links[3].writer is not None, "peer link")
            sw = Switch()
            for flow in range(1, 11):
                a.w.on_frame(sw.stamp(SLOT, checker_frame(flow, 1), 1)[0])
            a.w.close_batch()
            st = a.w.slots[SLOT].state
            await until(lambda: a.w.acked_versions.get(3, {}).get(SLOT) == st.version,
                        "the peer's replica")
            assert a.w.bounds.expire(time.monotonic() + 2) == 10  # every flow idle
            for flow in range(11, 14):  # and three new ones
                a.w.on_frame(sw.stamp(SLOT, checker_frame(flow, 1), 1)[0])
            a.w.close_batch()
            # the peer may hold the version before the evictions: a delta from there must
            # delete them
            assert st.deleted_since(a.w.acked_versions[3][SLOT]) is not None
            p.w.adopt(SLOT, 2)
            res = await a.w.release(SLOT, 3, p.addr, same_cluster=True)
            assert res.delta
            await until(lambda: SLOT in p.w.slots and p.w.slots[SLOT].state.flows == st.flows,
                        "the adopted state, without the evicted flows")
            assert len(st.flows) == 3
        finally:
            for n in (a, p):
                await n.w.stop()

    run(body)
