"""The backup side of the slot table (`nf_host.backup_slots.BackupSlots`): each slot held for
another NF is backed up or a peer's replica, and each event moves it as the worker's paths did
with the five separate tables it replaces (assignment, release notice, adoption, a transfer
accepted, a takeover given up, promotion)."""

from __future__ import annotations

import pytest

from contract.roles import SlotRole, SlotTransitionError
from nf_host.backup_slots import Backing, BackupSlots
from nf_host.state_store import Replica

pytestmark = pytest.mark.unit


def test_an_assigned_slot_is_backed_up_with_an_empty_replica_numbered_from_its_next_seq() -> None:
    t = BackupSlots()
    t.assign(4, epoch=3, next_seq=10)
    assert t.role(4) == SlotRole.BACKUP and t.holds(4) and t.held() == [4]
    assert t.replicas[4].epoch == 3 and t.replicas[4].last_seq == 9
    assert t.assigned_seq(4) == 10
    t.assign(6, epoch=3, next_seq=None)
    assert t.replicas[6].last_seq is None and t.assigned_seq(6) is None


def test_a_peer_replica_alone_is_a_replica_and_a_release_notice_keeps_it_unless_its_epoch() -> None:
    t = BackupSlots()
    t.replicas[5] = Replica(5, epoch=2)
    assert t.role(5) == SlotRole.REPLICA and t.role(9) is None
    t.assign(5, epoch=2, next_seq=None)
    t.released(5, None)  # a release notice: no longer backed up, the replica stays
    assert t.role(5) == SlotRole.REPLICA
    t.released(5, 7)  # a cancelled move's notice at another epoch: kept
    assert 5 in t.replicas
    t.released(5, 2)  # ... at the replica's epoch: the move's empty replica goes
    assert t.role(5) is None and not t.holds(5)


def test_adopting_and_a_transfer_accepted_leave_the_table_in_two_steps() -> None:
    t = BackupSlots()
    t.assign(8, epoch=1, next_seq=None)
    t.adopting(8)  # the replica stays: the base of a delta transfer
    assert t.role(8) == SlotRole.REPLICA
    t.transferred(8)
    assert t.role(8) is None


def test_idle_slots_wait_for_their_promotion_once() -> None:
    t = BackupSlots()
    for s in (1, 3):
        t.assign(s, epoch=1, next_seq=None)
    t.promote_later([1, 3], dead=9)
    assert t.waiting(1) and t.waiting(3) and not t.waiting(5)
    assert t.take_waiting(1) == 9
    assert not t.waiting(1) and t.take_waiting(1) is None  # promoted once only
    t.given_up(3, None)  # a takeover the controller's Promote left out
    assert not t.waiting(3) and t.role(3) == SlotRole.REPLICA  # (its assigned replica stays)


def test_a_slot_given_up_after_it_was_owned_is_a_replica_of_the_state_it_had() -> None:
    t = BackupSlots()
    t.assign(2, epoch=1, next_seq=None)
    rep = Replica(2, epoch=1, gen=1, version=12)
    t.given_up(2, rep)
    assert t.role(2) == SlotRole.REPLICA and t.replicas[2] is rep


def test_a_promoted_slot_leaves_the_table_at_least_at_the_epoch_promote_told() -> None:
    t = BackupSlots()
    t.assign(4, epoch=3, next_seq=10)
    t.told_epochs({4: 5, 6: 1})
    rep, assigned = t.promoted(4)
    assert rep.epoch == 5 and assigned == 10  # older replica: owned at the switch's epoch
    assert not t.holds(4) and t.assigned_seq(4) is None
    t.replicas[6] = Replica(6, epoch=4)
    rep, assigned = t.promoted(6)
    assert rep.epoch == 4 and assigned is None  # a newer replica keeps its own
    rep, _ = t.promoted(7)  # nothing held: an empty replica, epoch 0
    assert rep.epoch == 0 and not rep.flows


def test_clear_drops_everything_held() -> None:
    t = BackupSlots()
    t.assign(1, epoch=1, next_seq=3)
    t.promote_later([1], dead=2)
    t.told_epochs({1: 4})
    t.clear()
    assert t.held() == [] and not t.waiting(1) and t.assigned_seq(1) is None
    assert t.promoted(1)[0].epoch == 0  # the told epoch went too


def test_an_adoption_is_backed_up_unpromotable_until_started_and_outlives_our_own_adoption() -> None:
    t = BackupSlots()
    t.assign(3, epoch=2, next_seq=None, adoption=True)
    assert t.backing(3) == Backing.ADOPTION and 3 in t.backed_up and not t.promotable(3)
    t.assign(3, epoch=2, next_seq=None)  # assigned again (a new leader): still an adoption
    assert t.backing(3) == Backing.ADOPTION
    t.adopting(3)  # this NF adopts it itself while our primary's adoption is undecided
    assert t.backing(3) == Backing.ADOPTION_NOT_BACKED_UP
    assert 3 not in t.backed_up and 3 in t.adoptions and not t.promotable(3)
    t.assign(4, epoch=2, next_seq=None, adoption=True)
    t.started(4)  # our primary started it: backed up, promotable
    assert t.backing(4) == Backing.BACKUP and t.promotable(4) and 4 not in t.adoptions
    t.started(3)
    assert t.backing(3) is None and t.promotable(3)
    t.given_back(4)
    assert t.backing(4) is None and not t.holds(4)


def test_a_backing_change_outside_its_transitions_raises() -> None:
    t = BackupSlots()
    t.assign(5, epoch=1, next_seq=None)
    with pytest.raises(SlotTransitionError, match="BACKUP -> ADOPTION_NOT_BACKED_UP"):
        t._become(5, Backing.ADOPTION_NOT_BACKED_UP)  # (only an adoption outlives its backing)
    with pytest.raises(SlotTransitionError, match="None -> ADOPTION_NOT_BACKED_UP"):
        t._become(6, Backing.ADOPTION_NOT_BACKED_UP)
    assert t.backing(5) == Backing.BACKUP and t.backing(6) is None  # (nothing changed)


def test_a_given_up_takeovers_replica_goes_at_its_exact_generation_and_the_backing_stays() -> None:
    """`Released(slot, epoch, gen)`, sent by an NF that gives up a slot it took over by itself:
    the replica its deltas made goes, only at exactly that owner generation, and a slot this NF
    backs up for its own primary stays backed up (simulation, adopter kills, seed 61)."""
    b = BackupSlots()
    b.assign(5, 2, None)
    b.replicas[5] = Replica(5, epoch=2, gen=2)
    b.drop_replica(5, 2, 1)  # another generation: kept
    assert b.replicas[5].gen == 2
    b.drop_replica(5, 2, 2)
    assert 5 not in b.replicas and b.role(5) == SlotRole.BACKUP
