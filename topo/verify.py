"""The sink's verdict: was every packet delivered exactly once, in order, with an unbroken count?

Input: what each end received, per flow, in arrival order, as (pkt_no, count) pairs, and how many
packets each end sent per flow. A flow is correct when, in each direction, the packet numbers arrive
as exactly 1..sent (nothing lost, duplicated or reordered), the checker's counts rise strictly, and,
over both directions together, the counts are exactly 1..total (the NF's per-flow state was never
lost, rolled back or applied twice, across every migration and fail-over).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

Arrivals = Mapping[int, Sequence[tuple[int, int]]]
"""flow_id -> [(pkt_no, count)] in arrival order, for one direction."""


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
                     lossy: bool = False, counted: bool = True) -> tuple[list[str], int]:
    """Problems of one direction, and its losses. With `lossy` (the run's wire lost packets, on
    purpose), losses alone are not a problem here: `verify` weighs them against the wire's."""
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
    return problems, t.lost


def verify(
    forward: Arrivals,
    reverse: Arrivals,
    sent_forward: Mapping[int, int],
    sent_reverse: Mapping[int, int],
    wire_lost: int = 0,
    count_gaps: int = 0,
    counted: bool = True,
) -> Verdict:
    """The verdict. `wire_lost`: packets the wire is known to have dropped before the NFs (a
    fault that drops on purpose: `tc netem`); the run may lose up to that many, as
    long as nothing is duplicated or reordered and every checker count is unbroken (a packet lost
    before its NF is never counted, so the counts stay 1..N). `count_gaps`: counts that may be
    missing in all (the output of packets an NF processed while the switch was down).
    `counted=False`: no checker NF in the path (a service chain of other NFs): packet numbers
    alone are judged."""
    flows: list[FlowVerdict] = []
    lost = 0
    budget = count_gaps  # shared by every flow
    for flow_id in sorted(set(sent_forward) | set(sent_reverse) | set(forward) | set(reverse)):
        fwd, rev = forward.get(flow_id, ()), reverse.get(flow_id, ())
        fv = FlowVerdict(flow_id, len(fwd), len(rev))
        for name, arrivals, sent in (("forward", fwd, sent_forward.get(flow_id, 0)),
                                     ("reverse", rev, sent_reverse.get(flow_id, 0))):
            problems, n = _check_direction(name, arrivals, sent, lossy=wire_lost > 0,
                                           counted=counted)
            fv.problems += problems
            lost += n
        counts = sorted(c for _, c in (*fwd, *rev)) if counted else []
        gaps = (counts[-1] - len(counts)) if counts else 0
        if (counts != list(range(1, len(counts) + 1))
                and not (count_gaps and len(set(counts)) == len(counts) and 0 < gaps <= budget)):
            fv.problems.append(
                f"checker counts over both directions are not 1..{len(counts)} "
                f"(first {counts[:3]}, last {counts[-3:]})"
            )
        elif counts and gaps > 0:
            budget -= gaps
        flows.append(fv)
    if lost > wire_lost:
        flows.append(FlowVerdict(-1, 0, 0, [f"lost {lost} packets, more than the {wire_lost} "
                                            "the wire dropped"]))
    return Verdict(flows)
