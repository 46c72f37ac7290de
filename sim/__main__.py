"""`python -m sim`: run the deterministic simulation over many seeds, or replay one.

    python -m sim --seeds 200                 # seeds 1..200, a line per failing seed, a summary
    python -m sim --seed 17 --trace           # replay seed 17 and print its events
    python -m sim --seeds 50 --set kills=1.0 --set lost_replies=0.3   # another scenario

Exit status 0 when every seed passed, 1 when one failed, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import time

from sim.system import Outcome, Scenario, run_seed


def scenario(pairs: list[str]) -> Scenario:
    """A `Scenario` with `name=value` overrides (`--set`); a wrong name or value is named."""
    fields = {f.name: f for f in dataclasses.fields(Scenario)}
    values: dict[str, float | int | str] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or name not in fields:
            raise ValueError(f"--set {pair!r}: expected NAME=VALUE with NAME one of "
                             f"{', '.join(sorted(fields))}")
        try:
            kind = fields[name].type
            values[name] = (raw if kind in (str, "str") else
                            int(raw) if kind in (int, "int") else float(raw))
        except ValueError:
            raise ValueError(f"--set {pair!r}: {raw!r} is not a number") from None
    return Scenario(**values)  # type: ignore[arg-type]


def report(o: Outcome, trace: bool) -> None:
    status = "ok" if o.ok else "FAILED"
    print(f"seed {o.seed}: {status}: {o.stamped} stamped, {o.delivered} delivered, "
          f"{o.moves_ok}/{o.moves} moves, {o.failovers} fail-overs, {o.faults} faults, "
          f"{o.virtual_s:.1f} s simulated")
    if trace:
        for e in o.trace:
            print(f"  {e}")
    for p in o.problems:
        print(f"  problem: {p}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--seeds", type=int, default=20, help="run seeds FIRST..FIRST+N-1 (20)")
    which.add_argument("--seed", type=int, help="run this one seed (a replay)")
    ap.add_argument("--first", type=int, default=1, help="the first seed of --seeds (1)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="change the scenario (fields of sim.system.Scenario), repeatable")
    ap.add_argument("--trace", action="store_true", help="print each run's events")
    ap.add_argument("--verbose", action="store_true", help="the system's own log (INFO)")
    args = ap.parse_args(argv)
    if args.seeds is not None and args.seeds < 1:
        ap.error("--seeds takes a positive number")
    try:
        sc = scenario(args.set)
    except ValueError as exc:
        ap.error(str(exc))
    logging.basicConfig(level=logging.INFO if args.verbose else logging.CRITICAL,
                        format="%(levelname)s %(name)s: %(message)s")
    seeds = [args.seed] if args.seed is not None else range(args.first, args.first + args.seeds)
    started = time.perf_counter()
    failed: list[int] = []
    totals = {"stamped": 0, "moves": 0, "failovers": 0, "faults": 0}
    for n, seed in enumerate(seeds, 1):
        o = run_seed(seed, sc)
        for k in totals:
            totals[k] += getattr(o, k)
        if not o.ok:
            failed.append(seed)
        if not o.ok or args.seed is not None or args.trace:
            report(o, args.trace)
        elif n % 50 == 0:
            print(f"... {n} seeds, {len(failed)} failed, {time.perf_counter() - started:.0f} s",
                  file=sys.stderr)
    total = len(seeds)
    print(f"sim: {total - len(failed)} passed, {len(failed)} failed "
          f"({totals['stamped']} packets, {totals['moves']} moves, {totals['failovers']} "
          f"fail-overs, {totals['faults']} faults; {time.perf_counter() - started:.1f} s)")
    if failed:
        print("failing seeds (replay with --seed S --trace): " + " ".join(map(str, failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
