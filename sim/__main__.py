"""`python -m sim`: run the deterministic simulation over many seeds, or replay one.

    python -m sim --seeds 200                 # seeds 1..200, a line per failing seed, a summary
    python -m sim --seed 17 --trace           # replay seed 17 and print its events
    python -m sim --seeds 50 --set kills=1.0 --set lost_replies=0.3   # another scenario
    python -m sim --seeds 1000 --jobs 2       # seeds across 2 processes (the same results)

Exit status 0 when every seed passed, 1 when one failed, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import logging
import multiprocessing
import os
import sys
import time
from collections.abc import Iterable, Iterator

from sim.system import Outcome, Scenario, config, run_seed


def scenario(pairs: list[str]) -> Scenario:
    """A `Scenario` with `name=value` overrides (`--set`); a wrong name or value is named."""
    fields = {f.name: f for f in dataclasses.fields(Scenario)}
    values: dict[str, float | int | str | bool] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or name not in fields:
            raise ValueError(f"--set {pair!r}: expected NAME=VALUE with NAME one of "
                             f"{', '.join(sorted(fields))}")
        kind = fields[name].type
        if kind in (bool, "bool"):
            if raw.lower() not in ("true", "false", "1", "0"):
                raise ValueError(f"--set {pair!r}: {raw!r} is not true or false")
            values[name] = raw.lower() in ("true", "1")
            continue
        try:
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


class _VirtualTime(logging.Filter):
    """Stamps each record with the run's virtual time (`vt`, as in the trace), so a replay's
    log lines and its events read as one timeline."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            record.vt = f"{asyncio.get_running_loop().time():9.4f}"
        except RuntimeError:  # (outside a run)
            record.vt = " " * 9
        return True


def _quiet(level: int) -> None:
    logging.basicConfig(level=level, format="%(vt)s %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(_VirtualTime())


def outcomes(seeds: Iterable[int], sc: Scenario, jobs: int = 1,
             level: int = logging.CRITICAL) -> Iterator[Outcome]:
    """`run_seed` of each seed, in order; over `jobs` processes when more than one. A run is a
    function of its seed alone (nothing is shared between runs), so the outcomes are the same
    whichever process ran them."""
    seeds = list(seeds)
    if jobs <= 1 or len(seeds) < 2:
        for seed in seeds:
            yield run_seed(seed, sc)
        return
    # fork: the workers start with everything imported (a spawned one would import it all again)
    ctx = multiprocessing.get_context("fork")
    gc.freeze()  # (the collector would touch, and so copy, every page the workers share)
    with ctx.Pool(min(jobs, len(seeds)), _quiet, (level,)) as pool:
        yield from pool.imap(_run, [(seed, sc) for seed in seeds])


def _run(args: tuple[int, Scenario]) -> Outcome:
    return run_seed(*args)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--seeds", type=int, default=20, help="run seeds FIRST..FIRST+N-1 (20)")
    which.add_argument("--seed", type=int, help="run this one seed (a replay)")
    ap.add_argument("--first", type=int, default=1, help="the first seed of --seeds (1)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="change the scenario (fields of sim.system.Scenario), repeatable")
    ap.add_argument("--jobs", "-j", type=int, default=1,
                    help="processes to run the seeds in (1; 0: one per core)")
    ap.add_argument("--trace", action="store_true", help="print each run's events")
    ap.add_argument("--verbose", action="store_true", help="the system's own log (INFO)")
    args = ap.parse_args(argv)
    if args.seeds is not None and args.seeds < 1:
        ap.error("--seeds takes a positive number")
    try:
        sc = scenario(args.set)
    except ValueError as exc:
        ap.error(str(exc))
    pki = config(sc.slot_bits).security.pki_dir
    if not (pki / "ca.crt").exists():  # (else every seed times out waiting for a leader)
        ap.error(f"{pki / 'ca.crt'} is missing: the simulated controllers and NFs run the real "
                 "TLS code with the project's PKI; create it with `make pki`")
    level = logging.INFO if args.verbose else logging.CRITICAL
    _quiet(level)
    jobs = args.jobs if args.jobs > 0 else os.cpu_count() or 1
    seeds = [args.seed] if args.seed is not None else range(args.first, args.first + args.seeds)
    started = time.perf_counter()
    failed: list[int] = []
    totals = {"stamped": 0, "moves": 0, "failovers": 0, "faults": 0}
    for n, o in enumerate(outcomes(seeds, sc, jobs, level), 1):
        seed = o.seed
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
    wall = time.perf_counter() - started
    print(f"sim: {total - len(failed)} passed, {len(failed)} failed "
          f"({totals['stamped']} packets, {totals['moves']} moves, {totals['failovers']} "
          f"fail-overs, {totals['faults']} faults; {wall:.1f} s, {total / wall:.2f} seeds/s)")
    if failed:
        print("failing seeds (replay with --seed S --trace): " + " ".join(map(str, failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
