"""The TCP benchmark's arithmetic (`make bench-tcp`): goodput series, the stall after each event,
percentiles. Pure functions, tested without a network (tests/bench/test_tcp_stalls.py).

A **stall** after an event at time `t` is the longest stretch of consecutive intervals whose
goodput is under `frac` (10 %) of the baseline phase's median, among those that overlap the
window from `t` to the next event (or the run's end), counted inside the window: how long the
connections stood still. Goodput through this system is bursty even without events (a loss in
the switch or an NF costs a TCP retransmission timeout, 200 ms at least), so the same measure is
also taken on the baseline phase at the same offsets: the stall an event adds is the difference.
The **window goodput** is the mean goodput of the window against the baseline's mean, and the
**recovery** is from `t` to the end of that longest stall (0 without one).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from topo.tcp_load import Interval


@dataclass(frozen=True)
class Stall:
    """What one event did to goodput (seconds; `window` as a share of the baseline's mean)."""

    event: str
    at: float
    stall_s: float
    recovery_s: float
    window: float


def median_mbps(intervals: Sequence[Interval], skip_s: float = 1.0) -> float:
    """The median interval goodput, leaving out the first `skip_s` seconds (slow start)."""
    if not intervals:
        return 0.0
    t0 = intervals[0].start
    rates = [iv.mbps for iv in intervals if iv.start >= t0 + skip_s] or [iv.mbps for iv in intervals]
    return statistics.median(rates)


def mean_mbps(intervals: Sequence[Interval], start: float | None = None,
              end: float | None = None) -> float:
    """Bytes over time between `start` and `end` (default: the whole series)."""
    chosen = [iv for iv in intervals if (start is None or iv.start >= start)
              and (end is None or iv.end <= end)]
    if not chosen:
        return 0.0
    seconds = chosen[-1].end - chosen[0].start
    return sum(iv.nbytes for iv in chosen) * 8 / 1e6 / max(seconds, 1e-9)


def stalls(intervals: Sequence[Interval], events: Sequence[tuple[str, float]], baseline: float,
           baseline_mean: float, frac: float = 0.1) -> list[Stall]:
    """One `Stall` per (name, time) event, each judged up to the next event or the series' end;
    `baseline` is the baseline's median interval goodput, `baseline_mean` its mean."""
    level = baseline * frac
    end_of_run = intervals[-1].end if intervals else 0.0
    out = []
    ordered = sorted(events, key=lambda e: e[1])
    for i, (name, at) in enumerate(ordered):
        until = ordered[i + 1][1] if i + 1 < len(ordered) else end_of_run
        longest, longest_end, run, nbytes, seconds = 0.0, at, 0.0, 0.0, 0.0
        for iv in intervals:
            lo, hi = max(iv.start, at), min(iv.end, until)
            if hi <= lo:
                continue
            share = (hi - lo) / max(iv.end - iv.start, 1e-9)
            nbytes += iv.nbytes * share
            seconds += hi - lo
            run = run + (hi - lo) if iv.mbps < level else 0.0
            if run > longest:
                longest, longest_end = run, hi
        mean = nbytes * 8 / 1e6 / seconds if seconds else math.nan
        window = mean / baseline_mean if baseline_mean > 0 else math.nan
        out.append(Stall(name, at, longest, longest_end - at if longest else 0.0, window))
    return out


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0-100) by linear interpolation between the closest ranks; NaN for
    no values."""
    xs = sorted(v for v in values if v == v)
    if not xs:
        return math.nan
    k = (len(xs) - 1) * q / 100
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)
