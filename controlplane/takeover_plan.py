"""Backups armed to take over by themselves (docs/protocols.md §4.3).

A crashed primary's sockets close as the kernel tears the process down; its backup's worker sees
its replication connection end without a goodbye at the same instant as the controller could,
but it needs no confirmation round, no `Promote` through the NF's gRPC server and no second
process woken in turn. So the controller tells every backup in advance (`SetSuccessor`) which NF
of its cluster would become its own backup if it took over: the NF `choose_backup` would pick
now (a spare of the pool first, on another node). The backup then promotes itself at once, with
that successor as its backup, and its first output waits only for the successor's ack.

The controller's own fail-over still follows (its detection and `Promote` are idempotent for a
backup that has taken over already); it picks the armed successor when that NF still qualifies,
so the successor it records is the one the backup uses, and it rewrites the replica group so the
successor gets the input copies. A backup that took over from a primary the controller still
thinks alive reports it (`took_over_from` in its status) and the controller fails that primary
over: it cannot release anything anyway, as its output waits for the acks the backup no longer
sends.

This module keeps the plans in step with the pairs and the pool: `arm_takeovers` sends
`SetSuccessor` to each backup whose plan changed (a successor of 0 when no NF qualifies: the
backup then takes over without one, as the controller's fail-over would; a primary of 0 to a
backup that no longer backs anyone up), `takeover_loop` runs it a few times a second while this controller leads.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from contract.proto import nf_control_pb2 as pb
from controlplane.failover import BackupChoiceView, choose_backup
from controlplane.nf_registry import NfControlError

LOG = logging.getLogger(__name__)

ARM_INTERVAL = 0.1  # how often the plans are compared with the pairs and the pool (s)


class _Session(Protocol):
    @property
    def is_primary(self) -> bool: ...


class TakeoverHost(BackupChoiceView, Protocol):
    """What takeover planning reads (the cluster state, whose `armed` it keeps) and whether
    this controller leads the switch."""

    @property
    def session(self) -> _Session: ...


def wanted_plans(ctl: TakeoverHost) -> tuple[dict[int, tuple[int, int]], set[int]]:
    """(backup -> (its primary, its successor or 0)) for every live pair, and the backups to
    leave alone now (their primary is down: a fail-over promotes them, which ends the plan)."""
    want: dict[int, tuple[int, int]] = {}
    busy: set[int] = set()
    nfs = ctl.registry.nfs
    for primary, backup in ctl.state.pairs.items():
        if backup is None:
            continue
        if nfs[primary].declared_down or nfs[backup].declared_down \
                or not ctl.state.nfs.configured(backup):  # (acted on, or being configured)
            busy.add(backup)
            continue
        successor = choose_backup(ctl, backup, exclude={primary})
        want[backup] = (primary, successor or 0)
    return want, busy


async def arm_takeovers(ctl: TakeoverHost) -> int:
    """Send `SetSuccessor` to every backup whose plan changed; returns how many were sent. A
    backup that does not answer is tried again on the next call."""
    want, busy = wanted_plans(ctl)
    stale = [b for b in ctl.state.armed if b not in want and b not in busy]
    calls: list[tuple[int, tuple[int, int]]] = [
        (b, plan) for b, plan in want.items() if ctl.state.armed.get(b) != plan]
    calls += [(b, (0, 0)) for b in stale if not ctl.registry.nfs[b].declared_down]
    for b in stale:
        ctl.state.disarm(b)

    async def one(backup: int, plan: tuple[int, int]) -> None:
        primary, successor = plan
        address = ctl.cfg.nf(successor).replication_address() if successor else ""
        try:
            await ctl.registry.call(backup, "SetSuccessor", pb.SetSuccessorRequest(
                primary_nf_id=primary, successor_nf_id=successor, successor_address=address),
                timeout=0.5)
        except NfControlError as exc:
            LOG.info("NF %d not armed for a takeover yet: %s", backup, exc)
            return
        if primary:
            ctl.state.arm(backup, plan)
            LOG.info("NF %d armed: takes over from NF %d with %s as backup", backup, primary,
                     f"NF {successor}" if successor else "no NF (none qualifies)")

    await asyncio.gather(*(one(b, plan) for b, plan in calls))
    return len(calls)


async def takeover_loop(ctl: TakeoverHost, interval: float = ARM_INTERVAL) -> None:
    """`arm_takeovers` every `interval` while this controller leads, forever (cancel to stop)."""
    while True:
        if ctl.session.is_primary:
            try:
                await arm_takeovers(ctl)
            except Exception:  # never let a bad round end the loop (and the controller)
                LOG.exception("arming the takeovers failed")
        await asyncio.sleep(interval)
