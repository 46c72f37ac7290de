"""The worker's commit pipeline: the open batch, sealed into a delta for the backup and the cluster
peers when it is full or due; each sealed batch's output held until the backup acknowledges it
(then handed to `tx`, in order), or released at once without a backup; the backpressure that stops
reading input while too much output is held. A part of the worker (`nf_host.worker`), given a
narrow view of it (`PipelineHost`) when it is built.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from contract.replication import Delta, LoggedBatch, SlotRow, SwitchRestart, encode
from contract.roles import SlotRole
from contract.seq import seq_after
from nf_host.commit import Batch, OutputCommit, OutputLog
from nf_host.links import Links
from nf_host.quiet_window import QuietWindow
from nf_host.replication import Link
from nf_host.worker_types import PartHost, TakeoverClock, WorkerConfig

log = logging.getLogger("nf_host.worker")  # (the fail-over bench reads the takeover line)


class PipelineHost(PartHost, Protocol):
    """What `CommitPipeline` sees of the worker: configuration, counters and `tx`, the owned slots
    (sealed into rows), the links and who is backup or peer, the takeover's clock (ended by its
    first output) and quiet window (peers' deltas held), and the output log it keeps as a backup
    (emptied of what is released on a switch restart)."""

    takeover_clock: TakeoverClock | None

    @property
    def cfg(self) -> WorkerConfig: ...
    @property
    def tx(self) -> Callable[[bytes | bytearray], None]: ...
    @property
    def linkset(self) -> Links: ...
    @property
    def links(self) -> dict[int, Link]: ...
    @property
    def acked_versions(self) -> dict[int, dict[int, int]]: ...
    @property
    def pending_versions(self) -> dict[int, dict[int, dict[int, int]]]: ...
    @property
    def peer_ids(self) -> set[int]: ...
    @property
    def quiet(self) -> QuietWindow: ...
    @property
    def out_log(self) -> OutputLog: ...


class CommitPipeline:
    """Batches, their deltas and their held output (see the module docstring)."""

    def __init__(self, host: PipelineHost, on_pause: Callable[[bool], None] | None) -> None:
        self._w = host
        self._on_pause = on_pause  # stop/resume reading the data socket
        self.commit = OutputCommit()
        self.batch: Batch | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.released_id = 0  # the last batch whose output has been handed to `tx`
        self._release_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.input_paused = False

    def reset(self) -> None:
        """Drop the open batch and every held one, their output with them (the NF became a
        backup or a spare: `Worker.set_role`); batch numbers go on."""
        self.commit = OutputCommit(next_id=self.commit.next_id)
        if self.batch is not None:
            self.batch = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        self.maybe_resume()

    def open_batch(self, now: float) -> Batch:
        batch = self.batch = self.commit.new_batch(now)
        if self._w.cfg.batch_time > 0:
            self._timer = asyncio.get_running_loop().call_later(
                self._w.cfg.batch_time, self._batch_due, batch.id
            )
        return batch

    def _batch_due(self, batch_id: int) -> None:
        if self.batch is not None and self.batch.id == batch_id:
            self.close_batch()

    def close_batch(self) -> None:
        """Seal the open batch: send its delta, hold its output until the backup acknowledges."""
        batch = self.batch
        if batch is None:
            return
        self.batch = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._w.takeover_clock is not None and batch.outputs:
            self._w.takeover_clock.sealed(batch.slot_seqs)
        rows: list[SlotRow] = []
        versions: dict[int, int] = {}
        for slot, last in batch.slot_seqs.items():
            rt = self._w.slots[slot]
            entries = rt.state.seal()
            versions[slot] = rt.state.version
            row = SlotRow(slot, rt.epoch, rt.state.version, last, entries, rt.replace,
                          rt.state.gen)
            if rt.state.deleted:  # (tombstones kept back to the oldest version a peer holds)
                floor = min((acked.get(slot, 0) for acked in self._w.acked_versions.values()),
                            default=rt.state.version)
                row.deleted = list(rt.state.seal_deletions(floor))
            rows.append(row)
            rt.replace = False
        for slot in batch.replaced:  # a slot taken over empty: its generation, at once
            empty = self._w.slots.get(slot)
            if slot in batch.slot_seqs or empty is None or not empty.replace \
                    or empty.role != SlotRole.PRIMARY:
                continue
            entries = empty.state.seal()
            versions[slot] = empty.state.version
            rows.append(SlotRow(slot, empty.epoch, empty.state.version, empty.state.last_seq,
                                entries, True, empty.state.gen))
            empty.replace = False
        self._replicate(batch, Delta(batch.id, rows, False, self._w.cfg.nf_id), versions)

    def _replicate(self, batch: Batch, msg: Delta, versions: dict[int, int]) -> None:
        data = encode(msg) if self._w.links else b""
        for nf_id, link in self._w.links.items():
            if (nf_id != self._w.backup_id and nf_id not in self._w.peer_ids) or link is self._w.linkset.syncing:
                continue
            if nf_id == self._w.backup_id:
                # the backup also logs the batch's output, until we say it has left (`rel`): if
                # we die before that, the promoted backup sends it again (the switch drops what
                # had already left), so no output is lost however a batch ends
                if link.send(self.for_backup(msg, batch.logged())):
                    self._w.pending_versions.setdefault(nf_id, {})[batch.id] = versions
                continue
            if self._w.quiet.active:
                link.cork()  # a peer: nothing waits for its ack (sent when the window ends)
            if nf_id != self._w.backup_id and link.backlog() > self._w.cfg.peer_backlog_bytes:
                # a peer that does not keep up: rather than buffer without bound, drop the
                # connection; it reconnects and gets a full snapshot (versions restart from it)
                log.warning("peer %d is %d bytes behind: resynchronising", nf_id, link.backlog())
                link.reset()
                self._w.pending_versions.pop(nf_id, None)
                continue
            if link.send_raw(data):
                self._w.pending_versions.setdefault(nf_id, {})[batch.id] = versions
        if self._w.backup_id:
            self.commit.hold(batch)
            if self.commit.held_outputs >= self._w.cfg.max_held and not self.input_paused:
                self._pause_input(True)
        else:
            self.release_batch(batch)

    def _pause_input(self, pause: bool) -> None:
        """Backpressure: with too much output waiting for the backup, stop reading input (the
        kernel queues, then drops and counts); resume once half of it is released."""
        self.input_paused = pause
        log.warning("input %s: %d outputs held", "paused" if pause else "resumed", self.commit.held_outputs)
        if self._on_pause is not None:
            self._on_pause(pause)

    def maybe_resume(self) -> None:
        if self.input_paused and self.commit.held_outputs <= self._w.cfg.max_held // 2:
            self._pause_input(False)

    def switch_restarted(self) -> None:
        """The switch restarted (the controller's notice, before its reconcile): as a backup,
        the output logged here that is known released is dropped; as a primary, the backup is
        told what had been released by now, in order with the deltas (P10)."""
        self._w.out_log.forget_released()
        link = self._w.links.get(self._w.backup_id) if self._w.backup_id else None
        if link is not None:
            link.send(SwitchRestart(self._w.cfg.nf_id, self.released_id))

    def for_backup(self, msg: Delta, logged: list[LoggedBatch]) -> Delta:
        """`msg` as the backup receives it: with the outputs to log and the released watermark
        (the backup keeps one log per primary, by the sender's id)."""
        return replace(msg, outputs=logged, released=self.released_id)

    def held_upto(self, batch_id: int) -> bool:
        """Whether output of a batch numbered `batch_id` or lower still waits for an ack."""
        return bool(self.commit.inflight) and self.commit.inflight[0].id <= batch_id

    async def released_upto(self, batch_id: int, timeout: float) -> None:
        """Until the output of every batch up to `batch_id` has been handed to `tx` (at most
        `timeout`: a backup that stops acknowledging holds it; the output still leaves later)."""
        if not self.held_upto(batch_id):
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._release_waiters.append((batch_id, fut))
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            log.warning("output of batch %d not released within %.1f s", batch_id, timeout)

    def release_batch(self, batch: Batch) -> None:
        tx = self._w.tx
        for out in batch.outputs:
            tx(out)
        self._w.c.outputs += len(batch.outputs)
        self.released_id = batch.id
        if self._w.takeover_clock is not None and batch.outputs \
                and not self._w.takeover_clock.slots.isdisjoint(batch.slot_seqs):
            # what a fail-over's takeover ends with (the fail-over bench reads this line)
            clock, now = self._w.takeover_clock, time.time()
            self._w.takeover_clock = None
            log.info("takeover: first output of the promoted slots released %.1f ms after the "
                     "promotion (%s), at %.6f", (now - clock.at) * 1000, clock.steps(now), now)
            self._w.quiet.end()
        if self._release_waiters:
            waiting = self._release_waiters
            self._release_waiters = [(b, f) for b, f in waiting if self.held_upto(b)]
            for b, f in waiting:
                if not self.held_upto(b) and not f.done():
                    f.set_result(None)
        for slot, seq in batch.slot_seqs.items():
            rt = self._w.slots.get(slot)
            if rt is not None and (not rt.committed_seq or seq_after(seq, rt.committed_seq)):
                rt.committed_seq = seq
