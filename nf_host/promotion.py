"""The promotion of a backup (docs/protocols.md §4): the slots it backs up become its own, their
state from the replica, their input copies replayed and the dead primary's logged output sent
again; busy slots at once, idle ones a few per turn of the loop or by their first packet. A part
of the worker (`nf_host.worker`), given a narrow view of it (`PromotionHost`) when it is built.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from contract.results import PromoteResult
from contract.roles import Role, SlotRole
from contract.seq import SEQ_MASK, older_owner, seq_next
from contract.shim import ETH_HDR_LEN, Shim
from nf_host.backup import InputBuffer
from nf_host.backup_slots import BackupSlots
from nf_host.commit import Batch, OutputLog
from nf_host.move_marker import MarkerWait, Parked
from nf_host.promote_wait import PrimarySync
from nf_host.quiet_window import QuietWindow
from nf_host.state_store import SlotState
from nf_host.worker_types import PartHost, SlotRuntime, TakeoverClock, WorkerConfig

PROMOTE_CHUNK = 32  # idle slots promoted per turn of the event loop (`Promotion.promote_soon`)


class PromotionHost(PartHost, Protocol):
    """What `Promotion` sees of the worker: the slot tables (owned, held for others, input
    copies, the dead primary's output log), the open batch, the takeover's clock and quiet
    window, and the data path's entries to own a slot and offer it a packet."""

    role: Role
    takeover_clock: TakeoverClock | None

    @property
    def cfg(self) -> WorkerConfig: ...
    @property
    def backups(self) -> BackupSlots: ...
    @property
    def inbuf(self) -> InputBuffer: ...
    @property
    def out_log(self) -> OutputLog: ...
    @property
    def primary_sync(self) -> PrimarySync: ...
    @property
    def quiet(self) -> QuietWindow: ...
    @property
    def batch(self) -> Batch | None: ...
    @property
    def tx(self) -> Callable[[bytes | bytearray], None]: ...
    def owns(self, slot: int) -> bool: ...
    def open_batch(self, now: float) -> Batch: ...
    def close_batch(self) -> None: ...
    def new_slot(self, slot: int, epoch: int, role: SlotRole) -> SlotRuntime: ...
    def become_primary(self, rt: SlotRuntime, state: SlotState, next_seq: int | None) -> None: ...
    def offer(self, rt: SlotRuntime, shim: Shim, frame: bytes, now: float) -> None: ...
    @property
    def markers(self) -> MarkerWait: ...
    def start_adopted(self, rt: SlotRuntime, parked: Parked) -> None: ...
    def copy_to_backup(self, frame: bytes) -> None: ...
    def resync_backup(self) -> None: ...


class Promotion:
    """A backup's promotion (see the module docstring)."""

    def __init__(self, host: PromotionHost) -> None:
        self._w = host

    def busy_first(self, slots: list[int]) -> tuple[list[int], list[int]]:
        """`slots` split into those with something to replay or state (promoted first: their
        output is what a takeover waits for) and the idle rest."""
        busy: list[int] = []
        idle: list[int] = []
        for s in slots:
            rep = self._w.backups.replicas.get(s)
            (busy if self._w.inbuf.slots.get(s) or (rep is not None and rep.flows) else idle).append(s)
        return busy, idle

    async def promote_soon(self, slots: list[int], dead: int = 0,
                           chunk: int = PROMOTE_CHUNK) -> PromoteResult:
        """`promote`, busy slots first and then the idle ones `chunk` at a time, letting the event
        loop run in between: the busy slots' first output leaves (it waits for the new backup's
        ack, which arrives on this loop) without waiting for the per-slot work of hundreds of
        idle slots. A packet for an idle slot not promoted yet promotes it at once
        (`promote_waiting`), so no packet waits for the slot's turn."""
        res, idle = self.promote_busy(slots, dead)
        return await self.promote_idle(res, idle, dead, chunk)

    def promote_busy(self, slots: list[int], dead: int = 0) -> tuple[PromoteResult, list[int]]:
        """The first step of `promote_soon`, at once: the busy slots promoted, the idle ones
        marked (a packet promotes one at once); returns the result so far and the idle slots."""
        chosen = [s for s in (slots or sorted(self._w.backups.backed_up))
                  if self._w.owns(s) and self._w.backups.promotable(s)]  # (never: M14)
        busy, idle = self.busy_first(chosen)
        self._w.backups.promote_later(idle, dead)
        return self._promote(busy, dead, measured=chosen), idle

    async def promote_idle(self, res: PromoteResult, idle: list[int], dead: int,
                           chunk: int = PROMOTE_CHUNK) -> PromoteResult:
        """The rest of `promote_soon`: the idle slots, `chunk` per turn of the event loop, once
        the takeover's quiet window is over (its first output left: nf_host/quiet_window.py)."""
        await self._w.quiet.over()
        replayed, slots = res.replayed, list(res.slots)
        for start in range(0, len(idle), chunk):
            await asyncio.sleep(0)  # a turn of the loop: acks, packets, commands
            todo = [s for s in idle[start:start + chunk] if self._w.backups.take_waiting(s) is not None]
            if todo:
                more = self._promote(todo, dead, measured=[])
                replayed += more.replayed
                slots += more.slots
        done = set(slots)
        slots += [s for s in idle if s not in done]  # (promoted by a packet)
        return PromoteResult(replayed, slots, res.reemitted)

    def promote_waiting(self, slot: int) -> None:
        dead = self._w.backups.take_waiting(slot)
        if dead is not None:
            self._promote([slot], dead, measured=[])

    def holes(self, among: Iterable[int] | None = None) -> list[int]:
        """The slots backed up here (not owned yet; of `among` only, if given) whose input
        copies do not start right after the replica's last number: a promotion now would skip
        the numbers in between as a gap (nf_host/promote_wait.py). Copies at or before that
        number (committed) do not count."""
        out = []
        for slot in self._w.backups.backed_up if among is None else among:
            per = self._w.inbuf.slots.get(slot)
            if not per or slot in self._w.slots or slot not in self._w.backups.backed_up:
                continue
            rep = self._w.backups.replicas.get(slot)
            nxt = (seq_next(rep.last_seq) if rep is not None and rep.last_seq is not None
                   else self._w.backups.assigned_seq(slot))
            if nxt is None:
                continue  # (no number known: the first copy starts the slot)
            ahead = [d for d in ((s - nxt) & SEQ_MASK for s in per) if d < 1 << 31]
            if ahead and min(ahead) > 0:
                out.append(slot)
        return out

    def promote(self, slots: list[int], dead: int = 0) -> PromoteResult:
        """Own `slots` (all backed-up slots if empty) as the backup of dead NF `dead`, in one
        step (docs/protocols.md §4)."""
        chosen = [s for s in (slots or sorted(self._w.backups.backed_up))
                  if self._w.owns(s) and self._w.backups.promotable(s)]  # (never: M14)
        return self._promote(chosen, dead, measured=chosen)

    def _promote(self, chosen: list[int], dead: int, measured: list[int]) -> PromoteResult:
        """`promote` of exactly `chosen`; a takeover is measured (its first output logged) from
        here if `measured` holds a slot still backed up here ([]: a later part of one)."""
        if any(self._w.backups.holds(s) for s in measured):
            self._w.takeover_clock = TakeoverClock(time.time(), set(measured))
            self._w.quiet.begin()
        if chosen:
            # a primary now, whatever it was configured as (a spare given slots to back up, then
            # promoted): a later SetRole(IDLE/BACKUP) must drop what it owns
            self._w.role = Role.PRIMARY
        replayed = 0
        now = time.monotonic()
        done: list[int] = []
        in_place = False  # slots adopted in our dead primary's place (M18)
        # first, the output the dead primary may not have released, in its order; then the
        # replayed packets' output (numbers after the last commit). The switch forwards each
        # input's output once, so what had already left is dropped there
        sent, unsent = self._w.out_log.take_split(dead) if dead else ([], self._w.out_log.take(0))
        if sent or unsent:
            batch = self._w.batch or self._w.open_batch(now)
            self._w.c.reemitted += len(sent) + len(unsent)
            if self._w.backup_id and sent:
                # what the dead primary had released needs no ack: it leaves while the new
                # backup acknowledges, ahead of everything else (and is logged there too)
                batch.resent.extend(sent)
                self._resend_soon(sent)
            else:
                batch.outputs.extend(sent)
            batch.outputs.extend(unsent)
        for slot in chosen:
            rt = self._w.slots.get(slot)
            if rt is not None and (rt.role == SlotRole.PRIMARY or rt.adopted_from is not None):
                # (taken over by itself first, §4.3, at its replica's epoch: the switch's may be
                # newer, e.g. a move of the slot undone meanwhile; only forwards, as AssignSlots)
                told = self._w.backups.told_epoch(slot)
                if told is not None and older_owner((rt.epoch, 0), (told, 0)):
                    rt.epoch = told
                done.append(slot)
                continue
            # (before `promoted` forgets it) our primary adopted the slot just before it died:
            # the old owner's tail may still come, and its marker if our primary had not started
            adopted = self._w.backups.adopted_at(slot)
            if adopted is not None and now - adopted[0] >= self._w.cfg.marker_wait:
                adopted = None
            rep, assigned = self._w.backups.promoted(slot)  # (at the epoch Promote told, if later)
            marker = adopted is not None and not adopted[1]  # (still to come)
            rt = self._w.slots[slot] = self._w.new_slot(
                slot, rep.epoch, SlotRole.ADOPTING if marker else SlotRole.PRIMARY)
            buffered = self._w.inbuf.take_beyond(slot, rep.last_seq)
            if rep.last_seq is not None:
                first: int | None = seq_next(rep.last_seq)
            else:  # no delta yet: the number AssignSlots gave, else the first copy held
                first = assigned or (buffered[0][0] if buffered else None)
            state, bad = rep.to_slot_state()
            self._w.c.repl_errors += bad
            state.gen = rep.gen + 1  # a new owner of the same epoch: its deltas supersede A's
            if adopted is not None and marker:
                self._adopt_in_its_place(rt, state, first, adopted[0], buffered)
                in_place = True
            else:
                if adopted is not None:  # a gap waits for the tail (`DataPath.expire_gaps`)
                    rt.adopted_from = (0, 0)
                self._w.become_primary(rt, state, first)
                for _seq, frame in buffered:
                    shim = Shim.unpack(frame, ETH_HDR_LEN)
                    self._w.offer(rt, shim, frame, now)
            replayed += len(buffered)
            done.append(slot)
        self._w.c.replayed += replayed
        self._w.primary_sync.forget(done, dead)  # (ours now: nothing more to wait for)
        self._w.close_batch()
        if in_place:  # the state they start from goes to our backup now (its snapshot has it)
            self._w.resync_backup()
        return PromoteResult(replayed, done, reemitted=len(sent) + len(unsent))

    def _adopt_in_its_place(self, rt: SlotRuntime, state: SlotState, first: int | None,
                            adopted: float, buffered: list[tuple[int, bytes]]) -> None:
        """Our primary, the adopter of `rt`'s slot, died within `MARKER_WAIT` of accepting the
        old owner's transfer, maybe before the old owner's marker and tail reached it (M18):
        the slot starts here as it would have there, from its state once the marker comes (the
        switch passes it to us now) or the wait since the adoption is over, and a gap waits
        for the tail, which the old owner copies here. Started at once, its first outputs could
        overtake the old owner's last ones still queued at the switch, and the tail still on
        its way be skipped as lost (simulation, adopter kills, seeds 78, 100 and 126)."""
        rt.adopted_from = (0, 0)  # (started from its replica: no transfer of ours to answer)
        rt.pending = [(Shim.unpack(frame, ETH_HDR_LEN), frame) for _seq, frame in buffered]
        for _shim, frame in rt.pending:  # (unprocessed until it starts: our backup keeps them)
            self._w.copy_to_backup(frame)
        parked = Parked(state, first, adopted)
        if self._w.markers.on_transfer(rt.slot, parked):
            self._w.start_adopted(rt, parked)

    def _resend_soon(self, frames: list[bytes]) -> None:
        """Send `frames` again just after the delta that logs them has been written to the
        backup (its flush is scheduled first), so the two overlap; before any newer output, which
        waits for that backup's ack."""
        def resend() -> None:
            for frame in frames:
                self._w.tx(frame)
            self._w.c.outputs += len(frames)

        asyncio.get_running_loop().call_soon(resend)
