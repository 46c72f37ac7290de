"""The `--hot` proof of `make run`: skewed traffic makes one NF hot and the load balancer relieves it.

What it changes in the scenario:

* the configuration: the load balancer on (`load_balancer.enabled`, a round and a load report
  every 0.4 s, up to 16 moves a round), and every NF's `capacity_pps` at `CAPACITY_PPS`;
* the NFs: the checker NF with `work_us` of busy work per packet, so load costs CPU;
* the traffic: `HOT_SHARE` of the flows get source ports whose slot (the switch's symmetric CRC-16
  of the 5-tuple, `slot_of`) belongs to NF `HOT_NF`, the rest to the other primaries: NF 1 starts
  at about 1.6 of its capacity, the others far below the low-water mark;
* the live view: each NF's load (as the balancer sees it) and the balancer's last decisions;
* the summary: every decision (kind, slot, from, to, outcome, bytes, reason), the time from the
  first report of the overload to the first report below the high-water mark, and the round trips
  (p50, p99) of the flows that started on the hot NF before the first move and after relief.
"""

from __future__ import annotations

import json
import math
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table

from contract.slot_hash import flow_hash

HOT_NF = 1
HOT_SHARE = 0.8
CAPACITY_PPS = 400.0
WORK_US = 500.0
FIRST_PORT = 20000
# load reports every 0.4 s: a report after the moves covers post-move traffic only, so the relief
# shows one report after the moves, not two (a report straddling them still looks hot)
LOAD_BALANCER = {"enabled": True, "period_s": 0.4, "report_s": 0.4, "nf_settle_s": 0.8,
                 "slot_cooldown_s": 30.0, "idle_for_s": 3600.0, "max_concurrent_moves": 16}


def slot_of(src: str, dst: str, sport: int, dport: int, proto: int, slot_count: int) -> int:
    """The slot the switch gives a packet (`contract.slot_hash`) among `slot_count` slots."""
    return flow_hash(src, dst, sport, dport, proto) % slot_count


def skewed_ports(hot_slots: set[int], client: str, server: str, dport: int, flows: int,
                 slot_count: int, share: float = HOT_SHARE) -> list[int]:
    """Source ports for `flows` UDP flows, `share` of them in `hot_slots`, each flow in a slot of
    its own (so the balancer can split the hot NF's traffic)."""
    n_hot = round(flows * share)
    hot: list[int] = []
    cold: list[int] = []
    seen: set[int] = set()
    port = FIRST_PORT
    while len(hot) < n_hot or len(cold) < flows - n_hot:
        if port > 65535:
            raise RuntimeError(f"not enough source ports for {flows} flows in distinct slots")
        slot = slot_of(client, server, port, dport, 17, slot_count)
        if slot not in seen:
            bucket = hot if slot in hot_slots else cold
            if len(bucket) < (n_hot if bucket is hot else flows - n_hot):
                bucket.append(port)
                seen.add(slot)
        port += 1
    mixed = []
    for i in range(flows):  # interleave, so the sender's round robin spreads the hot flows
        mixed.append(hot.pop() if hot and (not cold or i % 5) else cold.pop())
    return mixed


def hot_flows(ports: list[int], hot_slots: set[int], client: str, server: str, dport: int,
              slot_count: int) -> list[int]:
    """The flows (indexes of `ports`) that start on the hot NF."""
    return [i for i, p in enumerate(ports) if slot_of(client, server, p, dport, 17, slot_count) in hot_slots]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def latency(rtt: dict[int, list[tuple[float, float]]], flows: list[int], before: float | None,
            after: float | None) -> dict[str, Any]:
    """Round trips of `flows`' packets sent before the balancer's first move (the hot NF
    unrelieved) and after the hot NF was relieved: count, p50, p99 in ms."""
    def stats(ms: list[float]) -> dict[str, Any]:
        if not ms:
            return {"n": 0, "p50": None, "p99": None}
        return {"n": len(ms), "p50": round(_percentile(ms, 0.5), 2),
                "p99": round(_percentile(ms, 0.99), 2)}
    samples = [s for f in flows for s in rtt.get(f, [])]
    return {"before": stats([ms for t, ms in samples if before is not None and t < before]),
            "after": stats([ms for t, ms in samples if after is not None and t >= after])}


def apply_config(data: dict[str, Any]) -> None:
    """The hot run's configuration on top of the example's."""
    data["load_balancer"] = {**data.get("load_balancer", {}), **LOAD_BALANCER}
    for nf in data["nfs"]:
        nf["capacity_pps"] = CAPACITY_PPS


def nf_params() -> list[str]:
    return ["--params", json.dumps({"work_us": WORK_US})]


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=2) as resp:
        return json.loads(resp.read())


@dataclass
class HotWatch:
    """Samples of the balancer's view during the traffic: loads per round and the decisions."""

    api: str
    high: float = 0.8
    samples: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    last: dict[str, Any] = field(default_factory=dict)

    def poll(self) -> dict[str, Any]:
        self.last = _get(f"{self.api}/lb/history?limit=8")
        self.high = float(self.last["knobs"]["high_water"])
        loads = {nf: float(v["load"]) for nf, v in self.last.get("loads", {}).items()}
        if loads and (not self.samples or self.samples[-1][1] != loads):
            self.samples.append((time.time(), loads))
        return self.last

    def relief(self, nf: int = HOT_NF) -> dict[str, Any]:
        """When NF `nf` was first seen above the high mark, and first seen below it after that."""
        onset = relieved = None
        peak = 0.0
        for at, loads in self.samples:
            load = loads.get(str(nf), 0.0)
            peak = max(peak, load)
            if onset is None and load > self.high:
                onset = at
            elif onset is not None and relieved is None and load <= self.high:
                relieved = at
        return {"nf": nf, "peak": round(peak, 3), "onset": onset, "relieved": relieved,
                "seconds": None if onset is None or relieved is None else round(relieved - onset, 2)}


def loads_of(data: dict[str, Any]) -> dict[int, float]:
    return {int(nf): float(v["load"]) for nf, v in data.get("loads", {}).items()}


def decisions_table(decisions: list[dict[str, Any]], title: str, reasons: bool = False) -> Table:
    table = Table(title=title)
    cols = ["#", "kind", "what", "outcome", "bytes", "ms"] + (["reason"] if reasons else [])
    for col in cols:
        table.add_column(col, justify="left" if col in ("kind", "what", "outcome", "reason") else "right",
                         overflow="fold")
    for d in decisions:
        a, det = d["action"], d.get("detail", {})
        what = (f"slot {a['slot']} {a['src']}->{a['dst']}" if a["action"] == "move"
                else f"cluster {a['cluster']}" if a["action"] == "scale_out" else f"NF {a['nf']}")
        ms = f"{det['seconds'] * 1000:.0f}" if "seconds" in det else ""
        row = [str(d["id"]), d["kind"], what, d["outcome"], str(det.get("bytes_shipped", "")), ms]
        table.add_row(*row, *([a["reason"]] if reasons else []))
    return table


def live(nf_view: RenderableType, watch: HotWatch) -> RenderableType:
    data = watch.last
    return Group(nf_view, decisions_table(data.get("decisions", []),
                                          f"load balancer: last decisions of {data.get('rounds', 0)} rounds"))


def summary(console: Console, data: dict[str, Any], relief: dict[str, Any]) -> None:
    decisions = data.get("decisions", [])
    console.print(decisions_table(decisions, f"load balancer decisions ({len(decisions)})", reasons=True))
    kinds: dict[str, int] = {}
    for d in decisions:
        kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
    console.print("decisions by kind: " + (", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
                                           or "none"))
    if relief["seconds"] is not None:
        console.print(f"NF {relief['nf']}: load {relief['peak']:.2f} at its peak, below the high "
                      f"mark {relief['seconds']:.2f} s after the overload was first reported")
    else:
        console.print(f"[bold red]NF {relief['nf']} was not relieved[/] (peak load {relief['peak']:.2f})")
    lat = data.get("latency")
    if lat:
        def fmt(s: dict[str, Any]) -> str:
            return f"p50 {s['p50']} ms, p99 {s['p99']} ms ({s['n']} packets)" if s["n"] else "no packets"
        console.print(f"round trips of the flows that started on NF {relief['nf']}: before the "
                      f"balancer's first move {fmt(lat['before'])}; after relief {fmt(lat['after'])}")
