"""What a worker holds of slots owned elsewhere, by slot: the backup side of the slot table.

A slot held here and owned by another NF is either *backed up* (this worker is the backup of its
primary: it keeps the input copies and the replica its primary's deltas build, and a promotion
makes it ours) or only *replicated* (a cluster peer's replica, kept for a delta move). Each such
slot's promotion-related facts sit here with it: the first sequence number `AssignSlots` gave a
slot backed up before any delta, the idle slots a promotion has yet to reach (and whose dead
primary they were), and the switch's epoch the controller's `Promote` listed. Every change goes
through a method named after the event that makes it; the owned slots are `Worker.slots`
(`SlotRuntime`, their roles and checked transitions in `contract.roles.SLOT_TRANSITIONS`).

Whether a slot is backed up here is one `Backing` per slot, changed only along
`BACKING_TRANSITIONS` (`BackupSlots._become`, which refuses any other change, as
`SlotRuntime.become` does for owned slots): `BACKUP`; `ADOPTION`, backed up while our primary
adopts it and has not started it, never promoted from here (docs/protocols.md §5, M14); and
`ADOPTION_NOT_BACKED_UP`, the same adoption still undecided when this NF adopts the slot itself
(it stays unpromotable, and the move's fence still gives our copies back). `backed_up` and
`adoptions` are read-only views of it. A peer's replica (`replicas`) and a promotion's idle
slots still to reach (`promote_later`) are data beside it, not states of it: a replica is held
whether or not the slot is backed up, and a promotion may list a slot held only as a replica,
or not held at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from enum import Enum

from contract.roles import SlotRole, SlotTransitionError
from contract.seq import SEQ_MASK, older_owner
from nf_host.state_store import Replica


class Backing(Enum):
    """Whether and how a slot is backed up here (see the module docstring)."""

    BACKUP = "backup"
    ADOPTION = "adoption"
    ADOPTION_NOT_BACKED_UP = "adoption not backed up"


# The changes `BackupSlots` makes to a slot's backing (None: not backed up, no adoption), each by
# `_become`, which refuses any other. An assignment backs a slot up (as our primary's adoption
# with `adoption`, which only the adoption's start clears); a release notice, the copies given
# back, a promotion or a clear end it; this NF adopting the slot, a takeover given up or a
# promotion end its backing but not an undecided adoption, which only its start, the release
# notice, the copies given back or a clear ends.
BACKING_TRANSITIONS: dict[Backing | None, frozenset[Backing | None]] = {
    None: frozenset({Backing.BACKUP, Backing.ADOPTION}),
    Backing.BACKUP: frozenset({Backing.ADOPTION, None}),
    Backing.ADOPTION: frozenset({Backing.BACKUP, Backing.ADOPTION_NOT_BACKED_UP, None}),
    Backing.ADOPTION_NOT_BACKED_UP: frozenset({Backing.ADOPTION, None}),
}
_BACKED_UP = frozenset({Backing.BACKUP, Backing.ADOPTION})
_ADOPTIONS = frozenset({Backing.ADOPTION, Backing.ADOPTION_NOT_BACKED_UP})


class BackupSlots:
    """The slots held here for other NFs (see the module docstring)."""

    def __init__(self) -> None:
        self.replicas: dict[int, Replica] = {}  # every slot held, backed up or a peer's
        self._backing: dict[int, Backing] = {}
        # views of `_backing` (read on every packet: kept, not computed): the slots we back up
        # (of our primary), and those our primary is adopting (a move) and has not started,
        # whose state is the old owner's, so never promoted from here (docs/protocols.md §5, M14)
        self._backed_up: set[int] = set()
        self._adoptions: set[int] = set()
        self._next_seq: dict[int, int] = {}  # first seq of slots backed up before any delta
        self._to_promote: dict[int, int] = {}  # idle slots a promotion has yet to reach -> dead
        # slots our primary adopted -> (when its SlotState came, whether it has started them
        # since: its marker came, and its first delta of them) (M18)
        self._adopted_at: dict[int, tuple[float, bool]] = {}
        # the switch's epoch of slots the controller's Promote listed, until each is promoted: a
        # promoted slot owns at least that epoch (its replica may be gone, or older)
        self._told_epochs: dict[int, int] = {}
        # slots whose delta rows the peer policy dropped since their last whole row (a snapshot,
        # a new owner's replace row, an adoption's state): their replicas, or those deltas
        # begin later, lack what those rows held, so no delta transfer is taken against them
        # (ReplicaReceiver._on_transfer; simulation seed 80 of adopter kills with stalls: a
        # delta move against such a replica started two flows 21 and 17 counts short)
        self.holes: set[int] = set()

    # ------------------------------------------------------------------ the backing
    def backing(self, slot: int) -> Backing | None:
        return self._backing.get(slot)

    @property
    def backed_up(self) -> Set[int]:
        """The slots backed up here (`BACKUP` or `ADOPTION`)."""
        return self._backed_up

    @property
    def adoptions(self) -> Set[int]:
        """The slots our primary adopts and has not started (never promoted from here)."""
        return self._adoptions

    def _become(self, slot: int, new: Backing | None) -> None:
        """Change `slot`'s backing along `BACKING_TRANSITIONS`; any other change raises."""
        old = self._backing.get(slot)
        if new == old:
            return
        if new not in BACKING_TRANSITIONS[old]:
            raise SlotTransitionError(f"slot {slot}: backing {old and old.name} -> "
                                      f"{new and new.name} is not a transition")
        if new is None:
            del self._backing[slot]
            self._adopted_at.pop(slot, None)
        else:
            self._backing[slot] = new
        if new in _BACKED_UP:
            self._backed_up.add(slot)
        else:
            self._backed_up.discard(slot)
        if new in _ADOPTIONS:
            self._adoptions.add(slot)
        else:
            self._adoptions.discard(slot)

    def _not_backed_up(self, slot: int) -> None:
        """No longer backed up here; an undecided adoption of it stays one."""
        old = self._backing.get(slot)
        self._become(slot, Backing.ADOPTION_NOT_BACKED_UP if old in _ADOPTIONS else None)

    # ------------------------------------------------------------------ what is held
    def role(self, slot: int) -> SlotRole | None:
        """`BACKUP` (backed up here), `REPLICA` (a peer's replica only) or None (not held)."""
        if slot in self.backed_up:
            return SlotRole.BACKUP
        return SlotRole.REPLICA if slot in self.replicas else None

    def held(self) -> list[int]:
        """Every slot held here, backed up or replicated, in order."""
        return sorted(self.backed_up | set(self.replicas))

    def holds(self, slot: int) -> bool:
        return slot in self.backed_up or slot in self.replicas

    def assigned_seq(self, slot: int) -> int | None:
        """The first number `AssignSlots` gave `slot` (backed up before any delta), if any."""
        return self._next_seq.get(slot)

    def waiting(self, slot: int) -> bool:
        """Whether a promotion has yet to reach idle `slot`."""
        return bool(self._to_promote) and slot in self._to_promote

    # ------------------------------------------------------------------ events
    def promotable(self, slot: int) -> bool:
        """Whether a promotion may own `slot`: not an adoption our primary has not started."""
        return slot not in self.adoptions

    def assign(self, slot: int, epoch: int, next_seq: int | None, adoption: bool = False) -> None:
        """`AssignSlots` as backup: backed up here, with an (empty) replica at `epoch` and the
        number the slot's primary starts at, if given; `adoption`: our primary adopts it (M14)."""
        adopting = adoption or slot in self._adoptions  # (only its start ends an adoption)
        self._become(slot, Backing.ADOPTION if adopting else Backing.BACKUP)
        rep = self.replicas.setdefault(slot, Replica(slot, epoch=epoch))
        if next_seq is not None and rep.last_seq is None:
            rep.last_seq = (next_seq - 1) & SEQ_MASK
        if next_seq is not None:
            self._next_seq[slot] = next_seq

    def not_whole(self, slots: list[int]) -> None:
        """Rows of `slots` were dropped (`PeerPolicy.on_rows_dropped`): see `holes`."""
        self.holes.update(slots)

    def released(self, slot: int, epoch: int | None) -> None:
        """Our primary released `slot` (its release notice): no longer backed up; with the
        move's `epoch`, a cancelled move's (empty) replica at that epoch goes too."""
        self._become(slot, None)
        rep = self.replicas.get(slot)
        if rep is not None and epoch is not None and rep.epoch == epoch:
            del self.replicas[slot]

    def drop_replica(self, slot: int, epoch: int, gen: int) -> None:
        """The replica of `slot` goes if it is exactly the owner generation (epoch, gen): the
        NF that sent its deltas gave the slot up (a self-takeover the controller's `Promote`
        left out, §4.3). Kept, its newer generation refused every delta of the slot's real
        owner as a stale sender's (simulation, adopter kills, seed 61)."""
        rep = self.replicas.get(slot)
        if rep is not None and (rep.epoch, rep.gen) == (epoch, gen):
            del self.replicas[slot]

    def started(self, slot: int, now: float | None = None) -> None:
        """Our primary started `slot` (its state came: its SlotState at `now`, or a whole entry
        of it in a delta): promotable from here now (M14). The SlotState comes when it accepted
        the transfer, the delta once it has started the slot after the old owner's marker: the
        old owner's tail and marker may still come until then (`adopted_at`, M18)."""
        old = self._backing.get(slot)
        if old in _ADOPTIONS:
            self._become(slot, Backing.BACKUP if old == Backing.ADOPTION else None)
            if now is not None and slot in self._backing:
                self._adopted_at[slot] = (now, False)
        elif now is None and slot in self._adopted_at:
            self._adopted_at[slot] = (self._adopted_at[slot][0], True)

    def adopted_at(self, slot: int) -> tuple[float, bool] | None:
        """When our primary adopted `slot` (its SlotState came), if it did, and whether it has
        started the slot since (M18): told once (the promotion that asks owns the slot)."""
        return self._adopted_at.pop(slot, None)

    def given_back(self, slot: int) -> None:
        """The copies of an adoption our dead primary never started went to the old owner
        (M14): nothing of `slot` is held here any more."""
        self._become(slot, None)
        self.replicas.pop(slot, None)
        self._next_seq.pop(slot, None)
        self._to_promote.pop(slot, None)

    def adopting(self, slot: int) -> None:
        """We adopt `slot` (a move): not backed up here any more (its replica stays, the base
        of a delta transfer)."""
        self._not_backed_up(slot)

    def transferred(self, slot: int) -> None:
        """A move's transfer of `slot` was accepted here: its replica is the adopted state now."""
        self.replicas.pop(slot, None)

    def given_up(self, slot: int, rep: Replica | None) -> None:
        """A slot taken over by ourselves that the controller's `Promote` left out: neither
        backed up nor waiting for its promotion; a replica again, with the state it had (`rep`),
        if it was owned already."""
        self._to_promote.pop(slot, None)
        self._not_backed_up(slot)
        if rep is not None:
            self.replicas[slot] = rep

    def promote_later(self, slots: Iterable[int], dead: int) -> None:
        """Idle `slots` of dead NF `dead`: promoted a few at a time, or by their first packet."""
        for s in slots:
            self._to_promote[s] = dead

    def take_waiting(self, slot: int) -> int | None:
        """The dead primary of idle `slot` if a promotion has yet to reach it (then it is not
        waiting any more: the caller promotes it now); None otherwise."""
        return self._to_promote.pop(slot, None)

    def told_epochs(self, epochs: dict[int, int]) -> None:
        """The switch's epochs of the slots a `Promote` lists."""
        self._told_epochs.update(epochs)

    def told_epoch(self, slot: int) -> int | None:
        """The switch's epoch a `Promote` told of `slot`, now used (a slot owned already)."""
        return self._told_epochs.pop(slot, None)

    def promoted(self, slot: int) -> tuple[Replica, int | None]:
        """`slot` is ours now: it leaves this table. Returns its replica (empty if none was
        held), at the epoch `Promote` told if the replica's is older, and the number its
        assignment gave (None: none)."""
        rep = self.replicas.pop(slot, None) or Replica(slot)
        told = self._told_epochs.pop(slot, None)
        if told is not None and older_owner((rep.epoch, 0), (told, 0)):
            # the replica is older than the switch (or missing: epoch 0), e.g. dropped when a
            # configuration made this NF a backup again before the controller's Promote came
            # again; owned at the replica's epoch, the slot's deltas would be refused by the
            # new backup, told the switch's epoch by AssignSlots, as a former owner's, and its
            # output held for good (docs/protocols.md §4)
            rep.epoch = told
        self._not_backed_up(slot)
        return rep, self._next_seq.pop(slot, None)

    def clear(self) -> None:
        """Nothing held (the NF became a backup or a spare: `Worker.set_role`)."""
        self.replicas.clear()
        self._backing.clear()
        self._backed_up.clear()
        self._adoptions.clear()
        self._to_promote.clear()
        self._told_epochs.clear()
        self._next_seq.clear()
