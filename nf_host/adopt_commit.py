"""An adopter's commit of a move's transfer: the slot's state is at its backup before the old
owner is told the transfer was accepted (docs/protocols.md §5, "The adopter's backup").

Without it, the old owner forgets the slot once the adopter acknowledges the transfer, and the
state lives at the adopter alone until its first delta reaches its backup: an adopter that dies
in between leaves its backup to promote the slot with nothing (found by the simulation, seed 48:
counts restarted mid-flow). So the adopter sends its backup the slot's whole state first (`xs`,
on the same ordered link as its later deltas), and answers the transfer only once the backup
acknowledges it (`xsa`). Until then the adoption is not *started*: the move's fence
(`CancelAdopt`) cancels it, and an acknowledgement that comes too late, or not at all
(`transfer_timeout / 2`), refuses the transfer, so the old owner keeps the slot.

The answer to the transfer is deferred: `begin` returns a future the replication server writes
back when it resolves (`nf_host.replication.ReplicationServer`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, replace

from contract.replication import SlotState, TransferAck
from nf_host.replication import Link


@dataclass
class _Pending:
    slot: int
    origin: tuple[int, int]
    reply: asyncio.Future[TransferAck]
    accepted: TransferAck
    on_commit: Callable[[], bool]  # starts the adoption; False if it is gone (cancelled)


class AdoptCommit:
    """The transfers waiting for the adopter's backup (see the module docstring)."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._next = 0
        self._pending: dict[int, _Pending] = {}
        self.refused = 0  # transfers refused because the backup did not take the state in time

    def waiting(self, slot: int, origin: tuple[int, int]) -> asyncio.Future[TransferAck] | None:
        """The pending answer to the same transfer sent again, if any."""
        for p in self._pending.values():
            if p.slot == slot and p.origin == origin:
                return p.reply
        return None

    def begin(self, backup: Link, slot: int, origin: tuple[int, int],
              state: Callable[[int], SlotState], accepted: TransferAck,
              on_commit: Callable[[], bool]) -> asyncio.Future[TransferAck]:
        """Send the slot's state (`state(id)`) to `backup`; the future answers the transfer."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[TransferAck] = loop.create_future()
        if backup.writer is None:
            self.refused += 1
            fut.set_result(refusal(accepted, "the adopter's backup is not connected"))
            return fut
        self._next += 1
        sid = self._next
        self._pending[sid] = _Pending(slot, origin, fut, accepted, on_commit)
        backup.send(state(sid))
        loop.call_later(self.timeout, self._expire, sid)
        return fut

    def acked(self, sid: int) -> None:
        """The backup holds the state: the adoption starts, the transfer is answered."""
        p = self._pending.pop(sid, None)
        if p is None or p.reply.done():
            return
        if p.on_commit():
            p.reply.set_result(p.accepted)
        else:
            p.reply.set_result(refusal(p.accepted, f"slot {p.slot} is not being adopted"))

    def _expire(self, sid: int) -> None:
        p = self._pending.pop(sid, None)
        if p is not None and not p.reply.done():
            self.refused += 1
            p.reply.set_result(refusal(p.accepted, "the adopter's backup did not take the "
                                                   "slot's state in time"))


def refusal(accepted: TransferAck, err: str) -> TransferAck:
    return replace(accepted, ok=False, err=err)
