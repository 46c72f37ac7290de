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


def _check_direction(name: str, arrivals: Sequence[tuple[int, int]], sent: int) -> list[str]:
    problems: list[str] = []
    numbers = [n for n, _ in arrivals]
    if numbers != list(range(1, sent + 1)):
        seen = set(numbers)
        lost = sent - len(seen & set(range(1, sent + 1)))
        dup = len(numbers) - len(seen)
        out_of_order = sum(1 for a, b in itertools.pairwise(numbers) if b < a)
        problems.append(
            f"{name}: received {len(numbers)} of {sent} "
            f"(lost {lost}, duplicated {dup}, out of order {out_of_order})"
        )
    counts = [c for _, c in arrivals]
    if any(b <= a for a, b in itertools.pairwise(counts)):
        problems.append(f"{name}: checker counts do not rise strictly")
    return problems


def verify(
    forward: Arrivals,
    reverse: Arrivals,
    sent_forward: Mapping[int, int],
    sent_reverse: Mapping[int, int],
) -> Verdict:
    flows: list[FlowVerdict] = []
    for flow_id in sorted(set(sent_forward) | set(sent_reverse) | set(forward) | set(reverse)):
        fwd, rev = forward.get(flow_id, ()), reverse.get(flow_id, ())
        fv = FlowVerdict(flow_id, len(fwd), len(rev))
        fv.problems += _check_direction("forward", fwd, sent_forward.get(flow_id, 0))
        fv.problems += _check_direction("reverse", rev, sent_reverse.get(flow_id, 0))
        counts = sorted(c for _, c in (*fwd, *rev))
        if counts != list(range(1, len(counts) + 1)):
            fv.problems.append(
                f"checker counts over both directions are not 1..{len(counts)} "
                f"(first {counts[:3]}, last {counts[-3:]})"
            )
        flows.append(fv)
    return Verdict(flows)
