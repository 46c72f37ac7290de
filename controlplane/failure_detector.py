"""The failure detector: is each NF alive? Heartbeats every `heartbeat.interval_ms` (over the
control API's `Heartbeat`, or UDP datagrams each worker echoes: `heartbeat.transport`), the
death watch on each NF's control connection (a crashed process closes its sockets), and the
probes that confirm a suspicion. It keeps each NF's liveness in the registry's `NfState`
(misses, uptime, last answer) and emits `NfEvent("down" | "up" | "restarted")` through the
registry to the controller (docs/protocols.md §7, "Detection").

It owns no connection and no NF record: the registry (`controlplane/nf_registry.py`) holds them,
and gives the detector the narrow view below (`DetectedNfs`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import Protocol

import grpc

from contract.proto import nf_control_pb2 as pb
from controlplane.config import ControllerConfig, split_hostport
from controlplane.liveness import UdpHeartbeats
from controlplane.nf_state import Conn, NfEvent, NfState


class DetectedNfs(Protocol):
    """What the detector needs of the registry: the NFs' records, a connection to each, and the
    way its events reach the controller."""

    cfg: ControllerConfig
    nfs: dict[int, NfState]

    def conn(self, nf_id: int) -> Conn: ...

    async def emit(self, event: NfEvent) -> None: ...


class FailureDetector:
    """Heartbeats, the death watch and the confirming probes of every NF (module docstring)."""

    def __init__(self, reg: DetectedNfs,
                 heartbeat_key: Callable[[int], bytes | None] | None = None) -> None:
        self.reg = reg
        cfg = reg.cfg
        # bound to the management address: `heartbeat.bind`, or the one that routes to the NFs
        first_host = split_hostport(cfg.nfs[0].replication_address())[0]
        self.udp = (UdpHeartbeats(heartbeat_key, bind=cfg.heartbeat.bind, towards=first_host)
                    if cfg.heartbeat.transport == "udp" else None)
        self.inconclusive_rounds = 0  # heartbeat rounds most NFs missed: not counted as misses
        # ...for this long at most (a stall is short; many NFs hung at once are not)
        self.stall_limit = 1.0
        self._last_conclusive = time.monotonic()

    def close(self) -> None:
        if self.udp is not None:
            self.udp.close()

    async def heartbeat(self, nf_id: int) -> bool:
        """One heartbeat; updates the NF's state and emits an event on a liveness change."""
        return await self._account(nf_id, *await self._send(nf_id))

    async def _send(self, nf_id: int) -> tuple[int | None, float, float]:
        """One heartbeat's (uptime or None, monotonic start, wall-clock send time)."""
        conn = self.reg.conn(nf_id)
        conn.counter += 1
        counter = conn.counter  # a concurrent probe may advance conn.counter
        start, sent_at = time.monotonic(), time.time()
        return await self._beat(nf_id, counter, self.reg.cfg.heartbeat.timeout_ms / 1000), start, sent_at

    async def _account(self, nf_id: int, uptime: int | None, start: float, sent_at: float,
                       count_miss: bool = True) -> bool:
        """Take one heartbeat's outcome into the NF's state; a miss counts only if `count_miss`."""
        state = self.reg.nfs[nf_id]
        if uptime is not None:
            restarted = state.uptime_ms is not None and uptime < state.uptime_ms
            state.uptime_ms = uptime
            state.answered_at = max(state.answered_at, sent_at)
            state.heartbeats += 1
            state.misses = 0
            state.suspected_at = None
            state.last_seen = time.monotonic()
            state.rtt_ms = (state.last_seen - start) * 1000
            state.alive = True
            if state.declared_down:
                state.declared_down = False
                await self.reg.emit(NfEvent("up", nf_id, restarted=restarted))
            elif restarted:  # back before it was missed: it lost its configuration all the same
                await self.reg.emit(NfEvent("restarted", nf_id))
            return True
        if not count_miss:
            return False
        state.misses += 1
        if state.suspected_at is None:
            state.suspected_at = sent_at
        if state.misses >= self.reg.cfg.heartbeat.misses and not state.declared_down:
            state.declared_down = True
            state.alive = False
            state.silent = True
            await self.reg.emit(NfEvent("down", nf_id, state.misses, since=state.suspected_at))
        return False

    async def _beat(self, nf_id: int, counter: int, timeout: float) -> int | None:
        """One heartbeat over the configured transport: the NF's uptime (ms), None if missed."""
        if self.udp is not None:
            host, port = split_hostport(self.reg.nfs[nf_id].cfg.replication_address())
            load = self.reg.nfs[nf_id].load
            return await self.udp.ping(nf_id, host, port, load.workers if load else 1, counter,
                                       timeout)
        try:
            reply = await self.reg.conn(nf_id).stub.Heartbeat(pb.HeartbeatRequest(counter=counter),
                                                           timeout=timeout)
        except grpc.aio.AioRpcError:
            return None
        if reply.counter != counter or reply.nf_id not in (0, nf_id):
            return None
        return int(reply.uptime_ms)

    async def probe(self, nf_id: int, timeout: float) -> bool:
        """One extra heartbeat with a longer deadline, changing no state: is the NF really gone?
        (A crashed NF refuses the connection at once; a slow one answers.)"""
        conn = self.reg.conn(nf_id)
        conn.counter += 1
        counter = conn.counter  # heartbeats may run meanwhile and advance conn.counter
        try:
            reply = await conn.stub.Heartbeat(pb.HeartbeatRequest(counter=counter), timeout=timeout)
        except grpc.aio.AioRpcError:
            return False
        return bool(reply.counter == counter)

    async def probe_hang(self, nf_id: int, timeout: float) -> bool:
        """The probe that confirms missed heartbeats: does the NF answer within `timeout`? Over
        UDP (when heartbeats use it) the datagram is sent three times within the deadline: a
        slow NF answers one of them, a stopped one none. (A closed control connection is
        confirmed by `probe`, whose refused connection is immediate.)"""
        if self.udp is None:
            return await self.probe(nf_id, timeout)
        conn = self.reg.conn(nf_id)
        conn.counter += 1
        host, port = split_hostport(self.reg.nfs[nf_id].cfg.replication_address())
        load = self.reg.nfs[nf_id].load
        return await self.udp.ping(nf_id, host, port, load.workers if load else 1, conn.counter,
                                   timeout, sends=3) is not None

    async def heartbeat_round(self, nf_ids: Iterable[int] | None = None) -> dict[int, bool]:
        """One heartbeat to each NF (all by default). A round that fewer than half of the NFs
        answered says more about this controller or the machine (a stall of its event loop, of
        the whole host) than about each NF: its misses are not counted, for `stall_limit`
        seconds at most (then many NFs really are silent). An NF that really hangs misses while
        the others answer."""
        ids = list(self.reg.nfs if nf_ids is None else nf_ids)
        sent = await asyncio.gather(*(self._send(i) for i in ids))
        answered = sum(1 for uptime, _, _ in sent if uptime is not None)
        now = time.monotonic()
        majority = 2 * answered >= len(ids)
        if majority:
            self._last_conclusive = now
        conclusive = majority or now - self._last_conclusive > self.stall_limit
        if not conclusive:
            self.inconclusive_rounds += 1
        results = [await self._account(i, *one, count_miss=conclusive)
                   for i, one in zip(ids, sent, strict=True)]
        return dict(zip(ids, results, strict=True))

    async def heartbeat_loop(self) -> None:
        """Heartbeat every NF each interval, forever (cancel to stop)."""
        interval = self.reg.cfg.heartbeat.interval_ms / 1000
        while True:
            started = time.monotonic()
            await self.heartbeat_round()
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))

    async def watch(self, nf_id: int) -> None:
        """Suspect an NF as soon as its control connection drops (a crashed process closes its
        sockets: the channel leaves READY at once), confirm with one probe, and declare it down.
        Heartbeats still catch an NF that hangs or is cut off and closes nothing."""
        channel = self.reg.conn(nf_id).channel
        state = channel.get_state(try_to_connect=True)
        while True:
            await channel.wait_for_state_change(state)
            new = channel.get_state(try_to_connect=False)
            if state == grpc.ChannelConnectivity.READY and new != state:
                await self.suspect(nf_id, f"control connection {new.name.lower()}")
            state = new

    async def suspect(self, nf_id: int, reason: str) -> bool:
        """Confirm a suspicion with one probe; declare the NF down if it fails. True if down."""
        nf = self.reg.nfs[nf_id]
        if nf.declared_down:
            return True
        since = time.time()
        if await self.probe(nf_id, self.reg.cfg.heartbeat.confirm_timeout_ms / 1000):
            return False
        if not nf.declared_down:  # (else the heartbeats declared it meanwhile)
            await self.declare_down(nf_id, reason, since)
        return True

    async def declare_down(self, nf_id: int, reason: str, since: float) -> None:
        """Declare `nf_id` down on evidence that needs no further probe (its connection closed
        and the probe was refused; its backup took over its slots)."""
        nf = self.reg.nfs[nf_id]
        nf.declared_down, nf.alive, nf.silent = True, False, False
        await self.reg.emit(NfEvent("down", nf_id, nf.misses, confirmed=True, reason=reason,
                                 since=since))

    async def watch_loop(self) -> None:
        """`watch` every NF until cancelled."""
        tasks = [asyncio.create_task(self.watch(i), name=f"watch-{i}") for i in self.reg.nfs]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
