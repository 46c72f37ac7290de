"""The memory (RSS) of a run's processes: snapshots, a sampler over the run, and the summary
table of `nfc-topo chaos` / `make soak`.

`rss()` snapshots every process under the scenario by a readable name with its pid (`nf-host 3
[1234]`, `etcd m1 [...]`, `p4sim [...]`); `RssSampler` takes one every `interval` seconds in a
thread until stopped; `rss_table` compares them and `plot` draws them (`rss.png` beside a
chaos run's disturbances.json).

Growth is judged over the run's second half: from the **warm** snapshot, the first taken at
least half-way through the run and at least `warmup` seconds (60) into it, to the end; it is
shown from the start as well. The start (just after start-up) precedes everything a process
builds once and then keeps at a plateau: an allocator's arenas, etcd's raft log in memory
(`--snapshot-count` entries, plus 5,000 kept after each snapshot: filled after that many
writes, not after a fixed time) and its key index up to the first compaction, the first
fail-over's code paths in the controller. A leak grows after that too; a warm-up does not. The
whole series is in disturbances.json (`rss_series`).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import psutil
from rich.table import Table

WARMUP_S = 60.0
INTERVAL_S = 10.0


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
        out[f"{_name(cmd)} [{p.pid}]"] = mem
    return out


def _name(cmd: list[str]) -> str:
    text = " ".join(cmd)
    for key, label in (("nf_host", "nf-host"), ("controlplane", "nfc-controller"),
                       ("etcd", "etcd"), ("p4sim", "p4sim"), ("simple_switch", "bmv2"),
                       ("topo.traffic", "traffic")):
        if key in text:
            for flag in ("--nf-id", "--name"):
                if flag in cmd:
                    return f"{label} {cmd[cmd.index(flag) + 1]}"
            return label
    return cmd[0] if cmd else "?"


class RssSampler:
    """`rss(root_pid)` now (`start`), then every `interval` s in a thread until `stop()`, which
    takes the last (`end`). `warm` is the first sample at least half-way through the run and at
    least `warmup` s after the start (the end's if the run was shorter)."""

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
        half = max(self.warmup, self.series[-1][0] / 2)
        warm = next((s for t, s in self.series if t >= half), self.series[-1][1])
        return {"start": self.series[0][1], "warm": warm, "end": self.series[-1][1]}

    def series_json(self) -> list[dict[str, Any]]:
        return [{"t": round(t, 1), "rss": s} for t, s in self.series]


def _pct(a: int, b: int) -> str:
    return f"{(b - a) / a * 100:+.1f} %" if a else "-"


def rss_table(rss_by_time: dict[str, dict[str, int]]) -> Table:
    """Resident memory of each process alive at the start and the end: at the start, warm (see
    the module docstring; absent in older reports), at the end, and its growth; then the parts
    restarted meanwhile (same name, another pid: `nf-host 3`, `etcd m1`, `p4sim`, a
    controller), whose growth says nothing about a leak (a fresh process at the end)."""
    start, end = rss_by_time.get("start", {}), rss_by_time.get("end", {})
    warm = rss_by_time.get("warm")
    table = Table(title="memory (RSS) of the processes alive at the start and the end"
                        + (" (growth: over the second half, from warm to the end)" if warm else ""))
    cols = ["process", "start MiB"] + (["warm MiB"] if warm else []) + ["end MiB", "growth"] \
        + (["from start"] if warm else [])
    for col in cols:
        table.add_column(col, justify="right" if col != "process" else "left")
    for name in sorted(set(start) & set(end)):
        a, b = start[name], end[name]
        if warm is None:
            table.add_row(name, f"{a / 2**20:.1f}", f"{b / 2**20:.1f}", _pct(a, b))
            continue
        w = warm.get(name, 0)
        table.add_row(name, f"{a / 2**20:.1f}", f"{w / 2**20:.1f}" if w else "-",
                      f"{b / 2**20:.1f}", _pct(w, b), _pct(a, b))

    def by_name(procs: dict[str, int]) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for key, mem in procs.items():
            out.setdefault(key.rsplit(" [", 1)[0], []).append(mem)
        return out

    first, last = by_name({k: v for k, v in start.items() if k not in end}), \
        by_name({k: v for k, v in end.items() if k not in start})
    for name in sorted(set(first) & set(last)):
        if len(first[name]) == len(last[name]) == 1:  # one process of that name, restarted
            blank = ["-"] if warm else []
            table.add_row(f"{name} (restarted)", f"{first[name][0] / 2**20:.1f}", *blank,
                          f"{last[name][0] / 2**20:.1f}", "-", *blank)
    return table


def plot(series: list[dict[str, Any]], path: Path) -> Path | None:
    """RSS (MiB) over time of each process alive from the first sample to the last (Mininet's
    shells left out), one line each, as a PNG; None without two samples."""
    if len(series) < 2:
        return None
    from experiments.plots import line  # (matplotlib: only when a plot is asked for)

    first, last = series[0]["rss"], series[-1]["rss"]
    names = sorted(n for n in set(first) & set(last) if not n.startswith("bash"))
    lines = [(n, [s["t"] for s in series if n in s["rss"]],
              [s["rss"][n] / 2**20 for s in series if n in s["rss"]]) for n in names]
    return line(path, "memory of the processes alive throughout the run", "seconds",
                "RSS (MiB)", lines)
