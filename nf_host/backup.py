"""The backup's buffer of input copies: bounded, with memory accounting.

The switch sends a backup a copy of every packet of the slots it backs up. The backup keeps each
copy until the primary's delta says the packet's effect is committed (`drop_upto`), and on
promotion replays the copies beyond the last commit (`take_beyond`). Memory is bounded by
`max_bytes` over all slots of a worker: a copy that does not fit is refused and counted (on
promotion it would show up as a gap, which is counted too).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from contract.seq import SEQ_MASK, seq_after


@dataclass
class InputBuffer:
    max_bytes: int = 64 * 1024 * 1024
    slots: dict[int, dict[int, bytes]] = field(default_factory=dict)
    bytes_held: int = 0
    overflows: int = 0
    duplicates: int = 0

    def add(self, slot: int, seq: int, frame: bytes) -> bool:
        """Keep a copy of packet `seq` of `slot`; False (and counted) if over budget or known."""
        per = self.slots.setdefault(slot, {})
        if seq in per:
            self.duplicates += 1
            return False
        if self.bytes_held + len(frame) > self.max_bytes:
            self.overflows += 1
            return False
        per[seq] = frame
        self.bytes_held += len(frame)
        return True

    def drop_upto(self, slot: int, seq: int) -> int:
        """Forget the copies of `slot` numbered `seq` or lower (committed); return how many."""
        per = self.slots.get(slot)
        if not per:
            return 0
        old = []
        for s in per:  # insertion order is (nearly) sequence order: stop at the first newer copy
            if seq_after(s, seq):
                break
            old.append(s)
        for s in old:
            self.bytes_held -= len(per.pop(s))
        return len(old)

    # A copy that arrived out of order behind a newer one is dropped by a later call or by
    # `take_beyond`, which filters by number: it only costs memory for a while.

    def take_beyond(self, slot: int, seq: int | None) -> list[tuple[int, bytes]]:
        """Remove every copy of `slot` and return those numbered after `seq` (all if None), in
        sequence order (serial arithmetic: numbers wrap around at 2**32)."""
        per = self.slots.pop(slot, {})
        self.bytes_held -= sum(len(f) for f in per.values())
        if not per:
            return []
        if seq is None:  # order around the first copy kept (copies span far less than 2**30)
            ref = (next(iter(per)) - (1 << 30)) & SEQ_MASK
            keep = list(per.items())
        else:
            ref = (seq + 1) & SEQ_MASK
            keep = [(s, f) for s, f in per.items() if seq_after(s, seq)]
        return sorted(keep, key=lambda kv: (kv[0] - ref) & SEQ_MASK)

    def discard(self, slot: int) -> None:
        """Forget every copy of `slot`."""
        self.take_beyond(slot, None)

    def count(self, slot: int | None = None) -> int:
        if slot is None:
            return sum(len(p) for p in self.slots.values())
        return len(self.slots.get(slot, ()))
