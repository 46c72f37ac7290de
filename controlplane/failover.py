"""Fail-over of a dead primary A to its backup A' (DESIGN.md §6 "Fail-over").

When the failure detection unit (`NfRegistry` heartbeats) declares A down:

1. a new backup C for A' is chosen: an NF of A's cluster on another node than A', alive, neither
   a primary nor backing up anyone (a spare, or a backup whose primary is gone); none if there is
   no such NF, and the status says so (`FailoverResult.new_backup is None`);
2. C is told it backs up A's slots for A' (`AssignSlots(as_backup, primary=A')`), and A''s
   multicast group is created as {(A' port, rid 1), (C port, rid 2)} (`Controller.set_pair`);
3. every slot of A is rewritten to A' with epoch + 1, in batches (`Controller.move_slots`: one
   P4Runtime write of up to 512 entries and one etcd transaction per 100 slots). Packets that reach
   A' as primary before the promotion are kept as copies and replayed (protocols.md §3);
4. A' is given its backup (`SetBackup(C)`, or none) and promoted (`Promote(slots, dead=A)`): it
   replays its buffered input beyond the last commit and becomes primary; the new link to C starts
   with a full snapshot, and promoted slots are sent whole with the next batch, so A' sends C the
   full state before any further output is released.

A dead backup is replaced the same way (steps 1-2 and `SetBackup` on its primary), so a primary
whose backup died does not hold its output forever.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from controlplane.nf_registry import NfControlError
from nf_host.proto import nf_control_pb2 as pb

if TYPE_CHECKING:
    from controlplane.controller import Controller

LOG = logging.getLogger(__name__)

PROMOTE_TIMEOUT = 10.0


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
    kind: str = "primary"     # "primary": a fail-over; "backup": a dead backup replaced

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def choose_backup(ctl: Controller, primary: int, exclude: set[int]) -> int | None:
    """An NF of `primary`'s cluster on another node, alive, neither primary nor a live primary's backup."""
    me = ctl.cfg.nf(primary)
    busy = set(ctl.pairs) | {b for p, b in ctl.pairs.items() if b is not None and p not in exclude}
    for nf in ctl.cfg.cluster_members(me.cluster):
        state = ctl.registry.nfs[nf.id]
        if nf.id in busy or nf.id in exclude or nf.id == primary or nf.node == me.node:
            continue
        if state.declared_down or state.alive is False:
            continue
        return nf.id
    return None


async def _give_backup(ctl: Controller, primary: int, backup: int | None, slots: list[int]) -> None:
    """Tell `backup` it backs up `slots` of `primary` and write `primary`'s multicast group."""
    if backup is not None:
        await ctl.registry.call(backup, "SetRole", pb.SetRoleRequest(role=pb.BACKUP))
        await ctl.registry.call(backup, "AssignSlots", pb.AssignSlotsRequest(
            slots=[pb.SlotEpoch(slot=s, epoch=ctl.slot_map.epoch(s)) for s in slots],
            as_backup=True, primary_nf_id=primary))
        ctl.registry.nfs[backup].role = "backup"
    await ctl.set_pair(primary, backup)


async def _set_backup(ctl: Controller, primary: int, backup: int | None) -> None:
    if backup is None:
        await ctl.registry.call(primary, "SetBackup", pb.SetBackupRequest(backup_nf_id=0))
    else:
        await ctl.registry.call(primary, "SetBackup", pb.SetBackupRequest(
            backup_nf_id=backup, address=ctl.cfg.nf(backup).replication_address()))


async def fail_over(ctl: Controller, dead: int) -> FailoverResult:
    """Promote the backup of dead primary `dead` for all its slots (see the module docstring)."""
    started, t0 = time.time(), time.monotonic()
    slots = ctl.slot_map.slots_of(dead)
    promoted = ctl.pairs.get(dead)
    if promoted is None or ctl.registry.nfs[promoted].declared_down:
        error = f"primary {dead} died without a live backup: its {len(slots)} slots have no owner"
        LOG.error(error)
        return FailoverResult(dead, None, None, len(slots), ok=False, error=error, at=started)
    new_backup = choose_backup(ctl, promoted, exclude={dead})
    error = ""
    replayed = 0
    try:
        ctl.forget_primary(dead)
        await _give_backup(ctl, promoted, new_backup, slots)
        await ctl.move_slots(slots, promoted)
        ctl.registry.nfs[promoted].role = "primary"
        await _set_backup(ctl, promoted, new_backup)
        reply = await ctl.registry.call(promoted, "Promote", pb.PromoteRequest(
            slots=slots, dead_nf_id=dead), timeout=PROMOTE_TIMEOUT)
        replayed = reply.replayed
        # the promoted slots carry the new epochs from now on
        await ctl.registry.call(promoted, "AssignSlots", pb.AssignSlotsRequest(
            slots=[pb.SlotEpoch(slot=s, epoch=ctl.slot_map.epoch(s)) for s in slots]))
    except NfControlError as exc:
        error = str(exc)
        LOG.error("fail-over of NF %d to NF %d: %s", dead, promoted, exc)
    seconds = round(time.monotonic() - t0, 4)
    LOG.warning("fail-over: NF %d dead, NF %d owns its %d slots (replayed %d) with backup %s in %.3f s",
                dead, promoted, len(slots), replayed,
                new_backup if new_backup is not None else "none (no NF qualifies)", seconds)
    return FailoverResult(dead, promoted, new_backup, len(slots), replayed, seconds, not error,
                          error, started)


async def replace_backup(ctl: Controller, dead_backup: int) -> FailoverResult | None:
    """A backup died: give its primary a new backup (or none), so its output is not held forever."""
    primary = next((p for p, b in ctl.pairs.items() if b == dead_backup), None)
    if primary is None:
        return None
    started, t0 = time.time(), time.monotonic()
    new_backup = choose_backup(ctl, primary, exclude={dead_backup})
    slots = ctl.slot_map.slots_of(primary)
    error = ""
    try:
        await _give_backup(ctl, primary, new_backup, slots)
        await _set_backup(ctl, primary, new_backup)
    except NfControlError as exc:
        error = str(exc)
        LOG.error("new backup for NF %d: %s", primary, exc)
    LOG.warning("backup %d of NF %d dead: new backup %s", dead_backup, primary,
                new_backup if new_backup is not None else "none")
    return FailoverResult(dead_backup, primary, new_backup, len(slots), 0,
                          round(time.monotonic() - t0, 4), not error, error, started, "backup")
