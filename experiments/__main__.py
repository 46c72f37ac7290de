"""`python -m experiments` (what `make experiments` runs): the thesis's experiments on the real
system, each writing `<out-dir>/<name>.csv` and its PNG plots, then `<out-dir>/report.md` with the
thesis's tables beside ours.

    python -m experiments --list
    python -m experiments [--quick] [--seed N] [--target p4sim|bmv2] [--out-dir DIR] [NAME ...]

Without names every experiment runs, in the order `--list` shows. Needs root (Mininet) and
`make build`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console

from experiments.common import REPO, Context, Outcome

# name -> (module:function, what it measures); the order is the run order
EXPERIMENTS: dict[str, tuple[str, str]] = {
    "workers": ("experiments.workers:run",
                "latency and throughput against worker processes, and against offered rate "
                "(thesis 6.1, A.1-A.2)"),
    "batch-size": ("experiments.clustering:run_batch_size",
                   "throughput against batch size, 3 clusters x 4 NFs against 12 unclustered "
                   "(thesis 6.2.1, A.3)"),
    "packet-rate": ("experiments.clustering:run_packet_rate",
                    "throughput against packet rate, clustered against unclustered (6.2.2, A.4)"),
    "migration-bytes": ("experiments.migration_bytes:run",
                        "bytes per batch of NF-1..3 through an intra- and an inter-cluster move "
                        "(6.3, A.5-A.7)"),
    "load-balancer": ("experiments.load_balancer:run",
                      "latency against packet rate with and without the load balancer, 3 x 3 "
                      "(6.4, A.8)"),
    "move-time": ("experiments.beyond:run_move_time",
                  "one-slot move time against the number of flows in the slot"),
    "failover": ("experiments.beyond:run_failover", "fail-over time of a killed primary"),
    "replication-cost": ("experiments.beyond:run_replication_cost",
                         "throughput and latency with cluster replication on and off"),
    "work": ("experiments.beyond:run_work", "throughput against per-packet work"),
    "prism": ("experiments.prism:run",
              "Prism TCP hand-off: throughput against object size and backends for proxy, Prism "
              "and Prism with one hand-off, hand-off latency (Prism thesis 5.1-5.2)"),
    "prism-scale": ("experiments.prism_scale:run",
                    "Prism at the thesis's scale (1 Gbit/s links, 4-32 backends) by simulation "
                    "calibrated on the `prism` run's hand-off costs (run it first)"),
    "targets": ("experiments.beyond:run_targets",
                "the throughput-against-rate figure on p4sim and on BMv2 (when installed)"),
}


def resolve(name: str) -> Callable[[Context], Outcome]:
    module, func = EXPERIMENTS[name][0].split(":")
    fn: Callable[[Context], Outcome] = getattr(importlib.import_module(module), func)
    return fn


def unknown(names: Sequence[str]) -> list[str]:
    return [n for n in names if n not in EXPERIMENTS]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m experiments", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="experiments to run (default: all; see --list)")
    p.add_argument("--list", action="store_true", help="list the experiments and exit")
    p.add_argument("--quick", action="store_true",
                   help="small version of each (fewer points and packets; for tests)")
    p.add_argument("--seed", type=int, default=1, help="seed of every random choice (default 1)")
    p.add_argument("--target", choices=["p4sim", "bmv2"], default="p4sim",
                   help="switch target (default p4sim)")
    p.add_argument("--out-dir", type=Path, default=REPO / "results" / "experiments",
                   help="where CSVs, plots and report.md go (default results/experiments)")
    return p


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    names = [n for arg in args.names for n in arg.replace(",", " ").split()]
    if args.list:
        for name, (_fn, what) in EXPERIMENTS.items():
            print(f"{name:18} {what}")
        return 0
    bad = unknown(names)
    if bad:
        parser.error(f"unknown experiment(s): {', '.join(bad)}; valid: {', '.join(EXPERIMENTS)}")
    if os.geteuid() != 0:
        parser.error("the experiments build Mininet networks: run them as root")
    from experiments import plots, report

    signal.signal(signal.SIGTERM, _interrupt)  # stopped like Ctrl-C: everything is cleaned up
    console = Console(width=max(Console().width, 110))
    out_dir: Path = args.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    failed = []
    console.print(f"experiments -> {out_dir} (target {args.target}, seed {args.seed}"
                  f"{', quick' if args.quick else ''}; plots with {plots.BACKEND})")
    for name in names or list(EXPERIMENTS):
        ctx = Context(out_dir=out_dir, quick=args.quick, seed=args.seed, target=args.target,
                      console=console)
        console.rule(f"{name}: {EXPERIMENTS[name][1]}")
        started = time.monotonic()
        try:
            outcome = resolve(name)(ctx)
        except KeyboardInterrupt:
            console.print("interrupted: everything started was stopped")
            return 130
        except Exception as exc:  # one experiment's failure must not lose the others
            traceback.print_exc()
            outcome = Outcome(name, error=f"{type(exc).__name__}: {exc}")
        seconds = time.monotonic() - started
        report.save(outcome, out_dir, seconds, {"quick": args.quick, "seed": args.seed,
                                                "target": args.target})
        bad_checks = [c for c in outcome.checks if not c.ok]
        if outcome.error or bad_checks:
            failed.append(name)
        for c in outcome.checks:
            console.print(f"  {'[green]PASS[/]' if c.ok else '[red]FAIL[/]'} {c.what}"
                          + (f" [dim]({c.detail})[/]" if c.detail else ""))
        console.print(f"  {name}: {len(outcome.csvs)} CSV, {len(outcome.plots)} plot(s) in "
                      f"{seconds:.0f} s" + (f" [red]error: {outcome.error}[/]" if outcome.error else ""))
    path = report.write(out_dir)
    console.print(f"report: {path}")
    if failed:
        console.print(f"[red]failed or with failing checks: {', '.join(failed)}[/]")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
