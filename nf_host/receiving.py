"""The receiving side of replication: what a worker does with the messages other NFs send it
(deltas and snapshots of the slots it backs up or replicates, a move's transfer and the state an
adopting primary gives its backup, forwarded packets and input copies). A part of the worker
(`nf_host.worker` describes the whole), given a narrow view of it (`ReceiverHost`) when the worker
is built; the sending side is `nf_host.commit_pipeline`'s and `nf_host.links`'.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import Protocol

from contract.replication import (
    Ack,
    Delta,
    Dispatch,
    Forward,
    InputCopy,
    Message,
    Released,
    SlotRow,
    SlotStateAck,
    SwitchRestart,
    Transfer,
    TransferAck,
)
from contract.replication import SlotState as SlotStateMsg
from contract.roles import SlotRole
from contract.seq import older_owner, seq_after, seq_next
from contract.shim import FRAME_KIND, FRAME_SLOT, SHIM_FRAME_LEN, SLOT_SEQ, Kind, with_kind
from nf_host.adopt_commit import AdoptCommit
from nf_host.backup import InputBuffer
from nf_host.backup_slots import BackupSlots
from nf_host.commit import OutputLog
from nf_host.move_marker import MarkerWait, Parked
from nf_host.promote_wait import UNNAMED, PrimarySync
from nf_host.replication import Link, Reply, StaleSender
from nf_host.state_store import Replica, SlotState, entries_from_wire, key_from_wire
from nf_host.worker_types import PartHost, SlotRuntime

log = logging.getLogger("nf_host.worker")


class ReceiverHost(PartHost, Protocol):
    """What `ReplicaReceiver` sees of the worker: the slots it owns, what it holds of other NFs'
    slots (replicas, backed-up slots, input copies, its primary's output log and snapshots), the
    adoptions under way, its links (the backup's), and the data path's entries for a forwarded
    packet, an input copy and an adopted slot that starts."""

    @property
    def backups(self) -> BackupSlots: ...
    @property
    def inbuf(self) -> InputBuffer: ...
    @property
    def out_log(self) -> OutputLog: ...
    @property
    def primary_sync(self) -> PrimarySync: ...
    @property
    def adopt_commit(self) -> AdoptCommit: ...
    @property
    def markers(self) -> MarkerWait: ...
    @property
    def links(self) -> dict[int, Link]: ...
    @property
    def gave_back(self) -> dict[int, tuple[Link, ...]]: ...
    def on_frame(self, frame: bytes) -> None: ...
    def backup_copy(self, slot: int, seq: int, frame: bytes) -> None: ...
    def start_adopted(self, rt: SlotRuntime, parked: Parked) -> None: ...


class ReplicaReceiver:
    """The worker's receiving side of replication (see the module docstring)."""

    def __init__(self, host: ReceiverHost) -> None:
        self._w = host

    def on_replication(self, msg: Message) -> Reply:
        """Handle one message through the dispatch table; a type this side does not take
        raises ProtocolError (counted, the connection closed)."""
        return self._receive(msg)

    @functools.cached_property
    def _receive(self) -> Dispatch[Reply]:
        """What a worker receives from other NFs, by message type."""
        table = Dispatch[Reply]()
        table.on(Delta, self._on_delta)
        table.on(Transfer, self._on_transfer)
        table.on(Released, self._on_released)
        table.on(SwitchRestart, lambda m: self._w.out_log.forget_released_of(m.sender, m.released))
        table.on(Forward, self._on_forward)
        table.on(SlotStateMsg, self._on_slot_state)
        table.on(InputCopy, self._on_input_copy)
        return table

    def _on_delta(self, msg: Delta) -> Ack:
        full = msg.full
        sender = msg.sender
        self._check_owner(sender, msg.rows)
        if msg.outputs is not None:  # from the primary we back up: log its unreleased output
            self._w.out_log.record(sender, msg.outputs, msg.released, full)
        for row in msg.rows:
            slot = row.slot
            # (an ADOPTING slot still takes deltas into its replica: the acknowledged version
            # is the base of the delta transfer that will complete the adoption)
            rep = self._w.backups.replicas.get(slot)
            whole = full or row.replace
            if whole:
                self._w.primary_sync.whole(slot, sender)  # (promote_wait.py)
                self._w.backups.holes.discard(slot)
                if msg.outputs is not None:  # (our primary's: it has started the slot, M14)
                    self._w.backups.started(slot)
            else:
                self._w.primary_sync.delta(slot, sender)
            if rep is None or whole:  # a whole slot from a new owner
                # the replica becomes that state, its last seq included: kept, a dead
                # owner's uncommitted numbers that reached this peer (not the backup) would
                # outlive the replacement, and promoted from it later (made the backup by
                # AssignSlots), this NF would skip the numbers after the new owner's last
                # without counting them (tests/nf_host/test_replica_last_seq.py)
                rep = self._w.backups.replicas[slot] = Replica(slot)
            rep.epoch = row.epoch
            rep.gen = row.gen
            rep.apply(row.entries, row.version, row.last_seq, row.deleted)
            if row.last_seq is not None:  # (None: the owner has not processed a packet yet)
                self._w.inbuf.drop_upto(slot, row.last_seq)
        if full and msg.outputs is not None:  # our primary's snapshot: its state and held output
            self._w.primary_sync.snapshot(sender)
        return Ack(msg.batch)

    def _on_released(self, msg: Released) -> None:
        """The primary we back up released this slot: its copies are not needed."""
        slot = msg.slot
        if msg.gen is not None and msg.epoch is not None:  # (a given-up self-takeover's replica)
            self._w.backups.drop_replica(slot, msg.epoch, msg.gen)
            return
        self._w.backups.released(slot, msg.epoch)  # (with a cancelled move's replica: ownership.py)
        self._w.inbuf.discard(slot)
        self._w.primary_sync.forget([slot])

    def _on_forward(self, msg: Forward) -> None:
        frame = msg.frame
        if len(frame) >= SHIM_FRAME_LEN and self._not_input(frame):
            return
        self.copy_to_backup(frame)
        self._w.on_frame(frame)

    def _not_input(self, frame: bytes) -> bool:
        """A forwarded packet of a slot not owned here that is kept, not processed (True)."""
        slot, seq = SLOT_SEQ.unpack_from(frame, FRAME_SLOT)
        if slot in self._w.slots:
            return False
        held = self._w.backups
        if slot in held.backed_up:
            # the old owner's copy of the tail it forwards to the adopter we back up (M18), or
            # what an undone move gives back, copied to the old owner's backup (M16): kept as
            # the switch's copies are, replayed if we are promoted
            self._w.on_frame(with_kind(frame, Kind.BACKUP))
            return True
        if slot in held.replicas:
            # given back by an undone move's adopter to the NF holding the old owner's state
            # as a replica (the primary of its group, which took the slot over by itself and
            # gave it up: §4.3), before the undo's AssignSlots owns it here: kept as input,
            # replayed by that promotion (docs/protocols.md §5, M15)
            rep = held.replicas[slot]
            if rep.last_seq is None or seq_after(seq, rep.last_seq):
                self._w.inbuf.add(slot, seq, frame)
            return True
        return False

    def _on_slot_state(self, msg: SlotStateMsg) -> SlotStateAck | None:
        """The primary we back up adopted a slot: its whole state, first. Not acknowledged for
        a slot whose copies we gave back (M14: our primary was taken for dead before it started
        it, and the move was undone): a primary only slow goes on, and acknowledged, it started
        the slot beside the old owner, which had it back (simulation `stalls`, seed 60); not
        acknowledged, it refuses the transfer (nf_host/adopt_commit.py)."""
        slot = msg.slot
        if slot in self._w.gave_back:
            log.warning("slot %d: our primary's adoption of it comes after we gave its copies "
                        "back (the move was undone): not acknowledged", slot)
            return None
        rep = self._w.backups.replicas[slot] = Replica(slot, epoch=msg.epoch)
        self._w.backups.holes.discard(slot)
        self._w.primary_sync.whole(slot, UNNAMED)  # (its sender's next delta names it)
        # our primary starts it: promoted from here if it dies (and the old owner's tail may
        # still come for a while, M18)
        self._w.backups.started(slot, time.monotonic())
        rep.apply(msg.flows, msg.version, msg.seq)
        if msg.seq is not None:
            self._w.inbuf.drop_upto(slot, msg.seq)
        return SlotStateAck(msg.id)

    def _on_input_copy(self, msg: InputCopy) -> None:
        """Our primary's copy of a packet forwarded to it: input we back up."""
        frame = msg.frame
        if len(frame) < SHIM_FRAME_LEN:
            raise ValueError("input copy is not a frame")
        slot, seq = SLOT_SEQ.unpack_from(frame, FRAME_SLOT)
        self._w.backup_copy(slot, seq, frame)

    def copy_to_backup(self, frame: bytes) -> None:
        """A packet a releasing NF forwarded to us (stamped in its epoch, after its transfer) never
        had a copy sent to our backup by the switch: we send it one, ahead of the delta that will
        hold its processing, so that a promotion of our backup replays it if we die before that
        delta is acknowledged (found by the simulation, seed 55: the packet was lost). Likewise
        a copy the switch sent us as a backup that is input now (M18: of a slot we adopt in our
        dead primary's place, it waits unprocessed for the old owner's marker)."""
        if not self._w.backup_id or len(frame) < SHIM_FRAME_LEN \
                or frame[FRAME_KIND] not in (Kind.PRIMARY, Kind.BACKUP):
            return
        link = self._w.links.get(self._w.backup_id)
        if link is not None:
            link.send(InputCopy(with_kind(frame, Kind.BACKUP)))

    def _check_owner(self, sender: int, rows: list[SlotRow]) -> None:
        """Refuse a delta from a slot's former owner: one that was failed over while alive (it
        hung, then went on) still sends deltas of the slots its backup now owns. Its
        acknowledged output would be of state nobody holds, and its versions would mix with the
        new owner's in the replicas (a later delta move would ship against them). The owner of
        a slot is ordered by (epoch, generation): a move bumps the epoch, a promotion the
        generation. Checked before anything is applied; the connection is then closed, so no
        later (cumulative) ack covers the refused delta."""
        for row in rows:
            slot, epoch, gen = row.slot, row.epoch, row.gen
            own = self._w.slots.get(slot)
            if own is not None and own.role == SlotRole.PRIMARY:
                raise StaleSender(f"delta from NF {sender} for slot {slot}, which this NF owns")
            rep = self._w.backups.replicas.get(slot)
            if rep is not None and older_owner((epoch, gen), (rep.epoch, rep.gen)):
                raise StaleSender(f"delta from NF {sender} for slot {slot} of owner generation "
                                  f"{epoch}.{gen}, this NF holds {rep.epoch}.{rep.gen}")

    def _on_transfer(self, msg: Transfer) -> TransferAck | asyncio.Future[TransferAck]:
        slot = msg.slot
        xid = msg.id
        rt = self._w.slots.get(slot)
        sender = msg.sender
        origin = None if sender is None else (sender, xid)
        pending = None if origin is None else self._w.adopt_commit.waiting(slot, origin)
        if pending is not None:
            return pending  # the same transfer again while our backup takes its state
        if rt is not None and origin is not None and rt.adopted_from == origin:
            # the same transfer sent again (its answer was lost, or the old owner was asked to
            # release again): accepted already, whether the slot has started or waits for its
            # marker; answered the same, never refused (a refusal would make the old owner
            # take back a slot that started here)
            return TransferAck(xid, True)
        if rt is None or rt.role != SlotRole.ADOPTING or rt.adopted_from is not None:
            return TransferAck(xid, False, f"slot {slot} is not being adopted")
        base = msg.base
        entries = entries_from_wire(msg.flows)
        if base >= 0:
            rep = self._w.backups.replicas.get(slot)
            holed = slot in self._w.backups.holes
            if rep is None or rep.version < base or holed:
                held = rep.version if rep is not None else None
                what = " of some flows only" if rep is not None and holed else ""
                return TransferAck(xid, False, f"delta against version {base} but this NF holds "
                                               f"{held}{what}")
            state, bad = rep.to_slot_state()
            self._w.c.repl_errors += bad
        else:
            state = SlotState(slot)
        version = msg.version
        for wk in msg.deleted:  # deleted since the base (evicted by the old owner)
            state.delete(key_from_wire(wk))
        state.deleted.clear()  # (not ours to replicate: our backup gets the whole state)
        state.load(entries, version)
        state.version = version
        state.last_seq = msg.seq
        self._w.backups.transferred(slot)
        self._w.inbuf.discard(slot)
        # (a last seq of None: the old owner knew no number yet; 0 is a number, after a wrap or
        # as the one before 1)
        parked = Parked(state, None if state.last_seq is None else seq_next(state.last_seq),
                        time.monotonic())
        origin = origin if origin is not None else (0, xid)
        accepted = TransferAck(xid, True)

        def commit() -> bool:
            if self._w.slots.get(slot) is not rt or rt.role != SlotRole.ADOPTING:
                return False  # cancelled meanwhile (the fence)
            rt.adopted_from = origin  # (the fence: started)
            # the slot starts here once the old owner's marker has come too (move_marker.py)
            if self._w.markers.on_transfer(slot, parked):
                self._w.start_adopted(rt, parked)
            return True

        backup = self._w.links.get(self._w.backup_id) if self._w.backup_id else None
        if backup is None:  # no backup to hold the state: accepted at once
            commit()
            return accepted
        # the state goes to our backup before the old owner forgets it (nf_host/adopt_commit.py)
        return self._w.adopt_commit.begin(backup, slot, origin, lambda sid: SlotStateMsg(
            sid, slot, rt.epoch, state.version, state.last_seq, state.everything()),
            accepted, commit)
