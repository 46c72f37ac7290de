"""The gRPC `NfControl` server (contract/proto/nf_control.proto): the controller's handle on an NF.

Runs in the parent process of an NF instance, on a thread pool, and turns each call into commands
for the worker processes (`WorkerPool`): slot commands go to the worker that owns the slot
(slot % workers), instance-wide ones to every worker. Errors never escape as RPC failures: every
reply carries `ok` and an `error` message (an unknown slot, an unreachable adopter, a value out of
range), so malformed control messages are answered, counted and logged, never a crash.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent import futures
from typing import TypeVar

import grpc
import psutil

from contract import commands
from contract.nf_params import parse_params
from contract.proto import nf_control_pb2 as pb
from contract.proto import nf_control_pb2_grpc as pb_grpc
from contract.results import PromoteResult
from contract.roles import Role
from contract.timing import CONTROL_REPLY_TIMEOUT
from mgmt.tls import nf_identity
from nf_host import replies
from nf_host.config import NfHostConfig
from nf_host.replication import split_address
from nf_host.worker import CommandError
from nf_host.worker_process import WorkerPool

log = logging.getLogger(__name__)

_R = TypeVar("_R")
R = TypeVar("R")
U16 = 0xFFFF
HEARTBEAT_WORKER_TIMEOUT = 0.5


# The largest parameter object UpdateNf accepts (bytes of JSON).
MAX_PARAMS_JSON = 64 * 1024


class BadRequest(ValueError):
    """A control message with a value out of range."""


def _check16(what: str, value: int) -> int:
    if not 0 <= value <= U16:
        raise BadRequest(f"{what} {value} does not fit 16 bits")
    return value


def _check_address(what: str, address: str) -> None:
    """An optional host:port (empty: none given); raises BadRequest naming `what`."""
    if address:
        try:
            split_address(address)
        except ValueError as exc:
            raise BadRequest(f"{what}: {exc}") from None


class NfControlServicer(pb_grpc.NfControlServicer):
    def __init__(self, cfg: NfHostConfig, pool: WorkerPool) -> None:
        self.cfg, self.pool = cfg, pool
        self.role = {"primary": pb.PRIMARY, "backup": pb.BACKUP, "idle": pb.IDLE}[cfg.role]
        self.backup_id = 0
        self.params: dict[str, object] = dict(cfg.params)
        self.started = time.monotonic()
        self.errors = 0
        self._rate_lock = threading.Lock()
        self._last_sample: tuple[float, int] = (self.started, 0)
        self._procs = [psutil.Process()] + [psutil.Process(p.pid) for p in pool.procs if p.pid]
        for p in self._procs:
            p.cpu_percent(None)

    def _guard(self, reply: Callable[[str], _R], fn: Callable[[], _R]) -> _R:
        try:
            return fn()
        except (CommandError, BadRequest, ValueError) as exc:
            self.errors += 1
            log.warning("control call failed: %s", exc)
            return reply(str(exc) or type(exc).__name__)

    def _all(self, cmd: commands.Returns[R]) -> list[R]:
        return self.pool.broadcast(cmd)

    # ---------------------------------------------------------------- RPCs
    def Status(self, request: pb.StatusRequest, context: grpc.ServicerContext) -> pb.StatusReply:
        parts = self._all(commands.Status())
        now = time.monotonic()
        packets = sum(p.packets for p in parts)
        with self._rate_lock:
            t0, n0 = self._last_sample
            rate = (packets - n0) / (now - t0) if now > t0 else 0.0
            self._last_sample = (now, packets)
        cpu = 0.0
        for p in self._procs:
            with contextlib.suppress(psutil.Error):
                cpu += p.cpu_percent(None)
        load = replies.load(parts, packet_rate=rate, cpu_percent=cpu,
                            heartbeats_withheld=self.pool.heartbeats_withheld())
        took_over = replies.took_over_from(parts)
        slots = replies.slot_rows(parts)
        return pb.StatusReply(
            nf_id=self.cfg.nf_id, role=pb.PRIMARY if took_over else self.role,
            cluster=self.cfg.cluster, slots=slots, load=load, took_over_from=took_over,
            nf_type=self.cfg.nf, workers=self.cfg.workers, backup_nf_id=self.backup_id,
            params_json=json.dumps(self.params, sort_keys=True),
        )

    def Heartbeat(self, request: pb.HeartbeatRequest, context: grpc.ServicerContext) -> pb.HeartbeatReply:
        if not self.pool.alive():
            context.abort(grpc.StatusCode.UNAVAILABLE, "a worker process of this NF has exited")
        try:  # every worker's event loop must answer, not just exist
            for w in range(self.cfg.workers):
                self.pool.request(w, commands.Ping(), timeout=HEARTBEAT_WORKER_TIMEOUT)
        except CommandError as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"worker not answering: {exc}")
        return pb.HeartbeatReply(
            nf_id=self.cfg.nf_id, counter=request.counter,
            uptime_ms=int((time.monotonic() - self.started) * 1000),
        )

    def SetRole(self, request: pb.SetRoleRequest, context: grpc.ServicerContext) -> pb.Result:
        def run() -> pb.Result:
            if request.role not in (pb.PRIMARY, pb.BACKUP, pb.IDLE):
                raise BadRequest(f"role {request.role} is not PRIMARY, BACKUP or IDLE")
            self._all(commands.SetRole(Role(request.role)))
            self.role = request.role
            return pb.Result(ok=True)

        return self._guard(lambda e: pb.Result(ok=False, error=e), run)

    def SetBackup(self, request: pb.SetBackupRequest, context: grpc.ServicerContext) -> pb.Result:
        def run() -> pb.Result:
            _check16("backup_nf_id", request.backup_nf_id)
            if request.backup_nf_id == self.cfg.nf_id:
                raise BadRequest("an NF cannot be its own backup")
            if request.backup_nf_id and not request.address:
                raise BadRequest("a backup needs a replication address")
            self._all(commands.SetBackup(request.backup_nf_id, request.address))
            self.backup_id = request.backup_nf_id
            return pb.Result(ok=True)

        return self._guard(lambda e: pb.Result(ok=False, error=e), run)

    def SetClusterPeers(
        self, request: pb.SetClusterPeersRequest, context: grpc.ServicerContext
    ) -> pb.Result:
        def run() -> pb.Result:
            peers = []
            for p in request.peers:
                _check16("peer nf_id", p.nf_id)
                if not p.address:
                    raise BadRequest(f"peer {p.nf_id} has no replication address")
                peers.append((p.nf_id, p.address))
            self._all(commands.SetPeers(peers))
            return pb.Result(ok=True)

        return self._guard(lambda e: pb.Result(ok=False, error=e), run)

    def AssignSlots(self, request: pb.AssignSlotsRequest, context: grpc.ServicerContext) -> pb.Result:
        def run() -> pb.Result:
            _check16("primary_nf_id", request.primary_nf_id)
            _check16("adoption_from_nf_id", request.adoption_from_nf_id)
            _check_address("adoption_from_address", request.adoption_from_address)
            per: dict[int, list[tuple[int, int, int | None]]] = {}
            for s in request.slots:
                _check16("slot", s.slot)
                _check16("epoch", s.epoch)
                nxt = s.next_seq if s.HasField("next_seq") else None
                per.setdefault(self.pool.worker_of(s.slot), []).append((s.slot, s.epoch, nxt))
            if request.as_backup and self.role == pb.IDLE:
                self.role = pb.BACKUP  # a spare taken from the pool (it holds nothing to drop)
            for w, slots in per.items():
                # (the primary's id: whose links the replication server then accepts)
                self.pool.request(w, commands.Assign(
                    slots, request.as_backup, request.primary_nf_id, request.adoption,
                    request.adoption_from_nf_id, request.adoption_from_address))
            return pb.Result(ok=True)

        return self._guard(lambda e: pb.Result(ok=False, error=e), run)

    def Adopt(self, request: pb.AdoptRequest, context: grpc.ServicerContext) -> pb.Result:
        def run() -> pb.Result:
            _check16("slot", request.slot)
            _check16("epoch", request.epoch)
            _check16("from_nf_id", request.from_nf_id)
            self.pool.request(self.pool.worker_of(request.slot), commands.Adopt(
                request.slot, request.epoch, request.from_nf_id, request.from_address))
            return pb.Result(ok=True)

        return self._guard(lambda e: pb.Result(ok=False, error=e), run)

    def CancelAdopt(self, request: pb.AdoptRequest,
                    context: grpc.ServicerContext) -> pb.CancelAdoptReply:
        def run() -> pb.CancelAdoptReply:
            _check16("slot", request.slot)
            _check16("epoch", request.epoch)
            _check16("from_nf_id", request.from_nf_id)
            _check16("copy_nf_id", request.copy_nf_id)
            _check_address("from_address", request.from_address)
            _check_address("copy_address", request.copy_address)
            res = self.pool.request(self.pool.worker_of(request.slot), commands.CancelAdopt(
                request.slot, request.epoch, request.from_nf_id, request.from_address,
                request.copy_nf_id, request.copy_address))
            return replies.fence_reply(res)

        return self._guard(lambda e: pb.CancelAdoptReply(ok=False, error=e), run)

    def Release(self, request: pb.ReleaseRequest, context: grpc.ServicerContext) -> pb.ReleaseReply:
        def run() -> pb.ReleaseReply:
            _check16("slot", request.slot)
            _check16("to_nf_id", request.to_nf_id)
            _check16("adopter_backup_nf_id", request.adopter_backup_nf_id)
            _check_address("adopter_backup_address", request.adopter_backup_address)
            if not request.to_address:
                raise BadRequest("release needs the adopter's replication address")
            res = self.pool.request(
                self.pool.worker_of(request.slot),
                commands.Release(request.slot, request.to_nf_id, request.to_address,
                                 request.same_cluster, request.adopter_backup_nf_id,
                                 request.adopter_backup_address),
                timeout=CONTROL_REPLY_TIMEOUT,
            )
            return replies.release_reply(res)

        return self._guard(lambda e: pb.ReleaseReply(ok=False, error=e), run)

    def Promote(self, request: pb.PromoteRequest, context: grpc.ServicerContext) -> pb.PromoteReply:
        def run() -> pb.PromoteReply:
            for s in request.slots:
                _check16("slot", s)
            if request.epochs and len(request.epochs) != len(request.slots):
                raise BadRequest(f"{len(request.epochs)} epochs for {len(request.slots)} slots")
            epochs = dict(zip(request.slots, request.epochs, strict=False))
            _check16("backup_nf_id", request.backup_nf_id)
            _check16("dead_nf_id", request.dead_nf_id)  # (found by tests/nf_host/test_fuzz_mgmt.py)
            if request.backup_nf_id == self.cfg.nf_id:
                raise BadRequest("an NF cannot be its own backup")
            if request.backup_nf_id and not request.backup_address:
                raise BadRequest("a backup needs a replication address")
            parts: list[PromoteResult] = []
            for w in range(self.cfg.workers):
                mine = [s for s in request.slots if self.pool.worker_of(s) == w]
                if request.slots and not mine:  # nothing to promote here: only the new backup
                    if request.backup_nf_id:
                        self.pool.request(w, commands.SetBackup(request.backup_nf_id,
                                                                request.backup_address))
                    continue
                # the backup is set in the same worker step as the promotion: no output of a
                # promoted slot leaves before the new backup holds its state
                res = self.pool.request(w, commands.Promote(
                    mine, request.dead_nf_id, request.backup_nf_id, request.backup_address,
                    {s: epochs[s] for s in mine if s in epochs}, request.primary_may_live))
                parts.append(res)
            if request.backup_nf_id:
                self.backup_id = request.backup_nf_id
            self.role = pb.PRIMARY
            return replies.promote_reply(parts)

        return self._guard(lambda e: pb.PromoteReply(ok=False, error=e), run)

    def SetSuccessor(self, request: pb.SetSuccessorRequest, context: grpc.ServicerContext) -> pb.Result:
        def run() -> pb.Result:
            _check16("primary_nf_id", request.primary_nf_id)
            _check16("successor_nf_id", request.successor_nf_id)
            if self.cfg.nf_id in (request.primary_nf_id, request.successor_nf_id):
                raise BadRequest("an NF cannot be its own primary or successor")
            if request.successor_nf_id and not (request.primary_nf_id and request.successor_address):
                raise BadRequest("a successor needs a primary and a replication address")
            if request.primary_nf_id == request.successor_nf_id and request.primary_nf_id:
                raise BadRequest("the successor cannot be the primary")
            self._all(commands.ArmTakeover(request.primary_nf_id, request.successor_nf_id,
                                           request.successor_address))
            return pb.Result(ok=True)

        return self._guard(lambda e: pb.Result(ok=False, error=e), run)

    def ExpectGiveBack(self, request: pb.AdoptRequest, context: grpc.ServicerContext) -> pb.Result:
        def run() -> pb.Result:
            _check16("slot", request.slot)
            _check16("from_nf_id", request.from_nf_id)
            _check_address("from_address", request.from_address)
            if not request.from_nf_id:
                raise BadRequest("a give-back needs the adopter's NF id")
            self.pool.request(self.pool.worker_of(request.slot), commands.ExpectGiveBack(
                request.slot, request.from_nf_id, request.from_address))
            return pb.Result(ok=True)

        return self._guard(lambda e: pb.Result(ok=False, error=e), run)

    def SwitchRestarted(self, request: pb.SwitchRestartedRequest,
                        context: grpc.ServicerContext) -> pb.Result:
        def run() -> pb.Result:
            self._all(commands.SwitchRestarted())
            return pb.Result(ok=True)

        return self._guard(lambda e: pb.Result(ok=False, error=e), run)

    def DumpSlot(self, request: pb.DumpSlotRequest, context: grpc.ServicerContext) -> pb.DumpSlotReply:
        def run() -> pb.DumpSlotReply:
            _check16("slot", request.slot)
            res = self.pool.request(self.pool.worker_of(request.slot), commands.Flows(request.slot))
            return replies.dump_reply(res)

        return self._guard(lambda e: pb.DumpSlotReply(ok=False, error=e), run)

    def UpdateNf(self, request: pb.UpdateNfRequest, context: grpc.ServicerContext) -> pb.Result:
        def run() -> pb.Result:
            if len(request.params_json) > MAX_PARAMS_JSON:
                raise BadRequest(f"params_json is {len(request.params_json)} bytes: at most {MAX_PARAMS_JSON}")
            params = parse_params(request.params_json or "{}", "params_json")
            # every worker checks first (it builds the NF, it owns no slot), so that a refusal
            # leaves all of them on the old version rather than some on each
            self._all(commands.UpdateNf(params, dry_run=True))
            self._all(commands.UpdateNf(params, dry_run=False))
            log.warning("NF %s updated: params %s -> %s", self.cfg.nf, self.params, params)
            self.params = params
            return pb.Result(ok=True)

        return self._guard(lambda e: pb.Result(ok=False, error=e), run)


class ClientNames(grpc.ServerInterceptor):  # type: ignore[misc]
    """Authorisation on top of mutual TLS (docs/security.md): only a client whose certificate
    names one of `allowed` (its common name, "controller" by default) may call; any other
    certificate of the CA (an NF's) is refused with PERMISSION_DENIED and counted (`denied`)."""

    def __init__(self, allowed: list[str]) -> None:
        self.allowed = {n.encode() for n in allowed}
        self.denied = 0

    # (grpc ships no type stubs: mypy sees its types as Any whatever they are named here)
    def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        inner = handler.unary_unary

        def checked(request: object, context: grpc.ServicerContext) -> object:
            names = context.auth_context().get("x509_common_name", [])
            if not self.allowed.intersection(names):
                self.denied += 1
                log.warning("control call %s refused: client certificate %s is not one of %s "
                            "(%d refused)", details.method, names, sorted(self.allowed),
                            self.denied)
                context.abort(grpc.StatusCode.PERMISSION_DENIED,
                              "this client may not call the NF control API")
            return inner(request, context)

        return grpc.unary_unary_rpc_method_handler(
            checked, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)


def serve(cfg: NfHostConfig, pool: WorkerPool) -> grpc.Server:
    """Start the control server on `cfg.control`; the caller waits on it and stops it."""
    interceptors = [ClientNames(cfg.control_clients)] if cfg.tls else []
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), interceptors=interceptors)
    pb_grpc.add_NfControlServicer_to_server(NfControlServicer(cfg, pool), server)  # type: ignore[no-untyped-call]
    # mutual TLS unless `tls: false` (docs/security.md): a caller without a certificate of the CA
    # is refused in the handshake, before any servicer code runs
    port = (server.add_secure_port(cfg.control, nf_identity(cfg.pki_dir, cfg.nf_id).grpc_server())
            if cfg.tls else server.add_insecure_port(cfg.control))
    if port == 0 and not cfg.control.startswith("unix:"):
        raise OSError(f"cannot listen on control address {cfg.control}")
    server.start()
    return server
