"""Where a restarted switch's numbering resumes (docs/protocols.md §9, P9): each slot's
`seq_base` from the numbers the NFs received and the switch's own bases and counts.

A slot whose last number (its entry's base, 0 without one, + its count) is behind the highest
number an NF received gets the base that makes its next number the one after it; every other
slot keeps its entry's base. An NF the controller could not read (hung, cut off from it, or
dead) may have received numbers beyond every NF it read: the frames of a slot that were inside
the switch when it restarted are lost on some ports and not on others (a primary received
packet N, the copy to its backup was lost), so the backup's highest is behind the primary's. If
any NF went unread and the switch restarted, every slot's numbering resumes `UNREAD_MARGIN`
beyond the highest number known (read from an NF, or the switch's own): a number an unread NF
holds is never used again (simulation seeds 13 and 15 of `--set switch_restarts=0.5`: six
numbers of a slot given again, which its cut-off primary dropped as duplicates). The NFs skip
the margin as a gap after their gap timeout (`gaps` counts numbers, not packets, there).
"""

from __future__ import annotations

from collections.abc import Mapping

from contract.seq import SEQ_MASK, seq_after

UNREAD_MARGIN = 1 << 16
"""Numbers skipped after a restart with an unread NF: more than a slot's frames that a switch's
queues hold (`contract.timing.SWITCH_QUEUE_BOUND` at 65,536 packets per second per slot)."""


def resumed_bases(bases: Mapping[int, int], counts: Mapping[int, int], seen: Mapping[int, int],
                  unread: bool, slots: int) -> tuple[dict[int, int], int]:
    """Each slot's `seq_base` (0 left out) and how many slots were behind. `bases`, `counts`:
    the switch's; `seen`: the highest number any NF read received, by slot; `unread`: some NF
    was not read; `slots`: the slot count."""
    def last(slot: int) -> int:
        return (bases.get(slot, 0) + counts.get(slot, 0)) & SEQ_MASK

    behind = {slot: (top - counts.get(slot, 0)) & SEQ_MASK for slot, top in seen.items()
              if seq_after(top, last(slot))}
    out = {**bases, **behind}
    if behind and unread:  # the switch restarted, and an NF may hold numbers beyond `seen`
        for slot in range(slots):
            top = seen.get(slot, last(slot))
            if not seq_after(top, last(slot)):
                top = last(slot)
            out[slot] = (top + UNREAD_MARGIN - counts.get(slot, 0)) & SEQ_MASK
    return {slot: base for slot, base in out.items() if base}, len(behind)
