"""The worker's data path: frames in (from the switch, or forwarded by a releasing NF), a backup's
input copies filed away, in-order processing per slot (the sequencer, its gaps), the NF's verdicts
turned into output and watermark frames in the open batch, and a slot that starts here (from a
transfer, or a promotion). A part of the worker (`nf_host.worker`), given a narrow view of it
(`DataPathHost`) when it is built; the state it works on (the slots, the counters, what is held
for other NFs) stays the worker's, shared with the other parts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Set
from typing import Protocol

from contract.replication import Forward
from contract.roles import SlotRole
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
    with_kind,
)
from nf_host.backup import InputBuffer
from nf_host.backup_slots import BackupSlots
from nf_host.commit import Batch
from nf_host.flow_bounds import FlowBounds
from nf_host.flow_table import FlowTable
from nf_host.move_marker import MarkerWait, Parked
from nf_host.nf_api import Context, GlobalStore, GlobalStoreError, NetworkFunction, Verdict
from nf_host.parse import parse_frame
from nf_host.promote_wait import PrimarySync
from nf_host.promotion import Promotion
from nf_host.reorder import Offer, Sequencer
from nf_host.replication import Link
from nf_host.state_store import FlowId, Replica, SlotState
from nf_host.watermark import SPAN as WATERMARK_SPAN
from nf_host.watermark import first_span, restart_marks, watermark_frame
from nf_host.worker_types import PartHost, SlotRuntime, TakeoverClock, WorkerConfig

log = logging.getLogger("nf_host.worker")


class DataPathHost(PartHost, Protocol):
    """What `DataPath` sees of the worker: configuration, the NF and the global store, the owned
    slots and those with a gap, what is held for other NFs (backed-up slots, replicas, input
    copies, slots given back), the move markers, the flow table and its bounds, the takeover's
    clock, the open batch, and the promotion a waiting backup's first copy starts."""

    takeover_clock: TakeoverClock | None

    @property
    def cfg(self) -> WorkerConfig: ...
    @property
    def nf(self) -> NetworkFunction: ...
    @property
    def store(self) -> GlobalStore: ...
    @property
    def gapped(self) -> set[int]: ...
    @property
    def backups(self) -> BackupSlots: ...
    @property
    def backed_up(self) -> Set[int]: ...
    @property
    def replicas(self) -> dict[int, Replica]: ...
    @property
    def inbuf(self) -> InputBuffer: ...
    @property
    def primary_sync(self) -> PrimarySync: ...
    @property
    def gave_back(self) -> dict[int, tuple[Link, ...]]: ...
    @property
    def markers(self) -> MarkerWait: ...
    @property
    def flow_table(self) -> FlowTable: ...
    @property
    def bounds(self) -> FlowBounds: ...
    @property
    def promotion(self) -> Promotion: ...
    @property
    def batch(self) -> Batch | None: ...
    def open_batch(self, now: float) -> Batch: ...
    def close_batch(self) -> None: ...
    def copy_to_backup(self, frame: bytes) -> None: ...


class DataPath:
    """Frames in, slots processed in order (see the module docstring)."""

    def __init__(self, host: DataPathHost) -> None:
        self._w = host
        # frames dropped as not owned here since the last report: (why, slot) -> count; logged
        # at most once a second (`_report_unowned`, also from the timer), so an operator sees
        # which slots lose them, and when
        self._unowned: dict[tuple[str, int], int] = {}
        self._unowned_since = 0.0

    def _drop_unowned(self, slot: int, why: str) -> None:
        """A frame of `slot` nobody here processes, keeps or forwards: counted (`unowned`)."""
        self._w.c.unowned += 1
        key = (why, slot)
        self._unowned[key] = self._unowned.get(key, 0) + 1
        now = time.monotonic()
        if now - self._unowned_since >= 1.0:
            self._report_unowned(now)

    def _report_unowned(self, now: float) -> None:
        by_why: dict[str, tuple[int, list[int]]] = {}
        for (why, slot), n in sorted(self._unowned.items()):
            total, slots = by_why.get(why, (0, []))
            by_why[why] = (total + n, [*slots, slot])
        if by_why:
            log.warning("dropped frames of slots not owned here since %.1f s ago: %s",
                        now - self._unowned_since if self._unowned_since else 0.0,
                        "; ".join(f"{n} {why} (slots {', '.join(map(str, slots[:8]))}"
                                  f"{' ...' if len(slots) > 8 else ''})"
                                  for why, (n, slots) in by_why.items()))
        self._unowned.clear()
        self._unowned_since = now

    def tick(self, now: float) -> None:
        """The worker's timer: gaps skipped, idle flows expired, adoptions whose move marker did
        not come started without it."""
        w = self._w
        self.expire_gaps(now)
        if self._unowned and now - self._unowned_since >= 1.0:
            self._report_unowned(now)  # (a burst's last drops, reported within a second)
        if w.flow_table.classes:
            w.bounds.expire(now)
        for slot, parked in w.markers.due(now):
            rt = w.slots.get(slot)
            if rt is not None and rt.role == SlotRole.ADOPTING:
                log.warning("slot %d: no move marker within %.2f s of the transfer: adopted "
                            "without it", slot, w.cfg.marker_wait)
                self.start_adopted(rt, parked)

    def on_frame(self, frame: bytes) -> None:
        """A frame from the switch (or forwarded by a releasing NF)."""
        w = self._w
        if len(frame) < SHIM_FRAME_LEN or frame[12:14] != ETHERTYPE_NFC_BYTES:
            if len(frame) >= ETH_HDR_LEN and frame[12:14] != ETHERTYPE_NFC_BYTES:
                w.c.foreign += 1  # not nfcluster's (the kernel's, another protocol's)
            else:
                w.c.malformed += 1  # a shim frame cut short, or not even Ethernet
            return
        if frame[FRAME_KIND] == Kind.BACKUP:  # fast path: a backup only files the copy away
            slot, seq = SLOT_SEQ.unpack_from(frame, FRAME_SLOT)
            self.backup_copy(slot, seq, frame)
            return
        try:
            shim = Shim.unpack(frame, ETH_HDR_LEN)
        except ShimError:
            w.c.malformed += 1
            return
        kind = shim.kind
        if kind == Kind.PRIMARY:
            self._primary_input(shim, frame)
        elif kind == Kind.MARKER:  # the old owner's output of a slot we adopt has gone through
            rt = w.slots.get(shim.slot)
            adopting = rt is not None and rt.role == SlotRole.ADOPTING and rt.epoch != shim.epoch
            parked = w.markers.on_marker(shim.slot, adopting)
            if parked is not None and rt is not None:
                self.start_adopted(rt, parked)
        else:  # OUTPUT/CONTROL frames are not for an NF's data path
            w.c.malformed += 1

    def backup_copy(self, slot: int, seq: int, frame: bytes) -> None:
        w = self._w
        if w.backups.waiting(slot):
            w.promotion.promote_waiting(slot)  # then this packet is its input
        if slot not in w.backed_up:  # (a peer's replica keeps no copies: none would be dropped)
            if w.gave_back and self.follow_given_back(slot, frame):
                return
            rt = w.slots.get(slot)
            if rt is not None and rt.role in (SlotRole.PRIMARY, SlotRole.RELEASED, SlotRole.ADOPTING):
                # a copy still in flight when this backup was promoted (and maybe has moved the
                # slot on since): it is input now, processed, forwarded or kept like a packet
                nxt = rt.seq.next_expected
                if rt.role == SlotRole.ADOPTING:  # (unprocessed until it starts: M18)
                    w.copy_to_backup(frame)
                if rt.role != SlotRole.PRIMARY or nxt is None or seq == nxt or seq_after(seq, nxt):
                    self._primary_input(Shim.unpack(frame, ETH_HDR_LEN), frame)
                return
            self._drop_unowned(slot, f"copies ({rt.role.name if rt is not None else 'no slot'})")
            return
        rep = w.replicas.get(slot)
        if rep is not None and rep.last_seq is not None and not seq_after(seq, rep.last_seq):
            return  # already committed by the primary: nothing to keep
        if w.inbuf.add(slot, seq, frame):
            w.c.backup_copies += 1
            if w.primary_sync.waiting:  # (it may close a waiting promotion's hole)
                w.primary_sync.changed()

    def follow_given_back(self, slot: int, frame: bytes) -> bool:
        """A packet of a slot whose copies went to its old owner (an adoption its adopter never
        started, M14): it follows them there, as input (True if forwarded)."""
        w = self._w
        links = w.gave_back.get(slot)
        if links is None:
            return False
        msg = Forward(with_kind(frame, Kind.PRIMARY))
        for link in links:
            link.send(msg)
        w.c.forwarded += 1
        return True

    def _primary_input(self, shim: Shim, frame: bytes) -> None:
        w = self._w
        rt = w.slots.get(shim.slot)
        if rt is None:
            if shim.slot in w.backed_up:  # switch already points at us; promotion will replay it
                self.backup_copy(shim.slot, shim.seq, frame)
            elif not (w.gave_back and self.follow_given_back(shim.slot, frame)):
                self._drop_unowned(shim.slot, "packets (no slot)")
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
                w.c.forwarded += 1
            elif len(rt.pending) < w.cfg.adopt_capacity:  # the transfer is not answered yet
                rt.pending.append((shim, frame))
            elif rt.forward_copy is None:  # (with a copy given: held there)
                w.c.overflows += 1
            return
        if role == SlotRole.ADOPTING:
            if len(rt.pending) < w.cfg.adopt_capacity:
                rt.pending.append((shim, frame))
            else:
                w.c.overflows += 1
            return
        if role != SlotRole.PRIMARY:
            self._drop_unowned(shim.slot, f"packets ({role.name})")
            return
        self.offer(rt, shim, frame, time.monotonic())

    def offer(self, rt: SlotRuntime, shim: Shim, frame: bytes, now: float) -> None:
        w = self._w
        ready: list[tuple[int, tuple[Shim, bytes]]] = []
        res = rt.seq.offer(shim.seq, (shim, frame), now, ready)
        if res == Offer.DUPLICATE:
            w.c.duplicates += 1
        elif res == Offer.OVERFLOW:
            w.c.overflows += 1
        elif res == Offer.BUFFERED:
            w.gapped.add(rt.slot)
        for _seq, (s, f) in ready:
            self._process(rt, s, f, now)
        if rt.seq.waiting_since is None:
            w.gapped.discard(rt.slot)

    def expire_gaps(self, now: float) -> None:
        w = self._w
        for slot in list(w.gapped):
            rt = w.slots.get(slot)
            if rt is None or rt.role != SlotRole.PRIMARY:
                w.gapped.discard(slot)
                continue
            since = rt.seq.waiting_since
            tail = rt.adopted_from is not None and not rt.epoch_seen
            # (an undone move's packets, given back by its adopter: simulation `stalls`, seed
            # 91, the old owner, assigned the slot back, skipped one that came 1 s later)
            given_back = rt.taken_back_at is not None and now - rt.taken_back_at < w.cfg.tail_wait
            if (tail or given_back) and since is not None and now - since < w.cfg.tail_wait:
                continue  # the old owner's tail may still be queued (found by the simulation)
            ready: list[tuple[int, tuple[Shim, bytes]]] = []
            if rt.seq.expire(now, ready):
                log.info("slot %d: gap skipped, now at %s", slot, rt.seq.next_expected)
            for _seq, (s, f) in ready:
                self._process(rt, s, f, now)
            if rt.seq.waiting_since is None:
                w.gapped.discard(slot)

    def _process(self, rt: SlotRuntime, shim: Shim, frame: bytes, now: float) -> None:
        w = self._w
        if shim.epoch == rt.epoch:
            if shim.flags & FLAG_FIRST_OF_EPOCH and rt.epoch_seen:
                # flagged again within our epoch: the switch restarted and its output dedup
                # forgot what it forwarded (nf_host/watermark.py, "After a switch restart")
                marks = restart_marks(w.cfg.nf_id, rt.slot, shim.stage, rt.epoch,
                                      rt.out_mark, shim.seq)
                (w.batch or w.open_batch(now)).outputs.extend(marks)
                w.c.watermarks += len(marks)
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
            fs = st.flows[key] = w.nf.initial_state()
        try:
            verdict = w.nf.process(
                pkt, fs, Context(rt.slot, shim.seq, w.cfg.nf_id, ckey, rev, w.store, now)
            )
        except GlobalStoreError as exc:  # etcd lost its quorum, say: counted, the packet dropped
            w.c.global_store_errors += 1
            if w.c.global_store_errors & (w.c.global_store_errors - 1) == 0:  # 1, 2, 4, ...
                log.warning("global state store failed (%d times so far): %s",
                            w.c.global_store_errors, exc)
            verdict = Verdict.DROP
        except Exception:
            log.exception("NF %s failed on slot %d seq %d", w.nf.name, rt.slot, shim.seq)
            w.c.nf_errors += 1
            verdict = Verdict.DROP
        st.last_seq = shim.seq
        if w.takeover_clock is not None:
            w.takeover_clock.processed(rt.slot)
        rt.packets += 1
        w.c.packets += 1
        batch = w.batch
        if batch is None:
            batch = w.open_batch(now)
        if verdict == Verdict.DROP_FORGET:  # the NF keeps no state for this flow
            if new:
                del st.flows[key]
            else:
                st.delete(key)
                w.flow_table.forget(rt.slot, key)
            w.flow_table.counted("nf")
        else:
            st.dirty.add(key)
            table = w.flow_table
            name, timeout = w.nf.flow_timeout(fs, ckey)
            table.touch(rt.slot, key, name, timeout, now, batch.id)
            if new and table.max_flows and len(table) > table.max_flows:
                w.bounds.evict_for_room(now)
        batch.packets += 1
        batch.slot_seqs[rt.slot] = shim.seq
        if verdict == Verdict.FORWARD:
            out = pkt.frame
            # insert EtherType 0x88B5 and the shim up to (not including) its ether_type field: the
            # frame's own EtherType, now right after it, becomes the shim's ether_type
            out[12:12] = ETHERTYPE_NFC_BYTES + SHIM_HEAD.pack(
                Kind.OUTPUT, shim.flags & FLAG_REVERSE, shim.stage, 0, rt.slot, rt.epoch,
                w.cfg.nf_id, shim.seq
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
                    w.cfg.nf_id, rt.slot, shim.stage, rt.epoch, shim.seq,
                    shim.flags & FLAG_REVERSE))
                rt.out_mark = shim.seq
                w.c.watermarks += 1
        if batch.packets >= w.cfg.batch_size:
            w.close_batch()

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
        w = self._w
        state.dirty = set(state.flows)
        rt.replace = True  # a peer may hold a replica from the previous owner, beyond our state
        rt.state = state
        rt.become(SlotRole.PRIMARY)
        rt.seq.next_expected = next_seq
        rt.committed_seq = state.last_seq or 0
        w.bounds.track(rt)
        batch = w.batch or w.open_batch(time.monotonic())
        if state.flows and state.last_seq is not None:
            batch.slot_seqs[rt.slot] = state.last_seq
        else:
            # an empty slot goes too: shipped only with its first packet, the backup and peers
            # kept the previous owner's replica, older than ours: a backup promoted from it
            # started an older owner generation, its peers refused all its deltas (a newer one
            # held), and its output waited for an ack that never came (busy-host hang runs)
            batch.replaced.add(rt.slot)

    def new_slot(self, slot: int, epoch: int, role: SlotRole) -> SlotRuntime:
        w = self._w
        return SlotRuntime(
            slot, epoch, role,
            Sequencer(capacity=w.cfg.reorder_capacity, gap_timeout=w.cfg.gap_timeout),
            SlotState(slot),
        )
