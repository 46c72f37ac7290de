"""Prism's options against the protocol without them (`make bench-prism-variants`).

    python -m bench.prism_variants [--pair direct|snapshots] [--quick] [--repeats 3]
        [--sizes 65536,262144] [--csv FILE]

On the p4sim testbed (prism.testbed, a private network namespace, links 8 Mbit/s, the client's
40), one pair of variants:
  direct:    mode "every" (the hand-back restored at the frontend, `release`, the request read,
             `begin`, dumped, shipped: four controller steps per request) against "every
             --direct" (the handed-back state shipped straight on after one `handover` step:
             three);
  snapshots: mode "once" against "once --snapshots" (a live snapshot shipped to the frontend
             and acknowledged before each later answer: what saving once-mode connections from
             a backend crash costs).
The variants alternate inside each repeat, so both see the same machine; the table gives the medians over the repeats, the
controller steps per response, the median hand-off time (`total_ms`: `begin` or `handover` to
the backend's ACK), the frontend's time per later request (from a HANDBACK to the next ACK) and
the load average around the points (the machine is shared: read the numbers beside it). Every
response is checked byte for byte by the client; a failure is printed and counted.
Needs root (namespaces, tc) and `make build`.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from prism.private_netns import run_in_private_netns
from prism.testbed import REPO, Testbed, target_missing

LINK_MBIT = 8.0
PAIRS: dict[str, dict[str, tuple[str, list[str]]]] = {
    "direct": {"every": ("every", []), "every --direct": ("every", ["--direct"])},
    "snapshots": {"once": ("once", []), "once --snapshots": ("once", ["--snapshots"])},
}


def _records(path: Path, kind: str) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [r for r in map(json.loads, path.read_text().splitlines()) if r["kind"] == kind]


def frontend_ms(stats: Path) -> float:
    """The frontend's median time per later request, from a HANDBACK to the next backend's ACK:
    restore + `release` (its hand-back record) + `begin` to ACK (its hand-off record); with
    --direct, `handover` to ACK. 0 without hand-backs (mode once)."""
    handoffs = _records(stats, "handoff")
    direct = [float(h["total_ms"]) for h in handoffs if h.get("direct")]
    if direct:
        return statistics.median(direct)
    backs = [float(b["restore_ms"] + b["release_ms"]) for b in _records(stats, "handback")]
    if not backs:
        return 0.0
    return statistics.median(backs) + statistics.median(float(h["total_ms"]) for h in handoffs)


def measure(logdir: Path, variants: dict[str, tuple[str, list[str]]], sizes: list[int],
            backends: int, connections: int, seconds: float, repeats: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    tb = Testbed(backends=backends, logdir=logdir, rate_mbit=LINK_MBIT)
    try:
        for rep in range(repeats):
            for size in sizes:
                for name, (mode, args) in variants.items():
                    stats = logdir / f"{rep}-{size}-{name.replace(' ', '')}.jsonl"
                    load_before = os.getloadavg()[0]
                    steps_before = tb.controller_status()["steps"]
                    tb.start_servers(mode, stats=stats, frontend_args=args)
                    out = tb.run_client("--connections", str(connections), "--size", str(size),
                                        "--duration", str(seconds), "--seed", str(rep + 1))
                    tb.stop_servers()
                    fails = out["failures"]
                    assert isinstance(fails, dict)
                    ok = int(out["ok"])  # type: ignore[call-overload]
                    steps = tb.controller_status()["steps"] - steps_before
                    totals = [h["total_ms"] for h in _records(stats, "handoff")]
                    row = {"repeat": rep, "variant": name, "size": size, "mbps": out["mbps"],
                           "responses": ok, "failures": sum(fails.values()),
                           "failure_kinds": json.dumps(fails),
                           "steps_per_response": steps / max(ok, 1),
                           "handoff_ms_median": statistics.median(totals) if totals else 0.0,
                           "frontend_ms_per_request": frontend_ms(stats),
                           "load_before": load_before, "load_after": os.getloadavg()[0]}
                    print(f"  repeat {rep}, {size} B, {name}: {row['mbps']:.2f} Mbit/s, "
                          f"{row['steps_per_response']:.2f} steps/response, hand-off "
                          f"{row['handoff_ms_median']:.1f} ms, frontend per request "
                          f"{row['frontend_ms_per_request']:.1f} ms, load {load_before:.1f}"
                          + (f", FAILURES {fails}" if fails else ""), flush=True)
                    rows.append(row)
    finally:
        tb.close()
    return rows


def table(rows: list[dict[str, Any]], variants: dict[str, tuple[str, list[str]]]) -> str:
    lines = ["| variant | object | Mbit/s (median) | min-max | steps / response | hand-off ms "
             "(median) | frontend ms / request | failures | load average |",
             "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- |"]
    for size in sorted({r["size"] for r in rows}):
        for name in variants:
            pts = [r for r in rows if r["size"] == size and r["variant"] == name]
            mbps = [r["mbps"] for r in pts]
            loads = [r["load_before"] for r in pts] + [r["load_after"] for r in pts]
            lines.append(
                f"| {name} | {size // 1024} KiB | {statistics.median(mbps):.1f} | "
                f"{min(mbps):.1f}-{max(mbps):.1f} | "
                f"{statistics.median(r['steps_per_response'] for r in pts):.2f} | "
                f"{statistics.median(r['handoff_ms_median'] for r in pts):.1f} | "
                f"{statistics.median(r['frontend_ms_per_request'] for r in pts):.1f} | "
                f"{sum(r['failures'] for r in pts)} | {min(loads):.0f}-{max(loads):.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="bench.prism_variants", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pair", choices=sorted(PAIRS), default="direct",
                   help="which option to measure against the protocol without it")
    p.add_argument("--quick", action="store_true", help="one size, 2 repeats of 4 s")
    p.add_argument("--sizes", default="65536,262144", help="object sizes in bytes")
    p.add_argument("--backends", type=int, default=4)
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--seconds", type=float, default=6.0, help="per point")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--csv", type=Path, help="write the points here")
    args = p.parse_args(argv)
    if missing := target_missing("p4sim", REPO / "build"):
        raise SystemExit(f"bench.prism_variants: {missing}")
    variants = PAIRS[args.pair]
    sizes = [int(s) for s in args.sizes.split(",")]
    seconds, repeats = args.seconds, args.repeats
    if args.quick:
        sizes, seconds, repeats = sizes[-1:], 4.0, 2
    with tempfile.TemporaryDirectory(prefix="prism-variants-") as tmp:
        rows = run_in_private_netns(
            lambda: measure(Path(tmp), variants, sizes, args.backends, args.connections, seconds,
                            repeats),
            timeout=3600, on_interrupt=Testbed.close_all)
    if args.csv:
        with args.csv.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    print(table(rows, variants))


if __name__ == "__main__":
    main()
