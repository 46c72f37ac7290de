"""The memory (RSS) of a run's processes: snapshots, a sampler over the run, and the summary
table of `nfc-topo chaos` / `make soak`.

`rss()` snapshots every process under the scenario by a readable name with its pid (`nf-host 3
[1234]`, `etcd m1 [...]`, `p4sim [...]`); `RssSampler` takes one every `interval` seconds in a
thread until stopped; `rss_table` compares them and `plot` draws them (`rss.png` beside a
chaos run's disturbances.json).

Growth is judged over the run's second half: from the **warm** snapshot, the first taken at
least half-way through the run and at least `warmup` seconds (60) into it, to the end; it is
shown from the start as well. Both ends are read off the least-squares line through every
sample from the warm one to the last (`trend`): a Python process's RSS swings by a few MiB
from one sample to the next (its collector, gRPC's buffers), and two single samples took a
swing for growth (the soak of 2026-11-28: +6.4 % for an nf-host whose samples a minute apart
over its last 300 s went 65.0, 65.3, 64.1, 63.9, 67.3, 66.2 MiB). A leak, which grows all the
way, keeps its whole growth on the line (exactly, if it is linear); a swing at either end is
weighed against every sample between. The start (just after start-up) precedes everything a process
builds once and then keeps at a plateau: an allocator's arenas, the Go heap of an etcd member
that has just caught up, its key index up to the first compaction, the first fail-over's code
paths in the controller. A leak grows after that too; a warm-up does not. The
whole series is in disturbances.json (`rss_series`).

A process restarted during the run (a chaos fault killed it) is judged by the same rule over
each of its **incarnations**, one name with one pid (`etcd m1 [8821]`): from the incarnation's
own warm sample (the first at least half-way through its sampled life and at least `warmup`
seconds after its own first sample) to its last sample. Only an incarnation sampled over at
least `2 * warmup` seconds (`long_enough`) is judged: a shorter life is all warm-up. The table
shows, for a restarted name, its longest judged incarnation; its caption, the largest growth of
all judged incarnations (`RssLife` each, `rss_lives` in disturbances.json). A process alive
throughout is the one incarnation that spans the run, judged as above.

A run with a **settle tail** (`nfc-topo chaos --settle S`, `make soak`: traffic goes on for S
seconds after the last fault) judges a restarted process by that tail instead (`settled_from`,
the tail's first second): the incarnation alive at the end from the tail's half-way sample (and
at least `warmup` after its own first) to its end; a life a fault ended is shown, not judged. A
process's memory answers its peers' faults: an etcd member grows in steps when a restarted
member catches up from it, and one restarted alone takes ~150 s to level off (docs/chaos.md),
so a life among faults is a warm-up that never ends, and only the quiet after them tells a leak.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from rich.table import Table

WARMUP_S = 60.0
INTERVAL_S = 10.0
TARGET_PCT = 5.0  # the soak's target: growth under 5 % (docs/chaos.md)
# not the system's: Mininet's shells, and the end hosts' traffic tools, which keep every packet's
# send and arrival times for the verdict (their memory grows with the run by design)
NOT_JUDGED = ("bash", "traffic")


def rss(root_pid: int) -> dict[str, int]:
    """Resident memory of every process under `root_pid`, by a readable name (`nf3`,
    `nfc-controller standby`, `etcd m1`, `p4sim`, ...) with the pid to keep names apart."""
    out: dict[str, int] = {}
    try:
        procs = psutil.Process(root_pid).children(recursive=True)
    except psutil.Error:
        return out
    for p in procs:
        try:
            cmd = p.cmdline()
            mem = p.memory_info().rss
        except psutil.Error:
            continue
        out[f"{_name(cmd, _comm(p))} [{p.pid}]"] = mem
    return out


def _comm(p: psutil.Process) -> str:
    try:
        return str(p.name())
    except psutil.Error:
        return ""


NF_CHILD = re.compile(r"nf(\d+)\.(w(\d+)|hb)$")  # nf_host/child_process.become_child's names


def _name(cmd: list[str], comm: str = "") -> str:
    child = NF_CHILD.match(comm)
    if child:  # an nf-host's worker or heartbeat responder (started by multiprocessing)
        what = f"worker {child.group(3)}" if child.group(3) is not None else "responder"
        return f"nf-host {child.group(1)} {what}"
    # by the program or module, never a substring of an argument (an --out path naming etcd)
    progs = [Path(c).name for c in cmd[:2]] + ([cmd[cmd.index("-m") + 1]] if "-m" in cmd[:-1]
                                                 else [])
    for keys, label in ((("nf_host", "nf-host"), "nf-host"),
                        (("controlplane", "nfc-controller"), "nfc-controller"),
                        (("etcd",), "etcd"), (("p4sim",), "p4sim"),
                        (("simple_switch", "simple_switch_grpc"), "bmv2"),
                        (("topo.traffic",), "traffic")):
        if any(p == k or p.startswith(k + ".") for p in progs for k in keys):
            for flag in ("--nf-id", "--name"):
                if flag in cmd[:-1]:
                    return f"{label} {cmd[cmd.index(flag) + 1]}"
            return label
    if any("multiprocessing.resource_tracker" in c for c in cmd[:5]):
        return "resource tracker"  # (one per nf-host: Python's multiprocessing starts it)
    return cmd[0] if cmd else "?"


def name_of(key: str) -> str:
    """`etcd m1 [8821]` -> `etcd m1`."""
    return key.rsplit(" [", 1)[0]


def long_enough(first: float, last: float, warmup: float = WARMUP_S) -> bool:
    """Whether a life sampled from `first` to `last` (seconds) is judged: at least `2 * warmup`
    seconds long, so that its second half starts after its warm-up."""
    return last - first >= 2 * warmup


def warm_at(first: float, last: float, warmup: float = WARMUP_S) -> float:
    """The time from which a sample of a life from `first` to `last` is its warm one: half-way
    through the life and at least `warmup` seconds after its first sample."""
    return first + max(warmup, (last - first) / 2)


@dataclass(frozen=True)
class RssLife:
    """One incarnation (a name with one pid) as sampled: its first, warm (None: not
    `long_enough` to be judged) and last samples' times (s into the run), its first sample's
    bytes, and the warm and end bytes read off the trend from the warm sample on (`trend`;
    the last sample's bytes when not judged)."""

    key: str
    first_t: float
    last_t: float
    samples: int
    start: int
    end: int
    warm_t: float | None = None
    warm: int | None = None
    # False: shown, not held to the target (a life a fault ended, in a run with a settle tail)
    judged: bool = True

    @property
    def name(self) -> str:
        return name_of(self.key)

    @property
    def life_s(self) -> float:
        return self.last_t - self.first_t

    @property
    def growth(self) -> float | None:
        """% from the warm sample to the last; None if not judged."""
        return (self.end - self.warm) / self.warm * 100 if self.warm else None


def incarnations(series: Sequence[tuple[float, Mapping[str, int]]],
                 warmup: float = WARMUP_S, settled_from: float | None = None) -> list[RssLife]:
    """Every incarnation of a series of (t, {key: bytes}), in the order first seen. With
    `settled_from` (the settle tail's first second, see the module docstring), a restarted
    process alive at the end is judged over the tail's second half, and a life a fault ended
    is shown with its own growth but not judged."""
    points: dict[str, list[tuple[float, int]]] = {}
    for t, snap in series:
        for key, mem in snap.items():
            points.setdefault(key, []).append((t, mem))
    first_t, end_t = (series[0][0], series[-1][0]) if series else (0.0, 0.0)
    out: list[RssLife] = []
    for key, pts in points.items():
        (t0, m0), (t1, m1) = pts[0], pts[-1]
        at: float | None = warm_at(t0, t1, warmup) if long_enough(t0, t1, warmup) else None
        judged = True
        if settled_from is not None:
            if t1 < end_t:
                judged = False  # a fault ended it: a warm-up among faults (its growth shown)
            elif t0 > first_t:  # restarted during the run, alive at the end: over the tail
                at = max(settled_from + (end_t - settled_from) / 2, t0 + warmup)
                at = at if end_t - at >= warmup / 2 else None  # the tail too short to judge it
        warm_t, warm = next(p for p in pts if p[0] >= at) if at is not None else (None, None)
        if warm_t is not None:
            warm, m1 = trend([p for p in pts if p[0] >= warm_t], warm_t, t1)
        out.append(RssLife(key, t0, t1, len(pts), m0, m1, warm_t, warm, judged))
    return out


class RssSampler:
    """`rss(root_pid)` now (`start`), then every `interval` s in a thread until `stop()`, which
    takes the last (`end`). `snapshots` reads each process's warm and end bytes off the trend
    from the warm sample (the first at least half-way through the run and at least `warmup` s
    after the start; the end's if the run was shorter) to the last."""

    def __init__(self, root_pid: int, interval: float = INTERVAL_S,
                 warmup: float = WARMUP_S) -> None:
        self.root_pid, self.interval, self.warmup = root_pid, interval, warmup
        self.t0 = time.monotonic()
        self.series: list[tuple[float, dict[str, int]]] = [(0.0, rss(root_pid))]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.series.append((time.monotonic() - self.t0, rss(self.root_pid)))

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=5)
        self.series.append((time.monotonic() - self.t0, rss(self.root_pid)))

    def snapshots(self) -> dict[str, dict[str, int]]:
        """{"start", "warm", "end"}: process -> bytes."""
        first, last = self.series[0][0], self.series[-1][0]
        half = warm_at(first, last, self.warmup)
        warm_t = next((t for t, _s in self.series if t >= half), last)
        judged = [(t, snap) for t, snap in self.series if t >= warm_t]
        warm: dict[str, int] = {}
        end: dict[str, int] = {}
        for key in set().union(*(snap for _t, snap in judged)):
            warm[key], end[key] = trend([(t, snap[key]) for t, snap in judged if key in snap],
                                        warm_t, last)
        return {"start": self.series[0][1], "warm": warm, "end": end}

    def incarnations(self, settled_from: float | None = None) -> list[RssLife]:
        """Every process incarnation of the series (`incarnations`): judged over its own life,
        or with `settled_from` (s on this sampler's clock, `since`), over the settle tail."""
        return incarnations(self.series, self.warmup, settled_from)

    def since(self, monotonic: float) -> float:
        """A `time.monotonic()` as seconds on this sampler's clock (its series' `t`)."""
        return monotonic - self.t0

    def series_json(self) -> list[dict[str, Any]]:
        return [{"t": round(t, 1), "rss": s} for t, s in self.series]


def trend(points: Sequence[tuple[float, int]], lo: float, hi: float) -> tuple[int, int]:
    """The least-squares line through `points` ((t, bytes), at least one), read at `lo` and
    `hi` (see the module docstring); with fewer than 3 points, the first and last as they are."""
    if len(points) < 3:
        return points[0][1], points[-1][1]
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mm = sum(m for _, m in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    slope = sum((t - mt) * (m - mm) for t, m in points) / var if var else 0.0
    return round(mm + slope * (lo - mt)), round(mm + slope * (hi - mt))


def _pct(a: int, b: int) -> str:
    return f"{(b - a) / a * 100:+.1f} %" if a else "-"


def _mib(b: int) -> str:
    return f"{b / 2**20:.1f}"


def rss_table(rss_by_time: dict[str, dict[str, int]], lives: Sequence[RssLife] | None = None,
              warmup: float = WARMUP_S, settled_from: float | None = None) -> Table:
    """Resident memory of each process alive at the start and the end: at the start, warm (see
    the module docstring; absent in older reports), at the end, and its growth. Then the parts
    restarted meanwhile (same name, another pid: `nf-host 3`, `etcd m1`, `p4sim`, a
    controller): with `lives` (`RssSampler.incarnations()`, sampled with this `warmup`), each
    one's longest judged incarnation over its own life, and a caption naming the largest growth
    of all judged incarnations; without (older reports), a bare row whose growth says nothing
    about a leak (a fresh process at the end). With `settled_from` (a run with a settle tail),
    a restarted process is shown by its life that reached the end, judged over the tail."""
    start, end = rss_by_time.get("start", {}), rss_by_time.get("end", {})
    warm = rss_by_time.get("warm")
    wide = warm is not None or lives is not None
    title = "memory (RSS) of the processes alive at the start and the end" if lives is None \
        else "memory (RSS) of the processes alive throughout and of the restarted ones' longest lives"
    table = Table(title=title + (" (growth: over the second half, from warm to the end)"
                                 if wide else ""), caption_justify="left")
    cols = ["process", "start MiB"] + (["warm MiB"] if wide else []) + ["end MiB", "growth"] \
        + (["from start"] if wide else [])
    for col in cols:
        table.add_column(col, justify="right" if col != "process" else "left")
    for name in sorted(set(start) & set(end)):
        a, b = start[name], end[name]
        if not wide:
            table.add_row(name, _mib(a), _mib(b), _pct(a, b))
            continue
        w = (warm or {}).get(name, 0)
        table.add_row(name, _mib(a), _mib(w) if w else "-", _mib(b), _pct(w, b), _pct(a, b))
    # (growth %, incarnation, its life in s); a process alive throughout is the incarnation that
    # spans the run, whose own warm sample is the run's
    graded = [(life.growth, life.key, life.life_s, life.judged) for life in lives or ()
              if life.growth is not None and not life.key.startswith(NOT_JUDGED)]
    judged = [(g, key, life_s) for g, key, life_s, held in graded if held]
    shown = [(g, key, life_s) for g, key, life_s, held in graded if not held]

    def by_name(procs: dict[str, int]) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for key, mem in procs.items():
            out.setdefault(name_of(key), []).append(mem)
        return out

    first, last = by_name({k: v for k, v in start.items() if k not in end}), \
        by_name({k: v for k, v in end.items() if k not in start})
    blank = ["-"] if wide else []
    for name in sorted(set(first) & set(last)):
        if len(first[name]) != 1 or len(last[name]) != 1:  # several processes of that name
            continue
        mine = [life for life in lives or () if life.name == name and life.warm is not None]
        if not mine:
            label = "(restarted)" if lives is None \
                else f"(restarted; no life ≥ {2 * warmup:.0f} s)"
            table.add_row(f"{name} {label}", _mib(first[name][0]), *blank,
                          _mib(last[name][0]), "-", *blank)
            continue
        best = max(mine, key=lambda life: (life.judged, life.life_s))
        how = f"life {best.life_s:.0f} s to the end, judged after the faults" \
            if settled_from is not None and best.judged else f"longest life {best.life_s:.0f} s"
        table.add_row(f"{name} (restarted; {how})", _mib(best.start),
                      _mib(best.warm or 0), _mib(best.end), _pct(best.warm or 0, best.end),
                      _pct(best.start, best.end))
    if lives is not None:
        table.caption = verdict(judged, warmup, shown, settled_from)
    return table


def verdict(judged: Sequence[tuple[float, str, float]], warmup: float = WARMUP_S,
            shown: Sequence[tuple[float, str, float]] = (),
            settled_from: float | None = None) -> str:
    """One line: the largest of the (growth %, incarnation, life s) judged, against the target;
    then, in a run with a settle tail (from `settled_from` s), the largest of the lives a fault
    ended (`shown`), which are not judged."""
    tail = "" if settled_from is None else \
        f"; judged after the faults (a settle tail from {settled_from:.0f} s)"
    if shown:
        pct, key, life = max(shown)
        tail += (f"; {len(shown)} li{'ves' if len(shown) > 1 else 'fe'} ended by a fault, not "
                 f"judged (a warm-up among faults): largest {pct:+.1f} %, {key} (life {life:.0f} s)")
    if not judged:
        return f"no process was sampled over a life of {2 * warmup:.0f} s or more: no growth " \
            f"judged{tail}"
    pct, key, life = max(judged)
    n = len(judged)
    return (f"largest growth of {n} judged incarnation{'s' if n > 1 else ''}: {pct:+.1f} %, {key} "
            f"(life {life:.0f} s): {'under' if pct < TARGET_PCT else 'NOT under'} the "
            f"{TARGET_PCT:.0f} % target{tail}")


def plot_lines(series: list[dict[str, Any]]) -> list[tuple[str, list[float], list[float]]]:
    """(key, seconds, MiB) of each incarnation with at least 2 samples (what is not judged left
    out: Mininet's shells, and the traffic tools, whose growth by design would set the scale),
    by name, then by its first sample."""
    pts: dict[str, tuple[list[float], list[float]]] = {}
    for s in series:
        for key, mem in s["rss"].items():
            ts, ms = pts.setdefault(key, ([], []))
            ts.append(float(s["t"]))
            ms.append(mem / 2**20)
    keep = [(k, ts, ms) for k, (ts, ms) in pts.items() if len(ts) >= 2 and not k.startswith(NOT_JUDGED)]
    return sorted(keep, key=lambda line: (name_of(line[0]), line[1][0]))


def plot(series: list[dict[str, Any]], path: Path, settled_from: float | None = None) -> Path | None:
    """RSS (MiB) over time of each process incarnation (`plot_lines`), one line each, in one
    colour per name, labelled once, and where the settle tail begins, as a PNG; None without an
    incarnation of 2 samples."""
    lines = plot_lines(series)
    if not lines:
        return None
    from matplotlib import colormaps  # (only when a plot is asked for; no pyplot, no backend)
    from matplotlib.figure import Figure

    path.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(8, 5), dpi=110)
    ax = fig.subplots()
    colours: dict[str, Any] = {}
    for key, ts, ms in lines:
        name = name_of(key)
        label = "_" + key if name in colours else name  # (a "_" label stays out of the legend)
        colour = colours.setdefault(name, colormaps["tab20"](len(colours) % 20))
        ax.plot(ts, ms, color=colour, label=label, linewidth=1.2)
    if settled_from is not None:
        ax.axvline(settled_from, color="grey", linestyle="--", linewidth=1, label="faults end")
    ax.set(title="memory of the processes over the run (one line per incarnation)",
           xlabel="seconds", ylabel="RSS (MiB)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="x-small", ncol=2)
    fig.tight_layout()
    fig.savefig(path)
    return path
