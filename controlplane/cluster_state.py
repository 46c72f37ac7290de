"""The cluster's state as the controller holds it: one object, its invariants checked in one place.

`ClusterState` owns the primary/backup pairs, each primary's replica group, the backups armed
to take over by themselves, and one lifecycle phase per NF (`NfPhase`, with its transition
table `TRANSITIONS`). Every change goes through a method here, which checks the transition (a
phase) or the invariants (the pairs and groups) after it; the controller's protocols decide
*what* changes (controlplane/failover.py, migration.py, spare_pool.py, nf_lifecycle.py), this
module only whether the result is a state the protocols allow (docs/protocols.md §4.5).

A violation is logged, counted (`violations`, in the controller's status and metrics) and the
change is kept: a running controller that refused half a fail-over would leave slots without
an owner, which is worse than a state its table did not foresee. With `strict=True` (unit
tests, the simulation) a violation raises `StateViolation` instead, so a test fails on it.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Iterable

LOG = logging.getLogger(__name__)


class NfPhase(enum.Enum):
    """Where an NF is in its life as the controller sees it (one per NF)."""

    NEW = "new"  # never configured: it holds no state, so its "down" is not acted on
    CONFIGURED = "configured"  # configured from the current state (role, slots, peers)
    # it may hold state but its configuration is not known current: suspected down, coming
    # back (a reconfiguration under way), or found in a slot map resumed from etcd
    UNSETTLED = "unsettled"
    # a primary confirmed dead whose fail-over found no live backup: it keeps its slots, and
    # its fail-over is tried again when its backup answers (or it comes back itself)
    ORPHAN = "orphan"
    # failed over, or replaced as a backup, since it was last configured: it holds a role it
    # must lose, so when it answers again it is configured anew (a spare)
    ACTED_ON = "acted_on"


P = NfPhase
# phase -> the phases it may go to (staying in a phase is always allowed, and is no transition)
TRANSITIONS: dict[NfPhase, frozenset[NfPhase]] = {
    P.NEW: frozenset({P.CONFIGURED, P.UNSETTLED}),  # configured; found in a resumed map
    # suspected or back (reconfigured); failed over or replaced while it answered again
    P.CONFIGURED: frozenset({P.UNSETTLED, P.ACTED_ON}),
    # false alarm or reconfigured; fail-over found no live backup; failed over or replaced
    P.UNSETTLED: frozenset({P.CONFIGURED, P.ORPHAN, P.ACTED_ON}),
    # false alarm (same process) or reconfigured; a new process whose fail-over is retried;
    # failed over when its backup answered
    P.ORPHAN: frozenset({P.CONFIGURED, P.UNSETTLED, P.ACTED_ON}),
    P.ACTED_ON: frozenset({P.CONFIGURED}),  # configured anew (a spare)
}


class StateViolation(RuntimeError):
    """An illegal phase transition or a broken invariant (raised in strict mode only)."""


class ViolationSink:
    """Where violations go: logged and counted, or raised (`strict`)."""

    def __init__(self, strict: bool = False) -> None:
        self.strict = strict
        self.count = 0

    def __call__(self, what: str) -> None:
        self.count += 1
        if self.strict:
            raise StateViolation(what)
        LOG.error("cluster state: %s (kept; counted)", what)


class NfPhases:
    """One `NfPhase` per NF id (NEW unless set) and its checked transitions."""

    def __init__(self, on_violation: ViolationSink) -> None:
        self._phase: dict[int, NfPhase] = {}
        self._violation = on_violation
        # time.monotonic() of the first configuration of each NF's current process (the start
        # of its start-up grace, controlplane/nf_lifecycle.py `_really_down`)
        self._first_configured: dict[int, float] = {}

    def __getitem__(self, nf: int) -> NfPhase:
        return self._phase.get(nf, NfPhase.NEW)

    def to(self, nf: int, new: NfPhase) -> None:
        """Move `nf` to phase `new` (checked against `TRANSITIONS`)."""
        old = self[nf]
        if old is new:
            return
        if new not in TRANSITIONS[old]:
            self._violation(f"NF {nf}: {old.value} -> {new.value} is not a transition")
        self._phase[nf] = new
        if new is NfPhase.CONFIGURED:
            self._first_configured.setdefault(nf, time.monotonic())

    def new_process(self, nf: int) -> None:
        """`nf` restarted: its next configuration starts a new start-up grace."""
        self._first_configured.pop(nf, None)

    def since_first_configured(self, nf: int) -> float | None:
        """Seconds since the first configuration of `nf`'s current process (None: not yet)."""
        at = self._first_configured.get(nf)
        return None if at is None else time.monotonic() - at

    def unsettle(self, nf: int) -> None:
        """A configured NF was suspected, or answers again: its configuration is not current."""
        if self[nf] is NfPhase.CONFIGURED:
            self.to(nf, NfPhase.UNSETTLED)

    def settle(self, nf: int) -> None:
        """A suspicion came to nothing: an unsettled NF keeps its configuration (an orphan or
        an NF acted on stays so: its return is handled by its "up")."""
        if self[nf] is NfPhase.UNSETTLED:
            self.to(nf, NfPhase.CONFIGURED)

    def holds_state(self, nfs: Iterable[int]) -> None:
        """NFs of a slot map resumed from etcd may hold state: NEW ones become UNSETTLED."""
        for nf in nfs:
            if self[nf] is NfPhase.NEW:
                self.to(nf, NfPhase.UNSETTLED)

    def ever_configured(self, nf: int) -> bool:
        """It may hold state (its death is acted on)."""
        return self[nf] is not NfPhase.NEW

    def configured(self, nf: int) -> bool:
        return self[nf] is NfPhase.CONFIGURED

    def in_phase(self, phase: NfPhase) -> frozenset[int]:
        return frozenset(nf for nf, p in self._phase.items() if p is phase)


class ClusterState:
    """Pairs, replica groups, armed backups and NF phases (see the module docstring)."""

    def __init__(self, pairs: dict[int, int | None], *, strict: bool = False) -> None:
        self.violations = ViolationSink(strict)
        self.pairs: dict[int, int | None] = dict(pairs)  # primary -> its backup (or None)
        # each primary's replica group (multicast group, the switch's `slot_owner` points at it):
        # its own id at first; a promoted backup takes over its dead primary's group
        self.groups: dict[int, int] = {p: p for p in self.pairs}
        # backups armed to take over by themselves: backup -> (its primary, its successor or
        # 0), as last sent (controlplane/takeover_plan.py). A record of what each backup was
        # told, not a phase: it is compared with the wanted plans every round, and may lag the
        # pairs by one round (so no invariant ties it to them)
        self.armed: dict[int, tuple[int, int]] = {}
        self.nfs = NfPhases(self.violations)
        self.check_invariants()

    # -- reads ------------------------------------------------------------------------------------
    def backups(self) -> set[int]:
        return {b for b in self.pairs.values() if b is not None}

    def primary_of_group(self, group: int) -> int:
        """The primary whose replica group is `group` (after fail-overs, its promoted backup)."""
        for primary in self.pairs:
            if self.groups.get(primary, primary) == group:
                return primary
        raise ValueError(f"no primary holds replica group {group}")

    # -- changes ----------------------------------------------------------------------------------
    def load(self, pairs: dict[int, int | None] | None, groups: dict[int, int] | None) -> None:
        """Pairs and groups as persisted (etcd), each kept as it is when none was stored."""
        if pairs:
            self.pairs = dict(pairs)
        if groups:
            self.groups = dict(groups)
        self.check_invariants()

    def hand_over(self, dead: int, promoted: int, backup: int | None) -> None:
        """A fail-over: `promoted` takes the dead primary's group, with `backup`."""
        self.groups[promoted] = self.groups.pop(dead)
        self.pairs.pop(dead, None)
        self.pairs[promoted] = backup
        self.check_invariants()

    def set_pair(self, primary: int, backup: int | None) -> int:
        """`primary` is a primary with `backup`; returns its replica group (a new primary gets
        its own id, or the next free one when a promoted NF already uses it)."""
        self.pairs[primary] = backup
        group = self.groups.get(primary)
        if group is None:
            used = set(self.groups.values())
            group = primary if primary not in used else max(used | set(self.pairs)) + 1
            self.groups[primary] = group
        self.check_invariants()
        return group

    def retire(self, primary: int) -> int | None:
        """A drained primary is one no more: its pair and group go; returns the group."""
        self.pairs.pop(primary, None)
        group = self.groups.pop(primary, None)
        self.check_invariants()
        return group

    def arm(self, backup: int, plan: tuple[int, int]) -> None:
        self.armed[backup] = plan

    def disarm(self, backup: int) -> tuple[int, int] | None:
        return self.armed.pop(backup, None)

    # -- invariants -------------------------------------------------------------------------------
    def broken_invariants(self) -> list[str]:
        """What is wrong with the pairs and groups (empty: nothing)."""
        out = []
        seen: dict[int, int] = {}
        for primary, backup in self.pairs.items():
            if backup is None:
                continue
            if backup == primary:
                out.append(f"NF {primary} is its own backup")
            elif backup in self.pairs:
                out.append(f"NF {backup}, backup of NF {primary}, is a primary")
            if backup in seen:
                out.append(f"NF {backup} backs up NF {seen[backup]} and NF {primary}")
            seen[backup] = primary
        missing = [p for p in self.pairs if p not in self.groups]
        if missing:
            out.append(f"primaries without a replica group: {missing}")
        if len(set(self.groups.values())) != len(self.groups):
            out.append(f"two primaries share a replica group: {self.groups}")
        return out

    def check_invariants(self) -> None:
        """Report each broken invariant (logged and counted, or raised when strict)."""
        for what in self.broken_invariants():
            self.violations(what)
