"""`make bench-tcp`'s arithmetic and parsing: iperf3's interval lines, their placement on the
caller's clock, the stall after an event, percentiles, RSTs after a close."""

from __future__ import annotations

import math

import pytest

from bench.tcp_stalls import mean_mbps, median_mbps, percentile, stalls
from topo.tcp_load import Download, Interval, after_close, parse_line, place

pytestmark = pytest.mark.unit


def series(mbps: list[float], step: float = 0.1, t0: float = 100.0) -> list[Interval]:
    return [Interval(t0 + i * step, t0 + (i + 1) * step, int(m * 1e6 / 8 * step))
            for i, m in enumerate(mbps)]


def test_only_the_lines_counting_every_stream_are_intervals() -> None:
    sum_line = "[SUM]   1.20-1.30   sec  1.25 MBytes  104857 Kbits/sec"
    stream = "[  5]   1.20-1.30   sec   320 KBytes  26214 Kbits/sec"
    assert parse_line(sum_line, 4) == (1.2, 1.3, int(1.25 * (1 << 20)))
    assert parse_line(stream, 4) is None  # one of four streams: the [SUM] line counts them all
    assert parse_line(stream, 1) == (1.2, 1.3, 320 << 10)
    assert parse_line("[SUM]   0.00-10.00  sec  23.3 MBytes  19 Kbits/sec   receiver", 4) is None
    assert parse_line("[SUM]   0.50-0.60   sec  0.00 Bytes  0.00 Kbits/sec", 4) == (0.5, 0.6, 0)
    assert parse_line("iperf3: error - control socket has closed unexpectedly", 4) is None


def test_intervals_are_placed_by_the_line_that_came_soonest() -> None:
    # iperf3's time 0 is at 50.0 on our clock; the lines came 0.3, 0.05 and 0.2 s late
    raw = [(50.4, 0.0, 0.1, 10), (50.25, 0.1, 0.2, 20), (50.5, 0.2, 0.3, 30)]
    placed = place(raw)
    assert [(round(iv.start, 3), round(iv.end, 3), iv.nbytes) for iv in placed] == [
        (50.05, 50.15, 10), (50.15, 50.25, 20), (50.25, 50.35, 30)]
    assert place([]) == []


def test_a_stall_is_the_longest_stretch_under_a_tenth_of_the_baseline() -> None:
    # 10 Mbit/s, an event at 101.0, then 0.3 s at zero, 0.2 s normal, 0.6 s at zero, normal again
    rates = [10.0] * 10 + [0.0] * 3 + [10.0] * 2 + [0.0] * 6 + [10.0] * 9
    ivs = series(rates)
    [s] = stalls(ivs, [("kill", 101.0)], baseline=10.0, baseline_mean=10.0)
    assert s.event == "kill"
    assert s.stall_s == pytest.approx(0.6)
    assert s.recovery_s == pytest.approx(1.1)  # the stall ended 1.1 s after the event
    assert s.window == pytest.approx(11 / 20)  # 11 of the window's 20 intervals carried data


def test_each_event_is_judged_up_to_the_next() -> None:
    rates = [10.0] * 10 + [0.0] * 5 + [10.0] * 5 + [0.0] * 2 + [10.0] * 8
    a, b = stalls(series(rates), [("move", 102.0), ("kill", 101.0)], 10.0, 10.0)
    assert (a.event, b.event) == ("kill", "move")  # in time order
    assert a.stall_s == pytest.approx(0.5) and b.stall_s == pytest.approx(0.2)
    # no stall: no recovery either
    [c] = stalls(series([10.0] * 20), [("scale-out", 100.5)], 10.0, 10.0)
    assert c.stall_s == 0 and c.recovery_s == 0 and c.window == pytest.approx(1.0)


def test_medians_means_and_percentiles() -> None:
    ivs = series([0.0] * 10 + [4.0, 8.0, 6.0])  # the first second is left out (slow start)
    assert median_mbps(ivs) == pytest.approx(6.0)
    assert mean_mbps(ivs) == pytest.approx(18 / 13, rel=1e-3)
    assert median_mbps([]) == 0.0 and mean_mbps([]) == 0.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)
    assert percentile([1.0, 2.0, 3.0, 4.0], 99) == pytest.approx(3.97)
    assert math.isnan(percentile([], 50))


def test_an_rst_counts_as_after_close_only_for_a_finished_good_download() -> None:
    line = "IP 10.0.0.1.40100 > 10.0.0.2.80: Flags [R], seq 1, win 0, length 0"
    done = [Download(1.0, 5.0, 0, 1 << 20, True, local_port=40100)]
    assert after_close(line, 6.0, done, "10.0.0.1")
    assert not after_close(line, 4.0, done, "10.0.0.1")  # while it ran: a reset
    bad = [Download(1.0, 5.0, 56, 1000, False, local_port=40100)]
    assert not after_close(line, 6.0, bad, "10.0.0.1")
    other = "IP 10.0.0.1.40200 > 10.0.0.2.80: Flags [R], seq 1, win 0, length 0"
    assert not after_close(other, 6.0, done, "10.0.0.1")


def test_the_balancers_decisions_become_events_at_their_times() -> None:
    from bench.tcp_balancer import lb_events

    def move(i: int, at: float, src: int, outcome: str = "moved") -> dict[str, object]:
        return {"id": i, "at": at, "kind": "intra", "outcome": outcome, "ok": outcome == "moved",
                "action": {"slot": 100 + i, "src": src, "dst": 11, "reason": f"r{i}"}, "detail": {}}

    scale = {"id": 1, "at": 1000.0, "kind": "scale_out", "outcome": "done", "ok": True,
             "action": {"cluster": "nat", "reason": "both hot"},
             "detail": {"new_primary": 11, "seconds": 0.6}}
    # moves less than a second apart are one event; a later one is another
    got = lb_events([move(3, 1001.5, 3), scale, move(2, 1001.0, 2), move(4, 1004.0, 2, "undone")],
                    offset=900.0)
    assert [(n, t) for n, t, _ in got] == [("lb-scale-out", 100.0), ("lb-moves", 101.0),
                                           ("lb-moves", 104.0)]
    assert got[0][2].startswith("done: NF 11 (0.6 s; #1: both hot")
    assert got[1][2].startswith("2 slots NF 2,3 -> NF 11, 2 moved (#2: r2")
    assert got[2][2].startswith("1 slots NF 2 -> NF 11, 0 moved")
    assert lb_events([], 0.0) == []
