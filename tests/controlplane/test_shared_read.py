"""The shared `slot_traffic` read (controlplane/shared_read.py): one read serves two callers, a
read in flight is joined, a stale read is refreshed, a failed read fails its callers only; the
balancer reads only in rounds with an NF above the high mark and the counter loop reuses its read.
The switch is a fake whose reads are held on an event: no sleep orders anything here."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controlplane.metrics import ControllerMetrics
from controlplane.shared_read import SharedRead
from tests.controlplane.test_balancer_loop import loads, traffic, with_balancer

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


async def turns(cond: Any, limit: int = 1000) -> None:
    """Let the other tasks run until `cond()` holds (event-loop turns, not time)."""
    for _ in range(limit):
        if cond():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not met")


class HeldSwitch:
    """A counter read that returns the read's number, held until `gate` is set."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.gate.set()
        self.started = asyncio.Event()
        self.reads = 0
        self.fail = False

    async def read(self) -> dict[int, tuple[int, int]]:
        self.reads += 1
        self.started.set()
        await self.gate.wait()
        if self.fail:
            raise RuntimeError("switch gone")
        return {0: (self.reads, 100 * self.reads)}


def test_one_read_serves_two_callers_while_it_is_young():
    async def run() -> None:
        switch, clock = HeldSwitch(), Clock()
        shared = SharedRead(switch.read, clock=clock)
        first = await shared.get(1.0)
        clock.now += 0.6
        second = await shared.get(1.0)  # 0.6 s old: young enough for this caller
        assert switch.reads == 1 and second is first and first.value == {0: (1, 100)}
        assert (first.seq, first.at, shared.served) == (1, 50.0, 2)
        third = await shared.get(0.5)  # not for one that wants at most 0.5 s
        assert switch.reads == 2 and third.seq == 2 and third.value == {0: (2, 200)}

    asyncio.run(run())


def test_a_read_in_flight_is_joined_not_repeated():
    async def run() -> None:
        switch, clock = HeldSwitch(), Clock()
        shared = SharedRead(switch.read, clock=clock)
        switch.gate.clear()
        a = asyncio.create_task(shared.get(0.0))
        await switch.started.wait()
        assert shared.in_flight
        b = asyncio.create_task(shared.get(0.0))  # wants a fresh one: the one in flight is that
        c = asyncio.create_task(shared.get(0.0))
        await turns(lambda: shared.served == 3)  # b and c asked; the read is still held
        assert switch.reads == 1
        switch.gate.set()
        ra, rb, rc = await asyncio.gather(a, b, c)
        assert ra is rb is rc and switch.reads == 1 and not shared.in_flight

    asyncio.run(run())


def test_a_stale_read_is_refreshed_and_a_forgotten_one_read_again():
    async def run() -> None:
        switch, clock = HeldSwitch(), Clock()
        shared = SharedRead(switch.read, clock=clock)
        await shared.get(1.0)
        clock.now += 1.5
        assert shared.fresh(1.0) is None
        again = await shared.get(1.0)
        assert switch.reads == 2 and again.seq == 2 and again.at == 51.5
        shared.forget()  # (a switch restart: its counts are gone)
        assert shared.last is None and shared.seq == 2
        assert (await shared.get(10.0)).seq == 3 and switch.reads == 3

    asyncio.run(run())


def test_a_failed_read_fails_its_callers_keeps_the_last_value_and_spares_the_others():
    async def run() -> None:
        switch, clock = HeldSwitch(), Clock()
        shared = SharedRead(switch.read, clock=clock)
        good = await shared.get(1.0)
        clock.now += 2
        switch.gate.clear()
        switch.fail = True
        a = asyncio.create_task(shared.get(1.0))
        await switch.started.wait()
        b = asyncio.create_task(shared.get(1.0))
        cancelled = asyncio.create_task(shared.get(1.0))
        await turns(lambda: shared.served == 4)
        cancelled.cancel()  # one caller gives up: the read goes on for the others
        switch.gate.set()
        results = await asyncio.gather(a, b, cancelled, return_exceptions=True)
        assert [type(r) for r in results] == [RuntimeError, RuntimeError, asyncio.CancelledError]
        assert shared.last is good and shared.seq == 1 and not shared.in_flight
        switch.fail = False
        assert (await shared.get(1.0)).seq == 2  # the next caller reads again

    asyncio.run(run())


def test_the_balancer_reads_only_while_an_nf_is_hot_and_bases_its_rates_on_shared_reads():
    async def body(c: Any, fakes: Any, session: Any, clock: Any) -> None:
        cool = {1: 5000.0, 2: 1000.0, 6: 1000.0}
        await loads(c, fakes, cool)
        traffic(c, session, 1, cool)
        assert await c.balancer.step() == [] and session.reads == []  # nothing hot: no read
        # the counter loop (or any other user) reads: the balancer's next round takes it as
        # the base its next rates are measured from, without a read of its own
        await c.balancer.traffic.get(0.0)
        assert session.reads == ["slot_traffic"]
        assert await c.balancer.step() == [] and session.reads == ["slot_traffic"]
        clock.now += 1
        hot = {1: 9000.0, 2: 1000.0, 6: 1000.0}
        await loads(c, fakes, hot)
        traffic(c, session, 1, hot)
        decisions = await c.balancer.step()  # hot: one read, and rates at once from the base
        assert session.reads == ["slot_traffic", "slot_traffic"]
        assert decisions and {d.kind for d in decisions} == {"intra"}
        assert all(d.inputs["slot"]["pps"] > 0 for d in decisions)

    asyncio.run(with_balancer(body))


def test_a_hot_round_does_not_take_a_young_read_it_already_has_as_new():
    async def body(c: Any, fakes: Any, session: Any, clock: Any) -> None:
        await loads(c, fakes, {1: 5000.0, 2: 1000.0, 6: 1000.0})
        await c.balancer.traffic.get(0.0)  # the counter loop's read ...
        await c.balancer.snapshot()        # ... the base of a quiet round
        clock.now += 0.3                   # young enough for the balancer (half its period: 0.5)
        hot = {1: 9000.0, 2: 1000.0, 6: 1000.0}
        await loads(c, fakes, hot)
        traffic(c, session, 1, hot)
        decisions = await c.balancer.step()
        assert session.reads == ["slot_traffic", "slot_traffic"]  # a new read, rates from it
        assert decisions and all(d.inputs["slot"]["pps"] > 0 for d in decisions)

    asyncio.run(with_balancer(body))


def test_the_counter_loop_reuses_the_balancers_read():
    async def body(c: Any, fakes: Any, session: Any, clock: Any) -> None:
        c.core.slot_traffic = c.balancer.traffic  # (as the controller wires them)
        session.counters = {3: (5, 500)}
        await c.balancer.traffic.get(0.0)
        session.counters = {3: (9, 900)}
        task = asyncio.create_task(c.counters._counter_loop())
        try:
            await turns(lambda: bool(c.counters.slot_counters))
            assert c.counters.slot_counters == {3: (5, 500)}  # the balancer's read, not a new one
            assert session.reads.count("slot_traffic") == 1
            assert c.metrics.registry.get_sample_value("nfc_slot_packets", {"slot": "3"}) == 5
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(with_balancer(body))


def test_the_slot_series_are_the_last_read_made_when_scraped():
    m = ControllerMetrics()

    def packets(slot: int) -> float | None:
        return m.registry.get_sample_value("nfc_slot_packets", {"slot": str(slot)})

    m.update_slot_traffic({1: (5, 50), 2: (0, 0), 3: (4, 40)})
    assert (packets(1), packets(2), packets(3)) == (5, None, 4)  # no series without traffic
    m.update_slot_traffic({1: (7, 70), 2: (3, 30), 3: (4, 40)})
    assert (packets(1), packets(2), packets(3)) == (7, 3, 4)
    assert m.registry.get_sample_value("nfc_slot_bytes", {"slot": "1"}) == 70
    m.update_slot_traffic({1: (0, 0), 2: (3, 30)})  # (a switch restart zeroed slot 1)
    assert (packets(1), packets(2)) == (None, 3)
