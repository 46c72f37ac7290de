"""Service chains: what each added stage costs, on the real system.

Runs `make run --chain` (Mininet, p4sim, the controller, real nf-host processes) on chains cut
from topo/chain.yaml to 1, 2 and 3 stages (firewall; firewall -> nat; firewall -> nat ->
flow_monitor), each stage with the NFs the file gives it, and for each:

* **latency**: round-trip time of every packet at a light load (the client's per-packet RTT:
  client -> every stage -> server -> every stage back), p50 and p99;
* **throughput**: packets delivered per second (both directions) when the client offers more than
  the system carries; at every stage a packet crosses the switch once more.

It prints one table with the ratios against one stage (medians over `--repeats` runs) and writes
`results/bench/chain.json`. Every run must still deliver every packet exactly once, in order (at
the light load; at saturation losses are counted, not judged).

    .venv/bin/python -m bench.chain [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from topo.faults.injector import percentiles
from topo.traffic import SideReport

REPO = Path(__file__).resolve().parent.parent
CHAIN = REPO / "topo" / "chain.yaml"
FLOWS = 8


def cut_chain(stages: int) -> dict[str, Any]:
    """topo/chain.yaml with its first `stages` stages, their clusters and their NFs only."""
    data: dict[str, Any] = yaml.safe_load(CHAIN.read_text())
    chain = data["chains"][0]
    chain["stages"] = chain["stages"][:stages]
    kept = {st["name"] for st in chain["stages"]}
    data["clusters"] = [c for c in data["clusters"] if c["stage"] in kept]
    clusters = {c["name"] for c in data["clusters"]}
    data["nfs"] = [nf for nf in data["nfs"] if nf["cluster"] in clusters]
    return data


def one_run(stages: int, rate: int, packets: int, out: Path) -> dict[str, Any]:
    """One `topo run --chain` on a chain of `stages` stages; RTTs and delivered packets/s."""
    out.mkdir(parents=True, exist_ok=True)
    config = out / "chain.yaml"
    config.write_text(yaml.safe_dump(cut_chain(stages), sort_keys=False))
    proc = subprocess.run(
        [sys.executable, "-m", "topo", "run", "--chain", "--config", str(config), "--flows",
         str(FLOWS), "--packets", str(packets), "--rate", str(rate), "--out-dir", str(out)],
        capture_output=True, text=True, cwd=REPO)
    if not (out / "client.json").exists():
        raise RuntimeError(f"{stages}-stage run failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    client = SideReport.from_json(json.loads((out / "client.json").read_text()))
    server = SideReport.from_json(json.loads((out / "server.json").read_text()))
    rtts = [ms for samples in client.rtt.values() for _, ms in samples]
    sends = [t for times in client.sent_at.values() for t in times]
    arrivals = [t for side in (client, server) for times in side.received_at.values() for t in times]
    received = len(arrivals)
    span = max(arrivals) - min(sends) if arrivals and sends else 0.0
    return {"verified": proc.returncode == 0, "rtt": percentiles(rtts), "received": received,
            "sent": sum(client.sent.values()) + sum(server.sent.values()),
            "delivered_pps": received / span if span > 0 else 0.0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="runs per point (median; default 3)")
    parser.add_argument("--light-rate", type=int, default=300, help="packets/s for latency")
    parser.add_argument("--heavy-rate", type=int, default=4000,
                        help="packets/s offered for throughput (more than the system carries)")
    parser.add_argument("--quick", action="store_true", help="one run per point, fewer packets")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "bench" / "chain.json")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.light_rate <= 0 or args.heavy_rate <= 0:
        parser.error("--repeats, --light-rate and --heavy-rate must be positive")
    repeats = 1 if args.quick else args.repeats
    light_packets = 60 if args.quick else 200
    heavy_packets = 300 if args.quick else 1500
    console = Console()
    results: dict[int, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="nfc-bench-chain-") as tmp:
        for stages in (1, 2, 3):
            for r in range(repeats):
                console.print(f"{stages} stage(s), run {r + 1}/{repeats}: light, then heavy load ...")
                light = one_run(stages, args.light_rate, light_packets, Path(tmp) / f"l{stages}-{r}")
                heavy = one_run(stages, args.heavy_rate, heavy_packets, Path(tmp) / f"h{stages}-{r}")
                results.setdefault(stages, []).append({"light": light, "heavy": heavy})
    rows = []
    for stages, runs in sorted(results.items()):
        rows.append({
            "stages": stages,
            "rtt_p50_ms": statistics.median(x["light"]["rtt"]["p50"] or 0.0 for x in runs),
            "rtt_p99_ms": statistics.median(x["light"]["rtt"]["p99"] or 0.0 for x in runs),
            "delivered_pps": statistics.median(x["heavy"]["delivered_pps"] for x in runs),
            "light_verified": all(x["light"]["verified"] for x in runs),
            "heavy_lost": statistics.median(x["heavy"]["sent"] - x["heavy"]["received"] for x in runs),
        })
    base = rows[0]
    table = Table(title=f"service chain cost (medians of {repeats} run(s); ratios against one stage)")
    for head in ("stages", "RTT p50 ms", "x", "RTT p99 ms", "x", "delivered pkt/s", "x",
                 "exactly-once (light)", "lost (heavy)"):
        table.add_column(head, justify="right")
    for row in rows:
        table.add_row(
            str(row["stages"]), f"{row['rtt_p50_ms']:.2f}",
            f"{row['rtt_p50_ms'] / base['rtt_p50_ms']:.2f}" if base["rtt_p50_ms"] else "-",
            f"{row['rtt_p99_ms']:.2f}",
            f"{row['rtt_p99_ms'] / base['rtt_p99_ms']:.2f}" if base["rtt_p99_ms"] else "-",
            f"{row['delivered_pps']:.0f}",
            f"{row['delivered_pps'] / base['delivered_pps']:.2f}" if base["delivered_pps"] else "-",
            "yes" if row["light_verified"] else "NO", f"{row['heavy_lost']:.0f}")
    console.print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "runs": results}, indent=1))
    console.print(f"written {args.out}")
    return 0 if all(r["light_verified"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
