"""The cluster state's phase table and invariants (controlplane/cluster_state.py)."""

from __future__ import annotations

import pytest

from controlplane.cluster_state import (
    TRANSITIONS,
    ClusterState,
    NfPhase,
    StateViolation,
)

pytestmark = pytest.mark.unit
P = NfPhase


def phase(s: ClusterState, nf: int) -> NfPhase:
    return s.nfs[nf]


def test_an_nf_starts_new_and_a_configuration_makes_it_configured():
    s = ClusterState({1: 2}, strict=True)
    assert s.nfs[1] is P.NEW and not s.nfs.ever_configured(1)
    s.nfs.to(1, P.CONFIGURED)
    assert s.nfs.configured(1) and s.nfs.ever_configured(1)


@pytest.mark.parametrize("old,new", [
    (old, new) for old in P for new in P if old is not new and new not in TRANSITIONS[old]])
def test_every_transition_outside_the_table_raises_when_strict(old: NfPhase, new: NfPhase):
    s = ClusterState({}, strict=True)
    s.nfs._phase[7] = old  # (set up the phase under test directly)
    with pytest.raises(StateViolation):
        s.nfs.to(7, new)


@pytest.mark.parametrize("old,new", [(old, new) for old in P for new in P if new in TRANSITIONS[old]])
def test_every_transition_of_the_table_is_taken_without_a_violation(old: NfPhase, new: NfPhase):
    s = ClusterState({}, strict=True)
    s.nfs._phase[7] = old
    s.nfs.to(7, new)
    assert s.nfs[7] is new and s.violations.count == 0


def test_a_running_controller_counts_an_illegal_transition_and_keeps_it():
    s = ClusterState({})  # not strict: what nfc-controller runs with
    s.nfs.to(3, P.ORPHAN)  # NEW -> ORPHAN: no NF that never held state is an orphan
    assert s.violations.count == 1 and s.nfs[3] is P.ORPHAN


def test_unsettle_and_settle_move_only_configured_and_unsettled_nfs():
    s = ClusterState({}, strict=True)
    s.nfs.unsettle(1)
    assert phase(s, 1) is P.NEW  # a "down" of an NF never configured changes nothing
    s.nfs.to(1, P.CONFIGURED)
    s.nfs.unsettle(1)
    assert phase(s, 1) is P.UNSETTLED
    s.nfs.to(1, P.ACTED_ON)
    s.nfs.settle(1)  # a false alarm does not undo a fail-over: its return reconfigures it
    assert phase(s, 1) is P.ACTED_ON
    s.nfs.to(1, P.CONFIGURED)
    assert s.nfs.in_phase(P.CONFIGURED) == {1}


def test_a_resumed_map_marks_its_nfs_as_holding_state():
    s = ClusterState({1: 2, 3: None}, strict=True)
    s.nfs.to(3, P.CONFIGURED)
    s.nfs.holds_state([1, 2, 3])
    assert (s.nfs[1], s.nfs[2], s.nfs[3]) == (P.UNSETTLED, P.UNSETTLED, P.CONFIGURED)


def test_a_fail_over_hands_the_group_to_the_promoted_backup():
    s = ClusterState({1: 3, 2: 4}, strict=True)
    s.hand_over(1, 3, 5)
    assert s.pairs == {2: 4, 3: 5} and s.groups == {2: 2, 3: 1}
    assert s.primary_of_group(1) == 3


def test_a_new_primary_whose_id_is_a_group_in_use_gets_the_next_free_group():
    s = ClusterState({1: 3}, strict=True)
    s.hand_over(1, 3, None)  # NF 3 now uses group 1
    assert s.set_pair(1, 5) == 4  # NF 1 back as a primary: group 1 is taken
    assert s.retire(1) == 4 and 1 not in s.pairs and 1 not in s.groups


@pytest.mark.parametrize("pairs,broken", [
    ({1: 1}, "its own backup"),
    ({1: 3, 2: 3}, "backs up NF 1 and NF 2"),
    ({1: 2, 2: None}, "is a primary"),
])
def test_a_broken_invariant_raises_when_strict(pairs: dict[int, int | None], broken: str):
    with pytest.raises(StateViolation, match=broken):
        ClusterState(pairs, strict=True)


def test_a_pair_change_that_breaks_an_invariant_is_caught_where_it_is_made():
    s = ClusterState({1: 3, 2: 4}, strict=True)
    with pytest.raises(StateViolation, match="backs up"):
        s.set_pair(2, 3)
    lenient = ClusterState({1: 3, 2: 4})
    lenient.set_pair(2, 3)
    assert lenient.violations.count == 1
