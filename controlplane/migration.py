"""Migration of one slot from its primary A to another primary B (docs/protocols.md §5).

The steps, epoch e -> e+1 (the runtime's side is docs/protocols.md §5):

1. `Adopt(s, e+1, from A)` on B: B buffers the slot's packets until A's state arrives;
2. B's backup is told it backs up s (`AssignSlots(as_backup, primary=B)`), so the copies the
   switch multicasts to it from now on are kept;
3. one atomic `slot_owner` write to B's group with epoch e+1, persisted in etcd
   (`Controller.move_slot`);
4. `Release(s, to B, same_cluster)` on A: A stops at a packet boundary, ships the delta (cluster
   peer) or the full state with its last processed seq, and forwards late packets to B. A delta
   that B refuses is retried once with the full state.

If step 1 or 2 fails nothing has changed yet. If the release fails or times out, the move is
undone: the slot is written back to A (one more epoch, so the epoch only ever grows) and A is told
its new epoch; A kept the slot when its `Release` failed (protocols.md §5, step 4). The runtime has
no call to cancel an adoption: B's ADOPTING slot stays idle (it receives nothing more) until a
later `Adopt` or assignment replaces it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from controlplane.nf_registry import NfControlError
from controlplane.slot_map import next_epoch
from nf_host.proto import nf_control_pb2 as pb
from nf_host.timing import ADOPT_RPC_TIMEOUT, RELEASE_RPC_TIMEOUT

if TYPE_CHECKING:
    from controlplane.controller_core import ControllerCore

LOG = logging.getLogger(__name__)

ADOPT_TIMEOUT = ADOPT_RPC_TIMEOUT
RELEASE_TIMEOUT = RELEASE_RPC_TIMEOUT  # beyond every limit of the runtime's release (nf_host/timing.py)


class MoveError(Exception):
    """A move that cannot start (bad slot or target); nothing was changed."""


class NotPrimaryError(MoveError):
    """A change of the switch asked of a controller that is not the switch's primary; nothing
    was changed (the API answers 503)."""


@dataclass(frozen=True)
class MoveResult:
    """What one slot move did, for the API, the logs and the scenario's summary."""

    slot: int
    from_nf: int
    to_nf: int
    epoch: int             # the slot's epoch afterwards (e+1, or e+2 when undone)
    ok: bool
    same_cluster: bool
    delta: bool = False
    bytes_shipped: int = 0
    flows_shipped: int = 0
    last_seq: int = 0
    seconds: float = 0.0
    error: str = ""
    undone: bool = False
    at: float = 0.0        # time.time() when the move started

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def check_move(ctl: ControllerCore, slot: int, to_nf: int) -> int:
    """Validate a move request; return the current owner (raises MoveError)."""
    if not ctl.session.is_primary:
        raise NotPrimaryError("this controller is not the switch's primary: it moves nothing")
    if not 0 <= slot < ctl.slot_map.slot_count:
        raise MoveError(f"slot {slot} is outside 0..{ctl.slot_map.slot_count - 1}")
    if to_nf not in ctl.pairs:
        raise MoveError(f"NF {to_nf} is not a primary")
    if ctl.registry.nfs[to_nf].declared_down:
        raise MoveError(f"NF {to_nf} is down")
    stage, to_stage = ctl.cfg.stage_of_slot(slot), ctl.cfg.stage_of(to_nf)
    if stage != to_stage:
        names = {st.id: st.name for st in ctl.cfg.stages()}
        raise MoveError(f"slot {slot} is a slot of stage {names[stage]!r}; NF {to_nf} serves "
                        f"stage {names[to_stage]!r}")
    owner = ctl.slot_map.owner(slot)
    if owner == to_nf:
        raise MoveError(f"slot {slot} is already owned by NF {to_nf}")
    if ctl.registry.nfs[owner].declared_down:
        raise MoveError(f"the owner of slot {slot}, NF {owner}, is down (fail-over moves its slots)")
    return owner


async def migrate_slot(ctl: ControllerCore, slot: int, to_nf: int,
                       release_timeout: float = RELEASE_TIMEOUT) -> MoveResult:
    """Move `slot` from its owner to primary `to_nf`; undo on failure. Raises MoveError only
    for a request that cannot start; a move that fails on the way returns ok=False."""
    src = check_move(ctl, slot, to_nf)
    reg, cfg = ctl.registry, ctl.cfg
    src_cfg, dst_cfg = cfg.nf(src), cfg.nf(to_nf)
    same_cluster = src_cfg.cluster == dst_cfg.cluster
    started, t0 = time.time(), time.monotonic()
    old_epoch = ctl.slot_map.epoch(slot)
    new_epoch = next_epoch(old_epoch)

    def result(ok: bool, epoch: int, **kw: Any) -> MoveResult:
        return MoveResult(slot, src, to_nf, epoch, ok, same_cluster,
                          seconds=round(time.monotonic() - t0, 4), at=started, **kw)

    try:
        await reg.call(to_nf, "Adopt", pb.AdoptRequest(
            slot=slot, epoch=new_epoch, from_nf_id=src, from_address=src_cfg.replication_address()),
            timeout=ADOPT_TIMEOUT)
        # B's backup must know it backs up s before the switch sends it copies of s: one that is
        # only suspected down (and may be back at once, keeping its configuration) would drop
        # them as unowned and, promoted later, own s with nothing (found by the simulation,
        # seed 55). If it does not answer, the move does not start; a dead one is replaced
        # (after this move: the same lock) with every slot B owns then.
        backup = ctl.pairs.get(to_nf)
        if backup is not None:
            await reg.call(backup, "AssignSlots", pb.AssignSlotsRequest(
                slots=[pb.SlotEpoch(slot=slot, epoch=new_epoch)], as_backup=True,
                primary_nf_id=to_nf), timeout=ADOPT_TIMEOUT)
    except NfControlError as exc:
        LOG.warning("move of slot %d to NF %d not started: %s", slot, to_nf, exc)
        return result(False, old_epoch, error=str(exc))

    try:
        entry = await ctl.move_slot(slot, to_nf)  # the one atomic switch write (+ etcd)
    except Exception as exc:  # nothing changed (all or nothing); B was told to adopt in vain
        error = f"switch or etcd write failed: {type(exc).__name__}: {exc}"
        LOG.warning("move of slot %d to NF %d not done: %s", slot, to_nf, error)
        await _cancel_adoption(ctl, slot, to_nf, new_epoch)
        return result(False, old_epoch, error=error)
    error = ""
    reply: Any = None
    for full in ((False, True) if same_cluster else (True,)):
        try:
            reply = await reg.call(src, "Release", pb.ReleaseRequest(
                slot=slot, to_nf_id=to_nf, to_address=dst_cfg.replication_address(),
                same_cluster=not full), timeout=release_timeout)
            error = ""
            break
        except NfControlError as exc:
            error = str(exc)
            LOG.warning("release of slot %d by NF %d (%s): %s", slot, src,
                        "full state" if full else "delta", exc)
            if "DEADLINE_EXCEEDED" in exc.error or "UNAVAILABLE" in exc.error:
                break  # no answer: do not ask again, undo
    if reply is not None and not error:
        LOG.info("slot %d moved %d -> %d epoch %d: %d bytes, %d flows (%s) in %.3f s", slot, src,
                 to_nf, entry.epoch, reply.bytes_shipped, reply.flows_shipped,
                 "delta" if reply.delta else "full", time.monotonic() - t0)
        return result(True, entry.epoch, delta=reply.delta, bytes_shipped=reply.bytes_shipped,
                      flows_shipped=reply.flows_shipped, last_seq=reply.last_seq)
    return await _undo(ctl, slot, src, to_nf, new_epoch, error, result)


async def _cancel_adoption(ctl: ControllerCore, slot: int, to_nf: int, epoch: int) -> None:
    """The adopter forgets an adoption that will not complete (best effort: an adopter that does
    not answer keeps an idle ADOPTING slot, counted nowhere, until a later assignment)."""
    try:
        await ctl.registry.call(to_nf, "CancelAdopt", pb.AdoptRequest(slot=slot, epoch=epoch),
                                timeout=ADOPT_TIMEOUT)
    except NfControlError as exc:
        LOG.warning("adoption of slot %d by NF %d not cancelled: %s", slot, to_nf, exc)


async def _undo(ctl: ControllerCore, slot: int, src: int, to_nf: int, epoch: int, error: str,
                result: Any) -> MoveResult:
    """The release failed: the slot goes back to its old owner (next epoch), the owner is told,
    and the adopter forgets the adoption."""
    back = await ctl.move_slot(slot, src)
    await _cancel_adoption(ctl, slot, to_nf, epoch)
    try:
        await ctl.registry.call(src, "AssignSlots", pb.AssignSlotsRequest(
            slots=[pb.SlotEpoch(slot=slot, epoch=back.epoch)]), timeout=ADOPT_TIMEOUT)
    except NfControlError as exc:
        LOG.warning("undo of slot %d: NF %d not told its epoch: %s", slot, src, exc)
    LOG.warning("move of slot %d to NF %d undone (back at NF %d epoch %d): %s", slot, to_nf, src,
                back.epoch, error)
    res: MoveResult = result(False, back.epoch, error=error, undone=True)
    return res
