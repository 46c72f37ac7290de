"""A fake NF runtime control server (NfControl over gRPC on loopback) that records what it is told."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import grpc

from contract.proto import nf_control_pb2 as pb
from contract.proto import nf_control_pb2_grpc as pb_grpc
from mgmt.pki import local_pki
from mgmt.tls import nf_identity


@dataclass
class FakeNf(pb_grpc.NfControlServicer):
    nf_id: int
    calls: list[tuple[str, Any]] = field(default_factory=list)
    role: Any = 0
    backup: int = 0
    peers: list[int] = field(default_factory=list)
    slots: dict[int, int] = field(default_factory=dict)
    next_seqs: dict[int, int] = field(default_factory=dict)  # slot -> AssignSlots next_seq
    backed_up_for: int = 0
    packet_rate: float = 0.0
    cpu_percent: float = 0.0
    queue_depth: int = 3
    overload_drops: int = 0
    workers: int = 1
    slot_flows: dict[int, int] = field(default_factory=dict)  # slot -> flows (version = flows)
    peer_version: dict[int, int] = field(default_factory=dict)  # slot -> version peers acked
    mute: bool = False  # heartbeats hang (a stuck NF)
    slow: float = 0.0  # heartbeats answer this late (a live NF on a loaded machine)
    uptime_ms: int = 1000  # set lower to play a restarted NF
    adopting: dict[int, int] = field(default_factory=dict)  # slot -> epoch told by Adopt
    released: list[tuple[int, int, bool]] = field(default_factory=list)  # (slot, to, same_cluster)
    release_delay: float = 0.0  # Release answers after this long (play a hung transfer)
    release_error: str = ""  # Release answers ok=false with this error
    refuse_delta: bool = False  # Release with same_cluster fails (the adopter lacks the base)
    replay: int = 0  # what Promote reports as replayed
    promote_delay: float = 0.0  # Promote answers after this long
    refuse_setrole: int = 0  # the next this many SetRole calls fail (a control API not up yet)
    setbackup_delay: float = 0.0  # SetBackup answers after this long (a hung NF)
    setrole_delay: float = 0.0  # SetRole takes effect after this long (a slow NF)
    promoted: list[int] = field(default_factory=list)
    promoted_may_live: bool | None = None  # the last Promote's primary_may_live
    params: dict[str, Any] = field(default_factory=dict)  # as last set by UpdateNf
    on_update: Any = None  # called (no arguments) when UpdateNf arrives: a test's probe
    seen: dict[int, int] = field(default_factory=dict)  # slot -> highest sequence number received
    armed: tuple[int, int] | None = None  # (primary, successor) as last set by SetSuccessor
    took_over_from: list[int] = field(default_factory=list)  # what Status reports
    started: set[int] = field(default_factory=set)  # slots whose transfer it accepted (the fence)
    assigned: list[tuple[list[int], bool]] = field(default_factory=list)  # AssignSlots: (slots, as_backup)
    fence_errors: int = 0  # the next this many CancelAdopt calls fail (a worker not answering)
    given_back_to: list[int] = field(default_factory=list)  # CancelAdopt's from_nf_id, in order

    async def Status(self, request, context):
        self.calls.append(("Status", request))
        role = pb.SLOT_BACKUP if self.backed_up_for else pb.SLOT_PRIMARY
        return pb.StatusReply(
            nf_id=self.nf_id, role=self.role, backup_nf_id=self.backup,
            took_over_from=self.took_over_from,
            slots=[pb.SlotStatus(slot=s, epoch=e, role=role, flows=self.slot_flows.get(s, 0),
                                 version=self.slot_flows.get(s, 0),
                                 peer_versions=({9: self.peer_version[s]}
                                                if s in self.peer_version else {}),
                                 highest_seen=self.seen.get(s, 0), has_seen=s in self.seen)
                   for s, e in sorted(self.slots.items())],
            load=pb.Load(packet_rate=self.packet_rate, queue_depth=self.queue_depth, packets=1000,
                         drops=1 + self.overload_drops, cpu_percent=self.cpu_percent,
                         overload_drops=self.overload_drops),
            workers=self.workers,
        )

    async def Heartbeat(self, request, context):
        self.calls.append(("Heartbeat", request.counter))
        if self.mute:
            await asyncio.sleep(5)
        if self.slow:
            await asyncio.sleep(self.slow)
        self.uptime_ms += 1
        return pb.HeartbeatReply(nf_id=self.nf_id, counter=request.counter, uptime_ms=self.uptime_ms)

    def restart(self) -> None:
        """Forget everything, as a restarted NF runtime would."""
        self.role, self.backup, self.peers, self.slots, self.backed_up_for = 0, 0, [], {}, 0
        self.uptime_ms = 0

    async def SetRole(self, request, context):
        self.calls.append(("SetRole", request.role))
        if self.refuse_setrole:
            self.refuse_setrole -= 1
            return pb.Result(ok=False, error="not serving yet")
        if self.setrole_delay:
            await asyncio.sleep(self.setrole_delay)
        self.role = request.role
        return pb.Result(ok=True)

    async def SetBackup(self, request, context):
        self.calls.append(("SetBackup", (request.backup_nf_id, request.address)))
        if self.setbackup_delay:
            await asyncio.sleep(self.setbackup_delay)
        self.backup = request.backup_nf_id
        return pb.Result(ok=True)

    async def SetClusterPeers(self, request, context):
        self.calls.append(("SetClusterPeers", [(p.nf_id, p.address) for p in request.peers]))
        self.peers = [p.nf_id for p in request.peers]
        return pb.Result(ok=True)

    async def AssignSlots(self, request, context):
        self.calls.append(("AssignSlots", len(request.slots)))
        self.assigned.append(([s.slot for s in request.slots], request.as_backup))
        if request.as_backup:
            self.backed_up_for = request.primary_nf_id
        self.slots.update({s.slot: s.epoch for s in request.slots})  # the runtime adds, too
        self.next_seqs.update({s.slot: s.next_seq for s in request.slots if s.HasField("next_seq")})
        for s in request.slots:
            self.adopting.pop(s.slot, None)
        return pb.Result(ok=True)

    async def CancelAdopt(self, request, context):
        self.calls.append(("CancelAdopt", (request.slot, request.epoch)))
        self.given_back_to.append(request.from_nf_id)
        if self.fence_errors:
            self.fence_errors -= 1
            return pb.CancelAdoptReply(ok=False, error="worker not answering")
        if request.slot in self.started:  # the transfer was accepted: the fence says so
            return pb.CancelAdoptReply(ok=True, started=True)
        if self.adopting.get(request.slot) == request.epoch:
            del self.adopting[request.slot]
            self.slots.pop(request.slot, None)
        return pb.CancelAdoptReply(ok=True, started=False)

    async def Adopt(self, request, context):
        self.calls.append(("Adopt", (request.slot, request.epoch, request.from_nf_id)))
        self.adopting[request.slot] = request.epoch
        self.slots[request.slot] = request.epoch  # owned once the (unplayed) transfer arrives
        return pb.Result(ok=True)

    async def Release(self, request, context):
        self.calls.append(("Release", (request.slot, request.to_nf_id, request.same_cluster)))
        if self.release_delay:
            await asyncio.sleep(self.release_delay)
        if request.slot not in self.slots:
            return pb.ReleaseReply(ok=False, error=f"slot {request.slot} is not owned here")
        if self.release_error:
            return pb.ReleaseReply(ok=False, error=self.release_error)
        if self.refuse_delta and request.same_cluster:
            return pb.ReleaseReply(ok=False, error="refused: no delta base")
        self.slots.pop(request.slot)
        self.released.append((request.slot, request.to_nf_id, request.same_cluster))
        return pb.ReleaseReply(ok=True, bytes_shipped=100 if request.same_cluster else 1000,
                               last_seq=42, flows_shipped=3, delta=request.same_cluster)

    async def SetSuccessor(self, request, context):
        self.calls.append(("SetSuccessor", (request.primary_nf_id, request.successor_nf_id)))
        self.armed = (request.primary_nf_id, request.successor_nf_id) if request.primary_nf_id else None
        return pb.Result(ok=True)

    async def ExpectGiveBack(self, request, context):
        self.calls.append(("ExpectGiveBack", (request.slot, request.from_nf_id)))
        return pb.Result(ok=True)

    async def Promote(self, request, context):
        self.calls.append(("Promote", (list(request.slots), request.dead_nf_id)))
        if self.promote_delay:
            await asyncio.sleep(self.promote_delay)
        self.promoted = list(request.slots)
        self.promoted_may_live = request.primary_may_live
        if request.backup_nf_id:
            self.backup = request.backup_nf_id
        self.backed_up_for = 0
        self.role = pb.PRIMARY
        return pb.PromoteReply(ok=True, replayed=self.replay, slots=list(request.slots))


    async def UpdateNf(self, request, context):
        self.calls.append(("UpdateNf", request.params_json))
        if self.on_update is not None:
            self.on_update()
        if self.slots and not self.backed_up_for:  # the runtime refuses while it owns slots
            return pb.Result(ok=False, error=f"NF update refused: slots {sorted(self.slots)[:8]} are still owned here")
        params = json.loads(request.params_json)
        if "bad" in params:  # plays an NF whose constructor rejects its parameters
            return pb.Result(ok=False, error="NF generic refuses these params: bad")
        self.params = params
        return pb.Result(ok=True)


class FakeNfServer:
    """One FakeNf served on 127.0.0.1:port; start/stop to simulate a crash and a restart."""

    def __init__(self, nf: FakeNf, port: int) -> None:
        self.nf, self.port = nf, port
        self.server: Any = None

    async def start(self) -> None:
        self.server = grpc.aio.server()
        pb_grpc.add_NfControlServicer_to_server(self.nf, self.server)  # type: ignore[no-untyped-call]
        # mutual TLS with NF n's certificate, as `nf-host` serves by default (docs/security.md)
        creds = nf_identity(local_pki(), self.nf.nf_id).grpc_server()
        self.server.add_secure_port(f"127.0.0.1:{self.port}", creds)
        await self.server.start()

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop(grace=None)
            self.server = None
