"""Per-slot sequencing: `next_expected`, a bounded reorder buffer and the gap timeout.

The switch stamps every packet of a slot with the next 32-bit sequence number. A `Sequencer` hands
packets to the NF strictly in that order: a packet whose number is next is released at once (with
any buffered successors); an early packet waits in a bounded buffer; a packet whose number was
already released is a duplicate and is refused. When the oldest missing number has been missing
for longer than the gap timeout, the sequencer skips to the lowest buffered number and counts the
skipped numbers as gaps, so a loss on the wire never blocks a slot and is never silent.

Sequence numbers are 32 bits and wrap around (the switch's register does): they are compared in
serial-number arithmetic (RFC 1982, `contract.seq`), so a number is "after" another when it is less than 2**31
ahead of it modulo 2**32.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Generic, TypeVar

from contract.seq import SEQ_HALF, SEQ_MASK

T = TypeVar("T")

class Offer(IntEnum):
    """What happened to an offered packet."""

    READY = 0  # released (it and maybe buffered successors)
    BUFFERED = 1  # early: waits for the missing numbers before it
    DUPLICATE = 2  # its number was already released or is already buffered
    OVERFLOW = 3  # early, but the reorder buffer is full: dropped and counted


@dataclass
class Sequencer(Generic[T]):
    """In-order release of one slot's packets; items are opaque to it."""

    next_expected: int | None = None
    capacity: int = 1024
    gap_timeout: float = 0.05
    buffer: dict[int, T] = field(default_factory=dict)
    waiting_since: float | None = None
    gaps: int = 0
    duplicates: int = 0
    overflows: int = 0

    def offer(self, seq: int, item: T, now: float, out: list[tuple[int, T]]) -> Offer:
        """Offer packet `seq`; append what is now releasable, in order, to `out`."""
        nxt = self.next_expected
        if nxt is None:  # first packet ever seen for this slot: start from it
            nxt = self.next_expected = seq
        ahead = (seq - nxt) & SEQ_MASK
        if ahead >= SEQ_HALF or seq in self.buffer:  # behind next_expected: already released
            self.duplicates += 1
            return Offer.DUPLICATE
        if ahead == 0:
            out.append((seq, item))
            self.next_expected = (seq + 1) & SEQ_MASK
            if self.buffer:
                self._drain(out, now)
            return Offer.READY
        if len(self.buffer) >= self.capacity:
            self.overflows += 1
            return Offer.OVERFLOW
        self.buffer[seq] = item
        if self.waiting_since is None:
            self.waiting_since = now
        return Offer.BUFFERED

    def _drain(self, out: list[tuple[int, T]], now: float) -> None:
        buf = self.buffer
        nxt = self.next_expected
        assert nxt is not None
        while nxt in buf:
            out.append((nxt, buf.pop(nxt)))
            nxt = (nxt + 1) & SEQ_MASK
        self.next_expected = nxt
        self.waiting_since = now if buf else None

    def expire(self, now: float, out: list[tuple[int, T]]) -> int:
        """Skip a gap older than the timeout; return how many numbers were skipped (also counted)."""
        if self.waiting_since is None or now - self.waiting_since < self.gap_timeout:
            return 0
        return self.skip_gap(now, out)

    def skip_gap(self, now: float, out: list[tuple[int, T]]) -> int:
        """Skip to the lowest buffered number at once (used on timeout and on flush)."""
        if not self.buffer:
            self.waiting_since = None
            return 0
        nxt = self.next_expected
        if nxt is None:
            nxt = next(iter(self.buffer))
        lowest = min(self.buffer, key=lambda s: (s - nxt) & SEQ_MASK)
        skipped = (lowest - nxt) & SEQ_MASK
        self.gaps += skipped
        self.next_expected = lowest
        self._drain(out, now)
        return skipped

    def take_buffered(self) -> list[tuple[int, T]]:
        """Remove and return every buffered packet in sequence order (a slot being released)."""
        nxt = self.next_expected or 0
        items = sorted(self.buffer.items(), key=lambda kv: (kv[0] - nxt) & SEQ_MASK)
        self.buffer.clear()
        self.waiting_since = None
        return items

    @property
    def depth(self) -> int:
        return len(self.buffer)
