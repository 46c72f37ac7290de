"""The NF control API's replies (`contract/proto/nf_control.proto`) made from the workers' answers
(`contract.results`): one place for the control server (`nf_host.control`) and the simulation
(`sim/nf.py`), which answers the controller's calls in-process.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

import msgpack

from contract.proto import nf_control_pb2 as pb
from contract.results import (
    FenceResult,
    PromoteResult,
    ReleaseResult,
    SlotFlows,
    SlotStatus,
    WorkerStatus,
)

K = TypeVar("K")


def _add_up(maps: Iterable[Mapping[K, int]]) -> dict[K, int]:
    """Per-worker counters by key (peer NF id, eviction reason), added up."""
    out: dict[K, int] = {}
    for m in maps:
        for k, v in m.items():
            out[k] = out.get(k, 0) + v
    return out


def slot_status(row: SlotStatus) -> pb.SlotStatus:
    return pb.SlotStatus(
        # (the stub types `role` as its own enum, which `contract.roles.SlotRole` mirrors)
        slot=row.slot, epoch=row.epoch, role=int(row.role), packets=row.packets,  # type: ignore[arg-type]
        committed_seq=row.committed_seq, next_expected=row.next_expected, version=row.version,
        flows=row.flows, peer_versions=row.peer_versions, highest_seen=row.highest_seen,
        has_seen=row.has_seen)


def slot_rows(parts: Sequence[WorkerStatus]) -> list[pb.SlotStatus]:
    """Every worker's slots, by slot number."""
    return sorted((slot_status(row) for p in parts for row in p.slots), key=lambda s: s.slot)


def took_over_from(parts: Sequence[WorkerStatus]) -> list[int]:
    """The primaries some worker took over from by itself (§4.3)."""
    return sorted({nf for p in parts for nf in p.took_over_from})


def load(parts: Sequence[WorkerStatus], *, packet_rate: float = 0.0, cpu_percent: float = 0.0,
         heartbeats_withheld: int = 0) -> pb.Load:
    """The NF's load: its workers' counters added up."""
    return pb.Load(
        packet_rate=packet_rate, queue_depth=sum(p.queue_depth for p in parts),
        cpu_percent=cpu_percent, drops=sum(p.drops for p in parts),
        gaps=sum(p.gaps for p in parts), packets=sum(p.packets for p in parts),
        malformed=sum(p.malformed for p in parts), foreign=sum(p.foreign for p in parts),
        duplicates=sum(p.duplicates for p in parts),
        repl_errors=sum(p.repl_errors for p in parts),
        repl_refused=sum(p.repl_refused for p in parts),
        tx_lost=sum(p.tx_lost for p in parts),
        global_store_errors=sum(p.global_store_errors for p in parts),
        nf_errors=sum(p.nf_errors for p in parts),
        overload_drops=sum(p.overflows + p.input_overflows + p.kernel_drops for p in parts),
        kernel_drops=sum(p.kernel_drops for p in parts),
        buffer_overflows=sum(p.overflows + p.input_overflows for p in parts),
        unowned=sum(p.unowned for p in parts),
        repl_tx_bytes=_add_up(p.repl.repl_tx_bytes for p in parts),
        repl_rx_bytes=_add_up(p.repl.repl_rx_bytes for p in parts),
        transfer_tx_bytes=sum(p.repl.transfer_tx_bytes for p in parts),
        transfer_rx_bytes=sum(p.repl.transfer_rx_bytes for p in parts),
        batches=sum(p.repl.batches for p in parts),
        markers=sum(p.markers for p in parts),
        marker_timeouts=sum(p.marker_timeouts for p in parts),
        self_promotions=sum(p.self_promotions for p in parts),
        heartbeats_withheld=heartbeats_withheld,
        flows=sum(p.flows for p in parts),
        evictions=_add_up(p.evictions for p in parts),
        flows_over_bound=sum(p.flows_over_bound for p in parts),
    )


def fence_reply(res: FenceResult) -> pb.CancelAdoptReply:
    return pb.CancelAdoptReply(ok=True, started=res.started, held=res.held)


def release_reply(res: ReleaseResult) -> pb.ReleaseReply:
    return pb.ReleaseReply(ok=True, bytes_shipped=res.bytes_shipped, last_seq=res.last_seq,
                           flows_shipped=res.flows_shipped, delta=res.delta)


def promote_reply(parts: Iterable[PromoteResult]) -> pb.PromoteReply:
    """The promotion's reply: its workers' answers added up."""
    replayed = 0
    slots: list[int] = []
    for res in parts:
        replayed += res.replayed
        slots += res.slots
    return pb.PromoteReply(ok=True, replayed=replayed, slots=sorted(slots))


def dump_reply(res: SlotFlows) -> pb.DumpSlotReply:
    return pb.DumpSlotReply(ok=True, version=res.version, last_seq=res.last_seq,
                            flows=msgpack.packb(res.flows, use_bin_type=True))
