"""The worker's core: the data path (frames in, in-order processing per slot, the NF's verdicts
turned into output, a slot started from a transfer or a promotion), and the construction of the
worker's parts, each given this object as the narrow Protocol it uses (the module docstring of
`nf_host.worker` lists them; `worker.Worker` adds the lifecycle and the control surface).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Set

from contract.replication import (
    Delta,
    Forward,
    LoggedBatch,
    Message,
)
from contract.roles import Role, SlotRole
from contract.seq import SEQ_MASK, seq_after
from contract.shim import (
    ETH_HDR_LEN,
    ETHERTYPE_NFC_BYTES,
    FLAG_FIRST_OF_EPOCH,
    FLAG_REVERSE,
    FRAME_KIND,
    FRAME_SLOT,
    SHIM_FRAME_LEN,
    SHIM_HEAD,
    SLOT_SEQ,
    Kind,
    Shim,
    ShimError,
)
from nf_host.adopt_commit import AdoptCommit
from nf_host.backup import InputBuffer
from nf_host.backup_slots import BackupSlots
from nf_host.commit import Batch, OutputCommit, OutputLog
from nf_host.commit_pipeline import CommitPipeline
from nf_host.flow_bounds import FlowBounds, eviction_policy
from nf_host.flow_table import FlowTable
from nf_host.links import Links
from nf_host.move_marker import MarkerWait, Parked
from nf_host.nf_api import Context, GlobalStore, GlobalStoreError, NetworkFunction, Verdict
from nf_host.ownership import Ownership
from nf_host.parse import parse_frame
from nf_host.peer_policy import PeerPolicy
from nf_host.promote_wait import PrimarySync
from nf_host.promotion import Promotion
from nf_host.quiet_window import QuietWindow
from nf_host.receiving import ReplicaReceiver
from nf_host.reorder import Offer, Sequencer
from nf_host.replication import Link, ReplicationServer, Reply
from nf_host.state_store import FlowId, Replica, SlotState
from nf_host.transfers import Transfers
from nf_host.watermark import SPAN as WATERMARK_SPAN
from nf_host.watermark import first_span, restart_marks, watermark_frame
from nf_host.worker_types import Counters, SlotRuntime, TakeoverClock, WorkerConfig

log = logging.getLogger("nf_host.worker")



class WorkerCore:
    """The per-worker engine's core (see the module docstring)."""

    def __init__(
        self,
        cfg: WorkerConfig,
        nf: NetworkFunction,
        store: GlobalStore,
        tx: Callable[[bytes | bytearray], None],
        *,
        on_pause: Callable[[bool], None] | None = None,
        drop_probe: Callable[[], int] | None = None,
        on_backup: Callable[[int, str], None] | None = None,
    ) -> None:
        """`tx` sends an output frame; `on_pause(True/False)` stops and resumes reading the data
        socket (backpressure); `drop_probe()` counts the frames the kernel dropped since it was
        last called; `on_backup(nf, address)` is told whenever the backup changes (the heartbeat
        responder's watch on it, nf_host/death_watch.py)."""
        self.cfg, self.nf, self.store, self.tx = cfg, nf, store, tx
        self.role = Role.PRIMARY
        self.slots: dict[int, SlotRuntime] = {}
        self.backups = BackupSlots()  # what we hold of slots owned elsewhere (backup_slots.py)
        # slots whose copies went to their old owner (an adoption our dead primary never
        # started, M14: Ownership.give_copies_back), and to the old owner's backup too while
        # the old owner is suspected (M16): what still arrives follows them
        self.gave_back: dict[int, tuple[Link, ...]] = {}
        self.primary_sync = PrimarySync()  # what we hold of our primaries (promote_wait.py)
        self.inbuf = InputBuffer(cfg.backup_buffer_bytes)
        self.backup_id = 0
        self.peer_ids: set[int] = set()
        self.c = Counters()
        # every owned flow's last use and idle class: the bounds (nf_host/flow_table.py)
        self.flow_table = FlowTable(int(nf.limit("max_flows")), eviction_policy(nf))
        self.bounds = FlowBounds(self.flow_table, self)  # evictions (nf_host/flow_bounds.py)
        self.server: ReplicationServer | None = None
        self.policy = PeerPolicy(cfg.nf_id, cfg.index, cfg.workers, cfg.limits)
        # adopted transfers waiting for our backup to hold their state (nf_host/adopt_commit.py)
        self.adopt_commit = AdoptCommit(cfg.transfer_timeout / 2)
        self._tick_task: asyncio.Task[None] | None = None
        self.gapped: set[int] = set()  # slots whose sequencer holds early packets
        self.drop_probe, self.on_backup = drop_probe, on_backup
        self.watched_backup: tuple[int, str] = (0, "")  # what `on_backup` was last told
        self.kernel_drops = 0
        self.started = time.monotonic()
        self.out_log = OutputLog(retain=self.cfg.output_retain)  # as a backup: outputs its primary may not have released
        # the last promotion's clock until its first output is released
        self.takeover_clock: TakeoverClock | None = None
        # until then, peers and idle slots wait (nf_host/quiet_window.py); the watch on the new
        # backup it defers (backup, address), opened when the window ends
        self.quiet = QuietWindow(self._quiet_over)
        self.deferred_watch: tuple[int, str] | None = None
        self.markers = MarkerWait(cfg.marker_wait)  # adoptions waiting for their move marker
        # as an armed backup: (primary, successor, its address) to take over with when the
        # primary's replication link closes without its goodbye (Worker.on_peer_lost)
        self.takeover_plan: tuple[int, int, str] | None = None
        self.took_over_from: set[int] = set()  # until the controller's Promote for them
        self.took_over_slots: dict[int, set[int]] = {}  # primary -> the slots taken from it
        self._tasks: set[asyncio.Task[object]] = set()
        self.receiver = ReplicaReceiver(self)  # the receiving side of replication (receiving.py)
        self.promotion = Promotion(self)  # a backup's promotion (promotion.py)
        self.transfers = Transfers(self)  # our transfers awaiting an answer (transfers.py)
        self.linkset = Links(self)  # our replication links and what they acknowledged (links.py)
        self.pipeline = CommitPipeline(self, on_pause)  # batches and held output (commit_pipeline.py)
        self.moves = Ownership(self)  # a move's two sides (ownership.py)

    # ------------------------------------------------------------------ lifecycle
    async def _tick(self) -> None:
        period = max(0.001, self.cfg.gap_timeout / 4)
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            self.expire_gaps(now)
            if self.flow_table.classes:
                self.bounds.expire(now)
            for slot, parked in self.markers.due(now):
                rt = self.slots.get(slot)
                if rt is not None and rt.role == SlotRole.ADOPTING:
                    log.warning("slot %d: no move marker within %.2f s of the transfer: adopted "
                                "without it", slot, self.cfg.marker_wait)
                    self.start_adopted(rt, parked)

    # ------------------------------------------------------------------ data path
    def on_frame(self, frame: bytes) -> None:
        """A frame from the switch (or forwarded by a releasing NF)."""
        if len(frame) < SHIM_FRAME_LEN or frame[12:14] != ETHERTYPE_NFC_BYTES:
            if len(frame) >= ETH_HDR_LEN and frame[12:14] != ETHERTYPE_NFC_BYTES:
                self.c.foreign += 1  # not nfcluster's (the kernel's, another protocol's)
            else:
                self.c.malformed += 1  # a shim frame cut short, or not even Ethernet
            return
        if frame[FRAME_KIND] == Kind.BACKUP:  # fast path: a backup only files the copy away
            slot, seq = SLOT_SEQ.unpack_from(frame, FRAME_SLOT)
            self.backup_copy(slot, seq, frame)
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
                self.start_adopted(rt, parked)
        else:  # OUTPUT/CONTROL frames are not for an NF's data path
            self.c.malformed += 1

    def backup_copy(self, slot: int, seq: int, frame: bytes) -> None:
        if self.backups.waiting(slot):
            self.promotion.promote_waiting(slot)  # then this packet is its input
        if slot not in self.backed_up:  # (a peer's replica keeps no copies: none would be dropped)
            if self.gave_back and self.follow_given_back(slot, frame):
                return
            rt = self.slots.get(slot)
            if rt is not None and rt.role in (SlotRole.PRIMARY, SlotRole.RELEASED, SlotRole.ADOPTING):
                # a copy still in flight when this backup was promoted (and maybe has moved the
                # slot on since): it is input now, processed, forwarded or kept like a packet
                nxt = rt.seq.next_expected
                if rt.role == SlotRole.ADOPTING:  # (unprocessed until it starts: M18)
                    self.receiver.copy_to_backup(frame)
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
            if self.primary_sync.waiting:  # (it may close a waiting promotion's hole)
                self.primary_sync.changed()

    def follow_given_back(self, slot: int, frame: bytes) -> bool:
        """A packet of a slot whose copies went to its old owner (an adoption its adopter never
        started, M14): it follows them there, as input (True if forwarded)."""
        links = self.gave_back.get(slot)
        if links is None:
            return False
        data = bytearray(frame)
        data[FRAME_KIND] = Kind.PRIMARY
        msg = Forward(bytes(data))
        for link in links:
            link.send(msg)
        self.c.forwarded += 1
        return True

    def _primary_input(self, shim: Shim, frame: bytes) -> None:
        rt = self.slots.get(shim.slot)
        if rt is None:
            if shim.slot in self.backed_up:  # switch already points at us; promotion will replay it
                self.backup_copy(shim.slot, shim.seq, frame)
            elif not (self.gave_back and self.follow_given_back(shim.slot, frame)):
                self.c.unowned += 1
            return
        role = rt.role
        if role == SlotRole.RELEASED:
            # (forward_copy: a cancelled adoption's, to the old owner's backup: M16)
            targets = [to for to in (rt.forward, rt.forward_copy) if to is not None]
            if targets:
                fwd = Forward(bytes(frame))
                for to in targets:
                    to.send(fwd)
            if rt.forward is not None:
                self.c.forwarded += 1
            elif len(rt.pending) < self.cfg.adopt_capacity:  # the transfer is not answered yet
                rt.pending.append((shim, frame))
            elif rt.forward_copy is None:  # (with a copy given: held there)
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
        self.offer(rt, shim, frame, time.monotonic())

    def offer(self, rt: SlotRuntime, shim: Shim, frame: bytes, now: float) -> None:
        ready: list[tuple[int, tuple[Shim, bytes]]] = []
        res = rt.seq.offer(shim.seq, (shim, frame), now, ready)
        if res == Offer.DUPLICATE:
            self.c.duplicates += 1
        elif res == Offer.OVERFLOW:
            self.c.overflows += 1
        elif res == Offer.BUFFERED:
            self.gapped.add(rt.slot)
        for _seq, (s, f) in ready:
            self._process(rt, s, f, now)
        if rt.seq.waiting_since is None:
            self.gapped.discard(rt.slot)

    def expire_gaps(self, now: float) -> None:
        for slot in list(self.gapped):
            rt = self.slots.get(slot)
            if rt is None or rt.role != SlotRole.PRIMARY:
                self.gapped.discard(slot)
                continue
            since = rt.seq.waiting_since
            if (rt.adopted_from is not None and not rt.epoch_seen and since is not None
                    and now - since < self.cfg.tail_wait):
                continue  # the old owner's tail may still be queued (found by the simulation)
            ready: list[tuple[int, tuple[Shim, bytes]]] = []
            if rt.seq.expire(now, ready):
                log.info("slot %d: gap skipped, now at %s", slot, rt.seq.next_expected)
            for _seq, (s, f) in ready:
                self._process(rt, s, f, now)
            if rt.seq.waiting_since is None:
                self.gapped.discard(slot)

    def _process(self, rt: SlotRuntime, shim: Shim, frame: bytes, now: float) -> None:
        if shim.epoch == rt.epoch:
            if shim.flags & FLAG_FIRST_OF_EPOCH and rt.epoch_seen:
                # flagged again within our epoch: the switch restarted and its output dedup
                # forgot what it forwarded (nf_host/watermark.py, "After a switch restart")
                marks = restart_marks(self.cfg.nf_id, rt.slot, shim.stage, rt.epoch,
                                      rt.out_mark, shim.seq)
                (self.batch or self.open_batch(now)).outputs.extend(marks)
                self.c.watermarks += len(marks)
            rt.epoch_seen = True
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
        new = fs is None
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
        st.last_seq = shim.seq
        if self.takeover_clock is not None:
            self.takeover_clock.processed(rt.slot)
        rt.packets += 1
        self.c.packets += 1
        batch = self.batch
        if batch is None:
            batch = self.open_batch(now)
        if verdict == Verdict.DROP_FORGET:  # the NF keeps no state for this flow
            if new:
                del st.flows[key]
            else:
                st.delete(key)
                self.flow_table.forget(rt.slot, key)
            self.flow_table.counted("nf")
        else:
            st.dirty.add(key)
            table = self.flow_table
            name, timeout = self.nf.flow_timeout(fs, ckey)
            table.touch(rt.slot, key, name, timeout, now, batch.id)
            if new and table.max_flows and len(table) > table.max_flows:
                self.bounds.evict_for_room(now)
        batch.packets += 1
        batch.slot_seqs[rt.slot] = shim.seq
        if verdict == Verdict.FORWARD:
            out = pkt.frame
            # insert EtherType 0x88B5 and the shim up to (not including) its ether_type field: the
            # frame's own EtherType, now right after it, becomes the shim's ether_type
            out[12:12] = ETHERTYPE_NFC_BYTES + SHIM_HEAD.pack(
                Kind.OUTPUT, shim.flags & FLAG_REVERSE, shim.stage, 0, rt.slot, rt.epoch,
                self.cfg.nf_id, shim.seq
            )
            batch.outputs.append(out)
            rt.out_mark = shim.seq
        else:
            # dropped: a watermark frame instead, now and then, so the switch's dedup watermark
            # never falls 2^31 numbers behind (nf_host/watermark.py)
            mark = rt.out_mark
            if mark is None:
                if rt.out_from is None:
                    rt.out_from = (shim.seq - 1) & SEQ_MASK
                due = (shim.seq - rt.out_from) & SEQ_MASK >= first_span(st.gen)
            else:
                due = (shim.seq - mark) & SEQ_MASK >= WATERMARK_SPAN
            if due:
                batch.outputs.append(watermark_frame(
                    self.cfg.nf_id, rt.slot, shim.stage, rt.epoch, shim.seq,
                    shim.flags & FLAG_REVERSE))
                rt.out_mark = shim.seq
                self.c.watermarks += 1
        if batch.packets >= self.cfg.batch_size:
            self.close_batch()

    # ------------------------------------------------------------------ output commit (commit_pipeline.py)
    @property
    def commit(self) -> OutputCommit:
        return self.pipeline.commit

    @property
    def batch(self) -> Batch | None:
        return self.pipeline.batch

    @property
    def released_id(self) -> int:
        return self.pipeline.released_id

    @property
    def input_paused(self) -> bool:
        return self.pipeline.input_paused

    def open_batch(self, now: float) -> Batch:
        return self.pipeline.open_batch(now)

    def close_batch(self) -> None:
        """Seal the open batch (`CommitPipeline.close_batch`)."""
        self.pipeline.close_batch()

    def release_batch(self, batch: Batch) -> None:
        self.pipeline.release_batch(batch)

    def maybe_resume(self) -> None:
        self.pipeline.maybe_resume()

    def for_backup(self, msg: Delta, logged: list[LoggedBatch]) -> Delta:
        return self.pipeline.for_backup(msg, logged)

    def held_upto(self, batch_id: int) -> bool:
        return self.pipeline.held_upto(batch_id)

    async def released_upto(self, batch_id: int, timeout: float) -> None:
        await self.pipeline.released_upto(batch_id, timeout)

    def _quiet_over(self) -> None:
        """The takeover's quiet window ended: what peers were not sent leaves, and the watch on
        the new backup opens."""
        for link in self.links.values():
            link.uncork()
        watch, self.deferred_watch = self.deferred_watch, None
        if watch is not None:
            self.watch_backup(watch)

    def watch_backup(self, watch: tuple[int, str]) -> None:
        """Tell `on_backup` the backup to watch, (NF, its worker's address), if it changed."""
        if self.on_backup is not None and watch != self.watched_backup:
            self.watched_backup = watch
            self.on_backup(*watch)

    # ------------------------------------------------------------------ receiving side
    def resync_backup(self) -> None:
        """Our backup, if connected, gets a full snapshot now (`Links.on_connected`)."""
        link = self.links.get(self.backup_id) if self.backup_id else None
        if link is not None and link.connected.is_set():
            self.linkset.on_connected(link)

    def copy_to_backup(self, frame: bytes) -> None:
        """An input copy of `frame` to our backup (`ReplicaReceiver.copy_to_backup`)."""
        self.receiver.copy_to_backup(frame)

    def on_replication(self, msg: Message) -> Reply:
        """A replication message from another NF (`nf_host.receiving.ReplicaReceiver`)."""
        return self.receiver.on_replication(msg)

    def start_adopted(self, rt: SlotRuntime, parked: Parked) -> None:
        """Own an adopted slot from its transfer, then process what waited for it."""
        parked.started.set()
        self.become_primary(rt, parked.state, parked.next_seq)
        pending, rt.pending = rt.pending, []
        now = time.monotonic()
        for shim, frame in pending:
            self.offer(rt, shim, frame, now)

    def become_primary(self, rt: SlotRuntime, state: SlotState, next_seq: int | None) -> None:
        """Own `rt` from `state`; its whole state goes to our backup/peers with the next batch."""
        state.dirty = set(state.flows)
        rt.replace = True  # a peer may hold a replica from the previous owner, beyond our state
        rt.state = state
        rt.become(SlotRole.PRIMARY)
        rt.seq.next_expected = next_seq
        rt.committed_seq = state.last_seq or 0
        self.bounds.track(rt)
        batch = self.batch or self.open_batch(time.monotonic())
        if state.flows and state.last_seq is not None:
            batch.slot_seqs[rt.slot] = state.last_seq
        else:
            # an empty slot goes too: shipped only with its first packet, the backup and peers
            # kept the previous owner's replica, older than ours: a backup promoted from it
            # started an older owner generation, its peers refused all its deltas (a newer one
            # held), and its output waited for an ack that never came (busy-host hang runs)
            batch.replaced.add(rt.slot)

    def new_slot(self, slot: int, epoch: int, role: SlotRole) -> SlotRuntime:
        return SlotRuntime(
            slot, epoch, role,
            Sequencer(capacity=self.cfg.reorder_capacity, gap_timeout=self.cfg.gap_timeout),
            SlotState(slot),
        )

    @property
    def links(self) -> dict[int, Link]:
        """Our replication links, by NF (`linkset`)."""
        return self.linkset.links

    @property
    def acked_versions(self) -> dict[int, dict[int, int]]:
        """The version of each slot each NF acknowledged (`linkset`): nf -> slot -> version."""
        return self.linkset.acked_versions

    @property
    def pending_versions(self) -> dict[int, dict[int, dict[int, int]]]:
        """The versions sent each NF, unacknowledged (`linkset`): nf -> batch -> slot -> version."""
        return self.linkset.pending_versions

    @property
    def replicas(self) -> dict[int, Replica]:
        """The replica of each slot held here (`backups`: backed up, or a peer's)."""
        return self.backups.replicas

    @property
    def backed_up(self) -> Set[int]:
        """The slots backed up here (`backups`), to read."""
        return self.backups.backed_up

    def owns(self, slot: int) -> bool:
        return slot % self.cfg.workers == self.cfg.index
