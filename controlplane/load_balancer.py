"""The cluster-based load balancer's decision: a pure function from a `LoadSnapshot` to actions.

`decide(snapshot, knobs)` follows the thesis's flow chart (docs/controller.md, "Load balancer"):

1. An NF is **hot** when its load is above the high-water mark (for `hot_for_s`) and no move
   touched it for `nf_settle_s` (its report reflects its current slots).
2. A hot NF sheds slots until its projected load is at most `target = high_water - target_margin`:
   first to the least-loaded NFs **of its own cluster** below the low-water mark (`Move(kind="intra")`:
   they hold a replica, so the move ships a delta), then to the least-loaded NFs of **other
   clusters** below the low-water mark (`kind="inter"`: the full state). A destination takes a slot
   only while its own projected load stays at most `target`, so it never becomes hot by the move.
3. When no destination can take enough and the NF would stay above the high-water mark:
   `ScaleOut(cluster)` (once per cluster, not while one is under way, `scale_cooldown_s` apart).
4. When nothing is hot: an NF below `idle_floor` for `idle_for_s` whose cluster peers can absorb its
   load while staying below the low-water mark on average is drained: `ScaleIn(nf)` (one per round,
   never the cluster's last `min_primaries_per_cluster`).

Which slots: each slot relieves its share of the NF's load (`NfLoadInfo.share`) and costs
`move_overhead_bytes` plus what the move ships (the delta within a cluster, the full state
across). Slots are taken in order of cost per unit of relief (hot slots with small state first),
then slots the NF does not need to shed are given back (most expensive first), and a single slot
that covers the need more cheaply than the whole choice replaces it: few bytes, few moves.

Against oscillation: the gap between the target and the low-water mark (hysteresis), a per-slot
cooldown (`slot_cooldown_s`: a slot that moved stays put), the settle time of an NF after a move,
a cap on the moves of one NF per round (`thresholds.max_slots_per_move`) and on moves in flight
(`max_concurrent_moves`).
"""

from __future__ import annotations

import heapq
from dataclasses import asdict, dataclass
from typing import Any, Literal

from controlplane.config import ControllerConfig
from controlplane.load_signals import LoadSnapshot, NfLoadInfo, SlotLoad


@dataclass(frozen=True)
class Knobs:
    """The balancer's parameters (from `thresholds` and `load_balancer` of the configuration)."""

    low_water: float = 0.3
    high_water: float = 0.8
    target_margin: float = 0.1
    idle_floor: float = 0.05
    idle_for_s: float = 30.0
    hot_for_s: float = 0.0
    slot_cooldown_s: float = 10.0
    max_slots_per_move: int = 16
    max_concurrent_moves: int = 8
    scale_cooldown_s: float = 30.0
    min_primaries_per_cluster: int = 1
    move_overhead_bytes: int = 256

    @property
    def target(self) -> float:
        return self.high_water - self.target_margin

    @classmethod
    def from_config(cls, cfg: ControllerConfig) -> Knobs:
        th, lb = cfg.thresholds, cfg.load_balancer
        return cls(
            low_water=th.low_water, high_water=th.high_water, target_margin=lb.target_margin,
            idle_floor=lb.idle_floor, idle_for_s=lb.idle_for_s, hot_for_s=lb.hot_for_s,
            slot_cooldown_s=lb.slot_cooldown_s, max_slots_per_move=th.max_slots_per_move,
            max_concurrent_moves=lb.max_concurrent_moves, scale_cooldown_s=lb.scale_cooldown_s,
            min_primaries_per_cluster=lb.min_primaries_per_cluster,
            move_overhead_bytes=lb.move_overhead_bytes,
        )


@dataclass(frozen=True)
class Move:
    """Move `slot` from primary `src` to primary `dst`."""

    slot: int
    src: int
    dst: int
    kind: Literal["intra", "inter"]
    reason: str
    bytes_estimate: int = 0
    relief: float = 0.0  # the part of src's load the slot is

    def to_json(self) -> dict[str, Any]:
        return {"action": "move", **asdict(self)}


@dataclass(frozen=True)
class ScaleOut:
    """Bring a new primary into `cluster` (a spare of the pool)."""

    cluster: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"action": "scale_out", **asdict(self)}


@dataclass(frozen=True)
class ScaleIn:
    """Drain primary `nf` to its cluster peers and return it to the pool."""

    nf: int
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"action": "scale_in", **asdict(self)}


Action = Move | ScaleOut | ScaleIn


def action_kind(action: Action) -> str:
    """`intra`, `inter`, `scale_out` or `scale_in` (the metric label and the history's kind)."""
    if isinstance(action, Move):
        return action.kind
    return "scale_out" if isinstance(action, ScaleOut) else "scale_in"


class _Dests:
    """Candidate destinations (projected load below the low-water mark), least-loaded first: one
    heap per cluster and one for all. An NF whose projected load changes gets fresh entries; the
    old ones are skipped as stale. Entries popped while serving one hot NF are put back by `end()`,
    so each destination is offered once per hot NF."""

    def __init__(self, nfs: list[NfLoadInfo], proj: dict[int, float], low: float) -> None:
        self.proj, self.low = proj, low
        self.cluster_of = {n.nf_id: n.cluster for n in nfs}
        self.stage_of = {n.nf_id: n.stage for n in nfs}
        self.by_cluster: dict[str, list[tuple[float, int]]] = {}
        self.all: list[tuple[float, int]] = []
        for n in nfs:
            entry = (proj[n.nf_id], n.nf_id)
            self.by_cluster.setdefault(n.cluster, []).append(entry)
            self.all.append(entry)
        for heap in self.by_cluster.values():
            heapq.heapify(heap)
        heapq.heapify(self.all)
        self.aside: list[tuple[list[tuple[float, int]], tuple[float, int]]] = []

    def pop(self, kind: str, cluster: str, stage: int = 0) -> int | None:
        """The least-loaded candidate in `cluster` (intra) or outside it in the same chain
        `stage` (inter), or None."""
        heap = self.by_cluster.get(cluster, []) if kind == "intra" else self.all
        while heap:
            entry = heapq.heappop(heap)
            load, nf = entry
            if load != self.proj[nf]:
                continue  # stale
            self.aside.append((heap, entry))
            if load >= self.low:
                return None  # the rest is at least as loaded
            if kind == "inter" and (self.cluster_of[nf] == cluster or self.stage_of[nf] != stage):
                continue
            return nf
        return None

    def update(self, nf: int) -> None:
        if self.proj[nf] < self.low:
            entry = (self.proj[nf], nf)
            heapq.heappush(self.by_cluster[self.cluster_of[nf]], entry)
            heapq.heappush(self.all, entry)

    def end(self) -> None:
        for heap, (load, nf) in self.aside:
            if load == self.proj[nf]:
                heapq.heappush(heap, (load, nf))
        self.aside = []


def choose_slots(candidates: list[SlotLoad], shares: dict[int, float], costs: dict[int, int],
                 need: float, room: float, ratio: float, limit: int) -> list[SlotLoad]:
    """Slots whose shares add up to at least `need` (or as close as `room` and `limit` allow) for
    few bytes: greedy by cost per relief, surplus given back, a cheaper single slot preferred.
    `ratio` converts a share of the source's load into load of the destination."""
    order = sorted(candidates, key=lambda s: costs[s.slot] / shares[s.slot])
    chosen: list[SlotLoad] = []
    got = added = 0.0
    for s in order:
        if got >= need or len(chosen) >= limit:
            break
        add = shares[s.slot] * ratio
        if added + add > room:
            continue
        chosen.append(s)
        got += shares[s.slot]
        added += add
    if got >= need:
        for s in sorted(chosen, key=lambda s: -costs[s.slot]):  # give back what is not needed
            if got - shares[s.slot] >= need:
                chosen.remove(s)
                got -= shares[s.slot]
        total = sum(costs[s.slot] for s in chosen)
        single = [s for s in candidates if shares[s.slot] >= need and shares[s.slot] * ratio <= room
                  and costs[s.slot] < total]
        if single:
            chosen = [min(single, key=lambda s: costs[s.slot])]
    return chosen


def decide(snap: LoadSnapshot, knobs: Knobs) -> list[Action]:
    """The balancer's decision for one snapshot (pure: no I/O, no clock, no state)."""
    actions: list[Action] = []
    nfs = list(snap.nfs.values())
    proj = {n.nf_id: n.load for n in nfs}
    budget = knobs.max_concurrent_moves - snap.moves_in_flight
    target, high, low = knobs.target, knobs.high_water, knobs.low_water
    hot = sorted((n for n in nfs if n.load > high and n.settled and n.hot_since is not None
                  and snap.at - n.hot_since >= knobs.hot_for_s), key=lambda n: -n.load)
    dests = _Dests([n for n in nfs if n.settled and n.load < low], proj, low)
    scaled: set[str] = set()
    for h in hot:
        if budget <= 0:
            break
        movable = [s for s in h.slots if s.pps > 0 and not (
            s.slot in snap.slot_moved_at and snap.at - snap.slot_moved_at[s.slot] < knobs.slot_cooldown_s)]
        shares = {s.slot: h.share(s) for s in movable}
        movable = [s for s in movable if shares[s.slot] > 0]
        limit = min(knobs.max_slots_per_move, budget)
        short_of_room = True
        for kind in ("intra", "inter"):
            costs = {s.slot: knobs.move_overhead_bytes + (s.delta_bytes if kind == "intra" else s.state_bytes)
                     for s in movable}
            while movable and limit > 0 and proj[h.nf_id] > target:
                dst_id = dests.pop(kind, h.cluster, h.stage)
                if dst_id is None:
                    break
                dst = snap.nfs[dst_id]
                ratio = h.capacity_pps / dst.capacity_pps
                need = proj[h.nf_id] - target
                chosen = choose_slots(movable, shares, costs, need, target - proj[dst_id], ratio, limit)
                for s in chosen:
                    before_src, before_dst = proj[h.nf_id], proj[dst_id]
                    proj[h.nf_id] -= shares[s.slot]
                    proj[dst_id] += shares[s.slot] * ratio
                    where = "its cluster" if kind == "intra" else f"cluster {dst.cluster}"
                    actions.append(Move(
                        s.slot, h.nf_id, dst_id, "intra" if kind == "intra" else "inter",
                        f"NF {h.nf_id} load {h.load:.2f} > high {high:g}"
                        + (f" (projected {before_src:.2f}, shedding to {target:.2f})"
                           if before_src != h.load else "")
                        + f": slot {s.slot} "
                        f"({s.pps:.0f} pkt/s, {shares[s.slot]:.2f} of its load, ~{costs[s.slot]} B) "
                        f"to the least-loaded NF of {where} below low {low:g}, NF {dst_id} "
                        f"({before_dst:.2f} -> {proj[dst_id]:.2f})",
                        costs[s.slot], round(shares[s.slot], 4)))
                taken = {s.slot for s in chosen}
                movable = [s for s in movable if s.slot not in taken]
                limit -= len(chosen)
                budget -= len(chosen)
                dests.update(dst_id)
            if proj[h.nf_id] <= target:
                short_of_room = False
                break
        dests.end()
        if not movable or limit <= 0:
            short_of_room = False  # nothing left to move (cooldown, no traffic) or the cap: wait
        if (short_of_room and proj[h.nf_id] > high and h.cluster not in scaled
                and h.cluster not in snap.scaling
                and snap.at - snap.cluster_scaled_at.get(h.cluster, -1e18) >= knobs.scale_cooldown_s):
            scaled.add(h.cluster)
            actions.append(ScaleOut(h.cluster, (
                f"NF {h.nf_id} load {h.load:.2f} > high {high:g} and still {proj[h.nf_id]:.2f} "
                f"after the moves: no NF of its cluster or another below low {low:g} can take more")))
    if not hot and not actions:
        actions.extend(_scale_in(snap, knobs, nfs))
    return actions


def _scale_in(snap: LoadSnapshot, knobs: Knobs, nfs: list[NfLoadInfo]) -> list[Action]:
    by_cluster: dict[str, list[NfLoadInfo]] = {}
    for n in nfs:
        by_cluster.setdefault(n.cluster, []).append(n)
    idle = sorted((n for n in nfs if n.idle_since is not None and n.settled
                   and snap.at - n.idle_since >= knobs.idle_for_s), key=lambda n: (n.load, n.nf_id))
    for n in idle:
        peers = [p for p in by_cluster[n.cluster] if p.nf_id != n.nf_id]
        if len(peers) < knobs.min_primaries_per_cluster or n.cluster in snap.scaling:
            continue
        if snap.at - snap.cluster_scaled_at.get(n.cluster, -1e18) < knobs.scale_cooldown_s:
            continue
        cap = sum(p.capacity_pps for p in peers)
        after = (sum(p.load * p.capacity_pps for p in peers) + n.load * n.capacity_pps) / cap
        if after >= knobs.low_water:
            continue
        return [ScaleIn(n.nf_id, (
            f"NF {n.nf_id} load {n.load:.2f} < idle floor {knobs.idle_floor:g} for "
            f"{snap.at - (n.idle_since or snap.at):.0f} s: its {len(peers)} cluster peers take its "
            f"slots at {after:.2f} on average (< low {knobs.low_water:g})"))]
    return []
