"""The sink's verdict catches loss, duplication, reordering and broken counts, and passes clean runs."""

from __future__ import annotations

import pytest

from contract.checker_record import Record
from topo.faults.loss_evidence import loss_summary, system_line, windows_of
from topo.verify import BOTH, INPUT, OUTAGE, OUTPUT, WIRE, Evidence, LossWindow, Verdict, verify


def _clean(n_fwd: int, n_rev: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    # forward and reverse interleaved: counts 1..n_fwd+n_rev split between the directions
    fwd, rev, count = [], [], 0
    for i in range(max(n_fwd, n_rev)):
        if i < n_fwd:
            count += 1
            fwd.append((i + 1, count))
        if i < n_rev:
            count += 1
            rev.append((i + 1, count))
    return fwd, rev


@pytest.mark.unit
def test_clean_bidirectional_flow_passes() -> None:
    fwd, rev = _clean(5, 5)
    v = verify({1: fwd}, {1: rev}, {1: 5}, {1: 5})
    assert v.ok and v.packets_received == 10


@pytest.mark.unit
@pytest.mark.parametrize(
    "mutate, expect",
    [
        (lambda f: f[:-1], "lost 1"),
        (lambda f: [*f, f[-1]], "duplicated 1"),
        (lambda f: [f[1], f[0], *f[2:]], "out of order 1"),
    ],
)
def test_broken_delivery_is_named(mutate, expect: str) -> None:
    fwd, rev = _clean(5, 0)
    v = verify({1: mutate(fwd)}, {1: rev}, {1: 5}, {1: 0})
    assert not v.ok
    assert expect in v.problems()[0]


@pytest.mark.unit
def test_state_rollback_breaks_the_count() -> None:
    # a fail-over that lost the last committed update would repeat count 3
    v = verify({1: [(1, 1), (2, 2), (3, 3)]}, {1: [(1, 3)]}, {1: 3}, {1: 1})
    assert not v.ok
    assert any("not 1..4" in p for p in v.problems())


@pytest.mark.unit
def test_record_round_trip_and_short_payload() -> None:
    r = Record(7, 42, 9)
    assert Record.unpack(r.pack(64)) == r
    with pytest.raises(ValueError, match="shorter than a record"):
        Record.unpack(b"\0" * 8)


# -- losses excused only by evidence tied to them (topo/verify.py, docs/chaos.md) ------------------
#
# One flow on slot 5, packets sent 10 ms apart from t = 100 s, each arriving 1 ms after it was
# sent; the checker's counts, over both directions, in the order the NF processed the packets.

SLOT = 5


def _times(arrivals: list[tuple[int, int]], n: int, t0: float = 100.0
           ) -> tuple[list[float], list[float]]:
    """Send times of packets 1..n and arrival times parallel to `arrivals`."""
    sent = [t0 + 0.01 * (i - 1) for i in range(1, n + 1)]
    return sent, [sent[no - 1] + 0.001 for no, _ in arrivals]


def _judge(fwd: list[tuple[int, int]], sent_fwd: int, windows: list[LossWindow],
           rev: list[tuple[int, int]] | None = None, sent_rev: int = 0) -> Verdict:
    rev = rev or []
    s_fwd, r_fwd = _times(fwd, sent_fwd)
    s_rev, r_rev = _times(rev, sent_rev, 100.005)
    ev = Evidence(windows, {0: SLOT}, {0: s_fwd}, {0: s_rev}, {0: r_fwd}, {0: r_rev})
    return verify({0: fwd}, {0: rev}, {0: sent_fwd}, {0: sent_rev}, ev)


# packet 3 processed (count 3 spent) and its output lost: a count gap between 2 and 4
GAP = [(1, 1), (2, 2), (4, 4), (5, 5)]
# packet 3 lost before any NF: no count spent, the counts run on unbroken
BEFORE = [(1, 1), (2, 2), (4, 3), (5, 4)]
AT_3 = (100.015, 100.025)  # packet 3 was sent at 100.02


@pytest.mark.unit
def test_nothing_may_be_lost_without_evidence() -> None:
    v = _judge(BEFORE, 5, [])
    assert not v.ok and "lost 1" in v.problems()[0]
    assert v.losses.system_before == 1


@pytest.mark.unit
def test_a_count_gap_with_no_impairment_evidence_fails() -> None:
    """An impairment of the flow's NF input (what p4sim's or tc's netem on the switch's side of
    an NF link drops) cannot explain a count gap: what it drops no NF has processed."""
    on_input = LossWindow(WIRE, *AT_3, INPUT, frozenset({SLOT}), dropped=5)
    v = _judge(GAP, 5, [on_input])
    assert not v.ok and v.losses.system_after == 1 and v.losses.count_gaps == 1
    assert any("checker counts missing that no wire fault explains" in p for p in v.problems())
    # nor one on another slot's port, nor one on this port at another time
    elsewhere = LossWindow(WIRE, *AT_3, OUTPUT, frozenset({SLOT + 1}), dropped=5)
    later = LossWindow(WIRE, 100.2, 100.3, OUTPUT, frozenset({SLOT}), dropped=5)
    assert not _judge(GAP, 5, [elsewhere, later]).ok


@pytest.mark.unit
def test_a_count_gap_tied_to_an_impairment_window_on_the_flows_port_passes() -> None:
    on_output = LossWindow(WIRE, *AT_3, OUTPUT, frozenset({SLOT}), dropped=1)
    v = _judge(GAP, 5, [on_output])
    assert v.ok, v.problems()
    assert (v.losses.wire_after, v.losses.system) == (1, 0)
    # the window dropped one frame: it cannot excuse two gaps
    two = [(1, 1), (2, 2), (5, 5)]
    assert not _judge(two, 5, [LossWindow(WIRE, 100.0, 100.05, OUTPUT, frozenset({SLOT}),
                                          dropped=1)]).ok


@pytest.mark.unit
def test_a_loss_before_processing_needs_a_window_it_met_on_its_port_with_drops_left() -> None:
    on_input = LossWindow(WIRE, *AT_3, INPUT, frozenset({SLOT}), dropped=1)
    v = _judge(BEFORE, 5, [on_input])
    assert v.ok and (v.losses.wire_before, v.losses.system) == (1, 0)
    assert not _judge(BEFORE, 5, [LossWindow(WIRE, *AT_3, INPUT, frozenset({9}), dropped=1)]).ok
    assert not _judge(BEFORE, 5, [LossWindow(WIRE, *AT_3, INPUT, frozenset({SLOT}),
                                             dropped=0)]).ok


@pytest.mark.unit
def test_an_outage_loss_outside_any_window_fails() -> None:
    inside = LossWindow(OUTAGE, *AT_3, BOTH)
    v = _judge(BEFORE, 5, [inside])
    assert v.ok and v.losses.outage_before == 1
    # the same loss, the switch's outage a second later: the system's
    v = _judge(BEFORE, 5, [LossWindow(OUTAGE, 101.0, 102.0, BOTH)])
    assert not v.ok and v.losses.system_before == 1
    assert any("lost before processing" in p for p in v.problems())
    # an output released into the dead switch (a count gap in the outage) is the wire's
    assert _judge(GAP, 5, [inside]).ok


@pytest.mark.unit
def test_a_duplicate_drop_of_never_delivered_output_fails() -> None:
    """The switch's dedup dropped packet 3's output as not newer than packet 4's (already
    forwarded), and no copy of it ever reached the end host: its count is missing. A switch
    outage elsewhere in the run (which lost a packet of another flow) once lent it its budget."""
    outage = LossWindow(OUTAGE, 200.0, 201.0, BOTH)
    other_sent = [200.0 + 0.01 * i for i in range(5)]
    other = [(1, 1), (2, 2), (4, 3), (5, 4)]  # flow 1's packet 3, sent at 200.02, lost in it
    s0, r0 = _times(GAP, 5)
    ev = Evidence([outage], {0: SLOT, 1: SLOT + 1}, {0: s0, 1: other_sent}, {},
                  {0: r0, 1: [other_sent[n - 1] + 0.001 for n, _ in other]}, {})
    v = verify({0: GAP, 1: other}, {}, {0: 5, 1: 5}, {}, ev)
    assert [f.ok for f in v.flows] == [False, True]
    assert v.losses.system_after == 1 and v.losses.outage_before == 1
    summary = loss_summary(v, {"nf_output_drops/duplicate": 3})
    assert summary["duplicate_drops_undelivered"] == 1
    line = system_line(summary)
    assert line.startswith("lost by the system 1 (") and "at most 1)" in line


@pytest.mark.unit
def test_counts_missing_without_a_lost_packet_are_the_systems_whatever_the_windows() -> None:
    """A count skipped (or a state update applied twice, one output dropped): nothing was lost
    on the wire, so no window can excuse it."""
    skipped = [(1, 1), (2, 2), (3, 4), (4, 5), (5, 6)]
    v = _judge(skipped, 5, [LossWindow(OUTAGE, 99.0, 101.0, BOTH)])
    assert not v.ok and v.losses.system_after == 1


@pytest.mark.unit
def test_a_duplicate_or_repeated_count_is_never_excused() -> None:
    outage = LossWindow(OUTAGE, 99.0, 101.0, BOTH)
    assert not _judge([(1, 1), (1, 2), (3, 3)], 3, [outage]).ok
    assert not _judge([(1, 1), (2, 2)], 2, [outage], [(1, 2)], 1).ok  # count 2 twice


@pytest.mark.unit
def test_the_windows_of_a_runs_faults() -> None:
    from topo.faults.chaos import ControlFault

    switch = ControlFault("switch", "restart", 0, 10.0, target="s1", window=(9.8, 12.0), ok=True)
    netem = ControlFault("netem", "p4sim", 3, 20.0, target="p4sim:port 3", ok=True,
                         slots=[1, 2], wire_lost=7, window=(20.0, 23.0))
    failed = ControlFault("netem", "p4sim", 3, 30.0, window=(30.0, 33.0))  # not ok
    kill = ControlFault("controller", "kill", 0, 40.0, ok=True)
    ws = windows_of([switch, netem, failed, kill])
    assert [(w.kind, w.carries, w.slots, w.dropped) for w in ws] == [
        (OUTAGE, BOTH, None, None), (WIRE, INPUT, frozenset({1, 2}), 7)]
    assert windows_of([netem], chains=True)[0].slots is None


@pytest.mark.unit
def test_frames_inside_the_killed_switch_excuse_as_many_losses_sent_just_before_it() -> None:
    """A busy switch is behind: packets sent before its kill may still be in its sockets'
    queues when it dies. Its count of frames inside, read just before the kill, excuses that
    many losses sent up to HELD_LEAD_S before the outage, and no more."""
    from topo.faults.chaos import ControlFault
    from topo.faults.loss_evidence import HELD_LEAD_S

    # packet 3 was sent at 100.02, the kill at 100.5: before the outage
    kill = ControlFault("switch", "restart", 0, 100.5, target="s1", window=(100.5, 101.0),
                        ok=True, held=1)
    ws = windows_of([kill])
    assert [(w.carries, w.dropped, w.lead_s) for w in ws] == [
        (BOTH, None, 0.0), (BOTH, 1, HELD_LEAD_S)]
    v = _judge(BEFORE, 5, ws)
    assert v.ok and v.losses.outage_before == 1, v.problems()
    assert _judge(GAP, 5, ws).ok  # an output released just before, inside it at the kill
    # two losses, one frame inside: the system's
    two = [(1, 1), (2, 2), (5, 3)]
    assert not _judge(two, 5, ws).ok
    # none inside (or not counted): the outage alone does not reach back to the packet
    for held in (0, None):
        none = ControlFault("switch", "restart", 0, 100.5, window=(100.5, 101.0), ok=True,
                            held=held)
        assert not _judge(BEFORE, 5, windows_of([none])).ok


@pytest.mark.unit
def test_a_counted_window_is_spent_only_on_losses_nothing_else_explains() -> None:
    """Which of a flow's lost packets were the processed ones its count gaps stand for is not
    known. Flow 0 lost packet 3 (sent before the kill; its count spent, output lost) and packet 6
    (sent inside the outage, never processed): one loss before processing, which the outage
    explains. The frame inside the switch at its kill is not flow 0's to spend: flow 1's
    packet 3, sent before the kill and never processed, needs it (the soak of the closing note
    failed on six such losses when the first flows judged spent it)."""
    from topo.faults.chaos import ControlFault

    kill = ControlFault("switch", "restart", 0, 100.04, target="s1", window=(100.04, 101.0),
                        ok=True, held=1)
    sent = [100.0 + 0.01 * i for i in range(6)]  # packets 1..6
    fwd = {0: [(1, 1), (2, 2), (4, 4), (5, 5)], 1: [(1, 1), (2, 2), (4, 3), (5, 4), (6, 5)]}
    arrived = {0: [100.001, 100.011, 101.5, 101.51], 1: [100.001, 100.011, 101.5, 101.51, 101.52]}
    ev = Evidence(windows_of([kill]), {0: SLOT, 1: SLOT}, {0: sent, 1: sent}, {}, arrived, {})
    v = verify(fwd, {}, {0: 6, 1: 6}, {}, ev)
    assert v.ok, v.problems()
    assert (v.losses.outage_before, v.losses.outage_after, v.losses.system) == (2, 1, 0)
