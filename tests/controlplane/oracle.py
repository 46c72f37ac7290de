"""An independent model of slot ownership, the oracle for controller tests.

It knows nothing of Maglev: it starts from whatever owners it is given and applies events with the
plainest possible semantics ("after NF x fails, its backup y owns every slot x owned, each one epoch
later"). Tests drive the real controller and this model with the same events and compare.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class OwnershipOracle:
    owners: list[int]
    epochs: list[int]
    backups: dict[int, int] = field(default_factory=dict)  # primary -> backup
    dead: set[int] = field(default_factory=set)

    @classmethod
    def start(cls, owners: Sequence[int], backups: dict[int, int] | None = None) -> OwnershipOracle:
        return cls(list(owners), [1] * len(owners), dict(backups or {}))

    def _bump(self, slot: int) -> None:
        self.epochs[slot] = 1 if self.epochs[slot] >= 0xFFFF else self.epochs[slot] + 1

    def migrate(self, slot: int, to: int) -> None:
        """Slot `slot` moves to NF `to` (one epoch later)."""
        assert to not in self.dead, f"cannot move slot {slot} to dead NF {to}"
        self.owners[slot] = to
        self._bump(slot)

    def fail(self, nf: int) -> None:
        """NF `nf` dies: its backup takes every slot it owned, with the same epochs (the
        promoted backup continues the dead primary's numbering in its replica group)."""
        backup = self.backups[nf]
        self.dead.add(nf)
        for slot, owner in enumerate(self.owners):
            if owner == nf:
                self.owners[slot] = backup

    def expected_owner(self, slot: int) -> int:
        return self.owners[slot]

    def check_invariants(self) -> None:
        """Every slot has a live owner and a non-zero epoch."""
        for slot, owner in enumerate(self.owners):
            assert owner not in self.dead, f"slot {slot} owned by dead NF {owner}"
            assert self.epochs[slot] != 0, f"slot {slot} has epoch 0"
