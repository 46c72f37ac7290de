"""The roles an NF and a slot hold, one definition for the controller and the NF runtime.

`Role` and `SlotRole` mirror the enums of the NF control API (`contract/proto/nf_control.proto`):
the numbers are the wire's. `NfRole` is the controller's word for an NF's configured role (its
configuration files, its HTTP API and its JSON): a `StrEnum`, so it is its string everywhere a
string is written or compared; `NfRole.runtime_role` is the `Role` the NF is told.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum


class SlotRole(IntEnum):
    """Mirrors `SlotRole` in nf_control.proto."""

    PRIMARY = 1
    BACKUP = 2
    ADOPTING = 3
    RELEASED = 4
    REPLICA = 5


# The owned slot's lifecycle (docs/protocols.md §5): the only role changes a worker may make to a
# slot it holds in `slots`, each by `SlotRuntime.become` (nf_host/worker_types.py), which refuses
# any other. (BACKUP and REPLICA are the roles of slots held as replicas, reported by Status;
# never an owned slot's.)
#   PRIMARY -> RELEASED: a Release sends the transfer; PRIMARY -> PRIMARY: owned anew from a
#   replica's or a transfer's state. ADOPTING -> PRIMARY: the transfer (and marker) arrived;
#   ADOPTING -> RELEASED: the move's fence cancelled the adoption (given back to the old owner).
#   RELEASED -> PRIMARY: the adopter refused the transfer, or the controller took the slot back.
SLOT_TRANSITIONS: dict[SlotRole, frozenset[SlotRole]] = {
    SlotRole.PRIMARY: frozenset({SlotRole.PRIMARY, SlotRole.RELEASED}),
    SlotRole.ADOPTING: frozenset({SlotRole.PRIMARY, SlotRole.RELEASED}),
    SlotRole.RELEASED: frozenset({SlotRole.PRIMARY}),
}


class SlotTransitionError(RuntimeError):
    """A role change of an owned slot that its lifecycle does not have (a bug, never input)."""


class Role(IntEnum):
    """Mirrors `Role` in nf_control.proto."""

    PRIMARY = 1
    BACKUP = 2
    IDLE = 3


class NfRole(StrEnum):
    """An NF's role in the controller's configuration and API (`nfs[].role`)."""

    PRIMARY = "primary"
    BACKUP = "backup"
    SPARE = "spare"

    @property
    def runtime_role(self) -> Role:
        """The role the NF runtime holds for it (a spare idles)."""
        return {NfRole.PRIMARY: Role.PRIMARY, NfRole.BACKUP: Role.BACKUP}.get(self, Role.IDLE)
