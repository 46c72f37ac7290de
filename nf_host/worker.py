"""One worker of an NF instance: in-order processing, output commit, replication, backup and moves.

A worker owns a disjoint set of slots (slot % workers == index) and everything about them: the
sequencers, the slot states, the open batch and the batches waiting for the backup's ack, the input
copies it holds as a backup, the replicas it holds as a cluster peer, and its replication links.
It runs on one asyncio loop: frames come from `on_frame` (the data socket, or packets forwarded by
a releasing NF), replication messages from `on_replication`, commands from `command`. Between two
calls nothing else runs, so every control action happens at a packet boundary.

The worker never touches a socket for data itself: it hands output frames to `tx`, which lets the
same code run behind an AF_PACKET socket (`nf_host.port`) and in-process in unit tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from nf_host.backup import InputBuffer
from nf_host.commit import Batch, OutputCommit, OutputLog
from nf_host.move_marker import MarkerWait, Parked, marker_frame
from nf_host.nf_api import Context, GlobalStore, GlobalStoreError, NetworkFunction, Verdict
from nf_host.parse import parse_frame
from nf_host.peer_policy import PeerLimits, PeerPolicy, hello
from nf_host.reorder import SEQ_MASK, Offer, Sequencer, seq_after, seq_next
from nf_host.replication import (
    Link,
    Message,
    ReplicationServer,
    StaleSender,
    encode,
    worker_address,
)
from nf_host.shim import ETH_HDR_LEN, FLAG_REVERSE, SHIM_LEN, SLOT_BITS, Kind, Shim, ShimError
from nf_host.state_store import FlowId, Replica, SlotState, entries_from_wire
from nf_host.timing import MARKER_WAIT, TRANSFER_TIMEOUT

log = logging.getLogger(__name__)

_OUT_SHIM = struct.Struct("!BBBBHHHI")  # the shim without its trailing ether_type
_OUT_PREFIX = b"\x88\xb5"
_HDR = ETH_HDR_LEN + SHIM_LEN
PROMOTE_CHUNK = 128  # idle slots promoted per turn of the event loop (Worker.promote_soon)
_SLOT_SEQ = struct.Struct("!H4xI")  # slot and seq, from shim offset 4


class SlotRole(IntEnum):
    """Mirrors `SlotRole` in nf_control.proto."""

    PRIMARY = 1
    BACKUP = 2
    ADOPTING = 3
    RELEASED = 4
    REPLICA = 5


class Role(IntEnum):
    """Mirrors `Role` in nf_control.proto."""

    PRIMARY = 1
    BACKUP = 2
    IDLE = 3


def _older(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether ownership generation a = (epoch, gen) is before b (epochs: 16-bit serial numbers)."""
    if a[0] != b[0]:
        return 0 < (b[0] - a[0]) & 0xFFFF < 0x8000
    return a[1] < b[1]


class CommandError(Exception):
    """A control command that cannot be carried out; its message goes back to the controller."""


@dataclass
class WorkerConfig:
    nf_id: int
    cluster: int = 0
    index: int = 0
    workers: int = 1
    batch_size: int = 32
    batch_time: float = 0.0005
    gap_timeout: float = 0.05
    reorder_capacity: int = 4096
    adopt_capacity: int = 65536
    backup_buffer_bytes: int = 64 * 1024 * 1024
    repl_host: str = "127.0.0.1"
    repl_port: int = 0
    transfer_timeout: float = TRANSFER_TIMEOUT
    marker_wait: float = MARKER_WAIT  # an adopter's wait for the old owner's move marker
    max_held: int = 65536  # outputs waiting for the backup before the worker stops reading input
    peer_backlog_bytes: int = 32 * 1024 * 1024  # unsent deltas to a peer before resynchronising
    limits: PeerLimits = field(default_factory=PeerLimits)  # what the replication server accepts


@dataclass
class SlotRuntime:
    slot: int
    epoch: int
    role: SlotRole
    seq: Sequencer[tuple[Shim, bytes]]
    state: SlotState
    packets: int = 0
    committed_seq: int = 0
    forward: Link | None = None
    pending: list[tuple[Shim, bytes]] = field(default_factory=list)  # while adopting
    replace: bool = False  # the next delta carries the whole slot: receivers replace their replica


@dataclass
class Counters:
    packets: int = 0
    malformed: int = 0
    unowned: int = 0
    duplicates: int = 0
    overflows: int = 0
    nf_errors: int = 0
    global_store_errors: int = 0  # packets dropped because the global state store failed
    forwarded: int = 0
    outputs: int = 0
    replayed: int = 0
    repl_errors: int = 0
    transfer_bytes: int = 0
    backup_copies: int = 0
    reemitted: int = 0  # logged outputs of a dead primary sent again on promotion
    cancelled: int = 0  # packets buffered for an adoption that was cancelled (an undone move)


class Worker:
    """The per-worker engine (see the module docstring)."""

    def __init__(
        self,
        cfg: WorkerConfig,
        nf: NetworkFunction,
        store: GlobalStore,
        tx: Callable[[bytes | bytearray], None],
    ) -> None:
        self.cfg, self.nf, self.store, self.tx = cfg, nf, store, tx
        self.role = Role.PRIMARY
        self.slots: dict[int, SlotRuntime] = {}
        self.replicas: dict[int, Replica] = {}
        self.backed_up: set[int] = set()
        self.backup_next_seq: dict[int, int] = {}  # first seq of slots backed up before any delta
        self.inbuf = InputBuffer(cfg.backup_buffer_bytes)
        self.commit = OutputCommit()
        self.batch: Batch | None = None
        self._batch_timer: asyncio.TimerHandle | None = None
        self.links: dict[int, Link] = {}
        self.bytes_to: dict[int, int] = {}  # replication bytes sent, by destination NF (all links)
        self.backup_id = 0
        self.peer_ids: set[int] = set()
        self.pending_versions: dict[int, dict[int, dict[int, int]]] = {}  # nf -> batch -> slot->ver
        self.acked_versions: dict[int, dict[int, int]] = {}  # nf -> slot -> version it holds
        self.c = Counters()
        self.server: ReplicationServer | None = None
        self.policy = PeerPolicy(cfg.nf_id, cfg.index, cfg.workers, cfg.limits)
        self._xfer_id = 0
        self._xfer_waiters: dict[int, asyncio.Future[Message]] = {}
        self._tick_task: asyncio.Task[None] | None = None
        self._waiting: set[int] = set()  # slots whose sequencer holds early packets
        self._syncing: Link | None = None  # a link being sent its snapshot (see _on_link_connected)
        self.input_paused = False
        self.on_pause: Callable[[bool], None] | None = None  # stop/resume reading the data socket
        self.drop_probe: Callable[[], int] | None = None  # frames the kernel dropped since last call
        self.kernel_drops = 0
        self.started = time.monotonic()
        self.released_id = 0  # the last batch whose output has been handed to `tx`
        self._release_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.out_log = OutputLog()  # as a backup: outputs its primary may not have released
        # the last promotion (time.time(), its slots) until its first output is released
        self._takeover: tuple[float, set[int]] | None = None
        self.markers = MarkerWait(cfg.marker_wait)  # adoptions waiting for their move marker

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        self.server = ReplicationServer(
            self.cfg.repl_host, self.cfg.repl_port, self.on_replication, self.policy
        )
        await self.server.start()
        self._tick_task = asyncio.get_running_loop().create_task(self._tick())

    async def stop(self) -> None:
        if self._tick_task is not None:
            self._tick_task.cancel()
        for link in list(self.links.values()):
            await link.close()
        if self.server is not None:
            await self.server.close()

    async def _tick(self) -> None:
        period = max(0.001, self.cfg.gap_timeout / 4)
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            self.expire_gaps(now)
            for slot, parked in self.markers.due(now):
                rt = self.slots.get(slot)
                if rt is not None and rt.role == SlotRole.ADOPTING:
                    log.warning("slot %d: no move marker within %.2f s of the transfer: adopted "
                                "without it", slot, self.cfg.marker_wait)
                    self._start_adopted(rt, parked)

    # ------------------------------------------------------------------ data path
    def on_frame(self, frame: bytes) -> None:
        """A frame from the switch (or forwarded by a releasing NF)."""
        if len(frame) < _HDR or frame[12] != 0x88 or frame[13] != 0xB5:
            self.c.malformed += 1
            return
        if frame[14] == Kind.BACKUP:  # fast path: a backup only files the copy away
            slot, seq = _SLOT_SEQ.unpack_from(frame, 18)
            self._backup_copy(slot, seq, frame)
            return
        try:
            shim = Shim.unpack(frame, ETH_HDR_LEN)
        except ShimError:
            self.c.malformed += 1
            return
        kind = shim.kind
        if kind == Kind.PRIMARY:
            self._primary_input(shim, frame)
        elif kind == Kind.MARKER:  # the old owner's output of a slot we adopt has gone through
            rt = self.slots.get(shim.slot)
            adopting = rt is not None and rt.role == SlotRole.ADOPTING and rt.epoch != shim.epoch
            parked = self.markers.on_marker(shim.slot, adopting)
            if parked is not None and rt is not None:
                self._start_adopted(rt, parked)
        else:  # OUTPUT/CONTROL frames are not for an NF's data path
            self.c.malformed += 1

    def _backup_copy(self, slot: int, seq: int, frame: bytes) -> None:
        if slot not in self.backed_up:  # (a peer's replica keeps no copies: none would be dropped)
            rt = self.slots.get(slot)
            if rt is not None and rt.role in (SlotRole.PRIMARY, SlotRole.RELEASED, SlotRole.ADOPTING):
                # a copy still in flight when this backup was promoted (and maybe has moved the
                # slot on since): it is input now, processed, forwarded or kept like a packet
                nxt = rt.seq.next_expected
                if rt.role != SlotRole.PRIMARY or nxt is None or seq == nxt or seq_after(seq, nxt):
                    self._primary_input(Shim.unpack(frame, ETH_HDR_LEN), frame)
                return
            self.c.unowned += 1
            return
        rep = self.replicas.get(slot)
        if rep is not None and rep.last_seq is not None and not seq_after(seq, rep.last_seq):
            return  # already committed by the primary: nothing to keep
        if self.inbuf.add(slot, seq, frame):
            self.c.backup_copies += 1

    def _primary_input(self, shim: Shim, frame: bytes) -> None:
        rt = self.slots.get(shim.slot)
        if rt is None:
            if shim.slot in self.backed_up:  # switch already points at us; promotion will replay it
                self._backup_copy(shim.slot, shim.seq, frame)
            else:
                self.c.unowned += 1
            return
        role = rt.role
        if role == SlotRole.RELEASED:
            if rt.forward is not None:
                rt.forward.send({"t": "f", "f": frame})
                self.c.forwarded += 1
            elif len(rt.pending) < self.cfg.adopt_capacity:  # the transfer is not answered yet
                rt.pending.append((shim, frame))
            else:
                self.c.overflows += 1
            return
        if role == SlotRole.ADOPTING:
            if len(rt.pending) < self.cfg.adopt_capacity:
                rt.pending.append((shim, frame))
            else:
                self.c.overflows += 1
            return
        if role != SlotRole.PRIMARY:
            self.c.unowned += 1
            return
        self._offer(rt, shim, frame, time.monotonic())

    def _offer(self, rt: SlotRuntime, shim: Shim, frame: bytes, now: float) -> None:
        ready: list[tuple[int, tuple[Shim, bytes]]] = []
        res = rt.seq.offer(shim.seq, (shim, frame), now, ready)
        if res == Offer.DUPLICATE:
            self.c.duplicates += 1
        elif res == Offer.OVERFLOW:
            self.c.overflows += 1
        elif res == Offer.BUFFERED:
            self._waiting.add(rt.slot)
        for _seq, (s, f) in ready:
            self._process(rt, s, f, now)
        if rt.seq.waiting_since is None:
            self._waiting.discard(rt.slot)

    def expire_gaps(self, now: float) -> None:
        for slot in list(self._waiting):
            rt = self.slots.get(slot)
            if rt is None or rt.role != SlotRole.PRIMARY:
                self._waiting.discard(slot)
                continue
            ready: list[tuple[int, tuple[Shim, bytes]]] = []
            if rt.seq.expire(now, ready):
                log.info("slot %d: gap skipped, now at %s", slot, rt.seq.next_expected)
            for _seq, (s, f) in ready:
                self._process(rt, s, f, now)
            if rt.seq.waiting_since is None:
                self._waiting.discard(slot)

    def _process(self, rt: SlotRuntime, shim: Shim, frame: bytes, now: float) -> None:
        inner = bytearray(frame[:12])
        inner += frame[28:]  # the shim's ether_type field, then the original payload
        pkt = parse_frame(inner, shim)
        flow = pkt.flow
        if flow is not None:
            ckey, rev = flow.canonical()
            key: FlowId = (ckey.src, ckey.dst, ckey.sport, ckey.dport, ckey.proto)
        else:
            ckey, rev, key = None, False, None
        st = rt.state
        fs = st.flows.get(key)
        if fs is None:
            fs = st.flows[key] = self.nf.initial_state()
        try:
            verdict = self.nf.process(
                pkt, fs, Context(rt.slot, shim.seq, self.cfg.nf_id, ckey, rev, self.store, now)
            )
        except GlobalStoreError as exc:  # etcd lost its quorum, say: counted, the packet dropped
            self.c.global_store_errors += 1
            if self.c.global_store_errors & (self.c.global_store_errors - 1) == 0:  # 1, 2, 4, ...
                log.warning("global state store failed (%d times so far): %s",
                            self.c.global_store_errors, exc)
            verdict = Verdict.DROP
        except Exception:
            log.exception("NF %s failed on slot %d seq %d", self.nf.name, rt.slot, shim.seq)
            self.c.nf_errors += 1
            verdict = Verdict.DROP
        st.dirty.add(key)
        st.last_seq = shim.seq
        rt.packets += 1
        self.c.packets += 1
        batch = self.batch
        if batch is None:
            batch = self._open_batch(now)
        batch.packets += 1
        batch.slot_seqs[rt.slot] = shim.seq
        if verdict == Verdict.FORWARD:
            out = pkt.frame
            # insert EtherType 0x88B5 and the shim up to (not including) its ether_type field: the
            # frame's own EtherType, now right after it, becomes the shim's ether_type
            out[12:12] = _OUT_PREFIX + _OUT_SHIM.pack(
                Kind.OUTPUT, shim.flags & FLAG_REVERSE, shim.stage, 0, rt.slot, rt.epoch,
                self.cfg.nf_id, shim.seq
            )
            batch.outputs.append(out)
        if batch.packets >= self.cfg.batch_size:
            self.close_batch()

    # ------------------------------------------------------------------ output commit
    def _open_batch(self, now: float) -> Batch:
        batch = self.batch = self.commit.new_batch(now)
        if self.cfg.batch_time > 0:
            self._batch_timer = asyncio.get_running_loop().call_later(
                self.cfg.batch_time, self._batch_due, batch.id
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
        if self._batch_timer is not None:
            self._batch_timer.cancel()
            self._batch_timer = None
        slots_wire: list[list[Any]] = []
        versions: dict[int, int] = {}
        for slot, last in batch.slot_seqs.items():
            rt = self.slots[slot]
            entries = rt.state.seal()
            versions[slot] = rt.state.version
            slots_wire.append([slot, rt.epoch, rt.state.version, last, entries, rt.replace,
                               rt.state.gen])
            rt.replace = False
        self._replicate(batch, {"t": "d", "b": batch.id, "s": slots_wire, "full": False,
                                "n": self.cfg.nf_id}, versions)

    def _replicate(self, batch: Batch, msg: Message, versions: dict[int, int]) -> None:
        data = encode(msg) if self.links else b""
        for nf_id, link in self.links.items():
            if (nf_id != self.backup_id and nf_id not in self.peer_ids) or link is self._syncing:
                continue
            if nf_id == self.backup_id:
                # the backup also logs the batch's output, until we say it has left (`rel`): if
                # we die before that, the promoted backup sends it again (the switch drops what
                # had already left), so no output is lost however a batch ends
                logged = [[batch.id, batch.outputs]] if batch.outputs else []
                if link.send(self._for_backup(msg, logged)):
                    self.pending_versions.setdefault(nf_id, {})[batch.id] = versions
                continue
            if nf_id != self.backup_id and link.backlog() > self.cfg.peer_backlog_bytes:
                # a peer that does not keep up: rather than buffer without bound, drop the
                # connection; it reconnects and gets a full snapshot (versions restart from it)
                log.warning("peer %d is %d bytes behind: resynchronising", nf_id, link.backlog())
                link.reset()
                self.pending_versions.pop(nf_id, None)
                continue
            if link.send_raw(data):
                self.pending_versions.setdefault(nf_id, {})[batch.id] = versions
        if self.backup_id:
            self.commit.hold(batch)
            if self.commit.held_outputs >= self.cfg.max_held and not self.input_paused:
                self._pause_input(True)
        else:
            self._release(batch)

    def _pause_input(self, pause: bool) -> None:
        """Backpressure: with too much output waiting for the backup, stop reading input (the
        kernel queues, then drops and counts); resume once half of it is released."""
        self.input_paused = pause
        log.warning("input %s: %d outputs held", "paused" if pause else "resumed", self.commit.held_outputs)
        if self.on_pause is not None:
            self.on_pause(pause)

    def _maybe_resume(self) -> None:
        if self.input_paused and self.commit.held_outputs <= self.cfg.max_held // 2:
            self._pause_input(False)

    def _for_backup(self, msg: Message, logged: list[list[Any]]) -> Message:
        """`msg` as the backup receives it: with the outputs to log, the released watermark and
        our id (the backup keeps one log per primary)."""
        return {**msg, "o": logged, "rel": self.released_id}

    def _held_upto(self, batch_id: int) -> bool:
        """Whether output of a batch numbered `batch_id` or lower still waits for an ack."""
        return bool(self.commit.inflight) and self.commit.inflight[0].id <= batch_id

    async def _released(self, batch_id: int, timeout: float) -> None:
        """Until the output of every batch up to `batch_id` has been handed to `tx` (at most
        `timeout`: a backup that stops acknowledging holds it; the output still leaves later)."""
        if not self._held_upto(batch_id):
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._release_waiters.append((batch_id, fut))
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            log.warning("output of batch %d not released within %.1f s", batch_id, timeout)

    def _release(self, batch: Batch) -> None:
        tx = self.tx
        for out in batch.outputs:
            tx(out)
        self.c.outputs += len(batch.outputs)
        self.released_id = batch.id
        if self._takeover is not None and batch.outputs \
                and not self._takeover[1].isdisjoint(batch.slot_seqs):
            # what a fail-over's takeover ends with (the fail-over bench reads this line)
            promoted_at, now = self._takeover[0], time.time()
            self._takeover = None
            log.info("takeover: first output of the promoted slots released %.1f ms after the "
                     "promotion, at %.6f", (now - promoted_at) * 1000, now)
        if self._release_waiters:
            waiting = self._release_waiters
            self._release_waiters = [(b, f) for b, f in waiting if self._held_upto(b)]
            for b, f in waiting:
                if not self._held_upto(b) and not f.done():
                    f.set_result(None)
        for slot, seq in batch.slot_seqs.items():
            rt = self.slots.get(slot)
            if rt is not None and (not rt.committed_seq or seq_after(seq, rt.committed_seq)):
                rt.committed_seq = seq

    def _on_link_message(self, link: Link, msg: Message) -> None:
        t = msg.get("t")
        if t == "a":
            bid = int(msg["b"])
            pend = self.pending_versions.get(link.nf_id, {})
            acked = self.acked_versions.setdefault(link.nf_id, {})
            for b in sorted(x for x in pend if x <= bid):
                for slot, ver in pend.pop(b).items():
                    acked[slot] = max(acked.get(slot, 0), ver)
            if link.nf_id == self.backup_id:
                for batch in self.commit.ack(bid):
                    self._release(batch)
                self._maybe_resume()
        elif t == "xa":
            fut = self._xfer_waiters.pop(int(msg["id"]), None)
            if fut is not None and not fut.done():
                fut.set_result(msg)
        else:
            self.c.repl_errors += 1

    def _on_link_connected(self, link: Link) -> None:
        """A (re)connected backup or peer gets the full state of every slot we own (a sync).

        The snapshot is the first message on the new connection: the open batch is closed without
        sending its delta to this link (the snapshot includes it). Otherwise the link's ack of that
        delta, cumulative, would release earlier batches sent while the link was down before the
        snapshot covering them is applied."""
        self._syncing = link
        try:
            self.close_batch()
        finally:
            self._syncing = None
        batch = self.commit.new_batch(time.monotonic())
        slots_wire: list[list[Any]] = []
        versions: dict[int, int] = {}
        for slot, rt in self.slots.items():
            # a slot whose transfer is unanswered is still ours (it stays if the move fails), and
            # its last batches' output waits for this link's ack: its state is in the snapshot
            if rt.role == SlotRole.PRIMARY:
                rt.state.seal()  # new flows since the last batch get a version too
            elif rt.role != SlotRole.RELEASED or rt.forward is not None:
                continue
            versions[slot] = rt.state.version
            slots_wire.append(
                [slot, rt.epoch, rt.state.version, rt.state.last_seq, rt.state.everything(),
                 False, rt.state.gen]
            )
            if rt.state.last_seq is not None:
                batch.slot_seqs[slot] = rt.state.last_seq
        msg: Message = {"t": "d", "b": batch.id, "s": slots_wire, "full": True, "n": self.cfg.nf_id}
        if link.nf_id == self.backup_id:
            # the batches still waiting for an ack may have reached no backup at all (a new
            # one, or the old link's frames were lost): the new backup logs their output too
            held = [[b.id, b.outputs] for b in self.commit.inflight if b.outputs]
            msg = self._for_backup(msg, held)
        link.send(msg)
        self.pending_versions.setdefault(link.nf_id, {})[batch.id] = versions
        if link.nf_id == self.backup_id:
            self.commit.hold(batch)

    def _link(self, nf_id: int, address: str) -> Link:
        link = self.links.get(nf_id)
        addr = worker_address(address, self.cfg.index)
        if link is not None and link.address == addr:
            return link
        if link is not None:
            asyncio.get_running_loop().create_task(link.close())
        self.pending_versions.pop(nf_id, None)
        self.acked_versions.pop(nf_id, None)
        link = Link(nf_id, addr, self._on_link_message, self._on_link_connected,
                    hello=hello(self.cfg.nf_id, self.cfg.index, self.cfg.workers),
                    tally=self.bytes_to)
        self.links[nf_id] = link
        return link

    # ------------------------------------------------------------------ receiving side
    def on_replication(self, msg: Message) -> Message | None:
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
                if rep is None or full or (more and more[0]):  # a whole slot from a new owner
                    old_last = rep.last_seq if rep is not None else None
                    rep = self.replicas[slot] = Replica(int(slot), last_seq=old_last)
                rep.epoch = int(epoch)
                rep.gen = int(more[1]) if len(more) > 1 else 0
                if last_seq is None:  # the owner has not processed a packet of the slot yet
                    rep.apply(raw, int(version), None)
                    continue
                rep.apply(raw, int(version), int(last_seq))
                self.inbuf.drop_upto(int(slot), int(last_seq))
            return {"t": "a", "b": msg["b"]}
        if t == "x":
            return self._on_transfer(msg)
        if t == "r":  # the primary we back up released this slot: its copies are not needed
            slot = int(msg["slot"])
            self.backed_up.discard(slot)
            self.inbuf.discard(slot)
            return None
        if t == "f":
            frame = msg["f"]
            if not isinstance(frame, bytes):
                raise ValueError("forwarded frame is not bytes")
            self.on_frame(frame)
            return None
        raise ValueError(f"unknown replication message type {t!r}")

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
            if rep is not None and _older((epoch, gen), (rep.epoch, rep.gen)):
                raise StaleSender(f"delta from NF {sender} for slot {slot} of owner generation "
                                  f"{epoch}.{gen}, this NF holds {rep.epoch}.{rep.gen}")

    def _on_transfer(self, msg: Message) -> Message:
        slot = int(msg["slot"])
        xid = msg["id"]
        rt = self.slots.get(slot)
        if rt is None or rt.role != SlotRole.ADOPTING:
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
        state.load(entries, version)
        state.version = version
        state.last_seq = None if msg["seq"] is None else int(msg["seq"])
        self.replicas.pop(slot, None)
        self.inbuf.discard(slot)
        # (a last seq of None: the old owner knew no number yet; 0 is a number, after a wrap or
        # as the one before 1)
        parked = Parked(state, None if state.last_seq is None else seq_next(state.last_seq),
                        time.monotonic())
        # the slot starts here once the old owner's marker has come too (nf_host/move_marker.py)
        if self.markers.on_transfer(slot, parked):
            self._start_adopted(rt, parked)
        return {"t": "xa", "id": xid, "ok": True, "err": ""}

    def _start_adopted(self, rt: SlotRuntime, parked: Parked) -> None:
        """Own an adopted slot from its transfer, then process what waited for it."""
        parked.started.set()
        self._become_primary(rt, parked.state, parked.next_seq)
        pending, rt.pending = rt.pending, []
        now = time.monotonic()
        for shim, frame in pending:
            self._offer(rt, shim, frame, now)

    def _become_primary(self, rt: SlotRuntime, state: SlotState, next_seq: int | None) -> None:
        """Own `rt` from `state`; its whole state goes to our backup/peers with the next batch."""
        state.dirty = set(state.flows)
        rt.replace = True  # a peer may hold a replica from the previous owner, beyond our state
        rt.state = state
        rt.role = SlotRole.PRIMARY
        rt.seq.next_expected = next_seq
        rt.committed_seq = state.last_seq or 0
        if state.flows and state.last_seq is not None:
            batch = self.batch or self._open_batch(time.monotonic())
            batch.slot_seqs[rt.slot] = state.last_seq

    # ------------------------------------------------------------------ commands
    def _new_slot(self, slot: int, epoch: int, role: SlotRole) -> SlotRuntime:
        return SlotRuntime(
            slot, epoch, role,
            Sequencer(capacity=self.cfg.reorder_capacity, gap_timeout=self.cfg.gap_timeout),
            SlotState(slot),
        )

    def owns(self, slot: int) -> bool:
        return slot % self.cfg.workers == self.cfg.index

    def assign(self, slots: list[tuple[int, int, int | None]], as_backup: bool) -> None:
        if as_backup and self.role == Role.IDLE and slots:
            self.role = Role.BACKUP  # a spare taken from the pool (as the control server records)
        elif not as_backup and slots:
            self.role = Role.PRIMARY
        for slot, epoch, next_seq in slots:
            if as_backup:
                self.backed_up.add(slot)
                rep = self.replicas.setdefault(slot, Replica(slot, epoch=epoch))
                if next_seq is not None and rep.last_seq is None:
                    rep.last_seq = (next_seq - 1) & SEQ_MASK
                if next_seq is not None:
                    self.backup_next_seq[slot] = next_seq
                continue
            rt = self.slots.get(slot)
            if rt is not None and rt.role == SlotRole.PRIMARY:
                rt.epoch = epoch
                continue
            if slot in self.backed_up or slot in self.replicas:
                # owning a slot we hold a copy of: that is a promotion (state kept, copies replayed)
                self.promote([slot])
                self.slots[slot].epoch = epoch
                continue
            rt = self.slots[slot] = self._new_slot(slot, epoch, SlotRole.PRIMARY)
            rt.seq.next_expected = next_seq
            if next_seq is not None:
                rt.state.last_seq = (next_seq - 1) & SEQ_MASK

    def set_role(self, role: Role) -> None:
        """The whole instance's role. Becoming a backup or idle (a spare) from another role drops
        every slot this worker owns, with the output it still holds: an NF the controller failed over (it hung,
        then came back) must never process or release anything of slots that are someone
        else's now; its promoted backup re-creates that output. Replicas and copies go too:
        a backup's come from `AssignSlots` and its primary's snapshot."""
        old, self.role = self.role, role
        if role == Role.PRIMARY or role == old:
            return  # (a reconfiguration in the same role, e.g. after a false alarm, keeps all)
        dropped = [s for s, rt in self.slots.items() if rt.role != SlotRole.REPLICA]
        if dropped:
            log.warning("now %s: dropping %d owned slots and %d held outputs", role.name,
                        len(dropped), self.commit.held_outputs)
        self.slots.clear()
        self._waiting.clear()
        self.replicas.clear()
        self.backed_up.clear()
        self.backup_next_seq.clear()
        self.inbuf = InputBuffer(self.cfg.backup_buffer_bytes)
        self.out_log = OutputLog()
        self.commit = OutputCommit(next_id=self.commit.next_id)
        if self.batch is not None:
            self.batch = None
            if self._batch_timer is not None:
                self._batch_timer.cancel()
                self._batch_timer = None
        self._maybe_resume()
        if self.backup_id:
            self.set_backup(0, "")

    def replace_nf(self, nf: Any, *, dry_run: bool = False) -> None:
        """Live update: process with `nf` from the next packet on. Refused while this worker
        owns or adopts a slot (its packets would meet two versions of the NF mid-flow); the
        copies and replicas it holds keep their flow state, which `nf` takes over as it is."""
        busy = sorted(s for s, rt in self.slots.items()
                      if rt.role in (SlotRole.PRIMARY, SlotRole.ADOPTING))
        if busy:
            more = f" and {len(busy) - 8} more" if len(busy) > 8 else ""
            raise CommandError(f"NF update refused: slots {busy[:8]}{more} are still owned here "
                               "(move them away first)")
        if not dry_run:
            self.nf = nf

    def set_backup(self, nf_id: int, address: str) -> None:
        old = self.backup_id
        if nf_id == 0:
            self.backup_id = 0
            for batch in self.commit.release_all():
                self._release(batch)
            self._maybe_resume()
        else:
            self.backup_id = nf_id
            # output waits for this link: if it is backing off after refusals (the NF was not
            # told of us yet, e.g. a spare just restarted), try again now
            self._link(nf_id, address).kick()
        if old and old != nf_id and old not in self.peer_ids:
            link = self.links.pop(old, None)
            if link is not None:
                asyncio.get_running_loop().create_task(link.close())

    def set_peers(self, peers: list[tuple[int, str]]) -> None:
        new = {nf for nf, _ in peers if nf != self.cfg.nf_id}
        for nf_id, address in peers:
            if nf_id != self.cfg.nf_id:
                # a peer now (again): it may have refused us while it did not know us
                self._link(nf_id, address).kick()
        for gone in self.peer_ids - new:
            if gone != self.backup_id:
                link = self.links.pop(gone, None)
                if link is not None:
                    asyncio.get_running_loop().create_task(link.close())
        self.peer_ids = new

    def adopt(self, slot: int, epoch: int) -> None:
        rt = self.slots.get(slot)
        if rt is not None and rt.role == SlotRole.PRIMARY:
            raise CommandError(f"slot {slot} is already owned here")
        self.role = Role.PRIMARY  # it owns the slot once the transfer (and marker) arrive
        self.slots[slot] = self._new_slot(slot, epoch, SlotRole.ADOPTING)
        self.backed_up.discard(slot)
        self.markers.forget(slot)

    def cancel_adopt(self, slot: int, epoch: int) -> None:
        """An undone move: forget the adoption of `slot` at `epoch` and what it buffered
        (counted in `cancelled`); a slot not being adopted at that epoch is left alone."""
        rt = self.slots.get(slot)
        if rt is None or rt.role != SlotRole.ADOPTING or (epoch and rt.epoch != epoch):
            return
        self.c.cancelled += len(rt.pending)
        del self.slots[slot]
        self.markers.forget(slot)

    async def release(self, slot: int, to_nf: int, to_address: str, same_cluster: bool) -> dict[str, Any]:
        parked = self.markers.parked.get(slot)
        if parked is not None:  # adopted here just now, its marker not in yet: it starts first
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(parked.started.wait(), self.cfg.marker_wait * 2)
        rt = self.slots.get(slot)
        if rt is None or rt.role != SlotRole.PRIMARY:
            raise CommandError(f"slot {slot} is not owned here as primary")
        link = self.links.get(to_nf)
        if link is None or link.address != worker_address(to_address, self.cfg.index):
            link = self._link(to_nf, to_address)
        try:
            await asyncio.wait_for(link.connected.wait(), self.cfg.transfer_timeout)
        except TimeoutError:
            raise CommandError(f"cannot reach NF {to_nf} at {link.address}") from None
        # from here to RELEASED nothing yields: this is a packet boundary. The slot's state is
        # sealed with a version (after the wait above, during which packets were processed:
        # a change left in the open batch would be missing from a delta transfer)
        self.close_batch()
        last_batch = self.commit.last_id  # holds the output of every packet of s processed here
        st = rt.state
        base = self.acked_versions.get(to_nf, {}).get(slot) if same_cluster else None
        entries = st.since(base) if base is not None else st.everything()
        # stopped: until the adopter answers, arriving packets wait here (rt.pending)
        rt.role = SlotRole.RELEASED
        rt.forward = None
        # our output of s leaves before the adopter can start: its output (seq L + 1 on, of the
        # next epoch) must not overtake ours (seq <= L), which waits for our backup's ack; the
        # switch accepts both epochs, so their order at the sink is the order they reach it
        await self._released(last_batch, self.cfg.transfer_timeout)
        # then the marker, on the same port after that output: the adopter starts on the slot
        # once the switch has passed it, so after everything we sent (nf_host/move_marker.py)
        self.tx(marker_frame(self.cfg.nf_id, slot, slot >> SLOT_BITS, rt.epoch, st.last_seq or 0))
        self._xfer_id += 1
        xid = self._xfer_id
        fut: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._xfer_waiters[xid] = fut
        nbytes = link.send({
            "t": "x", "id": xid, "slot": slot, "epoch": rt.epoch, "seq": st.last_seq,
            "version": st.version, "base": -1 if base is None else base, "flows": entries,
        })
        self.c.transfer_bytes += nbytes
        error = ""
        try:
            reply = await asyncio.wait_for(fut, self.cfg.transfer_timeout)
            if not reply.get("ok"):
                error = f"NF {to_nf} refused slot {slot}: {reply.get('err')}"
        except TimeoutError:
            error = f"NF {to_nf} did not acknowledge the state of slot {slot}"
        finally:
            self._xfer_waiters.pop(xid, None)
        held, rt.pending = rt.pending, []
        now = time.monotonic()
        if error:  # the slot stays here: resume processing, with what arrived meanwhile
            rt.role = SlotRole.PRIMARY
            for shim, frame in held:
                self._offer(rt, shim, frame, now)
            raise CommandError(error + "; the slot stays owned here")
        rt.forward = link
        early = [item for _seq, item in rt.seq.take_buffered()]
        for _shim, frame in early + held:
            link.send({"t": "f", "f": frame})
        self.c.forwarded += len(early) + len(held)
        self._waiting.discard(slot)
        backup = self.links.get(self.backup_id) if self.backup_id else None
        if backup is not None and backup is not link:
            backup.send({"t": "r", "slot": slot})  # our backup stops keeping copies of the slot
        # (our output of s left before the transfer: a next move cannot start while our epoch's
        # output is held, which the switch's two-epoch output dedup needs)
        return {
            "bytes_shipped": nbytes, "last_seq": st.last_seq or 0, "flows_shipped": len(entries),
            "delta": base is not None,
        }

    def busy_first(self, slots: list[int]) -> tuple[list[int], list[int]]:
        """`slots` split into those with something to replay or state (promoted first: their
        output is what a takeover waits for) and the idle rest."""
        busy: list[int] = []
        idle: list[int] = []
        for s in slots:
            rep = self.replicas.get(s)
            (busy if self.inbuf.slots.get(s) or (rep is not None and rep.flows) else idle).append(s)
        return busy, idle

    async def promote_soon(self, slots: list[int], dead: int = 0,
                           chunk: int = PROMOTE_CHUNK) -> dict[str, Any]:
        """`promote`, busy slots first and then the idle ones `chunk` at a time, letting the event
        loop run in between: the busy slots' first output leaves (it waits for the new backup's
        ack, which arrives on this loop) without waiting for the per-slot work of hundreds of
        idle slots. An idle slot not promoted yet is still backed up: its packets are kept as
        copies and replayed when its turn comes."""
        chosen = [s for s in (slots or sorted(self.backed_up)) if self.owns(s)]
        busy, idle = self.busy_first(chosen)
        res = self._promote(busy, dead, measured=chosen)
        for start in range(0, len(idle), chunk):
            await asyncio.sleep(0)  # a turn of the loop: acks, packets, commands
            more = self._promote(idle[start:start + chunk], dead, measured=[])
            res["replayed"] += more["replayed"]
            res["slots"] += more["slots"]
        return res

    def promote(self, slots: list[int], dead: int = 0) -> dict[str, Any]:
        """Own `slots` (all backed-up slots if empty) as the backup of dead NF `dead`, in one
        step (docs/protocols.md §4)."""
        chosen = [s for s in (slots or sorted(self.backed_up)) if self.owns(s)]
        return self._promote(chosen, dead, measured=chosen)

    def _promote(self, chosen: list[int], dead: int, measured: list[int]) -> dict[str, Any]:
        """`promote` of exactly `chosen`; a takeover is measured (its first output logged) from
        here if `measured` holds a slot still backed up here ([]: a later part of one)."""
        if any(s in self.backed_up or s in self.replicas for s in measured):
            self._takeover = (time.time(), set(measured))
        if chosen:
            # a primary now, whatever it was configured as (a spare given slots to back up, then
            # promoted): a later SetRole(IDLE/BACKUP) must drop what it owns
            self.role = Role.PRIMARY
        replayed = 0
        now = time.monotonic()
        done: list[int] = []
        # first, the output the dead primary may not have released, in its order; then the
        # replayed packets' output (numbers after the last commit). The switch forwards each
        # input's output once, so what had already left is dropped there
        logged = self.out_log.take(dead)
        if logged:
            batch = self.batch or self._open_batch(now)
            batch.outputs.extend(logged)
            self.c.reemitted += len(logged)
        for slot in chosen:
            rt = self.slots.get(slot)
            if rt is not None and rt.role == SlotRole.PRIMARY:
                done.append(slot)
                continue
            rep = self.replicas.pop(slot, None) or Replica(slot)
            self.backed_up.discard(slot)
            rt = self.slots[slot] = self._new_slot(slot, rep.epoch, SlotRole.PRIMARY)
            buffered = self.inbuf.take_beyond(slot, rep.last_seq)
            if rep.last_seq is not None:
                first: int | None = seq_next(rep.last_seq)
            else:  # no delta yet: the number AssignSlots gave, else the first copy held
                first = self.backup_next_seq.get(slot) or (buffered[0][0] if buffered else None)
            self.backup_next_seq.pop(slot, None)
            state, bad = rep.to_slot_state()
            self.c.repl_errors += bad
            state.gen = rep.gen + 1  # a new owner of the same epoch: its deltas supersede A's
            self._become_primary(rt, state, first)
            for _seq, frame in buffered:
                shim = Shim.unpack(frame, ETH_HDR_LEN)
                self._offer(rt, shim, frame, now)
            replayed += len(buffered)
            done.append(slot)
        self.c.replayed += replayed
        self.close_batch()
        return {"replayed": replayed, "slots": done, "reemitted": len(logged)}

    def highest_seen(self, slot: int) -> int | None:
        """The highest sequence number of `slot` this worker received: processed, buffered,
        waiting for an adoption, or held as a backup's input copy (serial order; None: none).
        After a switch restart the controller resumes the switch's numbering beyond it."""
        seen: list[int] = []
        rt = self.slots.get(slot)
        if rt is not None:
            if rt.seq.next_expected is not None:
                seen.append((rt.seq.next_expected - 1) & SEQ_MASK)
            seen += list(rt.seq.buffer)
            seen += [shim.seq for shim, _ in rt.pending]
        seen += list(self.inbuf.slots.get(slot, {}))
        if not seen:
            return None
        top = seen[0]
        for s in seen[1:]:
            if seq_after(s, top):
                top = s
        return top

    def status(self) -> dict[str, Any]:
        slots = []
        for slot, rt in self.slots.items():
            top = self.highest_seen(slot)
            slots.append({
                "slot": slot, "epoch": rt.epoch, "role": int(rt.role), "packets": rt.packets,
                "committed_seq": rt.committed_seq, "next_expected": rt.seq.next_expected or 0,
                "version": rt.state.version, "flows": len(rt.state.flows),
                "peer_versions": {
                    nf: vers[slot] for nf, vers in self.acked_versions.items() if slot in vers
                },
                "highest_seen": top or 0, "has_seen": top is not None,
            })
        for slot in sorted(self.backed_up | set(self.replicas)):
            if slot in self.slots:
                continue
            rep = self.replicas.get(slot) or Replica(slot)
            role = SlotRole.BACKUP if slot in self.backed_up else SlotRole.REPLICA
            top = self.highest_seen(slot)
            slots.append({
                "slot": slot, "epoch": rep.epoch, "role": int(role),
                "packets": self.inbuf.count(slot), "committed_seq": rep.last_seq or 0,
                "next_expected": 0, "version": rep.version, "flows": len(rep.flows),
                "highest_seen": top or 0, "has_seen": top is not None,
            })
        c = self.c
        if self.drop_probe is not None:
            dropped = self.drop_probe()
            if dropped:  # read on every Status call (the controller's load poll): not flooded
                self.kernel_drops += dropped
                log.warning("the kernel dropped %d frames before this worker read them (full "
                            "socket buffer; %d since start)", dropped, self.kernel_drops)
        gaps = sum(rt.seq.gaps for rt in self.slots.values())
        queue = sum(rt.seq.depth + len(rt.pending) for rt in self.slots.values())
        queue += self.commit.held_outputs
        return {
            "slots": slots, "packets": c.packets, "gaps": gaps, "queue_depth": queue,
            "malformed": c.malformed, "duplicates": c.duplicates,
            "drops": c.malformed + c.unowned + c.duplicates + c.overflows + self.inbuf.overflows
            + self.kernel_drops + c.cancelled,
            "kernel_drops": self.kernel_drops, "input_paused": self.input_paused,
            "unowned": c.unowned, "overflows": c.overflows, "input_overflows": self.inbuf.overflows,
            "nf_errors": c.nf_errors,
            "global_store_errors": c.global_store_errors,
            "forwarded": c.forwarded, "outputs": c.outputs, "replayed": c.replayed,
            "reemitted": c.reemitted, "logged_outputs": self.out_log.frames,
            "cancelled": c.cancelled, "markers": self.markers.markers,
            "marker_timeouts": self.markers.timeouts,
            "held_outputs": self.commit.held_outputs, "transfer_bytes": c.transfer_bytes,
            "backup_bytes": self.inbuf.bytes_held, "backup_copies": self.inbuf.count(),
            "repl_errors": c.repl_errors + (self.server.errors if self.server else 0),
            "repl_refused": self.policy.refused_total, "repl_refusals": dict(self.policy.refused),
            **self.repl_bytes(),
        }

    def repl_bytes(self) -> dict[str, Any]:
        """Replication traffic in bytes on the wire since start: sent by destination NF, received
        by sending NF (every message: deltas, snapshots, transfers, forwarded packets, acks), and
        the slot transfers of moves alone, each way."""
        rx: dict[int, int] = {}
        xfer_in = 0
        for (sender, kind), n in (self.server.bytes_in if self.server else {}).items():
            rx[sender] = rx.get(sender, 0) + n
            if kind == "x":
                xfer_in += n
        return {"repl_tx_bytes": dict(self.bytes_to), "repl_rx_bytes": rx,
                "transfer_tx_bytes": self.c.transfer_bytes, "transfer_rx_bytes": xfer_in,
                "batches": self.commit.last_id}

    def flows(self, slot: int) -> dict[str, Any]:
        """The state of one slot (owned or replicated), for tests and debugging."""
        rt = self.slots.get(slot)
        if rt is not None:
            flows, version, last = rt.state.flows, rt.state.version, rt.state.last_seq
        elif slot in self.replicas:
            state, _bad = self.replicas[slot].to_slot_state()
            flows, version, last = state.flows, state.version, state.last_seq
        else:
            raise CommandError(f"no state for slot {slot} here")
        return {
            "version": version, "last_seq": last or 0,
            "flows": [[None if k is None else list(k), v] for k, v in flows.items()],
        }

    async def command(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """Run one control command (from `nf_host.control` through the worker's pipe)."""
        self.policy.learn(name, args)  # who may use the replication server (peer_policy)
        if name == "ping":
            return {}
        if name == "status":
            return self.status()
        if name == "flows":
            return self.flows(int(args["slot"]))
        if name == "set_role":
            self.set_role(Role(int(args["role"])))
            return {}
        if name == "set_backup":
            self.set_backup(int(args["nf_id"]), str(args["address"]))
            return {}
        if name == "set_peers":
            self.set_peers([(int(n), str(a)) for n, a in args["peers"]])
            return {}
        if name == "assign":
            self.assign([(int(s), int(e), n) for s, e, n in args["slots"]], bool(args["as_backup"]))
            return {}
        if name == "cancel_adopt":
            self.cancel_adopt(int(args["slot"]), int(args["epoch"]))
            return {}
        if name == "adopt":
            self.adopt(int(args["slot"]), int(args["epoch"]))
            return {}
        if name == "release":
            return await self.release(
                int(args["slot"]), int(args["to_nf"]), str(args["to_address"]), bool(args["same_cluster"])
            )
        if name == "promote":
            if int(args.get("backup", 0)):  # in the same step: no output leaves unprotected
                self.set_backup(int(args["backup"]), str(args["address"]))
            return await self.promote_soon([int(s) for s in args["slots"]], int(args.get("dead", 0)))
        raise CommandError(f"unknown command {name!r}")


