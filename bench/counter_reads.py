"""The controller's CPU spent on reading the switch's `slot_traffic` counter, old way vs new.

The leading controller reads the per-slot counter for two users: the load balancer (every
`load_balancer.period_s`, 0.4 s in the busy run of docs/chaos.md) and the counter loop (every
second: the metrics, the status). This measures, per second of the controller's life, the CPU
those reads cost with `--slots` slots:

* **old**: each user reads on its own (the balancer every round, the counter loop every second),
  each read decoded through finsy's entities (`SwitchSession.read_counter_entries`), and the
  counter loop sets two gauges of every slot with traffic;
* **new**: one read shared by both (controlplane/shared_read.py: the counter loop takes a
  balancer read younger than a second, the balancer one younger than half a period), the
  balancer reading only in rounds where some NF is above the high mark (row "no NF hot": only
  the counter loop reads; row "an NF hot": the balancer reads every round), decoded from the
  ReadResponse protobuf (`SwitchSession.read_counter`), and the per-slot series made from the
  last read when /metrics is scraped, not set at each read (the last rows: that cost, and a
  scrape's, old and new).

The switch is a fake P4Runtime client behind a real `SwitchSession` (finsy's `Switch`, not
connected): each read is answered with a ReadResponse of `--slots` entries, parsed from bytes as
gRPC does (the bytes made beforehand: the switch's work is not the controller's), the counts
advanced on `--active` of the slots from one read to the next. The controller's clock is simulated
(`--seconds` of it per repeat, nothing sleeps); CPU is `time.process_time`. Each row is the
median of `--repeats`; the ratio is old / new within this one run.

    .venv/bin/python -m bench.counter_reads [--slots 4096] [--seconds 10] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

from finsy.proto import p4r
from prometheus_client import CollectorRegistry, Gauge, generate_latest

from controlplane.config import SwitchConfig
from controlplane.metrics import ControllerMetrics
from controlplane.pipeline_state import SLOT_COUNTER
from controlplane.shared_read import SharedRead
from controlplane.switch_session import SwitchSession

Counts = dict[int, tuple[int, int]]


class FakeClient:
    """What finsy's `Switch` reads through (`P4Client.request_iter`): one ReadResponse of every
    slot, its counts advanced on the active slots at each read, through bytes as on the wire."""

    def __init__(self, counter_id: int, slots: int, active: float, seed: int = 1,
                 distinct: int = 16) -> None:
        rng = random.Random(seed)
        counts = [[rng.randrange(1, 10**6), 0] for _ in range(slots)]
        active_slots = rng.sample(range(slots), int(slots * active))
        self.wire: list[bytes] = []  # made beforehand: the switch's work is not the controller's
        for _ in range(distinct):
            for s in active_slots:
                counts[s][0] += rng.randrange(1, 100)
            self.wire.append(p4r.ReadResponse(entities=[
                p4r.Entity(counter_entry=p4r.CounterEntry(
                    counter_id=counter_id, index=p4r.Index(index=i),
                    data=p4r.CounterData(packet_count=p, byte_count=100 * p)))
                for i, (p, _) in enumerate(counts)]).SerializeToString())
        self.reads = 0

    async def request_iter(self, request: p4r.ReadRequest) -> AsyncIterator[p4r.ReadResponse]:
        self.reads += 1
        yield p4r.ReadResponse.FromString(self.wire[self.reads % len(self.wire)])  # as gRPC does


class OldSlotGauges:
    """The per-slot series as they were: two gauges per slot with traffic, set at every read."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.slot_packets = Gauge("nfc_slot_packets", "Packets the switch counted per slot",
                                  ["slot"], registry=self.registry)
        self.slot_bytes = Gauge("nfc_slot_bytes", "Bytes the switch counted per slot", ["slot"],
                                registry=self.registry)

    def update_slot_traffic(self, counters: Mapping[int, tuple[int, int]]) -> None:
        for slot, (packets, nbytes) in counters.items():
            if packets:
                self.slot_packets.labels(slot=str(slot)).set(packets)
                self.slot_bytes.labels(slot=str(slot)).set(nbytes)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def timeline(seconds: float, period: float, interval: float) -> list[tuple[float, str]]:
    """(time, user) of every balancer round and counter-loop round in `seconds`, in order."""
    events = [(i * period, "balancer") for i in range(int(seconds / period))]
    events += [(i * interval + 0.05, "counters") for i in range(int(seconds / interval))]
    return sorted(events)


async def old_way(session: SwitchSession, events: list[tuple[float, str]]) -> int:
    m = OldSlotGauges()
    for _at, user in events:
        counts = await session.read_counter_entries(SLOT_COUNTER)
        if user == "counters":
            m.update_slot_traffic(counts)
    return len(events)


async def new_way(session: SwitchSession, events: list[tuple[float, str]], hot: bool,
                  period: float, interval: float) -> int:
    m, clock = ControllerMetrics(), Clock()
    shared: SharedRead[Counts] = SharedRead(lambda: session.read_counter(SLOT_COUNTER), clock=clock)
    seen = {"balancer": 0, "counters": 0}
    for at, user in events:
        clock.now = at
        if user == "balancer":
            if hot:
                await shared.get(period / 2)
            elif shared.last is not None and shared.last.seq != seen[user]:
                seen[user] = shared.last.seq  # no read: the counter loop's last is its base
                dict(shared.last.value)       # (SlotRates.base copies it)
            continue
        read = await shared.get(interval / 2)
        if read.seq != seen[user]:
            seen[user] = read.seq
            m.update_slot_traffic(read.value)
    return shared.reads


def cpu_ms(run: Callable[[], Coroutine[Any, Any, int]], repeats: int) -> tuple[list[float], int]:
    out, reads = [], 0
    for _ in range(repeats):
        c = time.process_time()
        reads = asyncio.run(run())
        out.append((time.process_time() - c) * 1000)
    return out, reads


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--slots", type=int, default=4096)
    ap.add_argument("--seconds", type=float, default=10.0, help="controller time per repeat")
    ap.add_argument("--period", type=float, default=0.4, help="the balancer's period_s")
    ap.add_argument("--interval", type=float, default=1.0, help="the counter loop's interval")
    ap.add_argument("--active", type=float, default=1.0,
                    help="share of slots whose count changes between reads")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--p4info", type=Path, default=Path("build/nfcluster.p4info.txtpb"))
    a = ap.parse_args()
    session = SwitchSession(SwitchConfig(p4info=a.p4info), device_config=b"x")
    client = FakeClient(session.schema.counters[session.names.counter(SLOT_COUNTER)].id,
                        a.slots, a.active)
    session.switch._p4client = client  # type: ignore[assignment]  # (what a connect sets)
    events = timeline(a.seconds, a.period, a.interval)

    async def old() -> int:
        return await old_way(session, events)

    def new(hot: bool) -> Callable[[], Coroutine[Any, Any, int]]:
        async def run() -> int:
            return await new_way(session, events, hot, a.period, a.interval)
        return run

    async def one(read: Callable[[str], Awaitable[Counts]]) -> int:
        await read(SLOT_COUNTER)
        return 1

    print(f"slot_traffic reads: {a.slots} slots, balancer every {a.period:g} s, counter loop every "
          f"{a.interval:g} s, {a.active:.0%} of slots counting; {a.seconds:g} s of controller time, "
          f"median of {a.repeats}")
    print(f"{'':<40}{'reads/s':>8}{'cpu ms/s':>10}{'min':>8}{'max':>8}{'old/new':>9}")
    base, base_reads = cpu_ms(old, a.repeats)
    base_med = statistics.median(base) / a.seconds

    def line(name: str, ms: list[float], reads: float, ratio: bool = True) -> None:
        med = statistics.median(ms)
        print(f"{name:<40}{reads:>8.1f}{med:>10.2f}{min(ms):>8.2f}{max(ms):>8.2f}"
              + (f"{base_med / med:>8.1f}x" if ratio else f"{'':>9}"))

    line("old: two readers, finsy decode", [x / a.seconds for x in base], base_reads / a.seconds,
         ratio=False)
    for hot in (False, True):
        ms, reads = cpu_ms(new(hot), a.repeats)
        line(f"new: shared, raw decode ({'an NF hot' if hot else 'no NF hot'})",
             [x / a.seconds for x in ms], reads / a.seconds)
    print(f"{'each':<40}{'':>8}{'cpu ms':>10}")
    finsy_ms, _ = cpu_ms(lambda: one(session.read_counter_entries), a.repeats * 3)
    raw_ms, _ = cpu_ms(lambda: one(session.read_counter), a.repeats * 3)
    print(f"{'  read, finsy entities (old)':<40}{'':>8}{statistics.median(finsy_ms):>10.2f}")
    print(f"{'  read, ReadResponse protobuf (new)':<40}{'':>8}{statistics.median(raw_ms):>10.2f}"
          f"{'':>25}{statistics.median(finsy_ms) / statistics.median(raw_ms):>7.1f}x")
    m_old, m_new = OldSlotGauges(), ControllerMetrics()  # (new: the whole registry)
    old_set: list[float] = []
    new_set: list[float] = []
    old_scrape: list[float] = []
    new_scrape: list[float] = []
    for _ in range(a.repeats * 3):
        counts = asyncio.run(session.read_counter(SLOT_COUNTER))
        c = time.process_time()
        m_old.update_slot_traffic(counts)
        old_set.append((time.process_time() - c) * 1000)
        c = time.process_time()
        m_new.update_slot_traffic(counts)
        new_set.append((time.process_time() - c) * 1000)
        c = time.process_time()
        generate_latest(m_old.registry)
        old_scrape.append((time.process_time() - c) * 1000)
        c = time.process_time()
        m_new.render()
        new_scrape.append((time.process_time() - c) * 1000)
    for name, old_ms, new_ms in (("gauges set, each read", old_set, new_set),
                                 ("a scrape of /metrics", old_scrape, new_scrape)):
        o, n = statistics.median(old_ms), statistics.median(new_ms)
        print(f"{'  ' + name + ' (old)':<40}{'':>8}{o:>10.3f}")
        print(f"{'  ' + name + ' (new)':<40}{'':>8}{n:>10.3f}{'':>25}{o / max(n, 1e-6):>7.1f}x")

if __name__ == "__main__":
    main()
