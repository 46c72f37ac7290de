"""The property test's model of the runtime's surroundings (tests/nf_host/test_protocol_properties.py
says what it checks): `Sim` (the run's shared record: the switch, its port queues, the clock of
steps, what each NF processed and sent), `Recorder` (the checker NF, recording every call and the
slot's state after it), `SimLink` (the replication channel, delivered, delayed or cut as the test
decides) and `Node` (a `Worker` wired to them)."""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from contract.replication import Delta, Forward, Message, Transfer, decode, encode
from contract.roles import SlotRole
from contract.seq import SEQ_MASK
from contract.shim import ETH_HDR_LEN, Kind, Shim
from nf_host.global_state import MemoryStore
from nf_host.harness import OutputDedup, Switch, read_checker, strip_shim
from nf_host.nf_api import Context, FlowState, NetworkFunction, Packet, Verdict
from nf_host.nfs import make_nf
from nf_host.replication import StaleSender, worker_address
from nf_host.state_store import FlowId, flow_id
from nf_host.watermark import is_watermark
from nf_host.worker import Worker, WorkerConfig

A, B, P, Q, C = 1, 2, 3, 4, 5  # primary, its backup, cluster peer, other cluster, new backup
INF = 1 << 40  # a position after every sequence number

Snapshot = dict[FlowId, dict[str, Any]]


def addr(nf: int) -> str:
    return f"10.9.0.{nf}:7000"


@dataclass
class Sim:
    rng: random.Random
    start: int
    nodes: dict[int, Node] = field(default_factory=dict)
    links: list[SimLink] = field(default_factory=list)
    switch: Switch = field(default_factory=Switch)
    route: dict[int, tuple[int, int]] = field(default_factory=dict)  # slot -> (primary, backup)
    stamped: dict[int, list[int]] = field(default_factory=dict)  # slot -> seqs in stamp order
    flow_of: dict[tuple[int, int], int] = field(default_factory=dict)  # (slot, seq) -> flow
    delivered: dict[int, set[tuple[int, int]]] = field(default_factory=dict)  # nf -> (slot, seq)
    processed: dict[int, dict[int, list[tuple[int, int, int]]]] = field(default_factory=dict)
    history: dict[tuple[int, int, int], Snapshot] = field(default_factory=dict)
    outputs: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    dedup: OutputDedup = field(default_factory=OutputDedup)  # the switch's, for NF output
    refused: int = 0  # replication connections closed by a receiver (StaleSender)
    fenced: set[int] = field(default_factory=set)  # NFs the cluster's view no longer includes
    keys: dict[int, FlowId] = field(default_factory=dict)  # checker flow id -> flow key
    next_no: dict[int, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    clock: float = 0.0
    link_lost: set[tuple[int, int]] = field(default_factory=set)  # forwarded into a cut link
    segments: dict[int, list[tuple[int, int, str]]] = field(default_factory=dict)
    # the switch's receive queue of each NF's port: (when the NF sent it, frame), served in order
    # at random, each frame at the latest `queue_bound` steps after it was sent
    ports: dict[int, deque[tuple[int, bytes]]] = field(default_factory=dict)
    now: int = 0  # steps so far: the clock of the port queues and of the backups' output logs
    queue_bound: int = 1
    justified: set[tuple[int, int]] = field(default_factory=set)  # (slot, seq) sent under P2
    unjustified: dict[tuple[int, int], str] = field(default_factory=dict)  # sent before it held
    version_seq: dict[tuple[int, int, int], int | None] = field(default_factory=dict)

    def state_at(self, slot: int, seq: int | None) -> Snapshot:
        """The slot's state after `seq` in its lineage (recorded by the owner whose turn it was)."""
        if seq is None or self.pos(seq) < 0:
            return {}
        lo = -1
        for nf, hi, _how in self.segments[slot]:
            if lo < self.key(seq) <= hi:
                return self.history.get((nf, slot, seq), {})
            lo = max(lo, hi)
        return {}

    def later(self) -> float:
        """A time after every gap timeout so far (gap expiry without sleeping)."""
        self.clock = max(self.clock, time.monotonic()) + 1000.0
        return self.clock

    def pos(self, seq: int | None) -> int:
        """Like `key`, but -1 for "nothing yet" (None, or the number before the first)."""
        return -1 if seq is None or seq == (self.start - 1) & SEQ_MASK else self.key(seq)

    def key(self, seq: int) -> int:
        """Position of `seq` in the stream (serial arithmetic from the first number)."""
        return (seq - self.start) & SEQ_MASK

    def fail(self, msg: str) -> None:
        self.errors.append(msg)

    def tick(self) -> None:
        """One step later: every frame that has waited `queue_bound` steps goes through now."""
        self.now += 1
        for nf, queue in self.ports.items():
            while queue and queue[0][0] + self.queue_bound <= self.now:
                self.serve(nf)

    def serve(self, nf: int) -> None:
        """The switch takes the next frame of NF `nf`'s port through its pipeline."""
        _t, frame = self.ports[nf].popleft()
        if frame[ETH_HDR_LEN] == Kind.MARKER:  # a move's marker: passed to the slot's owner
            marker = Shim.unpack(frame, ETH_HDR_LEN)
            self.nodes[self.route[marker.slot][0]].inq.append(frame)
            return
        if is_watermark(frame):  # (the checker NF drops nothing, but the switch would take it)
            self.dedup.offer(frame)
            return
        shim, inner = strip_shim(frame)
        rec = read_checker(inner)
        assert rec is not None
        flow, _no, count = rec
        if not self.dedup.offer(frame):
            return  # an output the switch forwarded already (sent again by a promoted backup)
        if (shim.slot, shim.seq) not in self.justified:
            self.fail(self.unjustified.get((shim.slot, shim.seq), f"P2: {shim.slot}/{shim.seq}"))
        self.outputs.append((nf, shim.slot, shim.seq, flow, count))


class Recorder(NetworkFunction):
    """The checker NF, recording each call and the slot's whole state after it."""

    name = "recorder"

    def __init__(self, sim: Sim, nf_id: int) -> None:
        super().__init__()
        self.inner, self.sim, self.nf_id = make_nf("checker"), sim, nf_id
        self.worker: Worker | None = None

    def initial_state(self) -> FlowState:
        return self.inner.initial_state()

    def process(self, packet: Packet, state: FlowState, context: Context) -> Verdict:
        verdict = self.inner.process(packet, state, context)
        rec = read_checker(packet.frame)
        assert rec is not None and self.worker is not None
        flow, _no, count = rec
        self.sim.keys[flow] = flow_id(context.flow_key)
        self.sim.processed.setdefault(self.nf_id, {}).setdefault(context.slot, []).append(
            (context.seq, flow, count)
        )
        flows = self.worker.slots[context.slot].state.flows
        self.sim.history[(self.nf_id, context.slot, context.seq)] = {
            k: dict(v) for k, v in flows.items()
        }
        return verdict


class SimLink:
    """Stands in for `nf_host.replication.Link`: the test delivers its messages."""

    def __init__(self, sim: Sim, src: Node, nf_id: int, address: str) -> None:
        self.sim, self.src, self.nf_id, self.address = sim, src, nf_id, address
        self.dst = next(n for n in sim.nodes.values() if worker_address(n.addr, 0) == address)
        self.writer: object | None = None
        self.connected = asyncio.Event()
        self.out: deque[bytes] = deque()
        self.back: deque[Message] = deque()
        self.held: deque[bytes] = deque()  # sent while corked (a takeover's quiet window)
        self.corked = False
        self.bytes_sent = 0
        self.closed = False

    def send(self, msg: Message) -> int:
        if self.writer is None:
            self.lost(msg)
            return 0
        return self.send_raw(encode(msg))

    def kick(self) -> None:
        """(The simulated link has no reconnection back-off: the test connects it.)"""

    def lost(self, msg: Message) -> None:
        """A message the runtime sent into a dead link: a forwarded packet is lost there."""
        if isinstance(msg, Forward):
            shim = Shim.unpack(msg.frame, ETH_HDR_LEN)
            self.sim.link_lost.add((shim.slot, shim.seq))

    def send_raw(self, data: bytes) -> int:
        if self.writer is None or (self.src.dying is not None and self.src.dying <= 0):
            return 0  # (a process that died mid-release sends nothing more)
        (self.held if self.corked else self.out).append(data)
        self.bytes_sent += len(data)
        return len(data)

    def cork(self) -> None:
        self.corked = True

    def uncork(self) -> None:
        self.corked = False
        self.out.extend(self.held)
        self.held.clear()

    def backlog(self) -> int:
        return sum(len(d) for d in self.out) + sum(len(d) for d in self.held)

    def reset(self) -> None:
        self.cut()

    async def close(self) -> None:
        self.closed = True
        self.cut()

    def cut(self) -> None:
        for data in [*self.out, *self.held]:
            self.lost(decode(data[4:]))
        self.held.clear()
        self.writer = None
        self.connected.clear()
        self.out.clear()
        self.back.clear()

    def connect(self) -> None:
        if self.closed or self.src.dead or self.writer is not None:
            return
        self.writer = object()
        self.connected.set()
        self.src.w.linkset.on_connected(self)  # type: ignore[arg-type]

    def deliver(self) -> None:
        msg = decode(self.out.popleft()[4:])
        if self.dst.dead:
            return
        if isinstance(msg, Transfer):
            self.dst.transfers.append((self.src.nf_id, msg))
        if isinstance(msg, Delta):
            for row in msg.rows:
                self.sim.version_seq[(self.src.nf_id, row.slot, row.version)] = row.last_seq
        if self.src.nf_id in self.sim.fenced and self.dst.nf_id != self.src.nf_id:
            self.sim.refused += 1  # no longer a peer: the receiver's policy closes the connection
            self.cut()
            return
        try:
            reply = self.dst.w.on_replication(msg)
        except StaleSender:  # the receiver closes the connection, as ReplicationServer does
            self.sim.refused += 1
            self.cut()
            return
        if isinstance(reply, asyncio.Future):  # answered later (nf_host/adopt_commit.py)
            reply.add_done_callback(lambda f: self.back.append(f.result()))
        elif reply is not None:
            self.back.append(reply)

    def answer(self) -> None:
        reply = self.back.popleft()
        if not self.src.dead:
            self.src.w.linkset.on_message(self, reply)  # type: ignore[arg-type]


class Node:
    def __init__(self, sim: Sim, nf_id: int, batch: int, reorder: int, copies: int) -> None:
        self.sim, self.nf_id, self.addr = sim, nf_id, addr(nf_id)
        self.dead = False
        self.dying: int | None = None  # outputs it still sends before it dies mid-release
        self.inq: list[bytes] = []
        self.transfers: list[tuple[int, Transfer]] = []  # (from NF, transfer message)
        self.nf = Recorder(sim, nf_id)
        self.w = Worker(
            WorkerConfig(
                nf_id=nf_id, batch_size=batch, batch_time=0, transfer_timeout=5.0,
                reorder_capacity=reorder, backup_buffer_bytes=copies,
                output_retain=sim.queue_bound,  # the bound of the switch's queues, in steps
            ),
            self.nf, MemoryStore(), self.tx,
        )
        self.w.out_log.clock = lambda: sim.now
        self.nf.worker = self.w
        self.w.linkset.link = self.link  # type: ignore[method-assign,assignment]

    def link(self, nf_id: int, address: str) -> SimLink:
        old = self.w.links.get(nf_id)
        a = worker_address(address, self.w.cfg.index)
        if isinstance(old, SimLink) and old.address == a:
            return old
        self.w.pending_versions.pop(nf_id, None)
        self.w.acked_versions.pop(nf_id, None)
        link = SimLink(self.sim, self, nf_id, a)
        self.w.links[nf_id] = link  # type: ignore[assignment]
        self.sim.links.append(link)
        return link

    def tx(self, frame: bytes | bytearray) -> None:
        """Output leaves the NF into its port's queue at the switch; P2 is judged now (the
        backup holds the state that produced it), the exactly-once when the switch serves it."""
        sim = self.sim
        if self.dying is not None:
            self.dying -= 1
            if self.dying < 0:
                return  # it died in the middle of releasing a batch: the rest never leaves
        if self.dead:
            sim.fail(f"NF {self.nf_id} sent output after it died")
        sim.ports.setdefault(self.nf_id, deque()).append((sim.now, bytes(frame)))
        if frame[ETH_HDR_LEN] == Kind.MARKER or is_watermark(frame):
            return
        shim, inner = strip_shim(frame)
        rec = read_checker(inner)
        assert rec is not None
        flow, _no, count = rec
        key = (shim.slot, shim.seq)
        owner = sim.nodes[sim.route[shim.slot][0]].w.slots.get(shim.slot)
        if owner is not None and owner.role == SlotRole.PRIMARY and self.w.slots[shim.slot].forward:
            sim.justified.add(key)  # moved: its new owner acknowledged the state that produced it
            return
        if self.w.backup_id:
            backup = sim.nodes[self.w.backup_id]
            rep = backup.w.replicas.get(shim.slot)
            held = None
            if rep is not None and sim.pos(rep.last_seq) >= sim.key(shim.seq):
                state, _ = rep.to_slot_state()
                held = state.flows.get(sim.keys[flow], {}).get("count", 0)
            if held is None or held < count:
                # (a promoted backup sends its dead primary's released output again before its
                # own backup holds it: fine if that primary's release was, so judged when forwarded)
                sim.unjustified.setdefault(key, (
                    f"P2: NF {self.nf_id} released slot {shim.slot} seq {shim.seq} (count {count}) "
                    f"before its backup NF {backup.nf_id} held it (replica {rep and rep.last_seq})"
                ))
                return
        sim.justified.add(key)

    def take(self, window: int) -> None:
        """Deliver one queued frame: any of the first `window` (reordering)."""
        frame = self.inq.pop(self.sim.rng.randrange(min(window, len(self.inq))))
        if self.dead:
            return
        shim = Shim.unpack(frame, ETH_HDR_LEN)
        self.sim.delivered.setdefault(self.nf_id, set()).add((shim.slot, shim.seq))
        self.w.on_frame(frame)
