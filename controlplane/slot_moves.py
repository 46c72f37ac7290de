"""`SlotMoves`: the slot moves this controller runs, one at a time with each other and with the
fail-overs (the core's `move_lock`): `migrate()`, the operator's, the balancer's, the spare
pool's and the live update's, and the moves a previous leader journalled and did not end,
finished once their NFs are configured (docs/protocols.md §5). The moves themselves are
controlplane/migration.py, run on a `MovesHost` (the controller's core)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from contract.proto import nf_control_pb2 as pb
from controlplane.background import BackgroundTasks
from controlplane.migration import (
    MOVE_AGAIN_AFTER,
    MoveHost,
    MoveResult,
    finish_move,
    migrate_slot,
)
from controlplane.nf_registry import NfControlError
from controlplane.run_history import RunHistory
from controlplane.slot_store import MoveIntent

LOG = logging.getLogger("controlplane.controller")  # one logger for the controller's parts


class MovesHost(MoveHost, Protocol):
    """What a move runs on (`MoveHost`), the lock that serialises moves and fail-overs and how
    long a `Release` is waited for."""

    @property
    def move_lock(self) -> asyncio.Lock: ...
    @property
    def release_timeout(self) -> float: ...


class SlotMoves:
    """Moves run one at a time, recorded in the history (see the module docstring)."""

    def __init__(self, host: MovesHost, history: RunHistory, tasks: BackgroundTasks) -> None:
        self.host = host
        self.history = history
        self.tasks = tasks
        self._finishing: set[int] = set()  # journalled moves a task is finishing
        self._cancelling: set[tuple[int, int]] = set()  # (adopter, slot) a task is telling

    @property
    def pairs(self) -> dict[int, int | None]:
        return self.host.state.pairs

    async def migrate(self, slots: list[int], to_nf: int) -> list[MoveResult]:
        """Move `slots` to primary `to_nf`, one after the other (migration.py). Raises
        MoveError before the first move for a bad request; a failed move is undone and reported.
        A slot moved less than `MOVE_AGAIN_AFTER` ago is moved once that has passed (waited for
        here, outside the lock: fail-overs and other moves go on meanwhile)."""
        now = time.monotonic()
        wait = max((self.host.moved_at.get(s, -MOVE_AGAIN_AFTER) + MOVE_AGAIN_AFTER - now
                    for s in slots), default=0.0)
        if wait > 0:
            await asyncio.sleep(wait)  # (the protocol's wait, not a synchronisation)
        results = []
        async with self.host.move_lock:
            for slot in slots:
                result = await migrate_slot(self.host, slot, to_nf, self.host.release_timeout)
                self.history.record_move(result)
                results.append(result)
        return results

    def finish_open_moves(self) -> None:
        """Finish each journalled move whose adopter is configured (told `Adopt` again) and
        whose old owner is configured or down, one at a time with the other moves and
        fail-overs (`migration.finish_move`); forget one whose adopter was failed over. Called
        once the NFs are configured, and after each reconfiguration of an NF."""
        self._tell_cancels()
        for slot, move in sorted(self.host.open_moves.items()):
            if move.dst not in self.pairs:  # B was failed over: its fail-over decided the slot
                self.tasks.spawn(self.host.close_move(slot))
                continue
            src_state = self.host.registry.nfs.get(move.src)
            ready = self.host.state.nfs.configured(move.dst) and (
                self.host.state.nfs.configured(move.src) or src_state is None
                or src_state.declared_down)
            if ready and slot not in self._finishing:
                self._finishing.add(slot)
                self.tasks.spawn(self._finish_move(move))

    def _tell_cancels(self) -> None:
        """An adopter taken for dead whose backup cancelled its adoption (M14), only slow after
        all, holds the slot ADOPTING while the switch sends it to the old owner: told
        `CancelAdopt` once it answers and is configured (what it buffered is dropped, counted
        in `cancelled`: the backup gave the copies back). Its backup no longer acknowledges the
        slot's state, so it cannot have started it (nf_host/receiving.py); simulation `stalls`,
        seeds 60 and 95."""
        reg = self.host.registry
        for nf_id, slots in list(self.host.untold_cancels.items()):
            if reg.nfs[nf_id].declared_down or not self.host.state.nfs.configured(nf_id):
                continue
            for slot, epoch in sorted(slots.items()):
                if (nf_id, slot) not in self._cancelling:  # (one call at a time per adoption)
                    self._cancelling.add((nf_id, slot))
                    self.tasks.spawn(self._tell_cancel(nf_id, slot, epoch))

    async def _tell_cancel(self, nf_id: int, slot: int, epoch: int) -> None:
        try:
            reply = await self.host.registry.call(nf_id, "CancelAdopt",
                                                  pb.AdoptRequest(slot=slot, epoch=epoch))
        except NfControlError as exc:
            LOG.info("NF %d not told the cancelled adoption of slot %d yet: %s", nf_id, slot, exc)
            return
        finally:
            self._cancelling.discard((nf_id, slot))
        if reply.started:
            LOG.error("NF %d had started slot %d, whose adoption its backup cancelled (epoch "
                      "%d): two NFs hold it", nf_id, slot, epoch)
        untold = self.host.untold_cancels.get(nf_id, {})
        if untold.get(slot) == epoch:  # (not a later adoption's, cancelled since)
            del untold[slot]
            if not untold:
                del self.host.untold_cancels[nf_id]

    async def _finish_move(self, move: MoveIntent) -> None:
        try:
            async with self.host.move_lock:
                if self.host.open_moves.get(move.slot) != move:
                    return
                if move.unwritten_in(self.host.slot_map.entry(move.slot)):
                    # its switch write failed and etcd kept its entry (`migrate_slot`): B
                    # still adopts it, as a next leader would finish it, so is this one
                    try:
                        await self.host.move_slot(move.slot, move.dst)
                    except Exception as exc:
                        LOG.warning("journalled move of slot %d not written yet: %s", move.slot,
                                    exc)
                        return
                result = await finish_move(self.host, move, self.host.release_timeout)
                self.history.record_move(result)
                LOG.warning("journalled move of slot %d finished: %s", move.slot,
                            "ok" if result.ok else result.error)
        finally:
            self._finishing.discard(move.slot)
