"""What the controller knows of each NF: its last load report (`NfLoad`, from `Status`), its
liveness and configured role (`NfState`, kept by `controlplane/nf_registry.py`), its connection (`Conn`), the
liveness changes the failure detection acts on (`NfEvent`), and where an NF's drops happened
(`nf_losses`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from contract.roles import NfRole
from controlplane.config import NfConfig


@dataclass(frozen=True)
class NfLoad:
    """One load report of an NF (from `Status`)."""

    packet_rate: float = 0.0
    queue_depth: int = 0
    cpu_percent: float = 0.0
    drops: int = 0
    gaps: int = 0
    packets: int = 0
    slots: int = 0
    malformed: int = 0  # part of drops: frames without a valid shim or body
    foreign: int = 0  # not part of drops: frames of another EtherType (not nfcluster's)
    duplicates: int = 0  # part of drops: sequence numbers already processed
    overload_drops: int = 0  # part of drops: input buffers full, kernel socket drops
    global_store_errors: int = 0  # packets dropped: the global state store (etcd) failed
    nf_errors: int = 0  # packets dropped: the NF raised
    kernel_drops: int = 0  # part of overload_drops: the kernel dropped them at the NF's socket
    buffer_overflows: int = 0  # part of overload_drops: reorder/backup buffers full
    unowned: int = 0  # part of drops: packets of slots the NF does not own
    tx_lost: int = 0  # part of drops: output frames the NF's data socket refused
    markers: int = 0  # moves adopted with the old owner's marker (docs/protocols.md §5, P6)
    marker_timeouts: int = 0  # moves adopted without the old owner's marker (order not proven)
    workers: int = 1  # worker processes (CPU capacity: 100 % each)
    slot_flows: Mapping[int, int] = field(default_factory=dict)  # owned slot -> flows with state
    flows: int = 0  # flows with state in the owned slots (nf_host/flow_table.py)
    evictions: Mapping[str, int] = field(default_factory=dict)  # flows evicted, by reason
    slots_behind: frozenset[int] = frozenset()  # owned slots a cluster peer/backup lags on
    at: float = 0.0  # time.monotonic() of the report


@dataclass(frozen=True)
class NfEvent:
    """Liveness change of an NF, as the failure detection unit sees it."""

    kind: Literal["down", "up", "restarted"]
    nf_id: int
    misses: int = 0
    confirmed: bool = False  # a "down" whose confirming probe has already failed
    reason: str = ""
    # "down": time.time() of the first evidence (the connection closing, the first missed
    # heartbeat), where a fail-over's timeline starts; "up": the NF answered with a lower uptime
    # than before (a new process: whatever it held is gone)
    since: float = field(default=0.0, compare=False)
    restarted: bool = False


@dataclass
class NfState:
    """What the controller knows about one NF."""

    cfg: NfConfig
    role: NfRole
    alive: bool | None = None  # None until the first heartbeat answer or declared failure
    misses: int = 0
    heartbeats: int = 0
    last_seen: float | None = None
    rtt_ms: float | None = None
    load: NfLoad | None = None
    declared_down: bool = False
    # declared down on silence alone (missed heartbeats, a probe that timed out), not on its
    # connection closing: it may be alive, only starved of CPU (`PromoteRequest.primary_may_live`)
    silent: bool = False
    uptime_ms: int | None = None  # from the last heartbeat; a decrease means the NF restarted
    suspected_at: float | None = None  # time.time() of the first miss of the current run of misses
    answered_at: float = 0.0  # time.time() at which the last heartbeat it answered was sent

    def summary(self) -> dict[str, Any]:
        load = self.load or NfLoad()
        return {
            "id": self.cfg.id, "name": self.cfg.name, "node": self.cfg.node,
            "cluster": self.cfg.cluster, "role": self.role, "port": self.cfg.port,
            "mgmt": self.cfg.mgmt,
            "alive": self.alive, "misses": self.misses, "rtt_ms": self.rtt_ms,
            "packet_rate": load.packet_rate, "queue_depth": load.queue_depth,
            "cpu_percent": load.cpu_percent, "drops": load.drops, "gaps": load.gaps,
            "packets": load.packets, "slots": load.slots,
            "malformed": load.malformed, "foreign": load.foreign, "duplicates": load.duplicates,
            "global_store_errors": load.global_store_errors, "nf_errors": load.nf_errors,
            "markers": load.markers, "marker_timeouts": load.marker_timeouts,
            "losses": nf_losses(load),
            "flows": load.flows, "evictions": dict(load.evictions),
        }


def nf_losses(load: NfLoad) -> dict[str, int]:
    """Where an NF's drops happened, by reason (only those that happened): `kernel` (its socket's
    receive buffer was full), `buffers` (reorder or backup buffers full), `tx` (its output was
    refused), `malformed`, `duplicates` (dropped on purpose: already processed), `unowned`,
    `nf_errors`, `store_errors` (the global state store failed), `other` (the rest of drops)."""
    parts = {"kernel": load.kernel_drops, "buffers": load.buffer_overflows, "tx": load.tx_lost,
             "malformed": load.malformed, "duplicates": load.duplicates, "unowned": load.unowned}
    other = load.drops - sum(parts.values())
    parts |= {"nf_errors": load.nf_errors, "store_errors": load.global_store_errors,
              "other": max(0, other)}
    return {k: v for k, v in parts.items() if v}


@dataclass
class Conn:
    """The controller's gRPC connection to one NF's control API, and its heartbeat counter."""

    channel: Any
    stub: Any
    counter: int = 0
