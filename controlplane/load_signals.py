"""Load signals of the load balancer: what every primary NF and every slot is doing, as one snapshot.

This module owns

* the snapshot (`SlotLoad`, `NfLoadInfo`, `LoadSnapshot`): the load balancer's only input;
* `SlotRates`: per-slot packet and byte rates from two successive reads of the switch's
  `slot_traffic` counter (read only in rounds with an NF above the high mark, `base` otherwise);
* `CapacityTracker`: each NF's capacity in packets/s, configured (`capacity_pps`) or learnt at the
  rate where its queue starts to grow or it starts dropping for overload;
* `SnapshotBuilder`: combines the NF load reports, the slot rates, the slot map and the balancer's
  memory (when each slot last moved, which NFs took part in a move lately, since when an NF has been
  hot or idle) into a `LoadSnapshot`.

**An NF's load** is a fraction of its capacity (1.0 = saturated):
`max(packet_rate / capacity_pps, cpu_percent / cpu_capacity_percent)`, where `cpu_capacity_percent`
is 100 per worker process unless configured. A slot's share of its owner's load is proportional to
its packet rate at the switch: `load * slot_pps / sum of the owner's slot_pps`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from controlplane.config import ControllerConfig
from controlplane.nf_state import NfLoad

EWMA = 0.5  # weight of a new capacity observation


class SlotLoad(NamedTuple):
    """One slot of an NF with traffic: its rates at the switch and what moving it would ship.
    (A named tuple: a snapshot holds up to 65,536 of them and is built every round.)"""

    slot: int
    pps: float              # packets/s at the switch
    bps: float = 0.0        # bytes/s at the switch
    state_bytes: int = 0    # the full state (an inter-cluster move ships it)
    delta_bytes: int = 0    # what an intra-cluster move ships (0 when the peers are up to date)


@dataclass(frozen=True, slots=True)
class NfLoadInfo:
    """One primary NF as the balancer sees it."""

    nf_id: int
    cluster: str
    load: float                      # fraction of capacity (see the module docstring)
    capacity_pps: float = 10000.0    # configured or learnt
    packet_rate: float = 0.0         # reported by the NF
    cpu_percent: float = 0.0         # reported by the NF (100 = one core)
    queue_depth: int = 0
    drop_rate: float = 0.0           # overload drops per second
    slots: tuple[SlotLoad, ...] = ()  # the slots it owns that carry traffic
    slot_count: int = -1             # every slot it owns (len(slots) when -1)
    hot_since: float | None = None   # above the high-water mark since (snapshot clock)
    idle_since: float | None = None  # below the idle floor since
    settled: bool = True             # no move involved it for `nf_settle_s`: its report is current
    traffic_pps: float = field(default=-1.0)  # sum of its slots' pps (computed when -1)
    stage: int = 0                   # its service-chain stage: slots move within a stage only

    def __post_init__(self) -> None:
        if self.traffic_pps < 0:
            object.__setattr__(self, "traffic_pps", sum(s.pps for s in self.slots))
        if self.slot_count < 0:
            object.__setattr__(self, "slot_count", len(self.slots))

    def share(self, slot: SlotLoad) -> float:
        """The part of this NF's load that `slot` is (0 when its slots carry no traffic)."""
        if self.traffic_pps <= 0:
            return 0.0
        return self.load * slot.pps / self.traffic_pps


@dataclass(frozen=True)
class LoadSnapshot:
    """Everything the decision function looks at, taken at one instant."""

    at: float                                   # monotonic seconds
    nfs: Mapping[int, NfLoadInfo]               # the live primaries
    slot_moved_at: Mapping[int, float] = field(default_factory=dict)
    cluster_scaled_at: Mapping[str, float] = field(default_factory=dict)
    scaling: frozenset[str] = frozenset()       # clusters with a scale action under way
    moves_in_flight: int = 0

    def summary(self) -> dict[str, object]:
        """The inputs a decision is logged with (per NF: load, capacity, rate, cpu, queue, slots)."""
        return {
            "at": round(self.at, 3),
            "nfs": {str(n.nf_id): {"cluster": n.cluster, "load": round(n.load, 3),
                                   "capacity_pps": round(n.capacity_pps, 1),
                                   "packet_rate": round(n.packet_rate, 1),
                                   "cpu_percent": round(n.cpu_percent, 1),
                                   "queue_depth": n.queue_depth, "slots": n.slot_count,
                                   "active_slots": len(n.slots)}
                    for n in sorted(self.nfs.values(), key=lambda n: n.nf_id)},
        }


class SlotRates:
    """Per-slot packet/byte rates from successive cumulative counter reads."""

    def __init__(self) -> None:
        self._last: dict[int, tuple[int, int]] = {}
        self._at: float | None = None
        self.rates: dict[int, tuple[float, float]] = {}

    def update(self, counters: Mapping[int, tuple[int, int]], now: float) -> dict[int, tuple[float, float]]:
        """Feed one read (index -> (packets, bytes)); returns slot -> (pps, bytes/s). The first read
        gives no rates; a counter that went backwards (switch restart) counts from 0."""
        if self._at is not None and now > self._at:
            dt = now - self._at
            last = self._last
            rates = {}
            for slot, (packets, nbytes) in counters.items():
                p0, b0 = last.get(slot, (0, 0))
                if packets < p0 or nbytes < b0:
                    p0, b0 = 0, 0
                if packets != p0:
                    rates[slot] = ((packets - p0) / dt, (nbytes - b0) / dt)
            self.rates = rates
        self._last = dict(counters)
        self._at = now
        return self.rates

    def base(self, counters: Mapping[int, tuple[int, int]], at: float) -> None:
        """Take a read made at `at` as the one the next `update` measures from, without computing
        rates (the balancer's rounds where no NF is hot: the counter loop's reads, for free)."""
        if self._at is None or at > self._at:
            self._last, self._at = dict(counters), at


@dataclass
class _Capacity:
    learnt: float | None = None
    queue: int = 0
    drops: int | None = None
    at: float | None = None


class CapacityTracker:
    """Capacity of each NF in packets/s.

    The configured `capacity_pps` is an upper bound. When an NF's queue is at least `queue_growth`
    packets and grew since the last report, or it dropped packets for overload, the rate it was
    processing is what it can do: the learnt capacity moves towards that rate (EWMA 0.5). When it
    processes more than the learnt capacity without queueing, the learnt capacity follows the rate
    up. The capacity used is min(configured, learnt)."""

    def __init__(self, configured: Mapping[int, float], queue_growth: int) -> None:
        self.configured = dict(configured)
        self.queue_growth = queue_growth
        self._nfs: dict[int, _Capacity] = {}
        self.drop_rates: dict[int, float] = {}

    def _step(self, nf_id: int, load: NfLoad) -> tuple[_Capacity, float]:
        """What `update` would keep for `nf_id` after `load`, and the drop rate (nothing kept)."""
        old = self._nfs.get(nf_id)
        st = _Capacity() if old is None else replace(old)
        drop_rate = 0.0
        if st.drops is not None and st.at is not None and load.at > st.at:
            drop_rate = max(0, load.overload_drops - st.drops) / (load.at - st.at)
        growing = load.queue_depth >= self.queue_growth and load.queue_depth > st.queue
        if (growing or drop_rate > 0) and load.packet_rate > 0:
            st.learnt = load.packet_rate if st.learnt is None else (
                (1 - EWMA) * st.learnt + EWMA * load.packet_rate)
        elif st.learnt is not None and load.packet_rate > st.learnt and not growing:
            st.learnt = load.packet_rate
        st.queue, st.drops, st.at = load.queue_depth, load.overload_drops, load.at
        return st, drop_rate

    def update(self, nf_id: int, load: NfLoad) -> float:
        st, self.drop_rates[nf_id] = self._step(nf_id, load)
        self._nfs[nf_id] = st
        return self.capacity(nf_id)

    def peek(self, nf_id: int, load: NfLoad) -> float:
        """The capacity `update(nf_id, load)` would return, without keeping anything."""
        return self._capacity(nf_id, self._step(nf_id, load)[0])

    def capacity(self, nf_id: int) -> float:
        return self._capacity(nf_id, self._nfs.get(nf_id))

    def _capacity(self, nf_id: int, st: _Capacity | None) -> float:
        configured = self.configured.get(nf_id, 10000.0)
        if st is None or st.learnt is None:
            return configured
        return max(1.0, min(configured, st.learnt))

    def learnt(self, nf_id: int) -> float | None:
        st = self._nfs.get(nf_id)
        return None if st is None else st.learnt


def nf_load_fraction(load: NfLoad, capacity_pps: float, cpu_capacity_percent: float | None) -> float:
    """The documented load number: max(rate / capacity, cpu / cpu capacity)."""
    cpu_cap = cpu_capacity_percent or 100.0 * max(1, load.workers)
    return max(load.packet_rate / capacity_pps, load.cpu_percent / cpu_cap)


class SnapshotBuilder:
    """Builds `LoadSnapshot`s and keeps the balancer's memory between them."""

    def __init__(self, cfg: ControllerConfig) -> None:
        self.cfg = cfg
        self.lb = cfg.load_balancer
        self.rates = SlotRates()
        self.capacity = CapacityTracker({nf.id: nf.capacity_pps for nf in cfg.nfs},
                                        self.lb.queue_growth)
        self.bytes_per_flow = float(self.lb.bytes_per_flow)
        self.clusters = {nf.id: nf.cluster for nf in cfg.nfs}
        self.stages = {nf.id: cfg.stage_of(nf.id) for nf in cfg.nfs}
        self.slot_moved_at: dict[int, float] = {}
        self.nf_touched_at: dict[int, float] = {}
        self._hot_since: dict[int, float] = {}
        self._idle_since: dict[int, float] = {}

    # -- memory the loop feeds back -----------------------------------------------------------------
    def note_move(self, slot: int, src: int, dst: int, now: float) -> None:
        self.slot_moved_at[slot] = now
        self.nf_touched_at[src] = self.nf_touched_at[dst] = now
        self._idle_since.pop(src, None)
        self._idle_since.pop(dst, None)

    def note_shipped(self, nbytes: int, flows: int) -> None:
        """A full-state move shipped `nbytes` for `flows` flows: refine the bytes-per-flow estimate."""
        if flows > 0 and nbytes > 0:
            self.bytes_per_flow = (1 - EWMA) * self.bytes_per_flow + EWMA * nbytes / flows

    def needs_rates(self, loads: Mapping[int, NfLoad | None], primaries: Iterable[int]) -> bool:
        """Whether the next `build` with these reports finds an NF above the high-water mark: the
        only NFs whose slots' rates the decision looks at (`load_balancer.decide`). The same load
        `build` computes, from the capacity its update would give, without keeping it."""
        th, lb = self.cfg.thresholds, self.lb
        for nf_id in primaries:
            report = loads.get(nf_id)
            if report is not None and nf_load_fraction(
                    report, self.capacity.peek(nf_id, report), lb.cpu_capacity_percent) > th.high_water:
                return True
        return False

    # -- the snapshot -------------------------------------------------------------------------------
    def build(self, now: float, loads: Mapping[int, NfLoad | None], primaries: Iterable[int],
              owners: Iterable[tuple[int, int]], counters: Mapping[int, tuple[int, int]] | None,
              scaling: Iterable[str] = (), cluster_scaled_at: Mapping[str, float] | None = None,
              moves_in_flight: int = 0, counters_at: float | None = None) -> LoadSnapshot:
        """`loads`: the last report of each live NF (None: no report yet, left out); `primaries`: the
        current primaries; `owners`: (slot, owner) for every slot; `counters`: this poll's read of
        `slot_traffic` (None: no read, the last rates are kept); `scaling`: clusters with a scale action
        under way; `cluster_scaled_at`: when each cluster's last scale action ended;
        `counters_at`: when the read was made (`now` if not given)."""
        rates = (self.rates.update(counters, now if counters_at is None else counters_at)
                 if counters is not None else self.rates.rates)
        per_nf: dict[int, list[int]] = {}
        for slot, owner in owners:
            per_nf.setdefault(owner, []).append(slot)
        th, lb = self.cfg.thresholds, self.lb
        bpf = self.bytes_per_flow
        nfs: dict[int, NfLoadInfo] = {}
        for nf_id in primaries:
            report = loads.get(nf_id)
            if report is None:
                continue
            cap = self.capacity.update(nf_id, report)
            load = nf_load_fraction(report, cap, lb.cpu_capacity_percent)
            if load > th.high_water:
                self._hot_since.setdefault(nf_id, now)
            else:
                self._hot_since.pop(nf_id, None)
            if load < lb.idle_floor:
                self._idle_since.setdefault(nf_id, now)
            else:
                self._idle_since.pop(nf_id, None)
            flows, behind = report.slot_flows, report.slots_behind
            slots = []
            mine = per_nf.get(nf_id, ())
            for s in mine:
                rate = rates.get(s)
                if rate is None:
                    continue  # no traffic: moving it relieves nothing
                full = int(flows.get(s, 0) * bpf)
                slots.append(SlotLoad(s, rate[0], rate[1], full, full if s in behind else 0))
            touched = self.nf_touched_at.get(nf_id)
            nfs[nf_id] = NfLoadInfo(
                nf_id=nf_id, cluster=self.clusters[nf_id], stage=self.stages[nf_id], load=load,
                capacity_pps=cap,
                packet_rate=report.packet_rate, cpu_percent=report.cpu_percent,
                queue_depth=report.queue_depth, drop_rate=self.capacity.drop_rates.get(nf_id, 0.0),
                slots=tuple(slots), slot_count=len(mine), hot_since=self._hot_since.get(nf_id),
                idle_since=self._idle_since.get(nf_id),
                settled=touched is None or now - touched >= lb.nf_settle_s,
            )
        expired = [s for s, t in self.slot_moved_at.items() if now - t >= lb.slot_cooldown_s]
        for s in expired:
            del self.slot_moved_at[s]
        for gone in set(self._hot_since) - set(nfs):
            self._hot_since.pop(gone)
        for gone in set(self._idle_since) - set(nfs):
            self._idle_since.pop(gone)
        return LoadSnapshot(at=now, nfs=nfs, slot_moved_at=dict(self.slot_moved_at),
                            cluster_scaled_at=dict(cluster_scaled_at or {}),
                            scaling=frozenset(scaling), moves_in_flight=moves_in_flight)
