"""Real TCP through the system's events (`make bench-tcp`): goodput, stalls, resets, checksums.

The service chain of `make up UP_ARGS=--chain` (firewall -> NAT -> flow monitor, topo/chain.yaml,
with two more NAT NFs, spares, and the load balancer enabled but paused: `bench/tcp_balancer.py`)
is brought up, once per repeat, in-process (`topo.launch.bringup.system` with `topo.launch.up.services`: the
server's HTTP server and `iperf3 -s`; `topo.launch.up.Supervisor` starts a killed NF again, idle, as
`make up` does). Each repeat then runs two phases of the same length, one after the other:

* **baseline**: `iperf3 -R -P 4 -i 0.1` (the server sends; the client's intervals are goodput)
  and HTTP downloads of `1M.bin` (rate-limited, one after the other, each checked by its sha256),
  nothing else;
* **events**: the same traffic while, `--gap` seconds apart,
  1. `balancer`: the load balancer is resumed and acts on that load as it decides (the NAT
     primaries are hot: it scales the NAT out to a spare and moves their slots to it), then is
     paused again; each of its decisions is an event at the time it took it (`lb-scale-out`,
     `lb-moves`: the moves of one burst), read from `GET /lb/history`;
  2. `kill`: the NAT primary carrying most of iperf3's connections gets SIGKILL (its backup takes
     over; the supervisor starts it again and the controller returns it to the spare pool),
  3. `move`: a NAT slot carrying one of iperf3's live connections moves to another NAT primary
     (`POST /slots/{slot}/move?to=NF`).

  `--by-command`: the schedule before the balancer acted by itself, the balancer paused: `kill`,
  `move`, `scale-out` (`POST /lb/scale-out?cluster=nat`) and `rebalance` (every slot of iperf3's
  connections owned by the NAT primary carrying most of them moves to the least loaded other NAT
  primary, the new one, one move after the other).

Counted per phase: connections reset (iperf3's exit code and error lines, curl's exit codes, TCP
segments with RST on the client's wire), downloads and bytes verified. The stall per event, its
recovery and dip are in `bench/tcp_stalls.py`; the baseline phase is judged at the same offsets
("none" rows: what the measure reads without an event). Writes `goodput.csv`, `events.csv`,
`phases.csv` and `goodput.png` to `--out-dir` (results/bench-tcp/) and prints a table.

    .venv/bin/python -m bench.tcp_events [--repeats 3] [--gap 5]
    .venv/bin/python -m bench.tcp_events --quick            # one repeat, shorter gaps
    .venv/bin/python -m bench.tcp_events --by-command       # the balancer's actions by command

Needs root (Mininet), iperf3, curl, tcpdump and `make build`. Run it alone on the machine (or in a
network namespace of its own: `unshare -n`).
"""

from __future__ import annotations

import argparse
import collections
import csv
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from bench.tcp_balancer import LARGE_PPS, LB_CONFIG, LB_WAIT_S, SMALL_PPS, Happened, balancer_acts
from bench.tcp_stalls import Stall, mean_mbps, median_mbps, percentile, stalls
from topo.http_api import http_json, http_post
from topo.launch import up
from topo.launch.bringup import system
from topo.launch.hot import slot_of
from topo.model import CHAIN_CONFIG, REPO, RunOptions, System
from topo.procs import process_start, wait_for
from topo.tcp_load import Download, Downloads, Interval, IperfRun, RstWatch, after_close

IPERF_PORT = 5201
SPARE_NATS = (11, 12)   # the pool's NAT spares (n3, n1): the balancer's scale-out and its backup
# more traffic than the events' schedule: an event waits for the previous one (a fail-over took
# 7 s at a load average of 25, and the last event came after iperf3's end with 8 s)
SLACK_S = 15.0
TCP = 6
NAT_CLUSTER = "nat"
# the balancer acts first (it scales out to spare 11 and moves iperf3's NAT slots there), then
# the NAT primary carrying iperf3's data (11 by then) is killed, then a live slot moved by command
EVENTS = ("balancer", "kill", "move")
# the same by command, the balancer paused throughout (--by-command)
BY_COMMAND = ("kill", "move", "scale-out", "rebalance")


@dataclass
class Phase:
    """One phase of one repeat: its traffic's record and its events (name, time, what it did)."""

    repeat: int
    name: str
    start: float
    intervals: list[Interval] = field(default_factory=list)
    events: list[tuple[str, float, str]] = field(default_factory=list)
    iperf_rc: int = 0
    iperf_errors: list[str] = field(default_factory=list)
    downloads: list[Download] = field(default_factory=list)
    rsts: list[tuple[float, str]] = field(default_factory=list)        # before iperf3's end
    rsts_at_end: list[tuple[float, str]] = field(default_factory=list)  # after a close

    @property
    def resets(self) -> int:
        """Connections reset or cut: iperf3 failed, a download failed, an RST on the wire."""
        return ((self.iperf_rc != 0) + sum(d.rc != 0 for d in self.downloads) + len(self.rsts))

    @property
    def verified(self) -> tuple[int, int, int]:
        """(downloads whose bytes are the file, downloads, bytes verified)."""
        good = [d for d in self.downloads if d.ok]
        return len(good), len(self.downloads), sum(d.nbytes for d in good)


# -- the running system ----------------------------------------------------------------------------

def bench_config(out: Path) -> Path:
    """topo/chain.yaml with two more NAT NFs, spares on nodes n3 and n1 (the balancer's
    scale-out, and the new primary's backup), the NFs' capacities (the NAT primaries 2 and 3
    small, every other NF large) and the load balancer (`LB_CONFIG`, paused) for the "balancer"
    event."""
    data = yaml.safe_load(CHAIN_CONFIG.read_text())
    for nf_id, node, port in ((SPARE_NATS[0], "n3", 13), (SPARE_NATS[1], "n1", 14)):
        data["nfs"].append({"id": nf_id, "name": f"nat{nf_id}", "node": node,
                            "cluster": NAT_CLUSTER, "role": "spare", "port": port,
                            "mac": f"02:00:00:00:01:{nf_id:02x}",
                            "mgmt": f"10.99.0.{10 + int(node[1:])}:71{nf_id}"})
    for nf in data["nfs"]:  # the chain's NAT primaries small, every other NF large
        small = nf["cluster"] == NAT_CLUSTER and nf["role"] == "primary"
        nf["capacity_pps"] = SMALL_PPS if small else LARGE_PPS
    data["thresholds"] = {"low_water": 0.3, "high_water": 0.8}
    data["load_balancer"] = dict(LB_CONFIG)
    path = out / "logs" / "chain-tcp.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@contextmanager
def chain_system(out: Path, console: Console,
                 target: str = "p4sim") -> Iterator[tuple[System, dict[str, dict[str, Any]]]]:
    """The chain of `make up UP_ARGS=--chain`: the system, the server's services, a supervisor
    (in a thread) starting killed NFs again; everything stopped on the way out. Yields the
    system and the server's files (name -> size, sha256)."""
    opts = RunOptions(target, bench_config(out), flows=0, packets=0, rate=0.0, workers=1,
                      out_dir=out / "logs", ready_timeout=90.0, chain=True, nf="passthrough")
    ticks = process_start(os.getpid())
    assert ticks is not None
    state = up.UpState(os.getpid(), ticks, target=target, config=str(CHAIN_CONFIG))
    with system(opts, console) as sys_, up.services(sys_, state):
        up._record(sys_, state)
        sup = up.Supervisor(sys_, state, out / "logs" / "up.json", console)
        done = threading.Event()

        def supervise() -> None:
            while not done.wait(up.SUPERVISE_EVERY_S):
                try:
                    sup.check()
                except Exception as exc:  # shown; the run goes on
                    console.print(f"supervisor: {exc!r}")

        worker = threading.Thread(target=supervise, name="supervise", daemon=True)
        worker.start()
        try:
            yield sys_, state.files
        finally:
            done.set()
            worker.join()


@contextmanager
def chain_system_retried(out: Path, console: Console, target: str = "p4sim", attempts: int = 2,
                         ) -> Iterator[tuple[System, dict[str, dict[str, Any]]]]:
    """`chain_system`, started once more when it does not come up (on a machine at a load
    average of 20+, the controller has lost its etcd lease while it started); each attempt's logs
    in a directory of its own, and the retry said."""
    for attempt in range(1, attempts + 1):
        where = out if attempt == 1 else out / f"attempt{attempt}"
        stack = ExitStack()
        try:
            got = stack.enter_context(chain_system(where, console, target))
        except (TimeoutError, RuntimeError) as exc:  # chain_system stopped what it started
            if attempt == attempts:
                raise
            console.print(f"[yellow]the system did not come up ({exc}): starting it again[/]")
            continue
        with stack:
            yield got
        return


def nat_nfs(api: str) -> list[dict[str, Any]]:
    return [r for r in http_json(f"{api}/nfs") if r["cluster"] == NAT_CLUSTER]


def settled(api: str) -> bool:
    """Every NAT primary alive with a live backup: a kill would be taken over at once."""
    rows = {r["id"]: r for r in http_json(f"{api}/nfs")}
    prims = [r for r in rows.values() if r["cluster"] == NAT_CLUSTER and r["role"] == "primary"]
    return bool(prims) and all(r["alive"] and r["backup"] in rows and rows[r["backup"]]["alive"]
                               for r in prims)


ADDR = re.compile(r"(\d+\.\d+\.\d+\.\d+):(\d+)")


def connections(host: Any, port_filter: str) -> list[tuple[str, int, str, int]]:
    """(local address, port, peer address, port) of `host`'s established TCP connections
    matching the `ss` filter (`sport = :5201`)."""
    out = host.cmd(f"ss -Htn state established '( {port_filter} )'")
    conns = []
    for line in out.splitlines():
        pairs = ADDR.findall(line)
        if len(pairs) == 2:
            (la, lp), (pa, pp) = pairs
            conns.append((la, int(lp), pa, int(pp)))
    return conns


def iperf_nat_slots(sys_: System) -> list[tuple[int, int, str]]:
    """(slot, owner, side) of the NAT slots carrying iperf3's connections: the inside 5-tuple's
    (the client's packets: ACKs) and the outside one's (the server's: the data), the data ones
    first, the newest connection (highest port) first within each. The slot is the switch's hash
    (`topo.launch.hot.slot_of`) at the NAT's stage."""
    cfg, n = sys_.cfg, sys_.cfg.switch.slot_count
    base = cfg.stage_of_cluster(NAT_CLUSTER) * n
    client, server = sys_.net.get("client"), sys_.net.get("server")
    outside = connections(server, f"sport = :{IPERF_PORT}")
    inside = connections(client, f"dport = :{IPERF_PORT}")
    found = [(base + slot_of(pa, la, pp, lp, TCP, n), pp, "data")
             for la, lp, pa, pp in sorted(outside, key=lambda c: -c[3])]
    found += [(base + slot_of(la, pa, lp, pp, TCP, n), lp, "acks")
              for la, lp, pa, pp in sorted(inside, key=lambda c: -c[1])]
    owners = {r["slot"]: r["owner"] for r in http_json(f"{sys_.api}/slots")}
    return [(slot, int(owners[slot]), side) for slot, _, side in found if slot in owners]


def busiest_nat_primary(sys_: System) -> int:
    """The NAT primary owning most of the slots of iperf3's data."""
    slots = iperf_nat_slots(sys_)
    data = [o for _, o, side in slots if side == "data"] or [o for _, o, _ in slots]
    if not data:
        raise RuntimeError("no iperf3 connection found at the NAT")
    return collections.Counter(data).most_common(1)[0][0]


# -- the events ------------------------------------------------------------------------------------

def kill_nat_primary(sys_: System) -> str:
    """SIGKILL to the NAT primary carrying most of iperf3's data; waits for its fail-over."""
    api = sys_.api
    victim = busiest_nat_primary(sys_)
    proc = next(p for p in sys_.nf_procs if up._nf_id_of(p) == victim and p.poll() is None)
    before = len(http_json(f"{api}/status")["failovers"])
    os.killpg(proc.pid, signal.SIGKILL)
    done = wait_for(lambda: next((f for f in http_json(f"{api}/status")["failovers"][before:]
                                  if f["dead"] == victim), None),
                    timeout=20, interval=0.05, what=f"NF {victim} failed over")
    return f"NF {victim} killed; fail-over ok={done['ok']}"


# a move the controller refuses before it starts, for now: asked again (as a user would) until
# `MOVE_RETRY_S`; a fail-over of a falsely suspected NF on a loaded host made the move wait
MOVE_WAITS = ("moves wait for it", "is not configured", "a slot is moved again")
MOVE_RETRY_S = 30.0


def move_live_slot(sys_: System) -> str:
    """A NAT slot carrying an iperf3 connection's data to another NAT primary; a refusal that
    says the move must wait (a fail-over first, an NF being configured, a slot moved just
    before) is asked again, up to `MOVE_RETRY_S`."""
    api = sys_.api
    done: list[str] = []
    waited: list[str] = []

    def attempt() -> bool:
        prims = [r["id"] for r in nat_nfs(api) if r["role"] == "primary" and r["alive"]]
        for slot, owner, _ in iperf_nat_slots(sys_):
            to = next((p for p in prims if p != owner), None)
            if to is None:
                continue
            code, body = http_post(f"{api}/slots/{slot}/move?to={to}")
            if code == 200:
                done.append(f"slot {slot} NF {owner} -> NF {to}")
                return True
            if not any(w in str(body) for w in MOVE_WAITS):
                raise RuntimeError(f"move of slot {slot} to NF {to}: {code} {body}")
            waited.append(str(body))
            return False
        raise RuntimeError(f"no iperf3 connection at the NAT to move (primaries {prims})")

    wait_for(attempt, timeout=MOVE_RETRY_S, interval=0.5, what="a move the controller takes")
    return done[0] + (f" (asked {len(waited) + 1} times: {waited[0]})" if waited else "")


def scale_out(sys_: System) -> str:
    """A spare becomes a NAT primary (waits for the killed NF to be back in the pool)."""
    api = sys_.api
    wait_for(lambda: any(r["role"] == "spare" and r["alive"] for r in http_json(f"{api}/nfs")
                         if sys_.cfg.stage_of(r["id"]) == sys_.cfg.stage_of_cluster(NAT_CLUSTER)),
             timeout=30, interval=0.1, what="a spare of the NAT's stage")
    code, body = http_post(f"{api}/lb/scale-out?cluster={NAT_CLUSTER}")
    if code != 200:
        raise RuntimeError(f"scale-out: {code} {body}")
    return f"NF {body['nf']} a NAT primary (backup {body['backup']})"


def rebalance(sys_: System) -> str:
    """What the balancer does after a scale-out: the slots of iperf3's connections owned by the
    busiest NAT primary move to the least loaded other NAT primary (the new one), one move after
    the other (as `BalancerLoop` runs its moves)."""
    api = sys_.api
    nf = busiest_nat_primary(sys_)
    rows = [r for r in nat_nfs(api) if r["role"] == "primary" and r["alive"] and r["id"] != nf]
    if not rows:
        raise RuntimeError(f"no other NAT primary than NF {nf}")
    to = min(rows, key=lambda r: (r["slots_owned"], r["id"]))["id"]
    slots = sorted({slot for slot, owner, _ in iperf_nat_slots(sys_) if owner == nf})
    moved: list[int] = []
    for slot in slots:
        code, body = http_post(f"{api}/slots/{slot}/move?to={to}")
        if code != 200:
            raise RuntimeError(f"move of slot {slot} to NF {to}: {code} {body} (moved {moved})")
        moved.append(slot)
    return f"{len(moved)} slots NF {nf} -> NF {to}"


ACTIONS: dict[str, Callable[[System], str | Happened]] = {
    "balancer": balancer_acts, "kill": kill_nat_primary, "move": move_live_slot,
    "scale-out": scale_out, "rebalance": rebalance}


# -- one phase -------------------------------------------------------------------------------------

def phase_seconds(events: tuple[str, ...], warmup: float, gap: float) -> float:
    """How long a phase with `events` runs iperf3 (both phases of a repeat alike): warmup, a gap
    after each event and after the last, the slack, and the balancer's wait."""
    return (warmup + gap * (len(events) + 1) + SLACK_S
            + (LB_WAIT_S if "balancer" in events else 0.0))


def run_phase(sys_: System, files: dict[str, dict[str, Any]], repeat: int, name: str,
              events: tuple[str, ...], warmup: float, gap: float, console: Console,
              streams: int = 4, rate: str = "500k", seconds: float | None = None) -> Phase:
    """iperf3 and downloads for `seconds` (default: `phase_seconds` of `events`); `events` in
    order, the first after `warmup`, then `gap` apart, counted from the previous event's end (a
    fail-over is waited for, the balancer's actions too; the slack absorbs that). An action that
    returns a list of events (the balancer's decisions) records those instead of itself."""
    client, server = sys_.net.get("client"), sys_.net.get("server")
    if seconds is None:
        seconds = phase_seconds(events, warmup, gap)
    rst = RstWatch(client, str(client.defaultIntf())).start()
    iperf = IperfRun(client, server.IP(), seconds, streams=streams).start()
    phase = Phase(repeat, name, time.monotonic())
    dl = Downloads(client, f"http://{server.IP()}/1M.bin", files["1M.bin"]["size"],
                   files["1M.bin"]["sha256"], rate=rate).start()
    try:
        wait_for(lambda: iperf.raw or (iperf.proc is not None and iperf.proc.poll() is not None),
                 timeout=15, what="iperf3's first interval")
        next_at = time.monotonic() + warmup
        for ev in events:
            wait_for(lambda at=next_at: time.monotonic() >= at, timeout=gap + warmup + 5,  # type: ignore[misc]
                     interval=0.02, what="the event's time")
            at = time.monotonic()
            try:
                did = ACTIONS[ev](sys_)
            except Exception as exc:  # recorded: the event did not happen
                did = f"FAILED: {exc}"
            for n, t, detail in ([(ev, at, did)] if isinstance(did, str) else did):
                console.print(f"  [{name} r{repeat}] {t - phase.start:6.2f} s  {n}: {detail}")
                phase.events.append((n, t, detail))
            next_at = time.monotonic() + gap
        phase.iperf_rc = iperf.wait(timeout=seconds + 60)
    finally:
        if iperf.proc is not None and iperf.proc.poll() is None:
            iperf.wait(0)
        phase.downloads = dl.stop()
        seen = rst.stop()
    # iperf3 -R ends with RSTs of its own: the client closes its data sockets with the
    # server's last segments unread, and each segment still in flight is answered by an RST.
    # A download's connection closed with every byte may see the same for a late segment.
    # Every other RST is a reset.
    end = iperf.ended_at if iperf.ended_at is not None else float("inf")
    for t, ln in seen:
        web = ".80:" in ln or ".80 >" in ln
        closed = (after_close(ln, t, phase.downloads, client.IP()) if web
                  else t >= end)
        (phase.rsts_at_end if closed else phase.rsts).append((t, ln))
    phase.intervals = iperf.intervals()
    phase.iperf_errors = iperf.errors()
    if phase.iperf_rc != 0:
        console.print(f"  iperf3 exited {phase.iperf_rc}: {iperf.lines[-5:]}")
    return phase


# -- output ----------------------------------------------------------------------------------------

def phase_stalls(phases: list[Phase]) -> list[tuple[Phase, Stall]]:
    """Each events phase's stalls; each baseline's at the offsets of its repeat's events."""
    out: list[tuple[Phase, Stall]] = []
    by_repeat: dict[int, dict[str, Phase]] = collections.defaultdict(dict)
    for ph in phases:
        by_repeat[ph.repeat][ph.name] = ph
    for pair in by_repeat.values():
        base, ev = pair.get("baseline"), pair.get("events")
        if base is None or not base.intervals:
            continue
        level, mean = median_mbps(base.intervals), mean_mbps(base.intervals)
        if ev is not None and ev.intervals:
            done = [(n, t) for n, t, d in ev.events if not d.startswith("FAILED")]
            out += [(ev, s) for s in stalls(ev.intervals, done, level, mean)]
            offsets = [("none", base.start + t - ev.start) for _, t in done]
            out += [(base, s) for s in stalls(base.intervals, offsets, level, mean)]
    return out


def write_csv(out: Path, phases: list[Phase], rows: list[tuple[Phase, Stall]]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "goodput.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["repeat", "phase", "start_s", "end_s", "bytes", "mbps"])
        for ph in phases:
            for iv in ph.intervals:
                w.writerow([ph.repeat, ph.name, f"{iv.start - ph.start:.3f}",
                            f"{iv.end - ph.start:.3f}", iv.nbytes, f"{iv.mbps:.3f}"])
    details = {(ph.repeat, ph.name, n, t): d for ph in phases for n, t, d in ph.events}
    with open(out / "events.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["repeat", "phase", "event", "at_s", "stall_s", "recovery_s", "window_goodput",
                    "detail"])
        for ph, s in rows:
            w.writerow([ph.repeat, ph.name, s.event, f"{s.at - ph.start:.3f}", f"{s.stall_s:.3f}",
                        f"{s.recovery_s:.3f}", f"{s.window:.3f}",
                        details.get((ph.repeat, ph.name, s.event, s.at), "")])
    with open(out / "rsts.txt", "w") as f:  # every RST seen, and whether it counted
        for ph in phases:
            for kind, seen in (("reset", ph.rsts), ("after-close", ph.rsts_at_end)):
                f.writelines(f"r{ph.repeat} {ph.name} {t - ph.start:8.3f} {kind} {ln}\n"
                             for t, ln in seen)
    with open(out / "phases.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["repeat", "phase", "median_mbps", "mean_mbps", "iperf_rc", "resets", "rsts",
                    "rsts_after_close", "downloads_ok", "downloads", "bytes_verified"])
        for ph in phases:
            ok, n, nbytes = ph.verified
            w.writerow([ph.repeat, ph.name, f"{median_mbps(ph.intervals):.3f}",
                        f"{mean_mbps(ph.intervals):.3f}", ph.iperf_rc, ph.resets, len(ph.rsts),
                        len(ph.rsts_at_end), ok, n, nbytes])


def smoothed(intervals: list[Interval], start: float, k: int = 5) -> tuple[list[float], list[float]]:
    """Goodput as the mean of `k` consecutive intervals (0.5 s of 0.1 s ones), at their ends."""
    xs, ys = [], []
    for i in range(len(intervals)):
        window = intervals[max(0, i - k + 1): i + 1]
        secs = window[-1].end - window[0].start
        xs.append(intervals[i].end - start)
        ys.append(sum(iv.nbytes for iv in window) * 8 / 1e6 / max(secs, 1e-9))
    return xs, ys


def plot(out: Path, phases: list[Phase]) -> Path:
    """Goodput over time (0.5 s means), one panel per repeat: its baseline and events phases,
    each event marked."""
    from experiments.plots import timeline

    panels = []
    for r in sorted({ph.repeat for ph in phases}):
        mine = [ph for ph in phases if ph.repeat == r]
        series = [(ph.name, *smoothed(ph.intervals, ph.start)) for ph in mine]
        marks = sorted((t - ph.start, n) for ph in mine if ph.name == "events"
                       for n, t, d in ph.events if not d.startswith("FAILED"))
        for i in range(1, len(marks)):  # a label close after another one: a line higher
            (x0, l0), (x, label) = marks[i - 1], marks[i]
            if x - x0 < 3.0 and not l0.endswith("\n"):
                marks[i] = (x, label + "\n")
        panels.append((f"repeat {r}", series, marks))
    return timeline(out / "goodput.png", "iperf3 -R -P 4 through firewall -> NAT -> monitor: "
                    "goodput, without and with events", "seconds since the phase's start",
                    "Mbit/s (0.5 s mean)", panels)


def read_back(out: Path) -> list[Phase]:
    """The phases of a run from its goodput.csv and events.csv (times from each phase's start):
    enough to draw the plot again (`--replot`)."""
    phases: dict[tuple[int, str], Phase] = {}
    with open(out / "goodput.csv") as f:
        for row in csv.DictReader(f):
            key = (int(row["repeat"]), row["phase"])
            ph = phases.setdefault(key, Phase(key[0], key[1], 0.0))
            ph.intervals.append(Interval(float(row["start_s"]), float(row["end_s"]),
                                         int(row["bytes"])))
    with open(out / "events.csv") as f:
        for row in csv.DictReader(f):
            key = (int(row["repeat"]), row["phase"])
            if row["phase"] == "events" and key in phases:
                phases[key].events.append((row["event"], float(row["at_s"]), row["detail"]))
    return [phases[k] for k in sorted(phases, key=lambda k: (k[0], k[1] != "baseline"))]


def table(phases: list[Phase], rows: list[tuple[Phase, Stall]]) -> tuple[Table, Table]:
    t = Table(title="stall per event: longest stretch of goodput < 10 % of the baseline median, "
                    "over repeats")
    for col in ("event", "n", "stall p50 s", "stall p99 s", "recovery p50 s", "recovery p99 s",
                "window goodput p50"):
        t.add_column(col, justify="right" if col != "event" else "left")
    names = list(dict.fromkeys(s.event for _, s in rows if s.event != "none"))
    for name in (*names, "none"):
        got = [s for _, s in rows if s.event == name]
        if not got:
            continue
        st, rc = [s.stall_s for s in got], [s.recovery_s for s in got]
        win = [s.window for s in got]
        t.add_row(name if name != "none" else "none (baseline, same offsets)", str(len(got)),
                  f"{percentile(st, 50):.2f}", f"{percentile(st, 99):.2f}",
                  f"{percentile(rc, 50):.2f}", f"{percentile(rc, 99):.2f}",
                  f"{percentile(win, 50):.0%}")
    p = Table(title="phases: goodput, resets, downloads verified (sha256)")
    for col in ("repeat", "phase", "median Mbit/s", "mean Mbit/s", "iperf3 rc", "RST seen",
                "resets", "downloads ok", "MB verified"):
        p.add_column(col, justify="right")
    for ph in phases:
        ok, n, nbytes = ph.verified
        p.add_row(str(ph.repeat), ph.name, f"{median_mbps(ph.intervals):.1f}",
                  f"{mean_mbps(ph.intervals):.1f}", str(ph.iperf_rc), str(len(ph.rsts)),
                  str(ph.resets), f"{ok}/{n}", f"{nbytes / 1e6:.0f}")
    return t, p


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.tcp_events",
                                 description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--repeats", type=int, default=3, help="baseline + events pairs (default 3)")
    ap.add_argument("--gap", type=float, default=5.0,
                    help="seconds between events, and after the last (default 5)")
    ap.add_argument("--warmup", type=float, default=3.0,
                    help="seconds of traffic before the first event (default 3)")
    ap.add_argument("--streams", type=int, default=4, help="iperf3 -P (default 4)")
    ap.add_argument("--rate", default="500k",
                    help="curl --limit-rate of each download of 1M.bin (default 500k)")
    ap.add_argument("--target", choices=["p4sim", "bmv2"], default="p4sim",
                    help="switch target (default p4sim)")
    ap.add_argument("--quick", action="store_true", help="one repeat, 3 s gaps (CI)")
    ap.add_argument("--by-command", action="store_true",
                    help="the events of the balancer by command instead (kill, move, scale-out, "
                         "rebalance; the balancer stays paused)")
    ap.add_argument("--replot", action="store_true",
                    help="only draw the plot again from --out-dir's CSVs (no run)")
    ap.add_argument("--out-dir", type=Path, default=REPO / "results" / "bench-tcp",
                    help="CSVs, the plot, the systems' logs (default results/bench-tcp)")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeats, args.gap = 1, 3.0
    if args.replot:
        print(f"written: {plot(args.out_dir, read_back(args.out_dir))}")
        return 0
    if os.geteuid() != 0:
        print("bench.tcp_events: needs root (Mininet)", file=sys.stderr)
        return 1
    console = Console(width=140)
    phases: list[Phase] = []
    schedule = BY_COMMAND if args.by_command else EVENTS
    seconds = phase_seconds(schedule, args.warmup, args.gap)
    for r in range(1, args.repeats + 1):
        # a system of its own per repeat: the events leave a NAT primary without a backup
        # (the scale-out took the last spare), which the next kill must not find
        with chain_system_retried(args.out_dir / f"r{r}", console, args.target) as (sys_, files):
            for name, events in (("baseline", ()), ("events", schedule)):
                wait_for(lambda: settled(sys_.api), timeout=60, interval=0.2,
                         what="every NAT primary protected")
                console.print(f"repeat {r}/{args.repeats}: {name}")
                phases.append(run_phase(sys_, files, r, name, events, args.warmup, args.gap,
                                        console, args.streams, args.rate, seconds))
    rows = phase_stalls(phases)
    write_csv(args.out_dir, phases, rows)
    png = plot(args.out_dir, phases)
    for t in table(phases, rows):
        console.print(t)
    console.print(f"written: {args.out_dir}/goodput.csv, events.csv, phases.csv, {png}")
    failed = [(ph.repeat, n, d) for ph in phases for n, _, d in ph.events if d.startswith("FAILED")]
    for r, n, d in failed:
        console.print(f"[red]repeat {r}: {n} did not happen: {d}[/]")
    ok = all(ph.resets == 0 and ph.verified[0] == ph.verified[1] for ph in phases)
    return 0 if ok and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
