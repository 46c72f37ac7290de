"""The release side's outstanding transfers (docs/protocols.md §5): each `Transfer` a worker sent
an adopter, by id, until its answer arrives (or the slot is taken back); the answer decides the
released slot at once, a packet boundary: accepted, what waited here and what arrives later is
forwarded to the adopter; refused, the slot is owned here again. A part of the worker
(`nf_host.worker`), given a narrow view of it (`TransferHost`) when it is built; the links
(`nf_host.links`) hand it the answers, `Ownership.release` opens and awaits them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from contract.replication import Forward, Released, TransferAck
from contract.roles import SlotRole
from contract.shim import Shim
from nf_host.flow_bounds import FlowBounds
from nf_host.replication import Link
from nf_host.worker_types import PartHost, SlotRuntime

log = logging.getLogger("nf_host.worker")


class TransferHost(PartHost, Protocol):
    """What `Transfers` sees of the worker: the owned slots, the links (the adopter's, the
    backup's), the flow bounds (a slot owned again), the slots whose sequencer waits, and the
    data path's entry for the packets that waited."""

    @property
    def links(self) -> dict[int, Link]: ...
    @property
    def bounds(self) -> FlowBounds: ...
    @property
    def gapped(self) -> set[int]: ...
    def offer(self, rt: SlotRuntime, shim: Shim, frame: bytes, now: float) -> None: ...


class Transfers:
    """The transfers awaiting an adopter's answer (see the module docstring)."""

    def __init__(self, host: TransferHost) -> None:
        self._w = host
        self._last_id = 0
        self._waiters: dict[int, asyncio.Future[TransferAck]] = {}
        self._slots: dict[int, int] = {}  # transfer id -> the slot it releases

    def open(self, slot: int) -> tuple[int, asyncio.Future[TransferAck]]:
        """A new transfer of `slot`: its id and the future its answer sets."""
        self._last_id += 1
        xid = self._last_id
        fut: asyncio.Future[TransferAck] = asyncio.get_running_loop().create_future()
        self._waiters[xid] = fut
        self._slots[xid] = slot
        return xid, fut

    def withdraw(self, xid: int) -> None:
        """The slot of transfer `xid` is taken back: whoever awaits its answer is told so, and a
        late answer decides nothing."""
        self._slots.pop(xid, None)
        fut = self._waiters.pop(xid, None)
        if fut is not None and not fut.done():
            fut.set_result(TransferAck(xid, False, "taken back"))

    def answered(self, msg: TransferAck) -> None:
        """The adopter's answer: it decides the slot, whoever still waits, then the waiter."""
        fut = self._waiters.pop(msg.id, None)
        if fut is not None and not fut.done():
            self._decide(msg.id, msg)
            fut.set_result(msg)

    def _decide(self, xid: int, msg: TransferAck) -> None:
        """The adopter's answer decides a released slot: accepted, what waited here and what
        arrives later is forwarded to it; refused, the slot is owned here again."""
        w = self._w
        slot = self._slots.pop(xid, None)
        rt = w.slots.get(slot) if slot is not None else None
        if rt is None or rt.release is None or rt.release.xid != xid:
            if msg.ok:
                log.error("slot %s: transfer %d accepted after this NF took the slot back", slot, xid)
            return
        rec = rt.release
        if rt.role != SlotRole.RELEASED or rt.forward is not None:
            return
        held, rt.pending = rt.pending, []
        if not msg.ok:  # the slot stays here: resume processing, with what arrived meanwhile
            rt.become(SlotRole.PRIMARY)
            rt.release = None
            w.bounds.track(rt)
            now = time.monotonic()
            for shim, frame in held:
                w.offer(rt, shim, frame, now)
            return
        link = w.links.get(rec.to_nf) or rec.link
        rt.forward = link
        rt.forward_copy = rec.copy  # the adopter's backup (M18)
        rec.transfer = None  # accepted: the state it carried is not needed again
        early = [item for _seq, item in rt.seq.take_buffered()]
        for _shim, frame in early + held:
            fwd = Forward(bytes(frame))
            link.send(fwd)
            if rec.copy is not None:
                rec.copy.send(fwd)
        w.c.forwarded += len(early) + len(held)
        w.gapped.discard(rt.slot)
        backup = w.links.get(w.backup_id) if w.backup_id else None
        if backup is not None and backup is not link:
            backup.send(Released(rt.slot))  # our backup stops keeping copies of the slot
        # (our output of s left before the transfer: a next move cannot start while our epoch's
        # output is held, which the switch's two-epoch output dedup needs)
