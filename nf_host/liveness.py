"""Heartbeats over UDP: each worker's event loop echoes the controller's datagrams.

Heartbeats of a few milliseconds catch an NF that hangs (SIGSTOP) or is cut off, which closes
nothing (docs/protocols.md §7). Over the gRPC control API each heartbeat costs a unary call in
the controller, a thread of the NF's parent, and a round trip through the pipe to every worker:
at 5 ms to ten NFs that is about a core of a 2-core machine, whose load then makes live NFs miss
their heartbeats. A datagram answered by the worker's own event loop costs two `sendto`s and two
wake-ups, and still answers only when the worker runs: a stopped or wedged worker is silent.

Each worker's heartbeats go to UDP on its replication address (host, base port + worker index;
the TCP and UDP port spaces are separate).

Who answers (`nf-host run --heartbeat-echo`):

* **realtime** (default): `HeartbeatResponder`, in a small process of its own started beside the
  workers, at real-time priority (SCHED_FIFO) where the OS permits it. On a loaded machine a
  worker waits tens of milliseconds for a CPU, and so does anything that shares its process: a
  thread at real-time priority inside a worker, or inside the `nf-host` parent, still waits for
  the GIL, held by a thread the scheduler has set aside (measured on this 2-core host at 2,000
  packets/s: answers up to 80 ms late). With heartbeats of a few milliseconds, a late echo fails
  over NFs that are only slow. The responder answers for worker i only while that worker runs:
  its process and the `nf-host` parent exist and are not stopped (`/proc/<pid>/stat`: SIGSTOP, a
  debugger), and its event loop has turned within `stall_limit` (`LoopClock`, a double in shared
  memory the loop writes every `stall_limit / 4`; a loop stuck in a handler or deadlocked falls
  silent after `stall_limit`). A stopped `nf-host` process group or a frozen VM answers nothing.
  Requests left unanswered because a process was stopped or a loop stuck are counted
  (`withheld`, Status `heartbeats_withheld`).
  The responder process also keeps each worker's *watch* on its backup (`nf_host/death_watch.py`):
  torn down first when the `nf-host` is killed, it tells an armed backup at once.
* **normal**: the same responder process at normal priority.
* **loop**: `HeartbeatEcho`, each worker's own event loop answers (silent whenever the worker
  waits for a CPU or is busy; the behaviour before the responder).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import selectors
import signal
import socket
import ssl
import threading
import time
from collections.abc import MutableSequence, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Protocol, cast

from contract.heartbeat import parse_request, reply
from mgmt.tls import Identity
from nf_host.child_process import become_child, freeze_startup
from nf_host.death_watch import DeathWatch

log = logging.getLogger(__name__)

class HeartbeatEcho(asyncio.DatagramProtocol):
    """Answers heartbeat datagrams from the worker's event loop."""

    def __init__(self, nf_id: int, index: int, started: float, key: bytes | None = None) -> None:
        self.nf_id, self.index, self.started, self.key = nf_id, index, started, key
        self.transport: asyncio.DatagramTransport | None = None
        self.answered = 0
        self.ignored = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        parsed = parse_request(data, self.key)
        if parsed is None or self.transport is None:
            self.ignored += 1  # (not a heartbeat, or not the controller's: its tag is wrong)
            return
        session, counter = parsed
        uptime = int((time.monotonic() - self.started) * 1000)
        self.transport.sendto(reply(counter, self.nf_id, self.index, uptime, self.key, session),
                              addr)
        self.answered += 1

    def error_received(self, exc: Exception) -> None:  # e.g. ICMP from a controller gone
        log.debug("heartbeat echo: %s", exc)


async def serve(host: str, port: int, nf_id: int, index: int, started: float,
                key: bytes | None = None) -> tuple[asyncio.DatagramTransport, HeartbeatEcho]:
    """Bind the echo on UDP host:port; close the transport to stop it."""
    loop = asyncio.get_running_loop()
    transport, proto = await loop.create_datagram_endpoint(
        lambda: HeartbeatEcho(nf_id, index, started, key), local_addr=(host, port))
    return transport, proto


class LoopClock(Protocol):
    """The time (`time.monotonic()`, the same clock in every process) of a worker's event loop's
    last turn: a `multiprocessing` shared double."""

    value: float


async def keep_turning(clock: LoopClock, period: float) -> None:
    """Write the loop's turns into `clock`, forever (cancel to stop)."""
    while True:
        clock.value = time.monotonic()
        await asyncio.sleep(period)


def stopped_or_gone(pid: int) -> str:
    """"stopped" or "gone" if process `pid` is (from /proc), else ""."""
    state = process_state(pid)
    if state in ("", "Z", "X"):
        return "gone"
    return "stopped" if state in ("T", "t") else ""


def process_state(pid: int) -> str:
    """The state letter of process `pid` from /proc (R, S, D, T, t, Z, ...), "" if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return ""
    end = stat.rfind(b")")  # the command name may hold spaces and parentheses
    return stat[end + 2:end + 3].decode() if end > 0 else ""


@dataclass
class WatchedWorker:
    """A worker the responder answers heartbeats for: its process id and its loop clock."""

    pid: int
    clock: LoopClock


class HeartbeatResponder:
    """Answers heartbeats for every worker of an `nf-host` (see the module docstring): `serve()`
    in a process of its own (`responder_main`, what `nf-host` runs), `start()` in a thread (tests);
    `close()` at the end. `watch_also` are processes whose stop silences every worker (the
    `nf-host` parent, which the controller's commands need). With `shared`, the counters are
    copied there for the parent to report."""

    def __init__(self, host: str, base_port: int, nf_id: int, workers: Sequence[WatchedWorker],
                 started: float, stall_limit: float, watch_also: Sequence[int] = (),
                 shared: MutableSequence[int] | None = None,
                 backups: Sequence[Connection] = (), key: bytes | None = None,
                 watch_tls: ssl.SSLContext | None = None) -> None:
        self.nf_id, self.workers, self.started, self.key = nf_id, list(workers), started, key
        self.stall_limit, self.watch_also, self.shared = stall_limit, list(watch_also), shared
        self.answered = 0
        self.ignored = 0  # datagrams that are no heartbeat request, or whose tag is wrong
        self.withheld = 0  # requests not answered: the worker was stopped, gone or stuck
        self._silent: dict[int, str] = {}  # worker index -> why it is not answered (logged once)
        self.death_watch: DeathWatch | None = None
        self._selector = selectors.DefaultSelector()
        self._socks: list[socket.socket] = []
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            for index in range(len(self.workers)):
                sock = socket.socket(family, socket.SOCK_DGRAM)
                self._socks.append(sock)
                sock.bind((host, base_port + index))
                sock.setblocking(False)
                self._selector.register(sock, selectors.EVENT_READ, index)
        except OSError:
            self.close()
            raise
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        # each worker's watch on its backup, named through `backups` (nf_host/death_watch.py)
        self.death_watch = DeathWatch(self._selector, nf_id, backups, watch_tls) if backups else None
        self._closed = False
        self._thread = threading.Thread(target=self.serve, name="heartbeat-echo", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def why_silent(self, index: int, now: float) -> str:
        """Why worker `index` must not be answered now ("" if it runs)."""
        for pid in self.watch_also:
            if what := stopped_or_gone(pid):
                return f"the nf-host process is {what}"
        w = self.workers[index]
        if what := stopped_or_gone(w.pid):
            return f"its process is {what}"
        idle = now - w.clock.value
        if idle > self.stall_limit:
            return f"its event loop has not turned for {idle * 1000:.0f} ms"
        return ""

    def serve(self) -> None:
        """Answer until `close()`."""
        watch = self.death_watch
        while not self._closed:
            timeout = watch.timeout(time.monotonic()) if watch is not None else None
            for key, mask in self._selector.select(timeout):
                if key.data is None:
                    return  # closed
                if callable(key.data):  # the death watch's sockets and pipes
                    key.data(mask)
                    continue
                self._answer(key.data, self._socks[key.data])
                if self.shared is not None:
                    self.shared[0], self.shared[1] = self.answered, self.withheld
                    if len(self.shared) > 2:
                        self.shared[2] = self.ignored
            if watch is not None:
                watch.run_due(time.monotonic())

    def _answer(self, index: int, sock: socket.socket) -> None:
        while True:
            try:
                data, addr = sock.recvfrom(128)
            except OSError:  # (nothing more to read, or closed)
                return
            parsed = parse_request(data, self.key)
            if parsed is None:
                self.ignored += 1
                continue
            session, counter = parsed
            now = time.monotonic()
            why = self.why_silent(index, now)
            if why:
                self.withheld += 1
                if self._silent.get(index) is None:
                    log.warning("heartbeats of worker %d not answered: %s", index, why)
                self._silent[index] = why
                continue
            if self._silent.pop(index, None) is not None:
                log.warning("heartbeats of worker %d answered again", index)
            uptime = int((now - self.started) * 1000)
            try:
                sock.sendto(reply(counter, self.nf_id, index, uptime, self.key, session), addr)
            except OSError as exc:  # e.g. no route back: the controller sends again
                log.debug("heartbeat echo: %s", exc)
                continue
            self.answered += 1

    def close(self) -> None:
        if getattr(self, "_closed", True) is False:
            self._closed = True
            with contextlib.suppress(OSError):
                self._wake_w.send(b"x")
            if self._thread.is_alive():
                self._thread.join(2)
            self._wake_r.close()
            self._wake_w.close()
        if self.death_watch is not None:
            self.death_watch.close()
        for sock in self._socks:
            sock.close()
        self._selector.close()


def prioritise(realtime: bool) -> str:
    """Run the calling thread at real-time priority (SCHED_FIFO 1) if `realtime`; what was done."""
    if not realtime:
        return "normal priority"
    try:  # (Linux: the calling thread; the whole process when it has only this one)
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except (OSError, AttributeError) as exc:
        log.warning("heartbeats answered at normal priority (no real-time priority: %s); on a "
                    "loaded host, keep heartbeat.confirm_timeout_ms generous", exc)
        return "normal priority (real-time refused)"
    return "real-time priority"


def responder_main(host: str, base_port: int, nf_id: int, workers: list[tuple[int, LoopClock]],
                   parent: int, started: float, stall_limit: float, realtime: bool,
                   shared: MutableSequence[int], conn: Connection,
                   backups: Sequence[Connection] = (), key: bytes | None = None,
                   watch_tls: Identity | None = None) -> None:
    """Entry point of the `nf-host`'s heartbeat responder process: it exits with its parent
    (killed with it, its watches end without a goodbye: that is their point), and on SIGTERM
    (`nf-host` stopping on purpose) it says goodbye on every watch first."""
    become_child(logging.INFO, f"nf{nf_id}.hb")
    try:
        responder = HeartbeatResponder(host, base_port, nf_id,
                                       [WatchedWorker(pid, clock) for pid, clock in workers],
                                       started, stall_limit, watch_also=[parent], shared=shared,
                                       backups=backups, key=key,
                                       watch_tls=watch_tls.client_context() if watch_tls else None)
    except OSError as exc:
        conn.send(f"heartbeat responder: UDP {host}:{base_port}: {exc}")
        return
    signal.signal(signal.SIGTERM, _stop)
    freeze_startup("heartbeat responder")  # a collector's pause would be a missed heartbeat
    conn.send(f"ok: {prioritise(realtime)}")
    conn.close()
    try:
        responder.serve()
    except _Stop:
        pass
    finally:
        responder.close()


class _Stop(Exception):
    """SIGTERM in the responder process."""


def _stop(_signum: int, _frame: object) -> None:
    raise _Stop
