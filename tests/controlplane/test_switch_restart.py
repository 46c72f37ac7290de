"""A restarted switch counts every slot's packets from 0 again: before the slots get their owners
back, the controller gives each slot that is behind the highest number its NFs received (primary
or backup) the `seq_base` that makes its next number the one after it; the reconcile writes the
bases with the slot_owner entries. After a mere reconnect, or a standby's take-over, the switch
is ahead and every slot keeps the base its entry holds."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.controlplane.test_migration import with_controller

pytestmark = pytest.mark.unit

MASK = 0xFFFFFFFF


class Numbering:
    """The switch's side: each slot's base (its slot_owner entry's) and packets stamped."""

    def __init__(self, bases: dict[int, int], counts: dict[int, int]) -> None:
        self.bases, self.counts = bases, counts
        self.seq_bases: dict[int, int] = {}  # what the controller sets for the reconcile

    async def read_numbering(self) -> tuple[dict[int, int], dict[int, int]]:
        return dict(self.bases), dict(self.counts)

    async def read_stamped(self) -> dict[int, int]:
        return dict(self.counts)

    def next_number(self, slot: int) -> int:
        """What the switch stamps next in `slot` once the bases are written."""
        return (self.seq_bases.get(slot, 0) + self.counts.get(slot, 0) + 1) & MASK


def test_a_restarted_switch_resumes_each_slots_numbering_where_its_nfs_are() -> None:
    async def body(c: Any, fakes: Any, servers: Any) -> None:
        a, b, d = c.slot_map.slots_of(1)[:3]
        fakes[1].seen = {a: 500, b: 70}
        fakes[3].seen = {a: 503}  # NF 1's backup holds copies up to 503 (they reached it only)
        restarted = Numbering({}, {})  # no entries, nothing counted
        await c.core._resume_numbering(restarted)
        assert restarted.seq_bases == {a: 503, b: 70}
        assert [restarted.next_number(s) for s in (a, b, d)] == [504, 71, 1]
        assert c.metrics.registry.get_sample_value("nfc_numbering_resumed_total") == 2
        # what the NFs are told once configured: the same next numbers
        restarted.counts = {a: 0, b: 0, d: 0}
        c.session.read_stamped, c.session.seq_bases = restarted.read_stamped, restarted.seq_bases
        assert await c.next_seqs() == {a: 504, b: 71, d: 1}

    asyncio.run(with_controller(body))


def test_a_live_switch_keeps_the_bases_its_entries_hold() -> None:
    async def body(c: Any, fakes: Any, servers: Any) -> None:
        a, b = c.slot_map.slots_of(1)[:2]
        fakes[1].seen = {a: 510, b: 100}
        # resumed once before (base 503 in a's entry), and stamping on since: a reconnect, or a
        # standby taking over, finds the switch ahead of every NF
        live = Numbering({a: 503, b: 0}, {a: 10, b: 100})
        await c.core._resume_numbering(live)
        assert live.seq_bases == {a: 503}  # kept; b's 0 is the default
        assert c.metrics.registry.get_sample_value("nfc_numbering_resumed_total") in (None, 0)

    asyncio.run(with_controller(body))


def test_a_base_wraps_around_as_the_numbers_do() -> None:
    async def body(c: Any, fakes: Any, servers: Any) -> None:
        a, b = c.slot_map.slots_of(1)[:2]
        fakes[1].seen = {a: 1000, b: 3}  # b's numbers already wrapped past 2^32
        # slots whose entries were lost while their counts went on: resumed after the NFs too
        switch = Numbering({}, {a: 5, b: MASK})
        await c.core._resume_numbering(switch)
        assert (switch.next_number(a), switch.next_number(b)) == (1001, 4)
        assert switch.seq_bases == {a: 995, b: 4}  # b: 4 + (2^32 - 1) packets = 3 (mod 2^32)

    asyncio.run(with_controller(body))
