"""Thesis §6.1 (tables A.1, A.2): latency and throughput against the number of worker processes.

The thesis runs one NF with 1-5 threads, 4,000 packets at 100 pkt/s, batch 30. Ours: one primary
(with its backup, which output commit needs) running the generic NF with `WORK_US` of busy work per
packet, 1-5 worker processes (our unit of parallelism across flows, as the thesis's threads are),
batch 30. The latency is the mean round trip of the thesis's run (4,000 packets at 100 pkt/s, every
packet answered by the sink, so both directions cross the NF). 100 pkt/s loads nothing here, so
each worker count is also offered rising rates up to saturation; its throughput is the highest
delivered rate (answers received per second from the first packet sent to the last answer).
"""

from __future__ import annotations

from typing import Any

from experiments import plots
from experiments.common import (
    Check,
    Comparison,
    Context,
    Outcome,
    bring_up,
    make_config,
    random_ports,
    write_csv,
)
from experiments.thesis_data import A1_LATENCY_VS_THREADS, A2_THROUGHPUT_VS_THREADS

NAME = "workers"
WORK_US = 200.0
FLOWS = 10
BATCH = 30
BATCH_TIMEOUT_US = 5000


def run(ctx: Context) -> Outcome:
    workers = [1, 2] if ctx.quick else [1, 2, 3, 4, 5]
    base_packets = 300 if ctx.quick else 4000
    rates = [1500.0] if ctx.quick else [500.0, 1000.0, 2000.0, 4000.0]
    seconds = 2.0 if ctx.quick else 5.0
    out = Outcome(NAME)
    out.notes.append(
        f"Generic NF with work_us={WORK_US:g} per packet, {FLOWS} flows, batch {BATCH} closing "
        f"after {BATCH_TIMEOUT_US / 1000:g} ms at the latest (the thesis's batches close on count "
        "only; at 100 pkt/s a batch of 30 would hold output for 300 ms). Workers are processes "
        "(the thesis's threads; Python threads would share one core).")
    rows: list[dict[str, Any]] = []
    sweep: list[dict[str, Any]] = []
    ports = random_ports(FLOWS, ctx.rng(NAME))
    steps = len(workers) * (1 + len(rates))
    step = 0
    for w in workers:
        cfg = make_config([1], batch=BATCH, batch_timeout_us=BATCH_TIMEOUT_US)
        with bring_up(ctx, f"{NAME}-w{w}", cfg, {"work_us": WORK_US}, workers=w) as bench:
            step += 1
            ctx.progress(NAME, step, steps, f"{w} worker(s): {base_packets} packets at 100 pkt/s")
            t = bench.traffic(FLOWS, base_packets // FLOWS, 100.0, sports=ports)
            row = {"workers": w, "offered_pps": 100.0, "sent": t.sent, "received": t.received,
                   "throughput_pps": t.throughput_pps, "latency_ms_mean": t.latency(),
                   "latency_ms_p50": t.latency(0.5), "latency_ms_p99": t.latency(0.99)}
            rows.append(row)
            sweep.append(dict(row))
            for rate in rates:
                step += 1
                ctx.progress(NAME, step, steps, f"{w} worker(s): offered {rate:g} pkt/s")
                t = bench.traffic(FLOWS, max(10, int(rate * seconds / FLOWS)), rate, sports=ports)
                sweep.append({"workers": w, "offered_pps": rate, "sent": t.sent,
                              "received": t.received, "throughput_pps": t.throughput_pps,
                              "latency_ms_mean": t.latency(), "latency_ms_p50": t.latency(0.5),
                              "latency_ms_p99": t.latency(0.99)})
    for row in rows:
        row["saturation_pps"] = max(r["throughput_pps"] for r in sweep if r["workers"] == row["workers"])
    out.csvs.append(write_csv(ctx.out_dir / "workers.csv", rows))
    out.csvs.append(write_csv(ctx.out_dir / "workers-rate.csv", sweep))
    thesis_w = sorted(A1_LATENCY_VS_THREADS)
    out.plots.append(plots.line(
        ctx.out_dir / "workers-latency.png", "Latency vs workers (100 pkt/s)", "workers",
        "latency (ms)", [("ours: mean round trip", [r["workers"] for r in rows],
                          [r["latency_ms_mean"] for r in rows]),
                         ("thesis A.1", thesis_w, [A1_LATENCY_VS_THREADS[w] for w in thesis_w])]))
    out.plots.append(plots.line(
        ctx.out_dir / "workers-throughput.png", "Throughput vs workers", "workers",
        "throughput", [("ours: saturation (pkt/s)", [r["workers"] for r in rows],
                        [r["saturation_pps"] for r in rows]),
                       ("ours: at 100 pkt/s", [r["workers"] for r in rows],
                        [r["throughput_pps"] for r in rows]),
                       ("thesis A.2", thesis_w, [A2_THROUGHPUT_VS_THREADS[w] for w in thesis_w])]))
    out.plots.append(plots.line(
        ctx.out_dir / "workers-rate.png", "Throughput vs offered rate", "offered (pkt/s)",
        "delivered (pkt/s)",
        [(f"{w} worker(s)", [r["offered_pps"] for r in sweep if r["workers"] == w],
          [r["throughput_pps"] for r in sweep if r["workers"] == w]) for w in workers]))
    by_w = {r["workers"]: r for r in rows}
    out.comparisons.append(Comparison(
        "A.1", "Latency vs number of threads (workers)", "workers", "ms/pkt", "ms (mean round trip)",
        [(w, A1_LATENCY_VS_THREADS.get(w), by_w[w]["latency_ms_mean"]) for w in workers],
        shape="At 100 pkt/s our NF is idle most of the time: the round trip is the batch timeout "
              "plus the path, so more workers cannot shorten it the way the thesis's threads "
              "shortened queueing."))
    out.comparisons.append(Comparison(
        "A.2", "Throughput vs number of threads (workers)", "workers", "(thesis unit)",
        "pkt/s at saturation",
        [(w, A2_THROUGHPUT_VS_THREADS.get(w), by_w[w]["saturation_pps"]) for w in workers],
        shape="Our saturation throughput can only grow while workers find free cores: this "
              "machine has 2, shared by the switch, the sender and the sink."))
    out.checks.append(Check(
        "at 100 pkt/s every worker count delivers at least 99% of the packets",
        all(r["received"] >= 0.99 * r["sent"] for r in rows),
        ", ".join(f"{r['workers']}: {r['received']}/{r['sent']}" for r in rows)))
    out.checks.append(Check(
        "the saturation throughput is above the 100 pkt/s of the thesis's load",
        all(r["saturation_pps"] > 100 for r in rows),
        ", ".join(f"{r['workers']}: {r['saturation_pps']:.0f}" for r in rows)))
    return out
