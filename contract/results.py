"""What the NF commands (`contract.commands`) answer: one frozen dataclass per kind of answer.

A worker (`nf_host.worker.Worker.run`) returns them, they cross the worker's pipe pickled
(`nf_host.worker_process.WorkerPool.request`) and the control server (`nf_host.control`) turns
them into the NF control API's replies (`contract/proto/nf_control.proto`); the simulation
(`sim/nf.py`) does the same in-process. Each command class names its answer (`RESULT`), so
`request(worker, Release(...))` is a `ReleaseResult` for mypy and is checked at run time.

    command       answer
    status        WorkerStatus (its rows: SlotStatus; its replication traffic: ReplBytes)
    flows         SlotFlows
    cancel_adopt  FenceResult
    release       ReleaseResult
    promote       PromoteResult
    (the others)  None
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from contract.roles import SlotRole

FlowRow = tuple[list[int] | None, object]
"""One flow of a slot's dump: its key as [src, dst, sport, dport, proto] (None: the slot's own
state) and the NF's state of it (msgpack-able)."""


class SlotStatus(NamedTuple):
    """One slot a worker holds: owned (PRIMARY, ADOPTING, RELEASED) or held for another NF
    (BACKUP, REPLICA). Mirrors `SlotStatus` of the NF control API. A typed tuple, not a
    dataclass: a Status answer carries one per slot (thousands) at every load poll, and frozen
    dataclasses took 3-4 times as long to build and to cross the worker's pipe (pickled), which
    a CI run of 12-18 NFs on 2 cores felt."""

    slot: int
    epoch: int
    role: SlotRole
    packets: int          # processed (owned) or input copies buffered (held)
    committed_seq: int
    next_expected: int    # 0: not known yet (always 0 for a held slot)
    version: int
    flows: int
    highest_seen: int     # with has_seen False: none yet
    has_seen: bool
    peer_versions: dict[int, int]  # owned: acked, by peer NF; held: empty


@dataclass(frozen=True, slots=True)
class ReplBytes:
    """Replication traffic in bytes on the wire since start: sent by destination NF, received
    by sending NF, and the slot transfers of moves alone, each way."""

    repl_tx_bytes: dict[int, int]
    repl_rx_bytes: dict[int, int]
    transfer_tx_bytes: int
    transfer_rx_bytes: int
    batches: int          # the last batch id sealed


@dataclass(frozen=True, slots=True)
class WorkerStatus:
    """One worker's `status`: its slots and its counters (the control server adds up the
    workers' into `Load`). `drops` counts every loss: malformed, unowned, duplicates, the
    overflows, the kernel's drops, cancelled adoptions and (added by the worker's process,
    `tx_lost`) output frames that could not be sent."""

    slots: list[SlotStatus]
    packets: int
    gaps: int
    queue_depth: int
    malformed: int
    foreign: int
    duplicates: int
    drops: int
    kernel_drops: int
    input_paused: bool
    unowned: int
    overflows: int
    input_overflows: int
    nf_errors: int
    flows: int
    evictions: dict[str, int]
    flows_over_bound: int
    global_store_errors: int
    forwarded: int
    outputs: int
    replayed: int
    reemitted: int
    watermarks: int
    logged_outputs: int
    log_evicted: int
    cancelled: int
    markers: int
    marker_timeouts: int
    self_promotions: int
    took_over_from: list[int]
    promote_waits: int
    promote_wait_timeouts: int
    promote_waited_ms: float
    held_outputs: int
    transfer_bytes: int
    backup_bytes: int
    backup_copies: int
    repl_errors: int
    repl_refused: int
    repl_refusals: dict[str, int]
    repl: ReplBytes
    tx_lost: int = 0      # (the worker's process: nf_host/worker_process.py, FrameSender)
    tx_errors: int = 0


@dataclass(frozen=True, slots=True)
class SlotFlows:
    """`flows`: the state of one slot (owned or replicated), for tests and debugging."""

    version: int
    last_seq: int
    flows: list[FlowRow]


@dataclass(frozen=True, slots=True)
class FenceResult:
    """`cancel_adopt`, the move's fence (docs/protocols.md §5): `started` if the adopter had
    accepted the transfer (the move is complete); otherwise `held` if this NF held the adoption
    (now cancelled), False if it knew nothing of it."""

    started: bool
    held: bool = False


@dataclass(frozen=True, slots=True)
class ReleaseResult:
    """`release`, once the adopter accepted the transfer."""

    bytes_shipped: int    # the transfer's size on the wire
    last_seq: int         # the last number processed here; the adopter starts after it
    flows_shipped: int
    delta: bool           # only the flows changed since the adopter's version were shipped


@dataclass(frozen=True, slots=True)
class PromoteResult:
    """`promote`: the slots now owned, the input copies processed again and the dead primary's
    logged outputs sent again."""

    replayed: int
    slots: list[int]
    reemitted: int = 0
