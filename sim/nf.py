"""A simulated NF process and the controller's calls to it.

`SimNf` is one NF instance: the real `nf_host.worker.Worker` (one worker, the checker NF, an
in-memory global store) on a node of the simulated network, its data port on the switch model.

`SimRegistry` is the controller's real `NfRegistry` with the transport underneath replaced: a
control call crosses the simulated network to the NF's node, runs the same worker command the NF's
control server would run (`nf_host/control.py` turns each RPC into one `Worker.command`), and its
reply crosses back; heartbeats and probes are answered by a node that is alive, not hung, and
reachable. A call's reply can be lost after the call took effect (a fault the run draws), which
the controller sees as a deadline, as it would with gRPC.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from contract.proto import nf_control_pb2 as pb
from contract.results import FenceResult, PromoteResult, ReleaseResult, WorkerStatus
from controlplane.config import ControllerConfig
from controlplane.failure_detector import FailureDetector
from controlplane.nf_registry import NfControlError, NfRegistry
from nf_host import replies
from nf_host.global_state import MemoryStore
from nf_host.nfs import make_nf
from nf_host.peer_policy import PeerLimits
from nf_host.worker import Result, Worker, WorkerConfig
from sim.network import SimNet

CONTROLLER = "controller"


class SimNf:
    """One NF process (see the module docstring); `start` again after a kill is a restart."""

    def __init__(self, net: SimNet, nf_id: int, host: str, port: int,
                 to_switch: Callable[[int, bytes | bytearray], None], batch: int = 4,
                 peer_policy: bool = False) -> None:
        self.net, self.nf_id, self.host, self.port = net, nf_id, host, port
        self.peer_policy = peer_policy  # known peers only, as `nf-host run` (Scenario.peer_policy)
        self.to_switch = to_switch
        self.batch = batch
        self.name = f"nf{nf_id}"
        self.worker: Worker | None = None
        self.incarnation = 0
        self.started_at = 0.0
        self._changed: asyncio.Event | None = None  # set when the process dies or restarts

    def changed(self) -> asyncio.Event:
        """An event set at the next death or restart (`notify`); the watchers' wake-up."""
        if self._changed is None or self._changed.is_set():
            self._changed = asyncio.Event()
        return self._changed

    def notify(self) -> None:
        if self._changed is not None:
            self._changed.set()

    def _tx(self, frame: bytes | bytearray) -> None:
        self.net.send(self.name, lambda: self.to_switch(self.nf_id, frame))

    async def start(self) -> None:
        """Start (or restart) the process: a fresh worker, nothing carried over."""
        if self.incarnation:
            self.net.revive(self.name)
        self.incarnation += 1
        self.started_at = asyncio.get_running_loop().time()
        cfg = WorkerConfig(nf_id=self.nf_id, batch_size=self.batch, batch_time=0.0005,
                           repl_host=self.host, repl_port=self.port,
                           limits=PeerLimits(known_peers_only=self.peer_policy))
        worker = Worker(cfg, make_nf("checker"), MemoryStore(), self._tx)
        self.worker = worker
        await self.net.spawn(self.name, worker.start())
        self.notify()

    def kill(self) -> None:
        """SIGKILL: the process and everything it had open end now."""
        self.net.kill(self.name)
        self.notify()

    @property
    def alive(self) -> bool:
        node = self.net.nodes.get(self.name)
        return node is not None and node.alive

    def on_frame(self, frame: bytes) -> None:
        """A frame from the switch reaches the data port."""
        w = self.worker
        if w is not None:
            self.net.deliver("switch", self.name, lambda: w.on_frame(frame))

    def command(self, name: str, args: dict[str, Any]) -> asyncio.Future[Result]:
        """Run one worker command on the NF's node (the caller delivers it there)."""
        w = self.worker
        assert w is not None
        return asyncio.ensure_future(w.command(name, args))


def _slots(req: Any) -> list[tuple[int, int, int | None]]:
    return [(s.slot, s.epoch, s.next_seq if s.HasField("next_seq") else None) for s in req.slots]


def to_command(name: str, req: Any) -> tuple[str, dict[str, Any]]:
    """The worker command an NfControl RPC becomes (as `nf_host.control.NfControlServicer` does
    for an NF with one worker)."""
    if name == "SetRole":
        return "set_role", {"role": req.role}
    if name == "SetBackup":
        return "set_backup", {"nf_id": req.backup_nf_id, "address": req.address}
    if name == "SetClusterPeers":
        return "set_peers", {"peers": [(p.nf_id, p.address) for p in req.peers]}
    if name == "AssignSlots":
        return "assign", {"slots": _slots(req), "as_backup": req.as_backup,
                          "primary": req.primary_nf_id, "adoption": req.adoption,
                          "from_nf": req.adoption_from_nf_id,
                          "from_address": req.adoption_from_address}
    if name == "Adopt":
        return "adopt", {"slot": req.slot, "epoch": req.epoch, "from_nf": req.from_nf_id,
                         "from_address": req.from_address}
    if name == "CancelAdopt":
        return "cancel_adopt", {"slot": req.slot, "epoch": req.epoch, "from_nf": req.from_nf_id,
                                "from_address": req.from_address, "copy_nf": req.copy_nf_id,
                                "copy_address": req.copy_address}
    if name == "Release":
        return "release", {"slot": req.slot, "to_nf": req.to_nf_id, "to_address": req.to_address,
                           "same_cluster": req.same_cluster,
                           "adopter_backup": req.adopter_backup_nf_id,
                           "adopter_backup_address": req.adopter_backup_address}
    if name == "Promote":
        return "promote", {"slots": list(req.slots), "dead": req.dead_nf_id,
                           "backup": req.backup_nf_id, "address": req.backup_address,
                           "epochs": dict(zip(req.slots, req.epochs, strict=False)),
                           "may_live": req.primary_may_live}
    if name == "SetSuccessor":
        return "arm_takeover", {"primary": req.primary_nf_id, "successor": req.successor_nf_id,
                                "address": req.successor_address}
    if name == "SwitchRestarted":
        return "switch_restarted", {}
    if name == "ExpectGiveBack":
        return "expect_give_back", {"slot": req.slot, "from_nf": req.from_nf_id,
                                    "from_address": req.from_address}
    if name == "Status":
        return "status", {}
    raise NotImplementedError(f"the simulation does not model NfControl.{name}")


def to_reply(name: str, res: Result) -> Any:
    """The RPC's reply from the worker's answer (`nf_host.replies`, as the control server)."""
    if name == "Release" and isinstance(res, ReleaseResult):
        return replies.release_reply(res)
    if name == "Promote" and isinstance(res, PromoteResult):
        return replies.promote_reply([res])
    if name == "CancelAdopt" and isinstance(res, FenceResult):
        return replies.fence_reply(res)
    if name == "Status" and isinstance(res, WorkerStatus):  # (the fields the controller reads)
        return pb.StatusReply(
            slots=replies.slot_rows([res]),
            load=pb.Load(packets=res.packets, drops=res.drops, gaps=res.gaps,
                         unowned=res.unowned, duplicates=res.duplicates),
            took_over_from=replies.took_over_from([res]), workers=1)
    if res is not None:
        raise TypeError(f"NfControl.{name} answered a {type(res).__name__}")
    return pb.Result(ok=True)


class SimRegistry(NfRegistry):
    """The controller's NF registry over the simulated network (see the module docstring)."""

    def __init__(self, cfg: ControllerConfig, net: SimNet, nfs: dict[int, SimNf],
                 lose_reply: Callable[[int, str], str], node: str = CONTROLLER,
                 step: Callable[[str, str], None] = lambda node, what: None) -> None:
        super().__init__(cfg)
        self.net, self.sim_nfs = net, nfs
        self.node = node  # the controller process whose calls these are
        self.step = step  # the run's hook before each call leaves (it may kill the caller)
        # (nf, call) -> "" or how this call's reply is lost after the call took effect: "reset"
        # (the connection breaks: UNAVAILABLE at once) or "silent" (a partition: the deadline)
        self.lose_reply = lose_reply
        self.calls: list[tuple[float, int, str, str]] = []  # (time, nf, call, outcome)
        self.detector = SimDetector(self)

    async def _call(self, nf_id: int, name: str, request: Any, timeout: float = 2.0) -> Any:
        loop = asyncio.get_running_loop()
        nf = self.sim_nfs[nf_id]
        done: asyncio.Future[Any] = loop.create_future()

        def settle(value: Any = None, exc: BaseException | None = None) -> None:
            if done.done():
                return
            if exc is not None:
                done.set_exception(exc)
            else:
                done.set_result(value)

        def on_nf() -> None:
            cmd, args = to_command(name, request)
            fut = nf.command(cmd, args)
            lost = self.lose_reply(nf_id, name)

            def answered(f: asyncio.Future[Result]) -> None:
                if f.cancelled():
                    return
                exc = f.exception()  # (retrieved even when the reply is lost: the NF's
                # control server answers every command; the loss is on the wire)
                if lost == "silent":
                    return
                if lost == "reset":  # the connection broke after the call acted
                    loop.call_later(self.net.delay(), settle, None, NfControlError(
                        nf_id, name, "UNAVAILABLE: connection reset after the call"))
                    return
                reply = (to_error_reply(name, str(exc)) if exc is not None
                         else to_reply(name, f.result()))
                def back() -> None:
                    loop.call_later(self.net.delay(), self.net.deliver, nf.name, self.node,
                                    lambda: settle(reply))

                self.net.send(nf.name, back)

            fut.add_done_callback(answered)

        if not nf.alive:
            await asyncio.sleep(self.net.delay())
            self.calls.append((loop.time(), nf_id, name, "refused"))
            raise NfControlError(nf_id, name, "UNAVAILABLE: connection refused")
        if name not in ("Status",):
            self.step(self.node, name)
        # (sent only by a live process: a call of a dead controller never reaches the NF)
        def send_request() -> None:
            loop.call_later(self.net.delay(), self.net.deliver, self.node, nf.name, on_nf)

        self.net.send(self.node, send_request)
        changed = asyncio.ensure_future(nf.changed().wait())
        try:  # a process that dies resets the call's connection at once
            await asyncio.wait([done, changed], timeout=timeout,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            changed.cancel()
        if not done.done():
            outcome = "reset" if changed.done() and not changed.cancelled() else "deadline"
            self.calls.append((loop.time(), nf_id, name, outcome))
            raise NfControlError(nf_id, name, "UNAVAILABLE: connection reset"
                                 if outcome == "reset" else "DEADLINE_EXCEEDED")
        reply = done.result()
        if not getattr(reply, "ok", True):
            self.calls.append((loop.time(), nf_id, name, "error"))
            raise NfControlError(nf_id, name, reply.error)
        self.calls.append((loop.time(), nf_id, name, "ok"))
        return reply

    async def close(self) -> None:
        return None


def to_error_reply(name: str, error: str) -> Any:
    if name == "Release":
        return pb.ReleaseReply(ok=False, error=error)
    if name == "Promote":
        return pb.PromoteReply(ok=False, error=error)
    if name == "CancelAdopt":
        return pb.CancelAdoptReply(ok=False, error=error)
    return pb.Result(ok=False, error=error)


class SimDetector(FailureDetector):
    """The real failure detector over the simulated network: a heartbeat or probe is answered
    by an NF whose node is alive and reachable from the controller's, after a round trip; the
    death watch sees the NF's process end."""

    def __init__(self, reg: SimRegistry) -> None:
        super().__init__(reg)
        self.sim = reg

    def _answers(self, nf_id: int) -> bool:
        return (self.sim.net.reachable(self.sim.node, self.sim.sim_nfs[nf_id].name)
                and self.sim.net.nodes[self.sim.node].alive)

    async def _beat(self, nf_id: int, counter: int, timeout: float) -> int | None:
        return await self._ping(nf_id, timeout)

    async def _ping(self, nf_id: int, timeout: float) -> int | None:
        rtt = 2 * self.sim.net.delay()
        if rtt < timeout and self._answers(nf_id):
            await asyncio.sleep(rtt)
            nf = self.sim.sim_nfs[nf_id]
            up = asyncio.get_running_loop().time() - nf.started_at
            return int(up * 1000) if self._answers(nf_id) else None
        await asyncio.sleep(timeout)
        return None

    async def probe(self, nf_id: int, timeout: float) -> bool:
        if not self.sim.sim_nfs[nf_id].alive:  # a dead process refuses at once
            await asyncio.sleep(self.sim.net.delay())
            return False
        return await self._ping(nf_id, timeout) is not None

    async def probe_hang(self, nf_id: int, timeout: float) -> bool:
        return await self.probe(nf_id, timeout)

    async def watch(self, nf_id: int) -> None:
        """A crash closes the control connection: suspected as soon as the node dies."""
        nf = self.sim.sim_nfs[nf_id]
        while True:
            await nf.changed().wait()
            if not nf.alive:
                await self.suspect(nf_id, "control connection closed")
