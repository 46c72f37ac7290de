"""Fail-over of a dead primary A to its backup A', in a constant number of switch writes.

The failure detection unit (`NfRegistry`: the NF's control connection closing, or missed
heartbeats, each confirmed by one probe) declares A down; then:

1. a new backup C for A' is chosen from A's cluster, on another node than A', alive and idle:
   a spare of the pool first, else an NF that backs up nobody (`choose_backup`); none if there
   is no such NF, and the result says so (`FailoverResult.new_backup is None`);
2. C is told it backs up A's slots for A' (`AssignSlots(as_backup, primary=A')`) while A' is
   given C as its backup (`SetBackup`): A''s output waits for C's acks from now on, so C holds
   the full state before any further output leaves;
3. A' is promoted (`Promote(slots, dead=A)`): it sends again the output A may not have released
   (its log of A's batches; the switch forwards each input's output once, so what had left is
   dropped there), replays its buffered input beyond the last commit and becomes primary; at
   the same time A's replica group is rewritten in place to {A' rid 1, C rid 2}: ONE switch
   write whatever the number of slots, since every slot of A points at that group. Epochs do
   not change (the output dedup's watermark carries over);
4. only then are the cluster's views sent without A, and does the controller's state change:
   A' owns A's slots and A's group, C is A''s backup (persisted in etcd). If a step fails,
   nothing of the controller's state has changed and the fail-over is tried again with another
   backup, then without one.

The promotion is the critical path (A''s output waits for it): nothing else goes to A' before
`Promote`, and the result's `timeline_ms` says when each step ended, counted from the first
evidence of the failure. A backup only suspected (missed heartbeats) is probed and promoted if
it answers; a primary left without a live backup stays an orphan the controller retries
(phase `ORPHAN`, controlplane/cluster_state.py), and `state_lost` records a double fault that lost the state.

A dead backup is replaced the same way (steps 1-2 and its primary's group), so a primary whose
backup died does not hold its output forever. A dead spare only leaves the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from finsy.p4client import P4ClientError

from contract.proto import nf_control_pb2 as pb
from contract.roles import NfRole
from controlplane.cluster_state import NfPhase
from controlplane.cluster_view import ClusterView
from controlplane.migration import NotPrimaryError
from controlplane.nf_registry import NfControlError
from controlplane.slot_map import SlotMap

LOG = logging.getLogger(__name__)

PROMOTE_TIMEOUT = 10.0
PROMOTE_ATTEMPT = 2.0  # a Promote unanswered this long is asked again (within PROMOTE_TIMEOUT)
ASSIGN_ATTEMPT, ASSIGN_TIMEOUT = 1.0, 3.0  # the new backup's AssignSlots, likewise


@dataclass(frozen=True)
class FailoverResult:
    """What one fail-over did, for the API, the logs and the scenario's summary."""

    dead: int
    promoted: int | None      # A' (None: A had no backup, its slots stay with the dead NF);
                              # for a dead backup: its primary, which gets the new backup
    new_backup: int | None    # C (None: no NF qualified; A' runs without a backup)
    slots: int
    replayed: int = 0
    seconds: float = 0.0      # from the confirmed down event to A' promoted
    ok: bool = True
    error: str = ""
    at: float = 0.0
    kind: str = "primary"     # "primary": a fail-over; "backup": a dead backup replaced;
                              # "protect": a backup given; "lost": a double fault's state lost
    steps_ms: dict[str, float] = field(default_factory=dict)  # where the time went
    # ms from the first evidence of the failure (`suspected_at`: the connection closing, the
    # first missed heartbeat) to each step: confirmed, decided, group, promoted, persisted
    timeline_ms: dict[str, float] = field(default_factory=dict)
    suspected_at: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class BackupChoiceView(ClusterView, Protocol):
    """What choosing a backup reads: the configuration, the NFs' liveness, the cluster state."""


class FailoverHost(BackupChoiceView, Protocol):
    """What a fail-over reads and the building blocks it runs on (`ControllerCore` is one):
    the slot map, the confirm deadline, the epochs an undone move could not tell, the NFs' role
    locks and the pair and group writes (switch and etcd)."""

    @property
    def slot_map(self) -> SlotMap: ...
    @property
    def confirm_timeout(self) -> float: ...
    @property
    def untold_epochs(self) -> dict[int, dict[int, int]]: ...
    def role_lock(self, nf_id: int) -> asyncio.Lock: ...
    async def rewrite_group(self, dead: int, promoted: int, backup: int | None) -> None: ...
    async def hand_over(self, dead: int, promoted: int, backup: int | None) -> None: ...
    async def journal_failover(self, dead: int, promoted: int) -> None: ...
    async def set_pair(self, primary: int, backup: int | None) -> None: ...
    async def copies_to(self, primary: int, backup: int) -> None: ...


def choose_backup(ctl: BackupChoiceView, primary: int, exclude: set[int],
                  prefer: int | None = None) -> int | None:
    """An idle NF of `primary`'s cluster on another node, alive: `prefer` if it qualifies (the
    successor a backup was armed with, which it may use already), else a spare first, else an
    NF that is neither a primary nor a live primary's backup."""
    me = ctl.cfg.nf(primary)
    pairs = ctl.state.pairs
    busy = set(pairs) | {b for p, b in pairs.items() if b is not None and p not in exclude}
    candidates = []
    for nf in ctl.cfg.cluster_members(me.cluster):
        state = ctl.registry.nfs[nf.id]
        if nf.id in busy or nf.id in exclude or nf.id == primary or nf.node == me.node:
            continue
        if state.declared_down or state.alive is False \
                or ctl.state.nfs[nf.id] is NfPhase.ACTED_ON:
            continue  # (failed over or replaced, not configured anew yet: it may still own slots)
        if not ctl.state.nfs.configured(nf.id):
            # its configuration is under way (it answered again after a suspicion): that
            # configuration was decided before this choice and would undo it, a `SetRole(spare)`
            # landing after our `AssignSlots(as_backup)` (seen in a busy hang run: the backup
            # dropped the copies as unowned, then was promoted and skipped their numbers)
            continue
        candidates.append((nf.id != prefer, state.role != "spare", nf.id))
    return min(candidates)[2] if candidates else None


async def _assign_backup(ctl: FailoverHost, backup: int, primary: int, slots: list[int]) -> None:
    """Tell `backup` it backs up `slots` of `primary` (kept copies, accepted deltas); a spare
    that is told so becomes a backup."""
    # asked again while unanswered: the assignment is idempotent, and one whose reply was lost
    # had acted, so trying another backup instead left two NFs told to back the slots up
    await ctl.registry.call_again(backup, "AssignSlots", pb.AssignSlotsRequest(
        slots=[pb.SlotEpoch(slot=s, epoch=ctl.slot_map.epoch(s)) for s in slots],
        as_backup=True, primary_nf_id=primary), ASSIGN_ATTEMPT, ASSIGN_TIMEOUT)
    ctl.registry.nfs[backup].role = NfRole.BACKUP


SET_BACKUP_TIMEOUT = 0.5  # a primary that does not answer within this hangs (the move lock waits)


def _role_lock(ctl: FailoverHost, nf_id: int | None) -> contextlib.AbstractAsyncContextManager[Any]:
    """`ctl.role_lock(nf_id)`, or nothing to hold when there is no such NF (no new backup)."""
    return ctl.role_lock(nf_id) if nf_id is not None else contextlib.nullcontext()


async def _set_backup(ctl: FailoverHost, primary: int, backup: int | None) -> None:
    if backup is None:
        await ctl.registry.call(primary, "SetBackup", pb.SetBackupRequest(backup_nf_id=0),
                                timeout=SET_BACKUP_TIMEOUT)
    else:
        await ctl.registry.call(primary, "SetBackup", pb.SetBackupRequest(
            backup_nf_id=backup, address=ctl.cfg.nf(backup).replication_address()),
            timeout=SET_BACKUP_TIMEOUT)


async def fail_over(ctl: FailoverHost, dead: int, since: float = 0.0,
                    confirmed_at: float = 0.0) -> FailoverResult:
    """Promote the backup of dead primary `dead` for all its slots (see the module docstring).
    `since` is the time.time() of the first evidence of the failure and `confirmed_at` of its
    confirmation (the timeline's origin and first mark)."""
    started, t0 = time.time(), time.monotonic()
    since = since or started
    timeline: dict[str, float] = {}

    def mark(name: str) -> None:
        timeline[name] = round((time.time() - since) * 1000, 2)

    if confirmed_at:
        timeline["confirmed"] = round((confirmed_at - since) * 1000, 2)
    mark("decided")
    slots = ctl.slot_map.slots_of(dead)
    promoted = ctl.state.pairs.get(dead)
    if promoted is not None and ctl.registry.nfs[promoted].declared_down \
            and await ctl.registry.detector.probe_hang(promoted, ctl.confirm_timeout):
        # the backup was only suspected (heartbeats missed on a loaded machine) and answers:
        # it holds the state, so it takes over (refusing would leave the slots without owner)
        LOG.warning("NF %d, backup of dead NF %d, missed heartbeats but answers: promoted", promoted,
                    dead)
    elif promoted is None or ctl.registry.nfs[promoted].declared_down:
        error = f"primary {dead} died without a live backup: its {len(slots)} slots have no owner"
        LOG.error(error)
        return FailoverResult(dead, None, None, len(slots), ok=False, error=error, at=started,
                              timeline_ms=timeline, suspected_at=since)
    try:
        # journalled before the first step: a leader that dies before the hand-over is
        # persisted leaves it to the next, which finishes it (docs/protocols.md §8, L3)
        await ctl.journal_failover(dead, promoted)
    except Exception as exc:  # (etcd without quorum: nothing of the fail-over has happened)
        error = f"fail-over not journalled: {type(exc).__name__}: {exc}"
        LOG.error("fail-over of NF %d to NF %d: %s", dead, promoted, error)
        return FailoverResult(dead, promoted, None, len(slots), ok=False, error=error,
                              at=started, timeline_ms=timeline, suspected_at=since)
    tried: set[int] = {dead}
    error = ""
    steps: dict[str, float] = {}
    armed = ctl.state.disarm(promoted)  # the successor it may have taken over with already
    while True:
        new_backup = choose_backup(ctl, promoted, exclude=tried,
                                   prefer=armed[1] if armed and armed[0] == dead else None)
        try:
            # no configuration of A' or C decided before this may land among its commands
            async with ctl.role_lock(promoted), _role_lock(ctl, new_backup):
                replayed = await _take_over(ctl, dead, promoted, new_backup, slots, steps, mark,
                                            took_over=armed == (dead, new_backup or 0))
            break
        except (NfControlError, P4ClientError, OSError, NotPrimaryError) as exc:
            error = f"{type(exc).__name__}: {exc}"
            LOG.error("fail-over of NF %d to NF %d with backup %s: %s", dead, promoted, new_backup, error)
            if new_backup is None:  # not even without a new backup: A' or the switch fails
                return FailoverResult(dead, promoted, None, len(slots), ok=False, error=error,
                                      seconds=round(time.monotonic() - t0, 4), at=started,
                                      timeline_ms=timeline, suspected_at=since)
            tried.add(new_backup)
    seconds = round(time.monotonic() - t0, 4)
    LOG.warning("fail-over: NF %d dead, NF %d owns its %d slots (replayed %d) with backup %s in %.3f s;"
                " ms since the first evidence: %s", dead, promoted, len(slots), replayed,
                new_backup if new_backup is not None else "none (no NF qualifies)", seconds,
                " ".join(f"{k} {v}" for k, v in timeline.items()))
    return FailoverResult(dead, promoted, new_backup, len(slots), replayed, seconds, True, "", started,
                          steps_ms=steps, timeline_ms=timeline, suspected_at=since)


async def _take_over(ctl: FailoverHost, dead: int, promoted: int, backup: int | None,
                     slots: list[int], steps: dict[str, float],
                     mark: Callable[[str], None] = lambda _name: None,
                     took_over: bool = False) -> int:
    """Steps 2-4 of the module docstring; returns how many packets A' replayed. `steps` gets
    each step's duration in ms, `mark` each step's end on the fail-over's timeline."""
    reg = ctl.registry
    t = t0 = time.monotonic()

    def lap(name: str) -> None:
        nonlocal t
        now = time.monotonic()
        steps[name] = round((now - t) * 1000, 2)
        t = now

    async def backup_then_group() -> None:
        # C keeps the copies the rewritten group sends it only once it knows its slots
        if backup is not None:
            await _assign_backup(ctl, backup, promoted, slots)
            lap("new_backup")
        await ctl.rewrite_group(dead, promoted, backup)
        lap("group")
        mark("group")

    async def promote() -> Any:
        # asked again while unanswered: a promotion told again promotes nothing twice (the
        # slots are owned already: the answer is the same), while a lost reply taken as a
        # failure made the fail-over start again with another backup, A' promoted already
        # (also while A' is declared down but only slow to answer: a starved A' carries the
        # promotion out all the same, and a fail-over given up on then had it made a backup
        # again, dropping the slots it had promoted: 8 flows wedged in a busy-host hang run)
        reply = await reg.call_again(promoted, "Promote", request, PROMOTE_ATTEMPT,
                                     PROMOTE_TIMEOUT, slow_while_down=True)
        mark("promoted")
        return reply

    # each slot's epoch: A' owns it at that epoch at least, even if its replica is gone or older
    # A only silent may be alive (a false alarm on a busy host): a promoted backup that lacks
    # its snapshot waits longer for it (nf_host/promote_wait.py)
    dead_state = reg.nfs[dead]
    request = pb.PromoteRequest(slots=slots, dead_nf_id=dead,
                                epochs=[ctl.slot_map.epoch(s) for s in slots],
                                primary_may_live=dead_state.declared_down and dead_state.silent)
    if backup is not None:
        request.backup_nf_id = backup
        request.backup_address = ctl.cfg.nf(backup).replication_address()
    # the promotion is the critical path (A''s output waits for it): nothing else is sent to
    # A' before it, and only the new backup's assignment and the group write run beside it
    if took_over:
        # A' was armed with this backup: it has taken over by itself (or does at the same
        # instant), and its first output waits for C's ack. Promote confirms it, then C is told
        # its slots: C's worker, busy with 1,024 slots, would delay that ack (§4.3)
        reply = await promote()
        await backup_then_group()
    else:
        reply, _ = await asyncio.gather(promote(), backup_then_group())
    steps["promote"] = round((time.monotonic() - t0) * 1000, 2)
    # then the cluster's view without A: its peers refuse whatever A may still send (a primary
    # failed over while alive must not feed the replicas A' now feeds; A''s deltas, of a newer
    # owner generation, already supersede A's in the replicas)
    await reg.refresh_peers(ctl.cfg.nf(dead).cluster)
    await ctl.hand_over(dead, promoted, backup)
    reg.nfs[promoted].role = NfRole.PRIMARY
    lap("persist")
    mark("persisted")
    await _tell_epochs(ctl, dead, promoted)
    return int(reply.replayed)


async def _tell_epochs(ctl: FailoverHost, dead: int, promoted: int) -> None:
    """Slots given back to `dead` by an undone move while it could not be told (it was dying):
    their promoted owner learns their epoch (its replica still has the one before the move).
    Best effort, after everything else: nothing waits for it."""
    untold = {s: e for s, e in ctl.untold_epochs.pop(dead, {}).items()
              if ctl.slot_map.owner(s) == promoted and ctl.slot_map.epoch(s) == e}
    if not untold:
        return
    try:
        await ctl.registry.call(promoted, "AssignSlots", pb.AssignSlotsRequest(
            slots=[pb.SlotEpoch(slot=s, epoch=e) for s, e in sorted(untold.items())]))
    except NfControlError as exc:
        LOG.warning("NF %d not told the epochs of slots %s: %s", promoted, sorted(untold), exc)


def state_lost(ctl: FailoverHost, dead: int) -> FailoverResult:
    """The record of a double fault: primary `dead` died without a live backup (`fail_over`
    refused) and came back as a new process, so the state of its slots is gone. It owns them
    again from empty state (nobody else can); the record makes the loss visible (status,
    `nfc status`, the fail-over bench counts it as a fault not handled)."""
    slots = len(ctl.slot_map.slots_of(dead))
    error = (f"NF {dead} died without a live backup and restarted: the state of its {slots} slots "
             "is lost (it owns them again, from empty state)")
    LOG.error(error)
    return FailoverResult(dead, None, None, slots, ok=False, error=error, at=time.time(),
                          kind="lost")


async def replace_backup(ctl: FailoverHost, dead_backup: int) -> FailoverResult | None:
    """A backup died: give its primary a new backup (or none), so its output is not held forever."""
    primary = next((p for p, b in ctl.state.pairs.items() if b == dead_backup), None)
    if primary is None:
        LOG.warning("NF %d (not a backup of a live primary) is down: it leaves the pool", dead_backup)
        return None
    return await give_backup(ctl, primary, dead_backup)


async def protect(ctl: FailoverHost) -> list[FailoverResult]:
    """Give every live primary that runs without a backup one from the pool, if one qualifies
    now (a spare that came back, or was added): called when an NF joins the pool."""
    done = []
    for primary, backup in sorted(ctl.state.pairs.items()):
        if backup is None and not ctl.registry.nfs[primary].declared_down \
                and choose_backup(ctl, primary, exclude=set()) is not None:
            done.append(await give_backup(ctl, primary, None))
    return done


async def give_backup(ctl: FailoverHost, primary: int, dead_backup: int | None) -> FailoverResult:
    """Give `primary` a new backup from the pool (or none if no NF qualifies), replacing
    `dead_backup` (None: it had none): assign the slots, tell the primary, then rewrite its group
    and record the pair. The primary is told first: until it answers, its output is committed
    with (and logged at) its old backup, which must stay the one a fail-over promotes; if it
    does not answer (it hangs too), nothing is recorded and its own fail-over finds the old
    backup (a backup only suspected is probed and promoted if it answers). A primary that had
    no backup gets the copies at the new one first: told first, it would commit with the new
    backup batches of packets whose copies went nowhere, and lose them if it died before that
    backup's ack (seen in a hang run: 12 packets in the window between the two writes)."""
    started, t0 = time.time(), time.monotonic()
    new_backup = choose_backup(ctl, primary, exclude=set() if dead_backup is None else {dead_backup})
    slots = ctl.slot_map.slots_of(primary)
    error = ""
    try:
        async with _role_lock(ctl, new_backup):  # (as in `fail_over`)
            if new_backup is not None:
                await _assign_backup(ctl, new_backup, primary, slots)
                if dead_backup is None:
                    await ctl.copies_to(primary, new_backup)
            await _set_backup(ctl, primary, new_backup)
            await ctl.set_pair(primary, new_backup)
    except (NfControlError, P4ClientError, OSError, NotPrimaryError) as exc:
        error = f"{type(exc).__name__}: {exc}"
        LOG.error("new backup for NF %d: %s", primary, error)
    LOG.warning("%s of NF %d: new backup %s",
                f"backup {dead_backup}" if dead_backup else "no backup",
                primary, new_backup if new_backup is not None else "none")
    return FailoverResult(dead_backup or 0, primary, new_backup, len(slots), 0,
                          round(time.monotonic() - t0, 4), not error, error, started,
                          "backup" if dead_backup else "protect")
