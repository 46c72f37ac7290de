"""The NF registry: one NfControl gRPC client per NF instance, its records and load collection.

It owns the controller's view of every NF (configured role, liveness, last load report) and talks
to the NF runtimes through `contract/proto/nf_control.proto`:

* `configure()` pushes role, backup, cluster peers and the slots each NF owns or backs up;
* its `detector` (`controlplane/failure_detector.py`) sends the heartbeats, watches each NF's
  control connection and confirms suspicions; the registry passes its `NfEvent`s ("down", "up",
  "restarted") to its listeners (the controller's failure handling) and its `events` queue;
* `load_loop()` polls `Status` and keeps each NF's last `NfLoad` for the load balancer and the API
  (a status that reports a self-takeover declares the primary it took over from down).

Cluster names from the configuration are sent as 1-based indexes (the proto's `cluster` is a number).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import grpc

from contract.proto import nf_control_pb2 as pb
from contract.proto import nf_control_pb2_grpc as pb_grpc
from contract.roles import NfRole
from controlplane.config import ControllerConfig
from controlplane.failure_detector import FailureDetector
from controlplane.nf_state import Conn, NfEvent, NfLoad, NfState
from controlplane.slot_map import SlotMap
from controlplane.slot_store import MoveIntent
from mgmt.pki import SECRET, derive_heartbeat_key, nf_name
from mgmt.tls import Identity, channel_options

LOG = logging.getLogger(__name__)

CALL_AGAIN_PAUSE = 0.05  # between the attempts of `call_again`

# reconnect quickly after an NF restarts, so heartbeats see it again within a few intervals
CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 500),
]
# with TLS, a connection attempt includes the handshake: gRPC's "min reconnect backoff" is the
# shortest time one attempt may take (its connect timeout), and 50 ms timed handshakes out on a
# loaded 2-core host ("timed out before receiving SETTINGS frame"). Refused connections (an NF
# gone) still fail at once, and the first retry still comes after 50 ms.
TLS_CHANNEL_OPTIONS = [(k, 1000 if k == "grpc.min_reconnect_backoff_ms" else v)
                       for k, v in CHANNEL_OPTIONS]


class NfControlError(Exception):
    """An NF answered a control call with ok=false, or could not be reached."""

    def __init__(self, nf_id: int, call: str, error: str) -> None:
        self.nf_id, self.call, self.error = nf_id, call, error
        super().__init__(f"NF {nf_id} {call}: {error}")

    @property
    def unanswered(self) -> bool:
        """No answer came (the connection broke or the deadline passed): the call may have
        acted or not. An NF's own refusal (ok = false) is an answer."""
        return self.error.startswith(UNANSWERED)


UNANSWERED = ("UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED")


EventListener = Callable[[NfEvent], Awaitable[None] | None]


class NfRegistry:
    """Every NF of the configuration, its gRPC client and its last known state."""

    def __init__(self, cfg: ControllerConfig) -> None:
        self.cfg = cfg
        self.clusters = cfg.cluster_numbers()
        self.nfs: dict[int, NfState] = {nf.id: NfState(nf, nf.role) for nf in cfg.nfs}
        self._conns: dict[int, Conn] = {}
        self._listeners: list[EventListener] = []
        self.events: asyncio.Queue[NfEvent] = asyncio.Queue(maxsize=1024)
        self._hb_keys: dict[int, bytes] = {}
        self._credentials: grpc.ChannelCredentials | None = None
        # heartbeats, probes and the death watch (controlplane/failure_detector.py)
        self.detector = FailureDetector(
            self, self._heartbeat_key if cfg.security.tls else None)
        # NFs left out of a cluster view sent while they were thought down (nf -> cluster):
        # when they answer again, their cluster gets its views again
        self.left_out: dict[int, str] = {}

    # -- connections ------------------------------------------------------------------------------
    def _heartbeat_key(self, nf_id: int) -> bytes | None:
        """NF `nf_id`'s heartbeat key (derived from the secret), None for an NF not configured."""
        key = self._hb_keys.get(nf_id)
        if key is None and nf_id in self.nfs:
            secret = (self.cfg.security.pki_dir / SECRET).read_bytes()
            key = self._hb_keys[nf_id] = derive_heartbeat_key(secret, nf_id)
        return key

    def _channel(self, nf_id: int) -> Any:
        """A channel to NF `nf_id`'s control API: mutual TLS, the NF's certificate checked
        against its name "nf-<id>" (plaintext with `security.tls: false`)."""
        sec, address = self.cfg.security, self.nfs[nf_id].cfg.mgmt
        if not sec.tls:
            return grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
        if self._credentials is None:
            self._credentials = Identity(sec.pki_dir, sec.name).grpc_channel()
        return grpc.aio.secure_channel(address, self._credentials,
                                       options=TLS_CHANNEL_OPTIONS + channel_options(nf_name(nf_id)))

    def conn(self, nf_id: int) -> Conn:
        conn = self._conns.get(nf_id)
        if conn is None:
            channel = self._channel(nf_id)
            conn = Conn(channel, pb_grpc.NfControlStub(channel))  # type: ignore[no-untyped-call]
            self._conns[nf_id] = conn
        return conn

    async def close(self) -> None:
        self.detector.close()
        conns, self._conns = self._conns, {}
        for conn in conns.values():
            await conn.channel.close()

    def add_listener(self, listener: EventListener) -> None:
        self._listeners.append(listener)

    async def emit(self, event: NfEvent) -> None:
        level = logging.WARNING if event.kind == "down" else logging.INFO
        LOG.log(level, "NF %d is %s (misses %d%s)", event.nf_id, event.kind, event.misses,
                f", {event.reason}" if event.reason else "")
        with contextlib.suppress(asyncio.QueueFull):
            self.events.put_nowait(event)
        for listener in self._listeners:
            result = listener(event)
            if result is not None:
                await result

    async def _call(self, nf_id: int, name: str, request: Any, timeout: float = 2.0) -> Any:
        conn, state = self.conn(nf_id), self.nfs[nf_id]
        # An NF that answers heartbeats but whose channel is not READY (it just started, or its
        # connection was reset) is reconnecting, possibly in gRPC's back-off (up to
        # max_reconnect_backoff_ms): the call waits for the channel within its deadline instead
        # of failing at once. (A live backup's replacement failed so at start-up, its primary's
        # channel still in back-off.) A call to an NF declared down fails fast as before.
        wait = bool(state.alive) and not state.declared_down \
            and conn.channel.get_state() != grpc.ChannelConnectivity.READY
        try:
            reply = await getattr(conn.stub, name)(request, timeout=timeout,
                                                   wait_for_ready=True if wait else None)
        except grpc.aio.AioRpcError as exc:
            raise NfControlError(nf_id, name, f"{exc.code().name}: {exc.details()}") from None
        if hasattr(reply, "ok") and not reply.ok:
            raise NfControlError(nf_id, name, reply.error or "failed")
        return reply

    async def call(self, nf_id: int, name: str, request: Any, timeout: float = 2.0) -> Any:
        """One NfControl call; raises NfControlError on ok=false, a transport error or a timeout."""
        return await self._call(nf_id, name, request, timeout)

    async def call_again(self, nf_id: int, name: str, request: Any, attempt: float,
                         total: float, slow_while_down: bool = False,
                         moot: Callable[[], bool] | None = None) -> Any:
        """An idempotent call (one the NF answers the same however often it is told: `Release`,
        `Promote`, `AssignSlots`, `Adopt`) asked again while it goes unanswered (a lost reply, a
        reset connection), each attempt within `attempt` seconds, until an answer, `total`
        seconds, or the NF is declared down. An answer, ok or not, ends it; so does the last
        attempt's error. An NF that acted on an attempt whose reply was lost answers the next
        one with the same result, so a lost reply neither counts as done nor as failed.
        `slow_while_down`: an NF declared down whose attempts only time out (its connection is
        up: a live NF starved of CPU, not a dead one, whose connection fails) is asked again
        too, until `total` (a `Promote`: docs/protocols.md Known limits). `moot`: a test after
        each unanswered attempt; true, the call is not asked again (the last attempt's error is
        raised): a `Release` whose adopter is declared down is decided by the fence
        (controlplane/migration.py), not waited for."""
        deadline = time.monotonic() + total
        while True:
            left = deadline - time.monotonic()
            try:
                return await self._call(nf_id, name, request, min(attempt, max(left, 0.001)))
            except NfControlError as exc:
                slow = slow_while_down and exc.error.startswith("DEADLINE_EXCEEDED")
                if not exc.unanswered or (self.nfs[nf_id].declared_down and not slow) \
                        or deadline - time.monotonic() <= 0 or (moot is not None and moot()):
                    raise
                LOG.info("NF %d %s unanswered (%s): asked again", nf_id, name, exc.error)
            await asyncio.sleep(min(CALL_AGAIN_PAUSE, max(deadline - time.monotonic(), 0)))

    # -- configuration ----------------------------------------------------------------------------
    async def configure(self, pairs: Mapping[int, int | None], slot_map: SlotMap,
                        next_seqs: Mapping[int, int] | None = None) -> None:
        """Push roles, backups, cluster peers and slot assignments to every NF."""
        await asyncio.gather(*(self.configure_nf(nf_id, pairs, slot_map, next_seqs)
                               for nf_id in self.nfs))

    async def configure_nf(self, nf_id: int, pairs: Mapping[int, int | None], slot_map: SlotMap,
                           next_seqs: Mapping[int, int] | None = None,
                           moves: Mapping[int, MoveIntent] | None = None,
                           first: bool = False) -> None:
        """Configure one NF. `next_seqs` (slot -> the next number the switch will stamp: the
        slot's seq_base + the packets `slot_traffic` counted + 1) tells a new owner or backup
        where each slot's numbering stands, so that a first packet that was reordered or lost is
        a counted gap, not a silent restart. `moves` are the journalled moves still under way
        (a new leader's): their slots are the adopter's in `slot_map`, but it is told `Adopt`
        again rather than `AssignSlots`, which keeps the adoption and what it buffered (and
        starts one in an adopter that restarted), so the move can be finished. `first`: this
        leader's first configuration of the NF (no move of its own involves it yet): a
        primary's adoption that neither the journal nor the slot map names is cancelled
        (`_cancel_unjournalled`)."""
        state = self.nfs[nf_id]
        primaries = set(pairs)
        backs_up = {b: p for p, b in pairs.items() if b is not None}
        role = (NfRole.PRIMARY if nf_id in primaries else NfRole.BACKUP if nf_id in backs_up
                else NfRole.SPARE)
        state.role = role
        await self._call(nf_id, "SetRole", pb.SetRoleRequest(role=pb.Role.Value(role.runtime_role.name)))
        if role == "primary":
            backup = pairs[nf_id]
            if backup is None:
                await self._call(nf_id, "SetBackup", pb.SetBackupRequest(backup_nf_id=0))
            else:
                await self._call(nf_id, "SetBackup", pb.SetBackupRequest(
                    backup_nf_id=backup, address=self.nfs[backup].cfg.replication_address()))
        await self._call(nf_id, "SetClusterPeers", self._peers_of(nf_id))
        if role == "primary":
            adopting = sorted((m for m in (moves or {}).values() if m.dst == nf_id),
                              key=lambda m: m.slot)
            skip = {m.slot for m in adopting}
            await self._call(nf_id, "AssignSlots", pb.AssignSlotsRequest(
                slots=_slot_epochs(slot_map, [s for s in slot_map.slots_of(nf_id)
                                              if s not in skip], next_seqs)))
            for m in adopting:
                try:  # (best effort: finishing the move asks B's fence whatever happened here)
                    await self._call(nf_id, "Adopt", pb.AdoptRequest(
                        slot=m.slot, epoch=m.epoch, from_nf_id=m.src,
                        from_address=self.nfs[m.src].cfg.replication_address()))
                except NfControlError as exc:
                    LOG.warning("journalled move of slot %d: NF %d not told to adopt it: %s",
                                m.slot, nf_id, exc)
            if first:
                await self._cancel_unjournalled(nf_id, skip | set(slot_map.slots_of(nf_id)))
        elif role == "backup":
            primary = backs_up[nf_id]
            await self._call(nf_id, "AssignSlots", pb.AssignSlotsRequest(
                slots=_slot_epochs(slot_map, slot_map.slots_of(primary), next_seqs),
                as_backup=True, primary_nf_id=primary))

    async def _cancel_unjournalled(self, nf_id: int, known: set[int]) -> None:
        """Cancel every adoption of primary `nf_id` outside `known` (its journalled moves and
        its slots): a previous leader told it `Adopt` and died before journalling the move
        (docs/protocols.md §5, M12). The journal is written before the switch is, so the switch
        never sent it that slot's packets at the adoption's epoch: the cancel drops nothing, and
        tells the NF's backup to drop the copy it was told to keep for the move. Without it the
        adoption stays open forever, and its backup promotes a replica of a slot it does not
        back up when the NF dies (simulation, leader kills, seed 4)."""
        reply = await self._call(nf_id, "Status", pb.StatusRequest(), timeout=1.0)
        for st in reply.slots:
            if st.role == pb.SLOT_ADOPTING and st.slot not in known:
                LOG.warning("NF %d adopts slot %d (epoch %d), a move no journal names: cancelled",
                            nf_id, st.slot, st.epoch)
                await self._call(nf_id, "CancelAdopt", pb.AdoptRequest(slot=st.slot,
                                                                             epoch=st.epoch))

    def _peers_of(self, nf_id: int) -> Any:
        """The cluster view `nf_id` gets: the other members of its cluster that are not declared
        down. An NF accepts replication only from its peers (and the primary it backs up), so a
        member failed over while alive (it hung, then went on) is refused by everyone."""
        me = self.nfs[nf_id].cfg
        return pb.SetClusterPeersRequest(peers=[
            pb.Peer(nf_id=p.id, address=p.replication_address())
            for p in self.cfg.cluster_members(me.cluster)
            if p.id != nf_id and not self.nfs[p.id].declared_down
        ])

    async def refresh_peers(self, cluster: str) -> None:
        """Send every live member of `cluster` its current view (after a member went down or
        came back); a member that cannot be reached gets it when it is configured again."""
        members = [p.id for p in self.cfg.cluster_members(cluster)
                   if not self.nfs[p.id].declared_down]
        self.left_out.update({p.id: cluster for p in self.cfg.cluster_members(cluster)
                              if self.nfs[p.id].declared_down})

        async def one(nf_id: int) -> None:
            try:
                await self._call(nf_id, "SetClusterPeers", self._peers_of(nf_id))
            except NfControlError as exc:
                LOG.warning("cluster view of NF %d not updated: %s", nf_id, exc)

        await asyncio.gather(*(one(i) for i in members))

    # -- load -------------------------------------------------------------------------------------
    async def poll_load(self, nf_id: int) -> NfLoad | None:
        try:
            reply = await self._call(nf_id, "Status", pb.StatusRequest(), timeout=1.0)
        except NfControlError as exc:
            LOG.debug("status of NF %d: %s", nf_id, exc)
            return None
        owned = [s for s in reply.slots if s.role == pb.SLOT_PRIMARY]
        load = NfLoad(
            packet_rate=reply.load.packet_rate, queue_depth=reply.load.queue_depth,
            cpu_percent=reply.load.cpu_percent, drops=reply.load.drops, gaps=reply.load.gaps,
            packets=reply.load.packets, slots=len(owned),
            malformed=reply.load.malformed, foreign=reply.load.foreign,
            duplicates=reply.load.duplicates, overload_drops=reply.load.overload_drops, workers=max(1, reply.workers),
            global_store_errors=reply.load.global_store_errors, nf_errors=reply.load.nf_errors,
            kernel_drops=reply.load.kernel_drops, buffer_overflows=reply.load.buffer_overflows,
            unowned=reply.load.unowned, tx_lost=reply.load.tx_lost,
            markers=reply.load.markers, marker_timeouts=reply.load.marker_timeouts,
            slot_flows={s.slot: s.flows for s in owned},
            flows=reply.load.flows, evictions=dict(reply.load.evictions),
            slots_behind=frozenset(
                s.slot for s in owned
                if s.version and (not s.peer_versions or min(s.peer_versions.values()) < s.version)),
            at=time.monotonic(),
        )
        self.nfs[nf_id].load = load
        for gone in reply.took_over_from:
            # this NF took over `gone`'s slots by itself (its replication link closed): if we
            # still think `gone` alive, it is failed over all the same (it can release nothing
            # more, docs/protocols.md §4.3)
            state = self.nfs.get(gone)
            if state is not None and not state.declared_down:
                await self.detector.declare_down(
                    gone, f"NF {nf_id} took over its slots (its replication link closed)",
                    time.time())
        return load

    async def poll_all(self) -> dict[int, NfLoad | None]:
        ids = [i for i, s in self.nfs.items() if not s.declared_down]
        loads = await asyncio.gather(*(self.poll_load(i) for i in ids))
        return dict(zip(ids, loads, strict=True))

    async def load_loop(self, interval: float = 1.0) -> None:
        while True:
            await self.poll_all()
            await asyncio.sleep(interval)

    def summaries(self) -> list[dict[str, Any]]:
        udp = self.detector.udp
        rejected = udp.rejected_by_nf if udp is not None else {}
        return [{**self.nfs[i].summary(), "heartbeats_rejected": rejected.get(i, 0)}
                for i in sorted(self.nfs)]

    def security(self) -> dict[str, Any]:
        """What /status shows of the management plane's security (docs/security.md)."""
        sec, udp = self.cfg.security, self.detector.udp
        return {"tls": sec.tls, "heartbeats_authenticated": sec.tls and udp is not None,
                "heartbeats_rejected": udp.rejected if udp is not None else 0}


def _slot_epochs(slot_map: SlotMap, slots: Iterable[int],
                 next_seqs: Mapping[int, int] | None = None) -> list[Any]:
    if next_seqs is None:
        return [pb.SlotEpoch(slot=s, epoch=slot_map.epoch(s)) for s in slots]
    return [pb.SlotEpoch(slot=s, epoch=slot_map.epoch(s), next_seq=next_seqs.get(s, 1))
            for s in slots]
