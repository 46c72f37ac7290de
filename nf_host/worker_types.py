"""What a worker is made of: its configuration, the runtime of each slot and its counters (the
slot and NF roles are `contract.roles`'), shared by the worker (`worker`) and its parts
(`data_path`, `ownership`, ...) and by the NF's control server."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Protocol

from contract.replication import Transfer, TransferAck
from contract.results import ReleaseResult
from contract.roles import SLOT_TRANSITIONS, SlotRole, SlotTransitionError
from contract.shim import Shim
from contract.timing import MARKER_WAIT, SWITCH_QUEUE_BOUND, TRANSFER_TIMEOUT
from nf_host.chunked import CHUNK
from nf_host.peer_policy import PeerLimits
from nf_host.reorder import Sequencer
from nf_host.replication import Link
from nf_host.state_store import SlotState


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
    # a promotion's longest wait for the dead primary's state it lacks (nf_host/promote_wait.py)
    # without anything of it applied here; at most `promote_wait_max` while its deltas keep
    # coming (the controller asks a late Promote again, which joins the wait, for 10 s in all)
    promote_wait: float = 0.5
    promote_wait_max: float = 4.0
    reorder_capacity: int = 4096
    adopt_capacity: int = 65536
    backup_buffer_bytes: int = 64 * 1024 * 1024
    repl_host: str = "127.0.0.1"
    repl_port: int = 0
    transfer_timeout: float = TRANSFER_TIMEOUT
    marker_wait: float = MARKER_WAIT  # an adopter's wait for the old owner's move marker
    max_held: int = 65536  # outputs waiting for the backup before the worker stops reading input
    # as a backup, how long the primary's released output is kept after the release is known
    # (the switch's queue bound: contract/timing.py, docs/protocols.md §2 "The output log")
    output_retain: float = SWITCH_QUEUE_BOUND
    # how long an adopter waits for a gap in the old owner's tail (packets stamped before the
    # move, still queued at the switch toward the old owner, which forwards them) before it
    # skips it: the switch's queues can hold them that long, far longer than `gap_timeout`
    tail_wait: float = SWITCH_QUEUE_BOUND
    peer_backlog_bytes: int = 32 * 1024 * 1024  # unsent deltas to a peer before resynchronising
    limits: PeerLimits = field(default_factory=PeerLimits)  # what the replication server accepts
    repl_chunk: int = CHUNK  # larger replication messages leave in paced fragments (chunked.py)


@dataclass
class ReleaseRecord:
    """A release of a slot by this NF (docs/protocols.md §5): the transfer sent to `to_nf` and
    its answer. Until the answer comes the slot is RELEASED and undecided: a late answer decides
    it (accepted: forward to the adopter; refused: owned here again), as does the controller (a
    `Release` again resends the transfer; an `AssignSlots` takes the slot back)."""

    to_nf: int
    link: Link
    xid: int
    transfer: Transfer | None     # sent again as it is; None once accepted (not needed again)
    answer: asyncio.Future[TransferAck]
    result: ReleaseResult         # what `Release` answers once the transfer is accepted
    # the adopter's backup: a copy of the forwarded tail goes there too, so that the adopter's
    # death does not lose what was forwarded to it (M18)
    copy: Link | None = None


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
    release: ReleaseRecord | None = None  # RELEASED: the transfer and its answer
    adopted_from: tuple[int, int] | None = None  # (sender NF, transfer id) of the accepted transfer
    # a packet of `epoch` was processed here: an adopted slot's old-epoch tail (packets the old
    # owner forwards, still queued at the switch toward it) is over
    epoch_seen: bool = False
    # this owner's last output or watermark frame (seq), else the number before its first packet
    # (nf_host/watermark.py: when a dropped input sends a watermark frame instead)
    out_mark: int | None = None
    out_from: int | None = None
    # an adoption cancelled by the move's fence whose buffered packets were given back to the
    # old owner: RELEASED, forwarding there what still arrives at the adoption's epoch
    given_back: bool = False
    # ... and where a copy of what it forwards goes too: the old owner's backup while the old
    # owner was suspected down when the fence came (M16); of a released slot's tail, the
    # adopter's backup (M18)
    forward_copy: Link | None = None
    # when an undone move gave the slot back here at a newer epoch (`Ownership.take_back`, or
    # `AssignSlots` of a slot owned here all along): the cancelled adoption's packets, given back
    # by the adopter, may still be on their way, and a gap waits for them up to `tail_wait`
    taken_back_at: float | None = None

    def __post_init__(self) -> None:
        if self.role not in SLOT_TRANSITIONS:
            raise SlotTransitionError(f"slot {self.slot}: an owned slot cannot be {self.role.name}")

    def become(self, role: SlotRole) -> None:
        """Change this owned slot's role along `SLOT_TRANSITIONS`; any other change raises."""
        if role not in SLOT_TRANSITIONS[self.role]:
            raise SlotTransitionError(
                f"slot {self.slot}: {self.role.name} -> {role.name} is not a slot transition")
        self.role = role


@dataclass
class Counters:
    packets: int = 0
    malformed: int = 0  # shim frames cut short or of a kind not for an NF (a loss if input)
    foreign: int = 0  # frames of another EtherType (not nfcluster's: the kernel's, LLDP): no loss
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
    self_promotions: int = 0  # takeovers started here: the primary's link closed (§4.3)
    cancelled: int = 0  # packets buffered for an adoption that was cancelled (an undone move)
    watermarks: int = 0  # watermark frames sent for dropped inputs (nf_host/watermark.py)


@dataclass
class TakeoverClock:
    """A promotion's timeline until its first output is released (wall clock, seconds): where a
    takeover's time goes, logged with its "takeover:" line. `at` the promotion; then the first
    packet of a promoted slot processed, and the first batch with output of one sealed (its
    delta sent to the new backup); the release follows the backup's ack."""

    at: float
    slots: set[int]
    first_processed: float | None = None
    first_sealed: float | None = None

    def processed(self, slot: int) -> None:
        if self.first_processed is None and slot in self.slots:
            self.first_processed = time.time()

    def sealed(self, slot_seqs: dict[int, int]) -> None:
        if self.first_sealed is None and not self.slots.isdisjoint(slot_seqs):
            self.first_sealed = time.time()

    def steps(self, released: float) -> str:
        """'processed +a ms, sealed +b ms, acked +c ms': each step from the one before, in the
        order they happened (a batch of the dead primary's logged output is sealed at the
        promotion, before any packet is processed); a step that did not happen is '-'."""
        marks = [("processed", self.first_processed), ("sealed", self.first_sealed)]
        out = [f"{name} -" for name, t in marks if t is None]
        last = self.at
        for name, t in sorted(((n, t) for n, t in marks if t is not None), key=lambda m: m[1]):
            out.append(f"{name} +{(t - last) * 1000:.1f} ms")
            last = t
        out.append(f"acked +{(released - last) * 1000:.1f} ms")
        return ", ".join(out)


class PartHost(Protocol):
    """What every part of the worker sees of it (each part's own Protocol extends this one): its
    counters, the slots it owns, and its backup's NF id (0: none)."""

    @property
    def c(self) -> Counters: ...
    @property
    def slots(self) -> dict[int, SlotRuntime]: ...
    @property
    def backup_id(self) -> int: ...
