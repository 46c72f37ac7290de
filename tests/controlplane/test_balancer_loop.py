"""The load balancer's loop against fake NF control servers and a fake switch: snapshot from one
counter read per round, moves through the real migration, scale actions through a fake executor,
the bounded history, `GET /lb/history`, `nfc lb history` and the per-kind counter."""

from __future__ import annotations

import asyncio
import io
import json
import urllib.request
from typing import Any

import pytest
from rich.console import Console

from controlplane import cli
from controlplane.balancer_loop import BalancerLoop
from controlplane.cluster_state import NfPhase
from controlplane.config import LoadBalancerConfig
from controlplane.controller import Controller
from controlplane.load_balancer import Move
from tests.controlplane.api_server import served_api
from tests.controlplane.fake_nf import FakeNf, FakeNfServer
from tests.controlplane.test_migration import IDS, P4INFO, FakeSession, config, wait_until
from tests.support.procs import free_port

pytestmark = pytest.mark.unit


class CounterSession(FakeSession):
    """The fake switch also answers the `slot_traffic` wildcard read, and counts the reads."""

    def __init__(self) -> None:
        super().__init__()
        self.counters: dict[int, tuple[int, int]] = {}
        self.reads: list[str] = []

    async def read_counter(self, short: str) -> dict[int, tuple[int, int]]:
        self.reads.append(short)
        return dict(self.counters)


class FakeScaler:
    """A ScaleExecutor that records what it is asked and can be held."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail = ""

    async def scale_out(self, cluster: str) -> int:
        self.calls.append(("scale_out", cluster))
        await self.gate.wait()
        if self.fail:
            raise RuntimeError(self.fail)
        return 5

    async def drain(self, nf: int) -> None:
        self.calls.append(("drain", nf))
        await self.gate.wait()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def with_balancer(body: Any, **knobs: Any) -> None:
    ports = {i: free_port() for i in IDS}
    fakes = {i: FakeNf(i) for i in IDS}
    servers = {i: FakeNfServer(fakes[i], ports[i]) for i in IDS}
    lb = {"idle_for_s": 1000.0, "nf_settle_s": 2.0, "slot_cooldown_s": 10.0, **knobs}
    cfg = config(ports)
    cfg = cfg.model_copy(update={"load_balancer": LoadBalancerConfig(**lb)})
    c = Controller(cfg, use_etcd=False, p4info=P4INFO, device_config=b"x", strict_state=True)
    session = CounterSession()
    c.session = session  # type: ignore[assignment]
    clock = Clock()
    c.balancer = BalancerLoop(c, clock=clock)
    try:
        for s in servers.values():
            await s.start()
        await c.registry.configure(c.pairs, c.slot_map)
        for i in IDS:
            c.state.nfs.to(i, NfPhase.CONFIGURED)
        await body(c, fakes, session, clock)
    finally:
        await c.balancer.cancel_scaling()
        await c.close()
        for s in servers.values():
            await s.stop()


async def loads(c: Controller, fakes: dict[int, FakeNf], rates: dict[int, float]) -> None:
    """The NFs report these packet rates (capacity 10000/s: 9000 is a load of 0.9)."""
    for nf, rate in rates.items():
        fakes[nf].packet_rate = rate
    await c.registry.poll_all()


def traffic(c: Controller, session: CounterSession, seconds: float, rates: dict[int, float]) -> None:
    """Advance the switch counters as if each NF's slots had carried its rate, evenly."""
    for nf, rate in rates.items():
        mine = c.slot_map.slots_of(nf)
        for s in mine:
            p, b = session.counters.get(s, (0, 0))
            n = int(rate / len(mine) * seconds)
            session.counters[s] = (p + n, b + 100 * n)


def test_a_hot_nf_sheds_slots_to_its_cluster_peer_through_the_migration():
    async def body(c, fakes, session, clock):
        rates = {1: 9000.0, 2: 1000.0, 6: 1000.0}
        await loads(c, fakes, rates)
        traffic(c, session, 1, rates)
        assert await c.balancer.step() == []  # the first counter read gives no rates yet
        clock.now += 1
        traffic(c, session, 1, rates)
        before = set(c.slot_map.slots_of(1))
        decisions = await c.balancer.step()
        assert session.reads == ["slot_traffic", "slot_traffic"]  # one wildcard read per round
        assert decisions and {d.kind for d in decisions} == {"intra"}
        assert all(d.outcome == "moved" and d.ok for d in decisions)
        moved = {d.action["slot"] for d in decisions}
        assert moved <= before and all(c.slot_map.owner(s) == 2 for s in moved)
        assert {(s, to, same) for s, to, same in fakes[1].released} == {(s, 2, True) for s in moved}
        relief = sum(d.action["relief"] for d in decisions)
        assert 0.9 - relief <= 0.7 + 1e-9 < 0.9 - relief + decisions[0].action["relief"]
        first = decisions[0]
        assert first.inputs["nfs"]["1"]["load"] == 0.9 and first.inputs["nfs"]["2"]["load"] == 0.1
        assert first.inputs["slot"]["pps"] > 0 and first.detail["delta"] is True
        assert "NF 1 load 0.90 > high 0.8" in first.action["reason"]
        text = c.metrics.render().decode()
        assert f'nfc_lb_actions_total{{kind="intra"}} {float(len(decisions))}' in text
        assert 'nfc_nf_load{nf="1"} 0.9' in text
        # the NF's report is stale until it settles: no second round of moves on it
        clock.now += 1
        traffic(c, session, 1, rates)
        assert await c.balancer.step() == []
        assert len(c.balancer.history) == len(decisions) and len(c.moves) == len(decisions)

    asyncio.run(with_balancer(body))


def test_no_room_anywhere_scales_out_once_while_it_is_under_way():
    async def body(c, fakes, session, clock):
        scaler = FakeScaler()
        c.balancer.executor = scaler
        scaler.gate.clear()
        rates = {1: 9000.0, 2: 5000.0, 6: 5000.0}
        await loads(c, fakes, rates)
        for _ in range(2):
            traffic(c, session, 1, rates)
            await c.balancer.step()
            clock.now += 1
        [d] = list(c.balancer.history)
        assert d.kind == "scale_out" and d.action["cluster"] == "c1" and d.outcome == "pending"
        assert c.balancer.view()["scaling"] == ["c1"]
        traffic(c, session, 1, rates)
        assert await c.balancer.step() == []  # under way: not again
        scaler.gate.set()
        await c.balancer.wait_scaling()
        assert (d.outcome, d.ok, d.detail["new_primary"]) == ("done", True, 5)
        assert scaler.calls == [("scale_out", "c1")]
        traffic(c, session, 1, rates)
        clock.now += 1
        assert await c.balancer.step() == []  # within the scale cooldown
        clock.now += 30
        traffic(c, session, 1, rates)
        scaler.fail = "no spare in cluster c1 or any other"
        [again] = await c.balancer.step()
        await c.balancer.wait_scaling()
        assert again.outcome == "failed" and "no spare" in again.detail["error"]

    asyncio.run(with_balancer(body))


def test_scale_actions_without_an_executor_are_recorded_as_not_executed():
    async def body(c, fakes, session, clock):
        rates = {1: 9000.0, 2: 5000.0, 6: 5000.0}
        await loads(c, fakes, rates)
        traffic(c, session, 1, rates)
        await c.balancer.step()
        clock.now += 1
        traffic(c, session, 1, rates)
        [d] = await c.balancer.step()
        assert (d.kind, d.outcome, d.ok) == ("scale_out", "not executed", False)
        assert "no scale executor" in d.detail["error"]

    asyncio.run(with_balancer(body))


def test_an_idle_nf_is_drained_and_is_no_destination_meanwhile():
    async def body(c, fakes, session, clock):
        scaler = FakeScaler()
        scaler.gate.clear()
        c.balancer.executor = scaler
        await loads(c, fakes, {1: 1000.0, 2: 0.0, 6: 1000.0})
        [d] = await c.balancer.step()
        assert (d.kind, d.action["nf"]) == ("scale_in", 2)
        assert set(d.inputs["nfs"]) == {"1", "2"}  # the NF and its cluster peers
        await wait_until(lambda: scaler.calls == [("drain", 2)])
        snap = await c.balancer.snapshot()
        assert 2 not in snap.nfs and c.balancer.view()["draining"] == [2]
        scaler.gate.set()
        await c.balancer.wait_scaling()
        assert d.outcome == "done" and c.balancer.draining == set()

    asyncio.run(with_balancer(body, idle_for_s=0.0, scale_cooldown_s=0.0))


def test_a_move_the_slot_map_no_longer_allows_is_refused_and_recorded():
    async def body(c, fakes, session, clock):
        slot = c.slot_map.slots_of(2)[0]
        decision = c.balancer._record(Move(slot, 1, 2, "intra", "test"), await c.balancer.snapshot())
        await c.balancer._move(Move(slot, 1, 2, "intra", "test"), decision)
        assert decision.outcome == "refused" and "already owned" in decision.detail["error"]

    asyncio.run(with_balancer(body))


def test_the_history_is_bounded_and_the_loop_runs_only_while_primary_and_not_paused():
    async def body(c, fakes, session, clock):
        for i in range(5):
            c.balancer._record(Move(i, 1, 2, "intra", f"r{i}"), await c.balancer.snapshot())
        assert [d.action["reason"] for d in c.balancer.history] == ["r2", "r3", "r4"]
        assert [d["id"] for d in c.balancer.view(limit=2)["decisions"]] == [4, 5]
        session.is_primary = False
        task = asyncio.create_task(c.balancer.run())
        try:
            await asyncio.sleep(0.05)
            assert c.balancer.rounds == 0
            session.is_primary = True
            await wait_until(lambda: c.balancer.rounds >= 3)
            # paused (POST /lb/pause): no round; resumed: rounds again
            assert c.lb_pause(True) == {"enabled": False, "paused": True}
            await asyncio.sleep(0.02)  # a round under way ends
            paused_at = c.balancer.rounds
            await asyncio.sleep(0.05)
            assert c.balancer.rounds == paused_at and c.balancer.view()["paused"] is True
            c.lb_pause(False)
            await wait_until(lambda: c.balancer.rounds >= paused_at + 2)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(with_balancer(body, history=3, period_s=0.01))


def test_lb_history_over_http_and_the_cli():
    async def body(c, fakes, session, clock):
        rates = {1: 9000.0, 2: 1000.0, 6: 1000.0}
        await loads(c, fakes, rates)
        for _ in range(2):
            traffic(c, session, 1, rates)
            await c.balancer.step()
            clock.now += 1
        async with served_api(c) as base:
            def get(path: str) -> Any:
                with urllib.request.urlopen(base + path, timeout=5) as resp:
                    return json.loads(resp.read())

            data = await asyncio.to_thread(get, "/lb/history")
            assert data["enabled"] is False and data["rounds"] == 2
            assert data["loads"]["1"]["load"] == 0.9 and data["knobs"]["target"] == pytest.approx(0.7)
            assert data["decisions"] and all(d["kind"] == "intra" for d in data["decisions"])
            assert len((await asyncio.to_thread(get, "/lb/history?limit=1"))["decisions"]) == 1
            out = io.StringIO()
            console = Console(file=out, width=200)
            code = await asyncio.to_thread(cli.main, ["--api", base, "lb", "history"], console)
            text = out.getvalue()
            assert code == 0 and "intra" in text and "moved" in text and "1->2" in text
            assert "1:0.90" in text  # the loads in the title
            out.truncate(0)
            code = await asyncio.to_thread(cli.main, ["--api", base, "--json", "lb", "history",
                                                      "--limit", "1"], console)
            assert code == 0 and len(json.loads(out.getvalue().strip("\x00"))["decisions"]) == 1

    asyncio.run(with_balancer(body))
