"""The receiving side of replication: what a worker does with the messages other NFs send it
(deltas and snapshots of the slots it backs up or replicates, a move's transfer and the state an
adopting primary gives its backup, forwarded packets and input copies). A layer of the worker
(`nf_host.worker` describes the whole); the sending side is `nf_host.worker_core`'s.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from nf_host.links import Links
from nf_host.move_marker import Parked
from nf_host.promote_wait import UNNAMED
from nf_host.reorder import seq_next
from nf_host.replication import Message, StaleSender
from nf_host.shim import Kind
from nf_host.state_store import Replica, SlotState, entries_from_wire, key_from_wire
from nf_host.worker_core import _HDR, _SLOT_SEQ
from nf_host.worker_types import SlotRole, older_owner


class Receiving(Links):
    """The worker's receiving side of replication (see the module docstring)."""

    def on_replication(self, msg: Message) -> Message | asyncio.Future[Message] | None:
        t = msg["t"]
        if t == "d":
            full = bool(msg.get("full"))
            sender = int(msg.get("n", 0))
            self._check_owner(sender, msg["s"])
            if "o" in msg:  # from the primary we back up: log its unreleased output
                self.out_log.record(sender, msg["o"] or [], msg.get("rel"), full)
            for item in msg["s"]:
                slot, epoch, version, last_seq, raw, *more = item
                # (an ADOPTING slot still takes deltas into its replica: the acknowledged version
                # is the base of the delta transfer that will complete the adoption)
                rep = self.replicas.get(slot)
                whole = full or bool(more and more[0])
                if whole:
                    self.primary_sync.whole(int(slot), sender)  # (promote_wait.py)
                else:
                    self.primary_sync.delta(int(slot), sender)
                if rep is None or whole:  # a whole slot from a new owner
                    # the replica becomes that state, its last seq included: kept, a dead
                    # owner's uncommitted numbers that reached this peer (not the backup) would
                    # outlive the replacement, and promoted from it later (made the backup by
                    # AssignSlots), this NF would skip the numbers after the new owner's last
                    # without counting them (tests/nf_host/test_replica_last_seq.py)
                    rep = self.replicas[slot] = Replica(int(slot))
                rep.epoch = int(epoch)
                rep.gen = int(more[1]) if len(more) > 1 else 0
                if last_seq is None:  # the owner has not processed a packet of the slot yet
                    rep.apply(raw, int(version), None, more[2] if len(more) > 2 else None)
                    continue
                rep.apply(raw, int(version), int(last_seq), more[2] if len(more) > 2 else None)
                self.inbuf.drop_upto(int(slot), int(last_seq))
            if full and "o" in msg:  # our primary's snapshot: its state and held output
                self.primary_sync.snapshot(sender)
            return {"t": "a", "b": msg["b"]}
        if t == "x":
            return self._on_transfer(msg)
        if t == "r":  # the primary we back up released this slot: its copies are not needed
            slot = int(msg["slot"])
            self.backed_up.discard(slot)
            self.inbuf.discard(slot)
            self.primary_sync.forget([slot])
            rep = self.replicas.get(slot)
            if rep is not None and msg.get("e") is not None and rep.epoch == int(msg["e"]):
                del self.replicas[slot]  # a cancelled move's (empty) replica (ownership.py)
            return None
        if t == "f":
            frame = msg["f"]
            if not isinstance(frame, bytes):
                raise ValueError("forwarded frame is not bytes")
            self._copy_to_backup(frame)
            self.on_frame(frame)
            return None
        if t == "xs":  # the primary we back up adopted a slot: its whole state, first
            slot = int(msg["slot"])
            rep = self.replicas[slot] = Replica(slot, epoch=int(msg["epoch"]))
            self.primary_sync.whole(slot, UNNAMED)  # (its sender's next delta names it)
            seq = msg["seq"]
            rep.apply(msg["flows"], int(msg["version"]), None if seq is None else int(seq))
            if seq is not None:
                self.inbuf.drop_upto(slot, int(seq))
            return {"t": "xsa", "id": msg["id"]}
        if t == "c":  # our primary's copy of a packet forwarded to it: input we back up
            frame = msg["f"]
            if not isinstance(frame, bytes) or len(frame) < _HDR:
                raise ValueError("input copy is not a frame")
            slot, seq = _SLOT_SEQ.unpack_from(frame, 18)
            self._backup_copy(slot, seq, frame)
            return None
        raise ValueError(f"unknown replication message type {t!r}")

    def _copy_to_backup(self, frame: bytes) -> None:
        """A packet a releasing NF forwarded to us (stamped in its epoch, after its transfer) never
        had a copy sent to our backup by the switch: we send it one, ahead of the delta that will
        hold its processing, so that a promotion of our backup replays it if we die before that
        delta is acknowledged (found by the simulation, seed 55: the packet was lost)."""
        if not self.backup_id or len(frame) < _HDR or frame[14] != Kind.PRIMARY:
            return
        link = self.links.get(self.backup_id)
        if link is not None:
            copy = bytearray(frame)
            copy[14] = Kind.BACKUP
            link.send({"t": "c", "f": bytes(copy)})

    def _check_owner(self, sender: int, items: list[Any]) -> None:
        """Refuse a delta from a slot's former owner: one that was failed over while alive (it
        hung, then went on) still sends deltas of the slots its backup now owns. Its
        acknowledged output would be of state nobody holds, and its versions would mix with the
        new owner's in the replicas (a later delta move would ship against them). The owner of
        a slot is ordered by (epoch, generation): a move bumps the epoch, a promotion the
        generation. Checked before anything is applied; the connection is then closed, so no
        later (cumulative) ack covers the refused delta."""
        for item in items:
            slot, epoch = int(item[0]), int(item[1])
            gen = int(item[6]) if len(item) > 6 else 0
            own = self.slots.get(slot)
            if own is not None and own.role == SlotRole.PRIMARY:
                raise StaleSender(f"delta from NF {sender} for slot {slot}, which this NF owns")
            rep = self.replicas.get(slot)
            if rep is not None and older_owner((epoch, gen), (rep.epoch, rep.gen)):
                raise StaleSender(f"delta from NF {sender} for slot {slot} of owner generation "
                                  f"{epoch}.{gen}, this NF holds {rep.epoch}.{rep.gen}")

    def _on_transfer(self, msg: Message) -> Message | asyncio.Future[Message]:
        slot = int(msg["slot"])
        xid = msg["id"]
        rt = self.slots.get(slot)
        sender = msg.get("n")
        origin = None if sender is None else (int(sender), int(xid))
        pending = None if origin is None else self.adopt_commit.waiting(slot, origin)
        if pending is not None:
            return pending  # the same transfer again while our backup takes its state
        if rt is not None and origin is not None and rt.adopted_from == origin:
            # the same transfer sent again (its answer was lost, or the old owner was asked to
            # release again): accepted already, whether the slot has started or waits for its
            # marker; answered the same, never refused (a refusal would make the old owner
            # take back a slot that started here)
            return {"t": "xa", "id": xid, "ok": True, "err": ""}
        if rt is None or rt.role != SlotRole.ADOPTING or rt.adopted_from is not None:
            return {"t": "xa", "id": xid, "ok": False, "err": f"slot {slot} is not being adopted"}
        base = int(msg["base"])
        entries = entries_from_wire(msg["flows"])
        if base >= 0:
            rep = self.replicas.get(slot)
            if rep is None or rep.version < base:
                held = rep.version if rep is not None else None
                return {
                    "t": "xa", "id": xid, "ok": False,
                    "err": f"delta against version {base} but this NF holds {held}",
                }
            state, bad = rep.to_slot_state()
            self.c.repl_errors += bad
        else:
            state = SlotState(slot)
        version = int(msg["version"])
        for wk in msg.get("del") or []:  # deleted since the base (evicted by the old owner)
            state.delete(key_from_wire(wk))
        state.deleted.clear()  # (not ours to replicate: our backup gets the whole state)
        state.load(entries, version)
        state.version = version
        state.last_seq = None if msg["seq"] is None else int(msg["seq"])
        self.replicas.pop(slot, None)
        self.inbuf.discard(slot)
        # (a last seq of None: the old owner knew no number yet; 0 is a number, after a wrap or
        # as the one before 1)
        parked = Parked(state, None if state.last_seq is None else seq_next(state.last_seq),
                        time.monotonic())
        origin = origin if origin is not None else (0, int(xid))
        accepted: Message = {"t": "xa", "id": xid, "ok": True, "err": ""}

        def commit() -> bool:
            if self.slots.get(slot) is not rt or rt.role != SlotRole.ADOPTING:
                return False  # cancelled meanwhile (the fence)
            rt.adopted_from = origin  # (the fence: started)
            # the slot starts here once the old owner's marker has come too (move_marker.py)
            if self.markers.on_transfer(slot, parked):
                self._start_adopted(rt, parked)
            return True

        backup = self.links.get(self.backup_id) if self.backup_id else None
        if backup is None:  # no backup to hold the state: accepted at once
            commit()
            return accepted
        # the state goes to our backup before the old owner forgets it (nf_host/adopt_commit.py)
        return self.adopt_commit.begin(backup, slot, origin, {
            "slot": slot, "epoch": rt.epoch, "version": state.version, "seq": state.last_seq,
            "flows": state.everything()}, accepted, commit)
