"""Migration of one slot from its primary A to another primary B (docs/protocols.md §5).

The steps, epoch e -> e+1 (the runtime's side is docs/protocols.md §5):

1. `Adopt(s, e+1, from A)` on B: B buffers the slot's packets until A's state arrives;
2. B's backup is told it backs up s (`AssignSlots(as_backup, primary=B)`), so the copies the
   switch multicasts to it from now on are kept;
3. the move is journalled in etcd (`MoveIntent`: s, A, B, e+1), before anything changes where
   packets go, so that a new leader finishes a move its predecessor left half done;
4. one atomic `slot_owner` write to B's group with epoch e+1, persisted in etcd
   (`Controller.move_slot`);
5. `Release(s, to B, same_cluster)` on A: A stops at a packet boundary, ships the delta (cluster
   peer) or the full state with its last processed seq, and forwards late packets to B. A delta
   that B refuses is retried once with the full state.

**The adopter decides.** The move is complete exactly when B has accepted A's transfer. When
`Release` fails or does not answer, the controller asks B: `CancelAdopt(s, e+1)` is a fence run
on B's event loop that either cancels the adoption (B refuses A's transfer from then on, so A
keeps the slot) and answers `started = false`, or answers `started = true` because B already
accepted the transfer. Only a cancelled move is undone: the slot goes back to A (epoch e+2, the
epoch only grows) and A is told (`AssignSlots`, which gives A back a slot it released and whose
transfer is unanswered, with its state and waiting packets). A started move is complete (ok,
`fenced`). The fence is asked again while B is reachable and not declared down; if B is
declared down, its fail-over owns the slot (it is B's in the slot map) and the move is not
undone. In every case but an undecided one the journal entry is cleared.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple, Protocol

from contract.proto import nf_control_pb2 as pb
from contract.timing import (
    ADOPT_RPC_TIMEOUT,
    GIVE_BACK_WAIT,
    RELEASE_RPC_TIMEOUT,
    SWITCH_QUEUE_BOUND,
)
from controlplane.cluster_view import ClusterView
from controlplane.nf_registry import NfControlError
from controlplane.slot_map import SlotEntry, SlotMap, next_epoch
from controlplane.slot_store import MoveIntent

LOG = logging.getLogger(__name__)

ADOPT_TIMEOUT = ADOPT_RPC_TIMEOUT
RELEASE_TIMEOUT = RELEASE_RPC_TIMEOUT  # beyond the runtime's release (contract/timing.py)
FENCE_PATIENCE = 5.0  # how long the fence is asked again while the adopter does not answer
# (under the move lock: a fail-over waits at most that long for it)
FENCE_RETRY = 0.2
RELEASE_ATTEMPT = 2.0  # a Release unanswered this long is asked again (it is idempotent, M5)
# A slot is moved again this long after its last move ended at the earliest. The old owner sends
# its marker (after its last output) once it has the Release, after the switch write; a second
# move's switch write sends whatever of the slot reaches the switch after it to the newer
# adopter, so a marker still queued then never reaches the adopter it was for: that adopter
# waits `MARKER_WAIT` for it and starts without it, and the old owner's output queued with it
# can arrive behind the adopter's (found by the simulation with port queues of up to a second,
# seed 5107 of tests/sim/test_sim.py's LONG_QUEUES). The switch's queues hold a frame
# `SWITCH_QUEUE_BOUND` at most. `SlotMoves.migrate` waits for it; a move that still comes
# sooner (another caller's, meanwhile) is refused.
MOVE_AGAIN_AFTER = SWITCH_QUEUE_BOUND
KEPT = "the slot stays owned here"  # how the runtime's Release says it kept the slot (ownership.py)



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
    fenced: bool = False   # the release failed and the adopter's fence decided the move

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class _Session(Protocol):
    @property
    def is_primary(self) -> bool: ...


class MoveHost(ClusterView, Protocol):
    """What a move reads and the building blocks it runs on (`ControllerCore` is one): the
    configuration, the NFs, the cluster state and slot map, the move journal, the fail-overs
    waiting (`urgent`) and the one atomic slot write."""

    @property
    def slot_map(self) -> SlotMap: ...
    @property
    def session(self) -> _Session: ...
    @property
    def open_moves(self) -> dict[int, MoveIntent]: ...
    @property
    def urgent(self) -> int: ...
    @property
    def fence_patience(self) -> float: ...
    @property
    def untold_epochs(self) -> dict[int, dict[int, int]]: ...
    @property
    def untold_cancels(self) -> dict[int, dict[int, int]]: ...
    @property
    def moved_at(self) -> dict[int, float]: ...
    async def open_move(self, move: MoveIntent) -> None: ...
    async def close_move(self, slot: int) -> None: ...
    async def drop_unwritten_move(self, slot: int) -> bool: ...
    async def move_slot(self, slot: int, to_nf: int) -> SlotEntry: ...


def check_move(ctl: MoveHost, slot: int, to_nf: int) -> int:
    """Validate a move request; return the current owner (raises MoveError)."""
    if not ctl.session.is_primary:
        raise NotPrimaryError("this controller is not the switch's primary: it moves nothing")
    if not 0 <= slot < ctl.slot_map.slot_count:
        raise MoveError(f"slot {slot} is outside 0..{ctl.slot_map.slot_count - 1}")
    if to_nf not in ctl.state.pairs:
        raise MoveError(f"NF {to_nf} is not a primary")
    if ctl.registry.nfs[to_nf].declared_down:
        raise MoveError(f"NF {to_nf} is down")
    stage, to_stage = ctl.cfg.stage_of_slot(slot), ctl.cfg.stage_of(to_nf)
    if stage != to_stage:
        names = {st.id: st.name for st in ctl.cfg.stages()}
        raise MoveError(f"slot {slot} is a slot of stage {names[stage]!r}; NF {to_nf} serves "
                        f"stage {names[to_stage]!r}")
    if slot in ctl.open_moves:
        move = ctl.open_moves[slot]
        raise MoveError(f"slot {slot}'s move from NF {move.src} to NF {move.dst} is not decided "
                        "yet (its adopter has not answered the fence)")
    ended = ctl.moved_at.get(slot)
    if ended is not None and time.monotonic() - ended < MOVE_AGAIN_AFTER:
        raise MoveError(f"slot {slot} was moved {time.monotonic() - ended:.1f} s ago: its old "
                        "owner's last output may still be queued at the switch (a slot is moved "
                        f"again {MOVE_AGAIN_AFTER:g} s after its last move at the earliest)")
    owner = ctl.slot_map.owner(slot)
    if owner == to_nf:
        raise MoveError(f"slot {slot} is already owned by NF {to_nf}")
    if ctl.registry.nfs[owner].declared_down:
        raise MoveError(f"the owner of slot {slot}, NF {owner}, is down (fail-over moves its slots)")
    for nf in (owner, to_nf):
        # an NF that restarted (or is being reconfigured) holds nothing it was given: a move
        # to or from it waits until the controller has configured it again (found by the
        # simulation, seed 5: a move queued before a crash ran after the restart)
        if not ctl.state.nfs.configured(nf):
            raise MoveError(f"NF {nf} is not configured (it restarted or is being reconfigured)")
    if ctl.urgent:
        raise MoveError("a fail-over is waiting: moves wait for it")
    return owner


async def migrate_slot(ctl: MoveHost, slot: int, to_nf: int,
                       release_timeout: float = RELEASE_TIMEOUT) -> MoveResult:
    """Move `slot` from its owner to primary `to_nf`; undo a move the adopter's fence cancelled.
    Raises MoveError only for a request that cannot start; a move that fails on the way returns
    ok=False."""
    src = check_move(ctl, slot, to_nf)
    reg, cfg = ctl.registry, ctl.cfg
    src_cfg = cfg.nf(src)
    started, t0 = time.time(), time.monotonic()
    old_epoch = ctl.slot_map.epoch(slot)
    intent = MoveIntent(slot, src, to_nf, next_epoch(old_epoch), ctl.state.groups.get(src, src))
    result = _results(intent, cfg.nf(src).cluster == cfg.nf(to_nf).cluster, started, t0)

    try:
        await reg.call(to_nf, "Adopt", pb.AdoptRequest(
            slot=slot, epoch=intent.epoch, from_nf_id=src,
            from_address=src_cfg.replication_address()), timeout=ADOPT_TIMEOUT)
        # B's backup must know it backs up s before the switch sends it copies of s: one that is
        # only suspected down (and may be back at once, keeping its configuration) would drop
        # them as unowned and, promoted later, own s with nothing (found by the simulation,
        # seed 55). If it does not answer, the move does not start; a dead one is replaced
        # (after this move: the same lock) with every slot B owns then.
        backup = ctl.state.pairs.get(to_nf)
        if backup is not None:
            await reg.call(backup, "AssignSlots", pb.AssignSlotsRequest(
                slots=[pb.SlotEpoch(slot=slot, epoch=intent.epoch)], as_backup=True,
                primary_nf_id=to_nf, adoption=True, adoption_from_nf_id=src,  # (M18)
                adoption_from_address=src_cfg.replication_address()), timeout=ADOPT_TIMEOUT)
    except NfControlError as exc:
        LOG.warning("move of slot %d to NF %d not started: %s", slot, to_nf, exc)
        # B may adopt in vain (its Adopt acted but the reply was lost, or its backup did not
        # answer): it forgets, or the slot stays ADOPTING there, idle (found by the simulation)
        await _cancel_adoption(ctl, slot, to_nf, intent.epoch)
        return result(False, old_epoch, error=str(exc))

    try:
        await ctl.open_move(intent)  # the journal, before anything changes where packets go
        entry = await ctl.move_slot(slot, to_nf)  # the one atomic switch write (+ etcd)
    except Exception as exc:  # nothing changed (all or nothing); B was told to adopt in vain
        error = f"switch or etcd write failed: {type(exc).__name__}: {exc}"
        LOG.warning("move of slot %d to NF %d not done: %s", slot, to_nf, error)
        if not await ctl.drop_unwritten_move(slot):
            # still journalled (etcd is out): a next leader takes the move for one under way
            # and writes it to the switch, so B must keep its adoption, and this leader
            # finishes it too (`finish_open_moves`). Cancelled here, the next leader sent the
            # slot to a B that dropped its packets as not owned until told `Adopt` again
            # (simulation, etcd outages, seed 242: the leader lost its lease mid-move)
            LOG.warning("move of slot %d to NF %d left journalled (etcd did not clear it): "
                        "finished later", slot, to_nf)
            return result(False, old_epoch, error=f"{error}; left journalled, finished later")
        await _cancel_adoption(ctl, slot, to_nf, intent.epoch)  # (A was never told to release)
        return result(False, old_epoch, error=error)
    if entry.epoch != intent.epoch:  # (the map changed under us: cannot happen under move_lock)
        LOG.error("slot %d written at epoch %d, journalled %d", slot, entry.epoch, intent.epoch)
    return await finish_move(ctl, intent, release_timeout, result)


def _adopter_backup(ctl: MoveHost, to_nf: int) -> dict[str, Any]:
    """The `ReleaseRequest` fields naming the adopter's backup: the copies an adopter that dies
    before it started the slot gives back come from it (M14), and the old owner sends it a copy
    of the tail it forwards to the adopter (M18)."""
    backup = ctl.state.pairs.get(to_nf)
    if backup is None:
        return {}
    return {"adopter_backup_nf_id": backup,
            "adopter_backup_address": ctl.cfg.nf(backup).replication_address()}


def _results(intent: MoveIntent, same_cluster: bool, started: float,
             t0: float) -> Callable[..., MoveResult]:
    def result(ok: bool, epoch: int, **kw: Any) -> MoveResult:
        return MoveResult(intent.slot, intent.src, intent.dst, epoch, ok, same_cluster,
                          seconds=round(time.monotonic() - t0, 4), at=started, **kw)
    return result


async def finish_move(ctl: MoveHost, intent: MoveIntent, release_timeout: float,
                      result: Callable[..., MoveResult] | None = None) -> MoveResult:
    """From the switch write on (the slot is B's at e+1): A's `Release`, and if it does not
    succeed, B's fence decides (see the module docstring). Also how a new leader finishes a
    journalled move (`SlotMoves.finish_open_moves`): `Release` and `Adopt` are idempotent."""
    slot, src, to_nf = intent.slot, intent.src, intent.dst
    reg, cfg = ctl.registry, ctl.cfg
    same_cluster = cfg.nf(src).cluster == cfg.nf(to_nf).cluster
    if result is None:
        result = _results(intent, same_cluster, time.time(), time.monotonic())
    t0 = time.monotonic()
    error = ""
    reply: Any = None
    if src in reg.nfs and not reg.nfs[src].declared_down and src in ctl.state.pairs:
        for full in ((False, True) if same_cluster else (True,)):
            try:
                # asked again while unanswered (a lost reply: the release runs on, and the NF
                # answers the same to the next attempt, M5), not held for the whole deadline:
                # a silent reply held the move lock, and every fail-over, for 19 s (seed 68)
                reply = await reg.call_again(src, "Release", pb.ReleaseRequest(
                    slot=slot, to_nf_id=to_nf, to_address=cfg.nf(to_nf).replication_address(),
                    same_cluster=not full,
                    **_adopter_backup(ctl, to_nf)),  # (M14, M18)
                    min(RELEASE_ATTEMPT, release_timeout),
                    release_timeout,
                    # not asked again once B is down or unsettled (it died, restarted, or is
                    # suspected): A waits for a dead B's answer until its own timeouts (up to
                    # 15 s), under the move lock that B's fail-over waits for; B's fence (or
                    # its backup's, M14) decides at once, as it would after those timeouts
                    moot=lambda: reg.nfs[to_nf].declared_down
                    or not ctl.state.nfs.configured(to_nf))
                error = ""
                break
            except NfControlError as exc:
                error = str(exc)
                LOG.warning("release of slot %d by NF %d (%s): %s", slot, src,
                            "full state" if full else "delta", exc)
                if "refused" not in exc.error or "delta" not in exc.error:
                    break  # only a refused delta base is worth a full-state retry
    elif src not in ctl.state.pairs:
        # failed over since (a journalled move finished later): what it held of the slot went
        # with its role, and its promoted backup holds the state the release began from; asked
        # to release anyway, it answered 5 s later with a transfer the adopter accepted after
        # the old owner had let the slot go, two NFs counting the slot (simulation, stalls with
        # moves under the peer policy, seed 44)
        error = f"NF {src} was failed over"
    else:
        error = f"NF {src} is down"
    if reply is not None and not error:
        LOG.info("slot %d moved %d -> %d epoch %d: %d bytes, %d flows (%s) in %.3f s", slot, src,
                 to_nf, intent.epoch, reply.bytes_shipped, reply.flows_shipped,
                 "delta" if reply.delta else "full", time.monotonic() - t0)
        await ctl.close_move(slot)
        return result(True, intent.epoch, delta=reply.delta, bytes_shipped=reply.bytes_shipped,
                      flows_shipped=reply.flows_shipped, last_seq=reply.last_seq)
    back_to = give_back_to(ctl, intent)
    decision = await fence(ctl, slot, to_nf, intent.epoch, back_to)
    if decision == "forgotten":  # B restarted: its backup holds the copies (M14)
        # ...and decides; one that does not answer decides nothing: the move stays journalled,
        # decided once it answers (`finish_open_moves`). Taken for "cancelled", the move was
        # undone without the copies it held given back (simulation, adopter kills with stalls
        # under the peer policy, seed 213: 2.3 s of the slot's packets, held by B's stalled
        # backup); taken for "down", the slot stayed at a live B that held nothing (seed 44)
        decision = await fence_backup(ctl, intent, back_to)
        if decision == "down":
            decision = "unknown"
    elif decision == "down":  # B's backup decides in its place (M14)
        decision = await fence_backup(ctl, intent, back_to)
    if decision == "started":  # the reply was lost, or A gave up first: B holds the slot
        LOG.warning("slot %d: the release by NF %d failed (%s) but NF %d had started it: the "
                    "move is complete", slot, src, error, to_nf)
        await ctl.close_move(slot)
        return result(True, intent.epoch, fenced=True,
                      error=f"completed: the adopter had started the slot ({error})")
    if decision in ("down", "unknown") and KEPT in error:
        # A answered that it kept the slot (B refused the transfer, or was never reached): B
        # cannot have started from this move, whatever it answers
        return await _undo(ctl, intent, error, result)
    if decision == "down":  # B's fail-over owns the slot (it is B's in the slot map)...
        # ...unless B was only slow and is not failed over: the move stays journalled, and is
        # finished once B answers again (`SlotMoves.finish_open_moves`: its fence decides), or
        # closed by B's fail-over. Closed here, it left B's slot ADOPTING for a transfer that
        # never came, the switch sending it there (simulation `stalls`, seeds 44 and 58)
        LOG.warning("slot %d: the release by NF %d failed (%s) and NF %d is down: its fail-over "
                    "decides, or the fence once it answers again", slot, src, error, to_nf)
        return result(False, intent.epoch, fenced=True,
                      error=f"{error}; the adopter is down: its fail-over owns the slot, or its "
                            "fence decides once it answers again")
    if decision == "unknown":  # left journalled: decided later (a new leader asks again)
        return result(False, intent.epoch, fenced=True,
                      error=f"{error}; undecided: the adopter did not answer its fence")
    return await _undo(ctl, intent, error, result)


class GiveBack(NamedTuple):
    """Where an undone move's packets go back to (`give_back_to`): the NF `to`, and a copy of
    them to the NF `copy` (0: none)."""

    to: int
    copy: int = 0


NOWHERE = GiveBack(0)  # (nothing named: an NF that held an adoption drops what it buffered)


def give_back_to(ctl: MoveHost, intent: MoveIntent) -> GiveBack:
    """Where an undone move's packets go back to (M11, M14): the NF that will own the slot
    when the undo points it at the old owner's replica group again. That is the old owner A
    while it is a primary; the primary holding A's group when A was failed over already (the
    undo gives it the slot: given to A's NF id, they reached a dead process, or a restarted one
    holding nothing, and were lost, M15). While A is declared down, which of A and its backup
    owns the slot next is not known yet: A if the suspicion was a false alarm (the undo gives
    the slot to A), A's backup if A's fail-over, waiting for the move lock, promotes it. So
    they go to A and a copy to A's backup (M16: given to the backup only, a false alarm's A
    got the slot back without them and skipped them as a gap; found by the simulation,
    LONG_QUEUES seed 5002)."""
    src = intent.src
    if src in ctl.state.pairs:
        backup = ctl.state.pairs[src]
        if ctl.registry.nfs[src].declared_down and backup is not None \
                and not ctl.registry.nfs[backup].declared_down:
            return GiveBack(src, backup)
        return GiveBack(src)
    try:
        return GiveBack(ctl.state.primary_of_group(intent.src_group))
    except ValueError:  # (A's group is gone: the undo cannot happen either)
        return GiveBack(src)


def _address(ctl: MoveHost, nf: int) -> str:
    """`nf`'s replication address ("" for none)."""
    if nf:
        with contextlib.suppress(KeyError):
            return ctl.cfg.nf(nf).replication_address()
    return ""


async def _ask_cancel_adopt(ctl: MoveHost, nf: int, slot: int, epoch: int, back: GiveBack,
                            timeout: float, whose: str = "") -> pb.CancelAdoptReply | str:
    """`CancelAdopt` of `slot` at `epoch` asked of `nf` (where what `nf` buffered or holds goes
    back to named, when known) and asked again while it does not answer: its reply, "down"
    (`nf` declared down before it answered) or "unknown" (no answer within
    `ctl.fence_patience`). The NF answers the same however often it is asked."""
    reg = ctl.registry
    back_to, copy_to = _address(ctl, back.to), _address(ctl, back.copy)
    deadline = time.monotonic() + ctl.fence_patience
    while True:
        if reg.nfs[nf].declared_down:
            return "down"
        try:
            reply: pb.CancelAdoptReply = await reg.call(nf, "CancelAdopt", pb.AdoptRequest(
                slot=slot, epoch=epoch, from_nf_id=back.to if back_to else 0,
                from_address=back_to, copy_nf_id=back.copy if copy_to else 0,
                copy_address=copy_to),
                timeout=timeout)
            return reply
        except NfControlError as exc:
            LOG.warning("fence of slot %d at NF %d%s: %s", slot, nf, whose, exc)
        if time.monotonic() >= deadline:
            return "unknown"
        await asyncio.sleep(FENCE_RETRY)


async def expect_give_back(ctl: MoveHost, slot: int, giver: int, back: GiveBack) -> None:
    """Before a fence: the NFs `back` names are told that `giver` (the adopter, or its backup)
    may give them back what it buffered of `slot` (`ExpectGiveBack`), so that they admit it
    under the peer policy, where an adopter of another cluster is none of their peers: one
    of them refused it and the given-back packets were lost (simulation stalls with moves and
    the peer policy, seeds 44, 58, 91 and 163). Best effort: one that does not answer refuses
    them (counted in its `repl_refused`)."""
    async def tell(nf: int) -> None:
        try:
            await ctl.registry.call(nf, "ExpectGiveBack", pb.AdoptRequest(
                slot=slot, from_nf_id=giver, from_address=_address(ctl, giver)),
                timeout=ADOPT_TIMEOUT)
        except NfControlError as exc:
            LOG.warning("NF %d not told that NF %d may give slot %d back: %s", nf, giver, slot,
                        exc)

    targets = sorted({back.to, back.copy} - {0, giver})
    if targets and not ctl.registry.nfs[giver].declared_down:
        await asyncio.gather(*(tell(nf) for nf in targets))


async def fence(ctl: MoveHost, slot: int, to_nf: int, epoch: int,
                back: GiveBack = NOWHERE) -> str:
    """Ask adopter `to_nf` whether it started `slot` at `epoch`, cancelling the adoption if not:
    "started", "cancelled", "forgotten" (not started, and it knew nothing of the adoption: it
    restarted, M14), "down" (declared down before it answered) or "unknown" (no answer within
    `ctl.fence_patience`). Asked again while it does not answer. A cancelled adoption
    gives what it buffered back to the old owner, as `back` says (M11, M16)."""
    await expect_give_back(ctl, slot, to_nf, back)
    reply = await _ask_cancel_adopt(ctl, to_nf, slot, epoch, back, ADOPT_TIMEOUT)
    if isinstance(reply, str):
        return reply
    if reply.started:
        return "started"
    return "cancelled" if reply.held else "forgotten"


async def fence_backup(ctl: MoveHost, intent: MoveIntent, back: GiveBack = NOWHERE) -> str:
    """M14: adopter B is down; the NF holding the copies of the slot's packets since the switch
    write (B's backup, or the NF promoted in B's place) decides instead: "started" if it holds
    the state B sent it on starting the slot (B's fail-over owns the slot), "cancelled" if B
    never started it (it gives its copies to the old owner A, which holds the state: the move
    is undone), "down" if it does not answer (B's fail-over owns the slot, as before M14)."""
    slot, to_nf = intent.slot, intent.dst
    back = back if back.to else GiveBack(intent.src)  # (where the copies go: `give_back_to`)
    src = back.to
    owner = ctl.slot_map.owner(slot)
    holder = ctl.state.pairs.get(to_nf) if owner == to_nf else owner
    if holder is None or holder in (src, intent.src):
        return "down"
    if back.copy == holder:  # (it backs A up too: what it gives back goes to A, not to itself)
        back = GiveBack(back.to)
    await expect_give_back(ctl, slot, holder, back)
    # (the wait covers its giving the copies back: it answers once they are given)
    reply = await _ask_cancel_adopt(ctl, holder, slot, intent.epoch, back,
                                    ADOPT_TIMEOUT + GIVE_BACK_WAIT, ", the adopter's backup")
    if isinstance(reply, str):
        return "down"
    LOG.warning("slot %d: adopter NF %d is down or restarted; its backup NF %d %s", slot, to_nf, holder,
                "holds the state it started the slot with" if reply.started
                else f"holds no state of it: its copies go back to NF {src}")
    if not reply.started:  # (B, only slow, still holds the adoption: told once it answers)
        ctl.untold_cancels.setdefault(to_nf, {})[slot] = intent.epoch
    return "started" if reply.started else "cancelled"


async def _cancel_adoption(ctl: MoveHost, slot: int, to_nf: int, epoch: int) -> None:
    """The adopter forgets an adoption whose switch write failed (A was never told to release,
    so B cannot have started; best effort: one that does not answer keeps an idle ADOPTING
    slot, which a later `Adopt` or assignment takes over, keeping what it buffered)."""
    try:
        await ctl.registry.call(to_nf, "CancelAdopt", pb.AdoptRequest(slot=slot, epoch=epoch),
                                timeout=ADOPT_TIMEOUT)
    except NfControlError as exc:
        LOG.warning("adoption of slot %d by NF %d not cancelled: %s", slot, to_nf, exc)


async def _undo(ctl: MoveHost, intent: MoveIntent, error: str,
                result: Callable[..., MoveResult]) -> MoveResult:
    """The adopter cancelled the adoption: the slot goes back to its old owner (next epoch) and
    the owner is told. If the old owner is no longer a primary (failed over meanwhile), the
    slot goes to the primary that holds its replica group now."""
    slot, src = intent.slot, intent.src
    try:
        owner = src if src in ctl.state.pairs else ctl.state.primary_of_group(intent.src_group)
    except ValueError as exc:  # (A's group is gone: a double fault; the slot stays at B)
        LOG.error("move of slot %d cannot be undone: %s", slot, exc)
        return result(False, intent.epoch, error=f"{error}; not undone: {exc}", fenced=True)
    back = await ctl.move_slot(slot, owner)
    try:
        await ctl.registry.call(owner, "AssignSlots", pb.AssignSlotsRequest(
            slots=[pb.SlotEpoch(slot=slot, epoch=back.epoch)]), timeout=ADOPT_TIMEOUT)
    except NfControlError as exc:  # (told by its next configuration, or its fail-over)
        LOG.warning("undo of slot %d: NF %d not told its epoch: %s", slot, owner, exc)
        ctl.untold_epochs.setdefault(owner, {})[slot] = back.epoch
    await ctl.close_move(slot)
    LOG.warning("move of slot %d to NF %d undone (back at NF %d epoch %d): %s", slot, intent.dst,
                owner, back.epoch, error)
    return result(False, back.epoch, error=error, undone=True, fenced=True)
