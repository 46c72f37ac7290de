"""The fail-over journal (docs/protocols.md §8, L3): a fail-over of dead primary A to its backup
A' is written to etcd (`SlotStore.save_failover`) before its first step (A''s `Promote`, the
new backup's assignment, the rewrite of A's replica group), and cleared once `groups` and
`pairs` say A' owns A's group (one etcd transaction, `SlotStore.save_handover`).

A leader that dies (or stops, its lease lost in an etcd outage) between the two leaves the
entry: A' may be promoted and A's group rewritten while etcd still pairs A with its backup A'.
The next leader resumes that entry (`resume`) and, before it configures A or A' from the pairs
in etcd (which would make A' a backup that drops what it owns, the state rolled back), fails A
over again (`unfinished`, asked by `NfLifecycle._restart_unseen`, and `pending`, at every
`_on_primary`): `Promote` is idempotent, and the fail-over's own hand-over clears the entry. An entry whose pairs no longer pair A with A'
is over (persisted, or overtaken) and is cleared.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Protocol

from controlplane.slot_store import SlotStore

LOG = logging.getLogger("controlplane.controller")


class JournalHost(Protocol):
    """What the journal reads and keeps (`ControllerCore` is one)."""

    store: SlotStore | None
    open_failovers: dict[int, int]  # dead primary -> the backup its fail-over promotes

    @property
    def pairs(self) -> dict[int, int | None]: ...


async def journal(ctl: JournalHost, dead: int, promoted: int) -> None:
    """Journal the fail-over of `dead` to `promoted` before its first step (etcd first: a
    failure raises, and nothing of the fail-over has happened)."""
    if ctl.store is not None:
        await ctl.store.save_failover(dead, promoted)
    ctl.open_failovers[dead] = promoted


async def close(ctl: JournalHost, dead: int) -> None:
    """The fail-over of `dead` is persisted: its entry goes. One etcd did not delete is found
    over by the next leader (the pairs no longer pair `dead` with its promoted backup)."""
    ctl.open_failovers.pop(dead, None)
    if ctl.store is not None:
        try:
            await ctl.store.clear_failover(dead)
        except Exception as exc:
            LOG.warning("journalled fail-over of NF %d not cleared: %s", dead, exc)


async def resume(ctl: JournalHost) -> None:
    """The fail-overs a previous leader journalled and did not persist (see the module
    docstring): kept in `open_failovers` while the resumed pairs still pair the dead primary
    with the backup it promoted; any other entry is over and cleared."""
    assert ctl.store is not None
    ctl.open_failovers = {}
    for dead, promoted in sorted((await ctl.store.load_failovers()).items()):
        if ctl.pairs.get(dead) != promoted:
            LOG.info("journalled fail-over of NF %d to NF %d is over: cleared", dead, promoted)
            with contextlib.suppress(Exception):
                await ctl.store.clear_failover(dead)
            continue
        LOG.warning("journalled fail-over of NF %d to NF %d not persisted: finishing it", dead,
                    promoted)
        ctl.open_failovers[dead] = promoted


def pending(ctl: JournalHost) -> list[int]:
    """The dead primaries of the journalled fail-overs the pairs do not hold yet: a previous
    leader's, or one of ours that failed half-way (its `Promote` done, its group write refused
    by a restarting switch: two NFs owned the dead primary's slots, simulation seed 2 of
    `--set switch_restarts=0.5`). Finished when this controller becomes the switch's primary."""
    return [dead for dead, promoted in sorted(ctl.open_failovers.items())
            if ctl.pairs.get(dead) == promoted]


def unfinished(ctl: JournalHost, nf_id: int) -> int | None:
    """The dead primary of a journalled fail-over that `nf_id` is part of (the dead primary or
    its promoted backup) and that the pairs do not hold yet: it is failed over before either
    is configured. None if there is none."""
    for dead, promoted in sorted(ctl.open_failovers.items()):
        if nf_id in (dead, promoted) and ctl.pairs.get(dead) == promoted:
            return dead
    return None
