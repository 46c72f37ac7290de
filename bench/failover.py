"""Fail-over under load: detection and takeover times, and what was lost, over many faults.

Runs the whole system (`make run`: Mininet, p4sim, the controller, the NF runtimes, numbered
traffic both ways) several times, each time faulting a primary again and again (`--kill-every`),
every victim restarted into the spare pool, each fault once the last one has settled (the victim
back, every primary protected, every backup armed: `topo.faults.injector.FaultInjector.settled`):

* **kill (self)**: SIGKILL (a crash: the NF's sockets close); its backup, armed in advance, takes
  over by itself as its primary's heartbeat responder's watch on it, or its replication link,
  closes (docs/protocols.md §4.3), and the controller, which suspects it at once and confirms
  with one probe, follows;
* **kill (controller)**: the same with the backups not armed (`--no-self-takeover`): the
  controller's fail-over alone, for comparison (`--kill-variants` chooses);
* **hang (realtime echo)**: SIGSTOP (nothing closes: heartbeats of `--heartbeat-ms`, 5 ms by
  default, catch it: after `--misses` (2) missed in a row it is probed, and failed over once
  silent for `--confirm-ms` (15 ms), missed heartbeats and the confirming probe together), the
  NFs' heartbeat responder at real-time priority answering for live workers
  (nf_host/liveness.py);
* **hang (loop echo)**: the same with each worker's event loop answering its heartbeats itself,
  for comparison (`--hang-variants` chooses): on this loaded host live NFs then miss the deadline
  and are failed over (`false f-o`).

The exit status is that of the default configuration's runs (kill (self), hang (realtime
echo)): every fault handled and the verdict ok; the comparison runs are reported, not judged.

Its headline figure is the **time to the first delivered packet after the fault**: from the
signal to the arrival, at the receiving end host, of the first packet sent after the signal on a
flow of the dead primary's slots (end to end: detection, the promoted backup's first output and
the switch's transit both ways), p50/p99 over the faults of the judged runs, and per run. Beside
it, per kind, detection (signal to confirmed down) and first output (signal to the promoted backup
releasing its first output for the dead primary's slots: takeover at the NF, from its log) as
p50/p99/max, the packets lost (by the system: the run's verdict, topo/verify.py), duplicated and
reordered over the whole run (all must be 0), and false fail-overs (live NFs failed over). It
writes `results/bench/failover.json`.

The verdict of a run is FAILED when its own verdict failed or, in any run (a comparison run
too), when a live NF was failed over and anything was lost (or the run's losses were not
recorded: unknown, not nothing): a false alarm may cost time, never a packet. The exit status is non-zero when any verdict shown is FAILED for that reason or a judged
run failed. A FAILED verdict says how many of the lost packets the switch itself lost at its
ports (p4sim's count, `switch_port_losses` in the JSON): on a busy host, losses that looked like
those of false fail-overs were all kernel drops at the switch's client port, the switch starved
of CPU while every NF had missed heartbeats for the same reason (docs/protocols.md, "A loaded
host delays, never drops").

`--busy N` runs each run beside N CPU hogs at nice 19 (topo/faults/hogs.py), as a machine with
background compile jobs is: the review that found a false fail-over losing packets ran it so.

    .venv/bin/python -m bench.failover [--kills 50] [--hangs 20] [--rate 2000] [--quick] [--busy N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from topo.faults.hogs import add_argument as add_busy
from topo.faults.injector import percentiles

REPO = Path(__file__).resolve().parent.parent
FLOWS = 16
SECONDS_PER_FAULT = 3.0  # a fault, its fail-over, the victim restarted and back in the pool


def run(kind: str, faults: int, rate: int, heartbeat_ms: int, confirm_ms: int, out: Path,
        seed: int, self_takeover: bool = True, echo: str = "", misses: int = 0,
        busy: int = 0) -> dict[str, Any]:
    """One `make run` with `faults` faults of `kind`; returns its disturbances and verdict."""
    packets = int(rate * (faults * SECONDS_PER_FAULT + 10) / FLOWS)
    cmd = [sys.executable, "-m", "topo", "run", "--flows", str(FLOWS), "--packets", str(packets),
           "--rate", str(rate), "--out-dir", str(out), "--kill-every", "0.5", "--faults",
           str(faults), "--fault-kinds", "primary", "--seed", str(seed)]
    cmd.append("--self-takeover" if self_takeover else "--no-self-takeover")
    if kind == "hang":
        cmd += ["--hang", "--heartbeat-ms", str(heartbeat_ms), "--confirm-ms", str(confirm_ms)]
        if misses:
            cmd += ["--heartbeat-misses", str(misses)]
    if echo:
        cmd += ["--heartbeat-echo", echo]
    if busy:
        cmd += ["--busy", str(busy)]
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    # (its own summary says why a run failed: a verdict of 0 lost can fail on a fault or a
    # fail-over not completed, which the table does not show)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scenario.log").write_text(proc.stdout + proc.stderr)
    dist_path = out / "disturbances.json"
    if not dist_path.exists():
        raise RuntimeError(f"the {kind} run failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    dist: dict[str, Any] = json.loads(dist_path.read_text())
    dist["verified"] = proc.returncode == 0
    dist["seconds"] = round(time.monotonic() - started, 1)
    dist["switch_port_losses"] = switch_port_losses(out / "switch.json")
    return dist


def switch_port_losses(path: Path) -> dict[str, int]:
    """The frames the switch lost at each of its ports (p4sim's own count: kernel drops at a
    receive ring it did not read in time, transmit errors), from the run's `switch.json`; {} when
    the run has none. It says where a loss was: a switch starved of CPU drops at its rings."""
    if not path.exists():
        return {}
    ports = json.loads(path.read_text()).get("p4sim", {}).get("ports", {})
    return {name: int(p.get("lost", 0)) for name, p in ports.items() if p.get("lost")}


def row(kind: str, dist: dict[str, Any]) -> dict[str, Any]:
    faults = dist["faults"]
    det = percentiles([f["detection_ms"] for f in faults if f["detection_ms"] is not None])
    tko = percentiles([f["takeover_ms"] for f in faults if f["takeover_ms"] is not None])
    out = percentiles([f["first_output_ms"] for f in faults if f.get("first_output_ms") is not None])
    losses = dist.get("losses", {})
    r = {
        "kind": kind, "faults": len(faults), "handled": sum(f["ok"] for f in faults),
        "detection_ms": det, "first_output_ms": out, "takeover_ms": tko, "lost": losses.get("lost"),
        "lost_by_system": losses.get("lost_by_system", losses.get("lost")),
        "duplicated": losses.get("duplicated"), "reordered": losses.get("reordered"),
        "verified": dist["verified"], "seconds": dist["seconds"],
        # fail-overs of NFs that were not faulted: false alarms acted on (a live NF failed over)
        "false_failovers": max(0, sum(1 for f in dist.get("failovers", [])
                                      if f["kind"] == "primary" and f["ok"]) - len(faults)),
        # every fault's time to the first delivered packet after it: the headline's pool
        "delivered_ms": [f["takeover_ms"] for f in faults if f["takeover_ms"] is not None],
        # where the switch itself lost frames (port: count): the site of a loss, beside its count
        "switch_port_losses": dist.get("switch_port_losses", {}),
    }
    # (no losses recorded with false fail-overs: the run ended without its verdict; what it
    # lost is unknown, so it is not taken for nothing)
    r["false_failover_lost"] = bool(r["false_failovers"] and (
        r["lost"] is None or r["lost"] or r["lost_by_system"]))
    return r


def verdict(r: dict[str, Any]) -> str:
    """A run's verdict: its own, and FAILED when a live NF was failed over and anything lost."""
    at_switch = sum(r.get("switch_port_losses", {}).values())
    where = f" ({at_switch} at the switch's ports)" if at_switch else ""
    if r["false_failover_lost"]:
        lost = "losses not known" if r["lost"] is None else f"{r['lost_by_system'] or r['lost']} lost"
        return f"FAILED: {r['false_failovers']} false f-o, {lost}{where}"
    return "ok" if r["verified"] else f"FAILED{where}"


def headline(rows: list[dict[str, Any]]) -> str:
    """Time to the first delivered packet after the fault, p50/p99 over the faults of `rows`."""
    pooled = percentiles([ms for r in rows for ms in r["delivered_ms"]])

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f} ms"

    return (f"time to the first delivered packet after the fault: p50 {ms(pooled['p50'])}, "
            f"p99 {ms(pooled['p99'])} over {sum(len(r['delivered_ms']) for r in rows)} faults "
            f"({', '.join(r['kind'] for r in rows) or 'no run'})")


def table(rows: list[dict[str, Any]], rate: int) -> Table:
    t = Table(title=f"fail-over under load ({rate} client packets/s, each answered; p4sim): "
                    "first delivered packet after the fault, detection, first output (ms)")
    for col in ("signal", "faults", "handled", "delivered p50", "p99", "max", "detect p50",
                "p99", "max", "1st output p50", "p99", "max", "lost", "dup", "reord",
                "false f-o", "verdict"):
        t.add_column(col, justify="right")

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    for r in rows:
        d, o, k = r["detection_ms"], r["first_output_ms"], r["takeover_ms"]
        t.add_row(r["kind"], str(r["faults"]), str(r["handled"]), ms(k["p50"]), ms(k["p99"]),
                  ms(k["max"]), ms(d["p50"]), ms(d["p99"]), ms(d["max"]), ms(o["p50"]),
                  ms(o["p99"]), ms(o["max"]), str(r["lost"]),
                  str(r["duplicated"]), str(r["reordered"]), str(r["false_failovers"]),
                  verdict(r))
    return t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=50, help="SIGKILLs of a primary (default 50)")
    parser.add_argument("--hangs", type=int, default=20, help="SIGSTOPs of a primary (default 20)")
    parser.add_argument("--rate", type=int, default=2000, help="client packets/s (default 2000)")
    parser.add_argument("--heartbeat-ms", type=int, default=5, help="heartbeats in the hang run")
    parser.add_argument("--confirm-ms", type=int, default=15,
                        help="how long a suspected NF must be silent (missed heartbeats and the "
                             "confirming probe) in the hang run (default 15: with the NFs' "
                             "heartbeat responder at real-time priority no live NF was failed "
                             "over at 15-25; with 'loop' echoes dozens are, see docs/protocols.md "
                             "Known limits)")
    parser.add_argument("--misses", type=int, default=2,
                        help="missed heartbeats before the confirming probe in the hang run "
                             "(default 2; 1 made the controller chase single late answers)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kill-variants", default="self,controller",
                        help="the kill runs, compared: 'self' (backups armed to take over by "
                             "themselves, docs/protocols.md §4.3), 'controller' (the controller's "
                             "fail-over alone); default both")
    parser.add_argument("--hang-variants", default="realtime,loop",
                        help="the hang runs, compared by who answers heartbeats in the NFs "
                             "(nf_host/liveness.py): 'realtime' (a responder process at "
                             "real-time priority, nf-host's default), 'normal' (the same at normal "
                             "priority), 'loop' (the worker's event loop); default realtime,loop")
    parser.add_argument("--quick", action="store_true", help="5 kills and 3 hangs")
    parser.add_argument("--out-dir", type=Path, default=REPO / "results" / "bench")
    add_busy(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.kills, args.hangs = 5, 3
    if min(args.kills, args.hangs, args.rate, args.busy) < 0 or args.rate == 0:
        parser.error("--kills, --hangs, --busy must be >= 0 and --rate > 0")
    variants = [v for v in args.kill_variants.split(",") if v]
    if not variants or any(v not in ("self", "controller") for v in variants):
        parser.error(f"--kill-variants {args.kill_variants!r}: a comma-separated list of self and "
                     "controller")
    echoes = [v for v in args.hang_variants.split(",") if v]
    if not echoes or any(v not in ("realtime", "normal", "loop") for v in echoes):
        parser.error(f"--hang-variants {args.hang_variants!r}: a comma-separated list of "
                     "realtime, normal and loop")
    console = Console(width=max(Console().width, 150))
    rows = []
    judged: list[dict[str, Any]] = []  # the default configuration's runs (the exit status)
    runs = [(f"kill ({v})" if len(variants) > 1 or v != "self" else "kill", "kill",
             args.kills, v == "self", "") for v in variants]
    runs += [(f"hang ({e} echo)", "hang", args.hangs, True, e) for e in echoes]
    for label, kind, n, self_takeover, echo in runs:
        if n == 0:
            continue
        console.print(f"{label}: {n} faults of a primary at {args.rate} packets/s"
                      + (f", {args.busy} CPU hog(s) at nice 19" if args.busy else "") + " ...")
        out = args.out_dir / f"failover-{kind}{'' if self_takeover else '-controller'}"
        if echo and echo != "realtime":
            out = out.with_name(f"{out.name}-{echo}")
        dist = run(kind, n, args.rate, args.heartbeat_ms, args.confirm_ms, out, args.seed,
                   self_takeover, echo, args.misses, args.busy)
        rows.append(row(label, dist))
        if self_takeover and echo in ("", "realtime"):
            judged.append(rows[-1])
        console.print(f"  done in {dist['seconds']} s")
    for r in rows:
        r["verdict"] = verdict(r)
    console.print(table(rows, args.rate))
    console.print(headline(judged))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "failover.json").write_text(json.dumps(
        {"busy": args.busy, "headline": headline(judged), "runs": rows}, indent=1))
    return 0 if passed(rows, judged) else 1


def passed(rows: list[dict[str, Any]], judged: list[dict[str, Any]]) -> bool:
    """Every judged run verified with every fault handled, and no run's false fail-over lost
    anything (a comparison run's neither)."""
    return (all(r["verified"] and r["handled"] == r["faults"] for r in judged)
            and not any(r["false_failover_lost"] for r in rows))


if __name__ == "__main__":
    sys.exit(main())
