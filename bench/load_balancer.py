"""Decision time of the load balancer (controlplane/load_balancer.py) at scale.

1,000 primary NFs in 10 clusters of 100, 65,536 slots spread evenly, skewed per-slot traffic
(seeded Pareto). Scenarios: nobody hot (the common round: a scan), 1 % and 10 % of the NFs hot
with cold peers in their clusters (intra moves), 10 % hot whose clusters are full (inter moves),
10 % hot with no room anywhere (scale-out), 10 % idle (scale-in). Each row is the median (and min,
max) of `--repeats` calls of `decide()` on the same snapshot; the target is 50 ms. The last row
is the time to build the snapshot from 1,000 load reports and one 65,536-entry counter read
(`SnapshotBuilder.build`), which the loop pays every round too.

    .venv/bin/python -m bench.load_balancer [--nfs 1000] [--slots 65536] [--repeats 11]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from controlplane.config import (
    ClusterConfig,
    ControllerConfig,
    LoadBalancerConfig,
    NfConfig,
    ThresholdConfig,
)
from controlplane.load_balancer import Knobs, action_kind, decide
from controlplane.load_signals import LoadSnapshot, NfLoadInfo, SlotLoad, SnapshotBuilder
from controlplane.nf_state import NfLoad

CLUSTERS = 10
CAPACITY = 1000.0
TARGET_MS = 50.0


def scenario(nfs: int, slots: int, hot: float, cold_peers: bool, cold_elsewhere: bool,
             idle: float = 0.0, seed: int = 1) -> LoadSnapshot:
    rng = random.Random(seed)
    per_cluster = nfs // CLUSTERS
    owners: dict[int, list[int]] = {i: [] for i in range(1, nfs + 1)}
    for s in range(slots):
        owners[1 + s % nfs].append(s)
    n_hot, n_idle = int(nfs * hot), int(nfs * idle)
    hot_ids = set(range(1, nfs + 1, max(1, nfs // max(1, n_hot))))
    hot_ids = set(sorted(hot_ids)[:n_hot])
    idle_ids = set(sorted(set(range(2, nfs + 1, max(1, nfs // max(1, n_idle)))) - hot_ids)[:n_idle])
    infos = {}
    for nf_id, mine in owners.items():
        cluster = f"c{(nf_id - 1) // per_cluster % CLUSTERS}"
        if nf_id in hot_ids:
            level = 1.1
        elif nf_id in idle_ids:
            level = 0.01
        elif cold_peers or (cold_elsewhere and cluster != "c0" and (nf_id - 1) // per_cluster % 2):
            level = 0.2
        else:
            level = 0.5
        weights = [rng.paretovariate(2.0) for _ in mine]
        total = sum(weights)
        sl = tuple(SlotLoad(s, level * CAPACITY * w / total, 0.0, rng.randrange(64, 4096),
                            rng.choice((0, 0, 0, 512))) for s, w in zip(mine, weights, strict=True))
        infos[nf_id] = NfLoadInfo(nf_id, cluster, level, CAPACITY, slots=sl,
                                  hot_since=0.0 if level > 0.8 else None,
                                  idle_since=0.0 if level < 0.05 else None)
    return LoadSnapshot(at=1000.0, nfs=infos)


def timed(fn: Callable[[], Any], repeats: int) -> tuple[list[float], list[float], Any]:
    """Wall and CPU milliseconds of each call (on a shared machine the wall time includes waiting
    for a core; the CPU time is what the call costs)."""
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        cpus.append((time.process_time() - c) * 1000)
        walls.append((time.perf_counter() - t) * 1000)
    return walls, cpus, out


def row(name: str, walls: list[float], cpus: list[float], note: str = "") -> str:
    med = statistics.median(walls)
    return (f"{name:<34}{med:>10.2f}{min(walls):>9.2f}{max(walls):>9.2f}"
            f"{statistics.median(cpus):>9.2f}  {note}")


def build_inputs(nfs: int, slots: int) -> tuple[ControllerConfig, dict[int, NfLoad],
                                                list[tuple[int, int]], dict[int, tuple[int, int]]]:
    # 1,000 NFs do not fit one switch's 9-bit ports: the configuration is built without validation
    cfg = ControllerConfig.model_construct(
        clusters=[ClusterConfig(name=f"c{c}") for c in range(CLUSTERS)],
        nfs=[NfConfig.model_construct(id=i, cluster=f"c{i % CLUSTERS}", capacity_pps=CAPACITY)
             for i in range(1, nfs + 1)],
        thresholds=ThresholdConfig(), load_balancer=LoadBalancerConfig())
    owners = [(s, 1 + s % nfs) for s in range(slots)]
    loads = {i: NfLoad(packet_rate=500.0, cpu_percent=40.0,
                       slot_flows={s: 3 for s in range(i - 1, slots, nfs)}, at=1.0)
             for i in range(1, nfs + 1)}
    counters = {s: (1000 * s, 64000 * s) for s in range(slots)}
    return cfg, loads, owners, counters


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nfs", type=int, default=1000)
    ap.add_argument("--slots", type=int, default=65536)
    ap.add_argument("--repeats", type=int, default=11)
    a = ap.parse_args()
    knobs = Knobs(max_concurrent_moves=10**6, max_slots_per_move=16)
    rows = [
        ("nobody hot (scan)", scenario(a.nfs, a.slots, 0.0, False, False)),
        ("1 % hot, cold peers (intra)", scenario(a.nfs, a.slots, 0.01, True, False)),
        ("10 % hot, cold peers (intra)", scenario(a.nfs, a.slots, 0.10, True, False)),
        ("10 % hot, cold elsewhere (inter)", scenario(a.nfs, a.slots, 0.10, False, True)),
        ("10 % hot, no room (scale-out)", scenario(a.nfs, a.slots, 0.10, False, False)),
        ("10 % idle (scale-in)", scenario(a.nfs, a.slots, 0.0, True, False, idle=0.10)),
    ]
    print(f"load balancer decision time: {a.nfs} NFs x {a.slots} slots, {CLUSTERS} clusters, "
          f"median of {a.repeats} (target <= {TARGET_MS:.0f} ms)")
    print(f"{'scenario':<34}{'median ms':>10}{'min ms':>9}{'max ms':>9}{'cpu ms':>9}  actions")
    for name, snap in rows:
        def call(snap: LoadSnapshot = snap) -> list[Any]:
            return decide(snap, knobs)
        walls, cpus, actions = timed(call, a.repeats)
        kinds = Counter(action_kind(x) for x in actions)
        summary = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) or "none"
        flag = "" if statistics.median(walls) <= TARGET_MS else "  (above target)"
        print(row(name, walls, cpus, summary + flag))
    cfg, loads, owners, counters = build_inputs(a.nfs, a.slots)
    builder = SnapshotBuilder(cfg)
    builder.build(0.0, loads, range(1, a.nfs + 1), owners, counters)
    later = {s: (p + 10, b + 640) for s, (p, b) in counters.items()}
    clock = iter(range(1, 10**6))

    def build() -> LoadSnapshot:
        return builder.build(float(next(clock)), loads, range(1, a.nfs + 1), owners, later)
    walls, cpus, _ = timed(build, a.repeats)
    print(row("snapshot build (every slot active)", walls, cpus, "in a thread, off the event loop"))


if __name__ == "__main__":
    main()
