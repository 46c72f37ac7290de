"""An owned slot's role changes only along its lifecycle (`SLOT_TRANSITIONS`); the worker's paths
that change roles (release, adopt, give back, take back) all go through `SlotRuntime.become`."""

from __future__ import annotations

import itertools

import pytest

from contract.roles import SLOT_TRANSITIONS, SlotRole, SlotTransitionError
from contract.shim import Shim
from nf_host.reorder import Sequencer
from nf_host.state_store import SlotState
from nf_host.worker_types import SlotRuntime

pytestmark = pytest.mark.unit


def slot(role: SlotRole) -> SlotRuntime:
    return SlotRuntime(7, 1, role, Sequencer[tuple[Shim, bytes]](capacity=8, gap_timeout=0.05),
                       SlotState(7))


def test_a_move_and_its_undo_follow_the_lifecycle() -> None:
    old, new = slot(SlotRole.PRIMARY), slot(SlotRole.ADOPTING)
    old.become(SlotRole.RELEASED)    # Release: the transfer leaves
    new.become(SlotRole.PRIMARY)     # the adopter owns it once the transfer and marker arrive
    old.become(SlotRole.PRIMARY)     # the controller takes it back (a move undone)
    new.become(SlotRole.PRIMARY)     # owned anew from a transfer's state
    assert (old.role, new.role) == (SlotRole.PRIMARY, SlotRole.PRIMARY)


@pytest.mark.parametrize(("before", "after"), [
    (a, b) for a, b in itertools.product(SLOT_TRANSITIONS, SlotRole)
    if b not in SLOT_TRANSITIONS[a]])
def test_every_other_change_is_refused_and_leaves_the_role(before: SlotRole,
                                                          after: SlotRole) -> None:
    rt = slot(before)
    with pytest.raises(SlotTransitionError, match=f"{before.name} -> {after.name}"):
        rt.become(after)
    assert rt.role == before


@pytest.mark.parametrize("role", [SlotRole.BACKUP, SlotRole.REPLICA])
def test_a_replica_role_is_never_an_owned_slot(role: SlotRole) -> None:
    with pytest.raises(SlotTransitionError, match="owned slot cannot be"):
        slot(role)
