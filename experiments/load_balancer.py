"""Thesis §6.4 (table A.8): latency against packet rate with and without the cluster-based load
balancer, 3 clusters x 3 NFs.

At the thesis's rates (25, 50, 100 pkt/s) nothing is loaded here unless the NFs are made slow, so
the generic NF does `WORK_US` of busy work per packet and the traffic is skewed (as `make run
--hot`): `HOT_SHARE` of the flows hash to slots of NF-1. NF-1 (capacity `CAPACITY_PPS` for the
balancer) is then below its high-water mark at 25 pkt/s and above its real capacity at 100 pkt/s.
With the balancer on (a round every 0.5 s) NF-1's slots move to its cluster peers, then to other
clusters; off, NF-1 queues. The latency is the mean round trip of every packet of the run.
"""

from __future__ import annotations

from typing import Any

from experiments import plots
from experiments.common import (
    SINK_PORT,
    Check,
    Comparison,
    Context,
    Outcome,
    bring_up,
    make_config,
    write_csv,
)
from experiments.thesis_data import A8_LATENCY_VS_RATE_LB

NAME = "load-balancer"
# 5 ms a packet: at 100 pkt/s NF-1 (80 % of the flows, both ways: 160 pkt/s) runs at 80 % of its
# 200 pkt/s and queues, while the spinning of all NFs together (1 core) leaves the switch a core;
# 8 ms saturated both cores (1.6 cores of spinning), so no placement could lower the latency
WORK_US = 5000.0
CAPACITY_PPS = 100.0
HOT_SHARE = 0.8
FLOWS = 20


def run(ctx: Context) -> Outcome:
    from topo.launch.hot import LOAD_BALANCER, skewed_ports

    out = Outcome(NAME)
    # quick: only the rate its check reads (each point brings up 18 NFs: ~50 s on 2 cores)
    rates = [100.0] if ctx.quick else [25.0, 50.0, 100.0]
    seconds = 10.0 if ctx.quick else 30.0
    out.notes.append(
        f"3 clusters x 3 primaries with backups, batch 30. Generic NF with work_us={WORK_US:g}, "
        f"capacity_pps={CAPACITY_PPS:g} for the balancer, {HOT_SHARE:.0%} of {FLOWS} flows on "
        f"NF-1's slots: without that, the thesis's rates load nothing. Each point runs "
        f"{seconds:g} s instead of 4,000 packets (160 s at 25 pkt/s).")
    rows: list[dict[str, Any]] = []
    # quick: with the balancer only (its check is that it moves slots off the hot NF; a balancer
    # switched off moves nothing by construction, and its 18-NF point cost a minute of CI)
    modes = (True,) if ctx.quick else (True, False)
    labels = ["with" if lb else "without" for lb in modes]
    steps, step = len(rates) * len(modes), 0
    for lb in modes:
        for rate in rates:
            step += 1
            label = "with" if lb else "without"
            ctx.progress(NAME, step, steps, f"{label} load balancing, {rate:g} pkt/s")
            cfg = make_config([3, 3, 3], batch=30, batch_timeout_us=5000,
                              load_balancer={**LOAD_BALANCER, "enabled": lb},
                              capacity_pps=CAPACITY_PPS)
            with bring_up(ctx, f"{NAME}-{label}-{rate:g}", cfg, {"work_us": WORK_US}) as bench:
                hot = {int(r["slot"]) for r in bench.get("/slots?nf=1")}
                ports = skewed_ports(hot, "10.0.0.1", "10.0.0.2", SINK_PORT, FLOWS,
                                     bench.system.cfg.switch.slot_count, HOT_SHARE)
                ctx.rng(NAME).shuffle(ports)
                t = bench.traffic(FLOWS, max(5, int(rate * seconds / FLOWS)), rate, sports=ports,
                                  wait=10.0)
                history = bench.get("/lb/history")
            moves = [d for d in history.get("decisions", []) if d["action"]["action"] == "move"]
            rows.append({"rate_pps": rate, "load_balancer": label, "sent": t.sent,
                         "received": t.received, "latency_ms_mean": t.latency(),
                         "latency_ms_p50": t.latency(0.5), "latency_ms_p99": t.latency(0.99),
                         "lb_moves": len(moves)})
    out.csvs.append(write_csv(ctx.out_dir / "load-balancer.csv", rows))
    get = {(r["rate_pps"], r["load_balancer"]): r for r in rows}
    out.plots.append(plots.line(
        ctx.out_dir / "load-balancer-latency.png", "Latency vs packet rate (3 clusters x 3 NFs)",
        "packet rate (pkt/s)", "latency (ms)",
        [*[(f"ours: {label} LB", rates, [get[(r, label)]["latency_ms_mean"] for r in rates])
           for label in labels],
         ("thesis A.8 with LB", list(A8_LATENCY_VS_RATE_LB),
          [v[0] for v in A8_LATENCY_VS_RATE_LB.values()]),
         ("thesis A.8 without LB", list(A8_LATENCY_VS_RATE_LB),
          [v[1] for v in A8_LATENCY_VS_RATE_LB.values()])]))
    for label, i in (("with", 0), ("without", 1))[:len(modes)]:
        out.comparisons.append(Comparison(
            "A.8", f"Latency vs packet rate, {label} load balancing", "rate (pkt/s)", "ms/pkt",
            "ms (mean round trip)",
            [(int(r), A8_LATENCY_VS_RATE_LB.get(int(r), (None, None))[i],
              get[(r, label)]["latency_ms_mean"]) for r in rates],
            shape="The balancer can only help once an NF is over its high mark: at low rates "
                  "every NF here is idle and both columns measure the path alone."))
    top = max(rates)
    if ctx.quick:  # 10 s runs: the moves' own cost is most of the run, the latency says nothing
        out.checks.append(Check(
            f"at {top:g} pkt/s the balancer moves slots off the hot NF",
            get[(top, "with")]["lb_moves"] > 0, f"{get[(top, 'with')]['lb_moves']} moves"))
        out.notes.append("quick mode: with the balancer only; the latency comparison is not "
                         "checked (10 s per point)")
        return out
    out.checks.append(Check(
        f"at {top:g} pkt/s the balancer moves slots off the hot NF",
        get[(top, "with")]["lb_moves"] > 0 and get[(top, "without")]["lb_moves"] == 0,
        f"{get[(top, 'with')]['lb_moves']} moves with, {get[(top, 'without')]['lb_moves']} without"))
    out.checks.append(Check(
        f"at {top:g} pkt/s the latency with the balancer is lower than without",
        get[(top, "with")]["latency_ms_mean"] < get[(top, "without")]["latency_ms_mean"],
        f"{get[(top, 'with')]['latency_ms_mean']:.1f} ms against "
        f"{get[(top, 'without')]['latency_ms_mean']:.1f} ms"))
    return out
