"""What a worker reports: its `Status` (each slot it owns or holds, its counters and losses, the
kernel's drops at its socket, added up here), the replication bytes it sent and received, the
highest sequence number of a slot it has seen, and one slot's flows. A part of the worker
(`nf_host.worker`), given a narrow view of it (`StatusHost`) when it is built; it only reads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from contract.results import ReplBytes, SlotFlows, SlotStatus, WorkerStatus
from contract.roles import SlotRole
from contract.seq import SEQ_MASK, seq_after
from nf_host.backup import InputBuffer
from nf_host.backup_slots import BackupSlots
from nf_host.commit import OutputCommit, OutputLog
from nf_host.flow_table import FlowTable
from nf_host.links import Links
from nf_host.move_marker import MarkerWait
from nf_host.peer_policy import PeerPolicy
from nf_host.promote_wait import PrimarySync
from nf_host.replication import ReplicationServer
from nf_host.state_store import Replica
from nf_host.worker_types import CommandError, PartHost

log = logging.getLogger("nf_host.worker")


class StatusHost(PartHost, Protocol):
    """What `StatusReport` reads of the worker: the slot tables (owned, held for others, input
    copies), the output commit and log, the flow table, the move markers, the takeovers and
    promotion waits, and the replication server, links and policy (their bytes and refusals)."""

    @property
    def backups(self) -> BackupSlots: ...
    @property
    def replicas(self) -> dict[int, Replica]: ...
    @property
    def acked_versions(self) -> dict[int, dict[int, int]]: ...
    @property
    def inbuf(self) -> InputBuffer: ...
    @property
    def commit(self) -> OutputCommit: ...
    @property
    def out_log(self) -> OutputLog: ...
    @property
    def input_paused(self) -> bool: ...
    @property
    def flow_table(self) -> FlowTable: ...
    @property
    def markers(self) -> MarkerWait: ...
    @property
    def took_over_from(self) -> set[int]: ...
    @property
    def primary_sync(self) -> PrimarySync: ...
    @property
    def server(self) -> ReplicationServer | None: ...
    @property
    def policy(self) -> PeerPolicy: ...
    @property
    def linkset(self) -> Links: ...


class StatusReport:
    """The worker's status and what it holds, read (see the module docstring)."""

    def __init__(self, host: StatusHost, drop_probe: Callable[[], int] | None) -> None:
        """`drop_probe()` counts the frames the kernel dropped since it was last called."""
        self._w = host
        self._drop_probe = drop_probe
        self.kernel_drops = 0

    def highest_seen(self, slot: int) -> int | None:
        """The highest sequence number of `slot` this worker received: processed, buffered,
        waiting for an adoption, or held as a backup's input copy (serial order; None: none).
        After a switch restart the controller resumes the switch's numbering beyond it."""
        w = self._w
        seen: list[int] = []
        rt = w.slots.get(slot)
        if rt is not None:
            if rt.seq.next_expected is not None:
                seen.append((rt.seq.next_expected - 1) & SEQ_MASK)
            seen += list(rt.seq.buffer)
            seen += [shim.seq for shim, _ in rt.pending]
        seen += list(w.inbuf.slots.get(slot, {}))
        if not seen:
            return None
        top = seen[0]
        for s in seen[1:]:
            if seq_after(s, top):
                top = s
        return top

    def status(self) -> WorkerStatus:
        w = self._w
        slots = []
        for slot, rt in w.slots.items():
            top = self.highest_seen(slot)
            slots.append(SlotStatus(
                slot=slot, epoch=rt.epoch, role=rt.role, packets=rt.packets,
                committed_seq=rt.committed_seq, next_expected=rt.seq.next_expected or 0,
                version=rt.state.version, flows=len(rt.state.flows),
                peer_versions={
                    nf: vers[slot] for nf, vers in w.acked_versions.items() if slot in vers
                },
                highest_seen=top or 0, has_seen=top is not None,
            ))
        for slot in w.backups.held():
            role = w.backups.role(slot)
            if slot in w.slots or role is None:
                continue
            rep = w.replicas.get(slot) or Replica(slot)
            top = self.highest_seen(slot)
            slots.append(SlotStatus(
                slot=slot, epoch=rep.epoch, role=role,
                packets=w.inbuf.count(slot), committed_seq=rep.last_seq or 0,
                next_expected=0, version=rep.version, flows=len(rep.flows),
                highest_seen=top or 0, has_seen=top is not None, peer_versions={},
            ))
        c = w.c
        if self._drop_probe is not None:
            dropped = self._drop_probe()
            if dropped:  # read on every Status call (the controller's load poll): not flooded
                self.kernel_drops += dropped
                log.warning("the kernel dropped %d frames before this worker read them (full "
                            "socket buffer; %d since start)", dropped, self.kernel_drops)
        gaps = sum(rt.seq.gaps for rt in w.slots.values())
        queue = sum(rt.seq.depth + len(rt.pending) for rt in w.slots.values())
        queue += w.commit.held_outputs
        return WorkerStatus(
            slots=slots, packets=c.packets, gaps=gaps, queue_depth=queue,
            malformed=c.malformed, foreign=c.foreign, duplicates=c.duplicates,
            drops=c.malformed + c.unowned + c.duplicates + c.overflows + w.inbuf.overflows
            + self.kernel_drops + c.cancelled,
            kernel_drops=self.kernel_drops, input_paused=w.input_paused,
            unowned=c.unowned, overflows=c.overflows, input_overflows=w.inbuf.overflows,
            nf_errors=c.nf_errors,
            flows=sum(len(rt.state.flows) for rt in w.slots.values()
                      if rt.role == SlotRole.PRIMARY),
            evictions=dict(w.flow_table.evicted),
            flows_over_bound=w.flow_table.over_bound,
            global_store_errors=c.global_store_errors,
            forwarded=c.forwarded, outputs=c.outputs, replayed=c.replayed,
            reemitted=c.reemitted, watermarks=c.watermarks, logged_outputs=w.out_log.frames,
            log_evicted=w.out_log.evicted,
            cancelled=c.cancelled, markers=w.markers.markers,
            marker_timeouts=w.markers.timeouts,
            self_promotions=c.self_promotions, took_over_from=sorted(w.took_over_from),
            promote_waits=w.primary_sync.waits,
            promote_wait_timeouts=w.primary_sync.timeouts,
            promote_waited_ms=round(w.primary_sync.waited_ms, 1),
            held_outputs=w.commit.held_outputs, transfer_bytes=c.transfer_bytes,
            backup_bytes=w.inbuf.bytes_held, backup_copies=w.inbuf.count(),
            repl_errors=c.repl_errors + (w.server.errors if w.server else 0),
            repl_refused=w.policy.refused_total, repl_refusals=dict(w.policy.refused),
            repl=self.repl_bytes(),
        )

    def repl_bytes(self) -> ReplBytes:
        """Replication traffic in bytes on the wire since start: sent by destination NF, received
        by sending NF (every message: deltas, snapshots, transfers, forwarded packets, acks), and
        the slot transfers of moves alone, each way."""
        w = self._w
        rx: dict[int, int] = {}
        xfer_in = 0
        for (sender, kind), n in (w.server.bytes_in if w.server else {}).items():
            rx[sender] = rx.get(sender, 0) + n
            if kind == "x":
                xfer_in += n
        return ReplBytes(repl_tx_bytes=dict(w.linkset.bytes_to), repl_rx_bytes=rx,
                         transfer_tx_bytes=w.c.transfer_bytes, transfer_rx_bytes=xfer_in,
                         batches=w.commit.last_id)

    def flows(self, slot: int) -> SlotFlows:
        """The state of one slot (owned or replicated), for tests and debugging."""
        w = self._w
        rt = w.slots.get(slot)
        if rt is not None:
            flows, version, last = rt.state.flows, rt.state.version, rt.state.last_seq
        elif slot in w.replicas:
            state, _bad = w.replicas[slot].to_slot_state()
            flows, version, last = state.flows, state.version, state.last_seq
        else:
            raise CommandError(f"no state for slot {slot} here")
        return SlotFlows(version=version, last_seq=last or 0,
                         flows=[(None if k is None else list(k), v) for k, v in flows.items()])
