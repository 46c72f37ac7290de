"""The TCP benchmark's arithmetic (`make bench-tcp`): goodput series, the stall after each event,
percentiles. Pure functions, tested without a network (tests/bench/test_tcp_stalls.py).

A **stall** after an event at time `t` is the time goodput spent under `frac` (10 %) of the
baseline phase's median in the window from `t` to the next event (or the end of the run): the
sum of the parts of the intervals under that level that fall inside the window. The **recovery**
is from `t` to the end of the last interval under that level in the window (0 when goodput never
fell under it): how long until the connections carried on as before. The **dip** is the window's
lowest interval goodput against the baseline median.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from topo.tcp_load import Interval


@dataclass(frozen=True)
class Stall:
    """What one event did to goodput (seconds; dip as a share of the baseline median)."""

    event: str
    at: float
    stall_s: float
    recovery_s: float
    dip: float


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
           frac: float = 0.1) -> list[Stall]:
    """One `Stall` per (name, time) event, each judged up to the next event or the series' end."""
    level = baseline * frac
    end_of_run = intervals[-1].end if intervals else 0.0
    out = []
    ordered = sorted(events, key=lambda e: e[1])
    for i, (name, at) in enumerate(ordered):
        until = ordered[i + 1][1] if i + 1 < len(ordered) else end_of_run
        stalled, last_low, low = 0.0, at, math.inf
        for iv in intervals:
            lo, hi = max(iv.start, at), min(iv.end, until)
            if hi <= lo:
                continue
            low = min(low, iv.mbps)
            if iv.mbps < level:
                stalled += hi - lo
                last_low = hi
        dip = low / baseline if baseline > 0 and low != math.inf else math.nan
        out.append(Stall(name, at, stalled, last_low - at, dip))
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
