"""The sink's verdict: was every packet delivered exactly once, in order, with an unbroken count?

Input: what each end received, per flow, in arrival order, as (pkt_no, count) pairs, and how many
packets each end sent per flow. A flow is correct when, in each direction, the packet numbers arrive
as exactly 1..sent (nothing lost, duplicated or reordered), the checker's counts rise strictly, and,
over both directions together, the counts are exactly 1..total (the NF's per-flow state was never
lost, rolled back or applied twice, across every migration and fail-over).

A run that breaks the wire on purpose (a switch restarted, a link impaired: `topo/faults/chaos.py`) may
lose packets, and only those the wire can be shown to have dropped: `Evidence` gives each packet's
send and arrival times and the run's `LossWindow`s (where, when and how much the wire dropped), and
each loss is excused only by a window tied to it (the rules: `excuse_flow`; docs/chaos.md,
"What the verdict excuses"). What no window explains is lost by the system (`Losses`), and fails.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields

Arrivals = Mapping[int, Sequence[tuple[int, int]]]
"""flow_id -> [(pkt_no, count)] in arrival order, for one direction."""
Times = Mapping[int, Sequence[float]]
"""flow_id -> [time.time()] of each packet sent (index pkt_no - 1), or of each arrival."""

OUTAGE, WIRE = "outage", "wire"
INPUT, OUTPUT, BOTH = "input", "output", "both"


@dataclass(frozen=True)
class LossWindow:
    """Where and when the wire may drop packets, and how many it says it dropped.

    `carries`: what a frame dropped there is: INPUT, a packet no NF has processed yet (what the
    switch sends an NF: its loss leaves no checker-count gap); OUTPUT, one an NF processed (what
    an NF sends the switch, or the switch an end host: a count gap); BOTH, the whole switch (an
    outage: packets sent into it, and output NFs released into it). `slots`: the slots whose
    packets cross it (None: every slot, as the switch itself). `dropped`: how many frames it
    dropped (None: not counted, as an outage's). `lead_s`: how long before `start` a packet may
    have been sent and still met it (a busy machine's queues between the sender and the port)."""

    kind: str  # OUTAGE | WIRE
    start: float  # time.time()
    end: float
    carries: str = INPUT
    slots: frozenset[int] | None = None
    dropped: int | None = None
    lead_s: float = 0.0
    name: str = ""

    def crosses(self, slot: int | None) -> bool:
        """Whether packets of `slot` cross it (an unknown slot crosses only a whole-switch one)."""
        return self.slots is None or (slot is not None and slot in self.slots)

    def met_by(self, sent: float) -> bool:
        """Whether a packet sent at `sent` may have met the window."""
        return self.start - self.lead_s <= sent <= self.end

    def overlaps(self, lo: float, hi: float) -> bool:
        return lo <= self.end and self.start - self.lead_s <= hi


@dataclass(frozen=True)
class Evidence:
    """What the verdict may excuse losses with: the run's loss windows, each flow's slot, and the
    time each packet was sent and each arrival came, per direction (forward: client to server)."""

    windows: Sequence[LossWindow] = ()
    slots: Mapping[int, int] = field(default_factory=dict)
    sent_at_forward: Times = field(default_factory=dict)
    sent_at_reverse: Times = field(default_factory=dict)
    received_at_forward: Times = field(default_factory=dict)
    received_at_reverse: Times = field(default_factory=dict)


@dataclass
class Losses:
    """The run's lost packets, each counted once, by what explains it."""

    outage_before: int = 0  # sent into a switch outage, never processed (no count gap)
    outage_after: int = 0  # processed, output lost in a switch outage (a count gap in it)
    wire_before: int = 0  # dropped by a wire impairment on its way to an NF (no count gap)
    wire_after: int = 0  # output dropped by a wire impairment (a count gap in it)
    system_before: int = 0  # lost with no count gap, and no window met it (or it was full)
    system_after: int = 0  # count gaps no window explains: lost after processing, by the system
    count_gaps: int = 0  # every missing checker count (lost after processing, excused or not)

    @property
    def system(self) -> int:
        return self.system_before + self.system_after

    @property
    def outage(self) -> int:
        return self.outage_before + self.outage_after

    @property
    def wire(self) -> int:
        return self.wire_before + self.wire_after

    def add(self, other: Losses) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def to_json(self) -> dict[str, int]:
        return {"lost_in_switch_outages": self.outage, "lost_on_the_wire": self.wire,
                "lost_by_system": self.system, "lost_by_system_before_processing":
                self.system_before, "lost_after_processing": self.count_gaps,
                "lost_after_processing_by_system": self.system_after,
                "lost_after_processing_excused": self.outage_after + self.wire_after}


@dataclass
class FlowVerdict:
    flow_id: int
    forward_received: int
    reverse_received: int
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class Verdict:
    flows: list[FlowVerdict]
    losses: Losses = field(default_factory=Losses)

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.flows)

    @property
    def packets_received(self) -> int:
        return sum(f.forward_received + f.reverse_received for f in self.flows)

    def problems(self, limit: int = 20) -> list[str]:
        out = [f"flow {f.flow_id}: {p}" for f in self.flows for p in f.problems]
        return out[:limit]


@dataclass(frozen=True)
class Tally:
    """What went wrong in one direction of one flow, counted."""

    in_order: bool  # the packet numbers arrived as exactly 1..sent
    received: int
    lost: int
    duplicated: int
    out_of_order: int
    counts_not_rising: int


def tally(arrivals: Sequence[tuple[int, int]], sent: int) -> Tally:
    """Count losses, duplicates, reorderings and non-rising checker counts in one direction."""
    numbers = [n for n, _ in arrivals]
    counts = [c for _, c in arrivals]
    return Tally(
        in_order=numbers == list(range(1, sent + 1)),
        received=len(numbers),
        lost=sent - len(set(numbers) & set(range(1, sent + 1))),
        duplicated=len(numbers) - len(set(numbers)),
        out_of_order=sum(1 for a, b in itertools.pairwise(numbers) if b < a),
        counts_not_rising=sum(1 for a, b in itertools.pairwise(counts) if b <= a),
    )


def _check_direction(name: str, arrivals: Sequence[tuple[int, int]], sent: int,
                     lossy: bool = False, counted: bool = True) -> list[str]:
    """Problems of one direction. With `lossy` (the run's wire lost packets, on purpose), losses
    alone are not a problem here: `excuse_flow` weighs each against the evidence."""
    problems: list[str] = []
    t = tally(arrivals, sent)
    tolerated = lossy and t.duplicated == 0 and t.out_of_order == 0
    if not t.in_order and not tolerated:
        problems.append(
            f"{name}: received {t.received} of {sent} "
            f"(lost {t.lost}, duplicated {t.duplicated}, out of order {t.out_of_order})"
        )
    if counted and t.counts_not_rising:
        problems.append(f"{name}: checker counts do not rise strictly")
    return problems


@dataclass(frozen=True)
class FlowSide:
    """One direction of one flow, with its times."""

    arrivals: Sequence[tuple[int, int]]
    sent: int
    sent_at: Sequence[float]
    received_at: Sequence[float]

    def lost_sent_at(self) -> list[float]:
        """When each lost packet was sent (nan when not recorded)."""
        got = {n for n, _ in self.arrivals}
        return [self.sent_at[n - 1] if n - 1 < len(self.sent_at) else math.nan
                for n in range(1, self.sent + 1) if n not in got]


class WindowCapacity:
    """What each counted window may still excuse (shared by every flow of the run)."""

    def __init__(self, windows: Sequence[LossWindow]) -> None:
        self.left: dict[int, float] = {i: math.inf if w.dropped is None else w.dropped
                                       for i, w in enumerate(windows)}

    def take(self, i: int) -> bool:
        if self.left[i] < 1:
            return False
        self.left[i] -= 1
        return True


def _gap_spans(sides: Sequence[FlowSide]) -> list[tuple[int, float, float]]:
    """Each missing checker count of a flow, with the span its lost output must have been lost
    in: from the sending of the packet with the count below it (the NF processed the missing
    one after that one) to the arrival of the packet with the count above it (an NF releases a
    slot's output in order, so the missing output had left the NF by then). nan: not recorded."""
    seen: dict[int, tuple[float, float]] = {}  # count -> (its packet's send time, arrival)
    for side in sides:
        for i, (no, count) in enumerate(side.arrivals):
            sent = side.sent_at[no - 1] if 0 < no <= len(side.sent_at) else math.nan
            arrived = side.received_at[i] if i < len(side.received_at) else math.nan
            seen.setdefault(count, (sent, arrived))
    counts = sorted(seen)
    spans: list[tuple[int, float, float]] = []
    for c in range(1, counts[-1] if counts else 1):
        if c in seen:
            continue
        k = bisect.bisect_left(counts, c)
        lo = seen[counts[k - 1]][0] if k > 0 else -math.inf
        spans.append((c, lo, seen[counts[k]][1]))
    return spans


def _excusing(windows: Sequence[LossWindow], capacity: WindowCapacity,
              ties: Callable[[LossWindow], bool],
              passes: tuple[bool, ...] = (False, True)) -> int | None:
    """The window that excuses one loss (`ties` it to the loss, and one of its counted drops is
    left: taken), uncounted windows (an outage's) before counted ones; None if none does.
    `passes`: which of the two kinds to try (False: uncounted, True: counted), in that order."""
    for counted in passes:
        for i, w in enumerate(windows):
            if (w.dropped is not None) == counted and ties(w) and capacity.take(i):
                return i
    return None


def excuse_flow(slot: int | None, sides: Sequence[FlowSide], windows: Sequence[LossWindow],
                capacity: WindowCapacity, counted: bool = True) -> Losses:
    """Weigh one flow's losses against the windows; what no window explains is the system's.

    * A **count gap** (a count below the flow's highest that no packet carries: an NF processed
      that packet, then its output was lost) is excused only by a window that carries output
      (an outage, or an impairment of what NFs send or the switch sends an end host), crosses
      the flow's slot, and overlaps the span the output was lost in (`_gap_spans`); each excuse
      takes one of the window's counted drops. Else it is lost after processing, by the system.
      More gaps than lost packets (a count skipped, a state update applied twice) are the
      system's whatever the windows.
    * The flow's other losses (lost packets beyond its gaps: never processed) are excused only
      by a window that carries input (an outage, or an impairment of what the switch sends an
      NF), crosses the flow's slot and was met by the packet (sent inside it, or `lead_s`
      before), each taking one counted drop. Else they are lost by the system.
    Without a checker in the path (`counted` False) a lost packet may be either: any window
    that crosses its slot and that it met excuses it."""
    out = Losses()
    lost = sorted(t for side in sides for t in side.lost_sent_at())
    gaps = _gap_spans(sides) if counted else []
    out.count_gaps = len(gaps)
    after_kinds = (OUTPUT, BOTH)
    unexcused_gaps = 0
    for _c, lo, hi in gaps:
        def lost_output(w: LossWindow, lo: float = lo, hi: float = hi) -> bool:
            return w.carries in after_kinds and w.crosses(slot) and w.overlaps(lo, hi)

        i = _excusing(windows, capacity, lost_output)
        if i is None:
            unexcused_gaps += 1
        elif windows[i].kind == OUTAGE:
            out.outage_after += 1
        else:
            out.wire_after += 1
    out.system_after = max(unexcused_gaps, len(gaps) - len(lost))
    need = max(0, len(lost) - len(gaps))  # lost before any NF processed them
    before_kinds = (INPUT, BOTH) if counted else (INPUT, OUTPUT, BOTH)
    # which of the lost packets were the processed ones the gaps stand for is not known: those
    # no uncounted window met are taken to be them first, so that a counted window's drops (a
    # switch's frames inside it at its kill, an impairment's) are spent only on packets that
    # nothing else explains, and stay for the flows that need them
    for counted_pass in (False, True):
        left: list[float] = []
        for sent in lost:
            if need == 0:
                break
            def lost_input(w: LossWindow, t: float = sent) -> bool:
                return w.carries in before_kinds and w.crosses(slot) and w.met_by(t)

            i = _excusing(windows, capacity, lost_input, (counted_pass,))
            if i is None:
                left.append(sent)
            else:
                need -= 1
                if windows[i].kind == OUTAGE:
                    out.outage_before += 1
                else:
                    out.wire_before += 1
        lost = left
    out.system_before = need
    return out


def verify(
    forward: Arrivals,
    reverse: Arrivals,
    sent_forward: Mapping[int, int],
    sent_reverse: Mapping[int, int],
    evidence: Evidence | None = None,
    counted: bool = True,
) -> Verdict:
    """The verdict. `evidence`: the run's loss windows and each packet's times; a loss is
    excused only by a window tied to it (`excuse_flow`), and never a duplicate, a reordering, a
    repeated or falling checker count. Without evidence, nothing may be lost.
    `counted=False`: no checker NF in the path (a service chain of other NFs): packet numbers
    alone are judged."""
    ev = evidence or Evidence()
    lossy = bool(ev.windows)
    capacity = WindowCapacity(ev.windows)
    flows: list[FlowVerdict] = []
    total = Losses()
    for flow_id in sorted(set(sent_forward) | set(sent_reverse) | set(forward) | set(reverse)):
        fwd, rev = forward.get(flow_id, ()), reverse.get(flow_id, ())
        fv = FlowVerdict(flow_id, len(fwd), len(rev))
        sides = (FlowSide(fwd, sent_forward.get(flow_id, 0), ev.sent_at_forward.get(flow_id, ()),
                       ev.received_at_forward.get(flow_id, ())),
                 FlowSide(rev, sent_reverse.get(flow_id, 0), ev.sent_at_reverse.get(flow_id, ()),
                       ev.received_at_reverse.get(flow_id, ())))
        for name, side in zip(("forward", "reverse"), sides, strict=True):
            fv.problems += _check_direction(name, side.arrivals, side.sent, lossy=lossy,
                                            counted=counted)
        counts = sorted(c for _, c in (*fwd, *rev)) if counted else []
        repeated = len(counts) != len(set(counts))
        if counts != list(range(1, len(counts) + 1)) and (repeated or not lossy):
            fv.problems.append(
                f"checker counts over both directions are not 1..{len(counts)} "
                f"(first {counts[:3]}, last {counts[-3:]})"
            )
        losses = excuse_flow(ev.slots.get(flow_id), sides, ev.windows, capacity, counted)
        total.add(losses)
        if lossy and losses.system_after:
            fv.problems.append(
                f"{losses.system_after} of {losses.count_gaps} checker counts missing that no "
                "wire fault explains: output lost after an NF processed it (or a count skipped "
                "or applied twice), by the system")
        if lossy and losses.system_before:
            fv.problems.append(
                f"{losses.system_before} packets lost before processing that no switch outage "
                "or wire impairment on the flow's port met (or it dropped fewer), by the system")
        flows.append(fv)
    return Verdict(flows, total)
