"""The slot map: which primary NF owns each slot, and the slot's epoch (ownership version).

Initial ownership comes from Maglev consistent hashing (Eisenbud et al., NSDI 2016): every primary
walks its own permutation of the slot space, and the primaries take turns claiming their next free
slot. With equal weights each primary ends up with floor(S/N) or ceil(S/N) slots, and adding or removing
one primary moves only about 1/N of the slots. The slot count is a power of two, so each
permutation uses an odd skip (coprime with it) instead of Maglev's prime table size.

Later changes (migration, fail-over, load balancing) are single-slot moves through `move()`, which bumps
the slot's epoch. Epochs are 16-bit on the switch; they run 1..65534 and wrap to 1 (0 means "never
owned", the initial value of the switch's per-slot epoch register): an even count, so consecutive
epochs always differ in parity, which the switch's output dedup uses to keep a slot's current and
previous epoch apart (docs/dataplane.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

EPOCH_MAX = 0xFFFE


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch`, skipping 0 on wrap-around."""
    return 1 if epoch >= EPOCH_MAX else epoch + 1


def _hash(key: str, salt: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8, key=salt).digest(), "big")


def maglev_table(backends: Sequence[int], size: int) -> list[int]:
    """Maglev lookup table of `size` entries (a power of two) over `backends` (NF ids)."""
    if size <= 0 or size & (size - 1):
        raise ValueError(f"slot count {size} is not a power of two")
    if not backends:
        raise ValueError("no backends to own the slots")
    if len(set(backends)) != len(backends):
        raise ValueError(f"duplicate backends in {list(backends)}")
    order = sorted(backends)
    offsets = [_hash(str(b), b"offset") % size for b in order]
    skips = [(_hash(str(b), b"skip") % size) | 1 for b in order]
    nexts = [0] * len(order)
    table = [-1] * size
    filled = 0
    while True:
        for i, backend in enumerate(order):
            slot = (offsets[i] + nexts[i] * skips[i]) % size
            while table[slot] >= 0:
                nexts[i] += 1
                slot = (offsets[i] + nexts[i] * skips[i]) % size
            table[slot] = backend
            nexts[i] += 1
            filled += 1
            if filled == size:
                return table


@dataclass(frozen=True)
class SlotEntry:
    """One slot's ownership: the switch's `slot_owner` entry is (group = owner, epoch, primary = owner)."""

    slot: int
    owner: int
    epoch: int


class SlotMap:
    """Owner and epoch of every slot; the controller's single source of truth for ownership."""

    def __init__(self, slot_count: int, owners: Sequence[int], epochs: Sequence[int]) -> None:
        if len(owners) != slot_count or len(epochs) != slot_count:
            raise ValueError(f"need {slot_count} owners and epochs, got {len(owners)}/{len(epochs)}")
        self.slot_count = slot_count
        self._owners = list(owners)
        self._epochs = list(epochs)

    @classmethod
    def build(cls, primaries: Iterable[int], slot_count: int) -> SlotMap:
        """A fresh map: Maglev ownership, every epoch 1."""
        return cls(slot_count, maglev_table(list(primaries), slot_count), [1] * slot_count)

    @classmethod
    def build_staged(cls, stage_primaries: Sequence[Iterable[int]], slots_per_stage: int) -> SlotMap:
        """A fresh map for service chains: stage k's slot indexes k * slots_per_stage, ... are
        spread by Maglev over stage k's primaries (one stage: `build`)."""
        owners: list[int] = []
        for primaries in stage_primaries:
            owners += maglev_table(list(primaries), slots_per_stage)
        return cls(len(owners), owners, [1] * len(owners))

    # -- reading ----------------------------------------------------------------------------------
    def owner(self, slot: int) -> int:
        return self._owners[slot]

    def epoch(self, slot: int) -> int:
        return self._epochs[slot]

    def entry(self, slot: int) -> SlotEntry:
        return SlotEntry(slot, self._owners[slot], self._epochs[slot])

    def entries(self) -> list[SlotEntry]:
        return [SlotEntry(s, o, e) for s, (o, e) in enumerate(zip(self._owners, self._epochs, strict=True))]

    def slots_of(self, owner: int) -> list[int]:
        return [s for s, o in enumerate(self._owners) if o == owner]

    def counts(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for owner in self._owners:
            out[owner] = out.get(owner, 0) + 1
        return out

    def owners(self) -> list[int]:
        return list(self._owners)

    def epochs(self) -> list[int]:
        return list(self._epochs)

    def copy(self) -> SlotMap:
        return SlotMap(self.slot_count, self._owners, self._epochs)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, SlotMap)
            and self._owners == other._owners
            and self._epochs == other._epochs
        )

    def __hash__(self) -> int:  # mutable; hash by identity like a list would refuse to
        return id(self)

    # -- changing ---------------------------------------------------------------------------------
    def move(self, slot: int, new_owner: int) -> SlotEntry:
        """Give `slot` to `new_owner` with the next epoch (also for a same-owner re-stamp)."""
        if not 0 <= slot < self.slot_count:
            raise IndexError(f"slot {slot} is outside 0..{self.slot_count - 1}")
        self._owners[slot] = new_owner
        self._epochs[slot] = next_epoch(self._epochs[slot])
        return self.entry(slot)

    def set_entry(self, entry: SlotEntry) -> None:
        """Record an ownership the switch and etcd already hold (`Controller.move_slot`)."""
        if not 0 <= entry.slot < self.slot_count:
            raise IndexError(f"slot {entry.slot} is outside 0..{self.slot_count - 1}")
        self._owners[entry.slot] = entry.owner
        self._epochs[entry.slot] = entry.epoch

    def hand_over(self, from_owner: int, to_owner: int) -> list[SlotEntry]:
        """Every slot of `from_owner` to `to_owner` with its epoch unchanged: a fail-over, where the
        promoted backup continues the dead primary's numbering (same replica group, same epoch)."""
        slots = self.slots_of(from_owner)
        for s in slots:
            self._owners[s] = to_owner
        return [self.entry(s) for s in slots]

    def move_all(self, from_owner: int, to_owner: int) -> list[SlotEntry]:
        """Every slot of `from_owner` to `to_owner` (fail-over), each with its next epoch."""
        return [self.move(s, to_owner) for s in self.slots_of(from_owner)]

    def rebalance(self, primaries: Iterable[int]) -> list[SlotEntry]:
        """Re-derive Maglev ownership for a new set of primaries; move only the slots that change."""
        target = maglev_table(list(primaries), self.slot_count)
        return [self.move(s, o) for s, o in enumerate(target) if o != self._owners[s]]

    def apply(self, entries: Iterable[SlotEntry]) -> None:
        """Overwrite slots with given entries (used when loading persisted state)."""
        for e in entries:
            self._owners[e.slot] = e.owner
            self._epochs[e.slot] = e.epoch


def moved_fraction(before: Mapping[int, int] | Sequence[int], after: Sequence[int]) -> float:
    """Fraction of slots whose owner differs between two owner lists."""
    b = list(before.values()) if isinstance(before, Mapping) else list(before)
    return sum(1 for x, y in zip(b, after, strict=True) if x != y) / len(after)
