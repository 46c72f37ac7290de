"""Worker processes of an NF instance and the pool the control server uses to reach them.

`nf-host run` starts one OS process per worker (the GIL rules out threads for CPU work). Each
runs `worker_main`: its own asyncio loop, its own AF_PACKET socket with the BPF filter for its
slots, its replication server, and a `Worker`. The parent talks to it over a multiprocessing pipe:
requests `(id, command)` (`contract.commands`) and replies `(id, ok, result or error message)`; `WorkerPool`
matches replies to requests so a slow command on one worker (a release waiting for the adopter)
does not block status calls. A worker exits when its parent dies (PR_SET_PDEATHSIG) or the pipe closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import importlib
import itertools
import logging
import multiprocessing as mp
import os
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnContext
from multiprocessing.process import BaseProcess
from typing import Protocol, TypeVar

from contract import commands
from contract.results import WorkerStatus
from mgmt.tls import nf_heartbeat_key, nf_identity
from nf_host import liveness, replication
from nf_host.child_process import become_child, freeze_startup
from nf_host.config import NfHostConfig
from nf_host.nf_api import GlobalStore
from nf_host.nfs import make_nf
from nf_host.port import open_port, recv_frames, socket_drops
from nf_host.tls_streams import TlsStreams
from nf_host.worker import CommandError, Worker

log = logging.getLogger(__name__)
R = TypeVar("R")
# the most time one turn of a worker's event loop spends reading and processing frames, so
# heartbeats, the backup's acks and commands wait at most this (plus one frame's work)
TURN_BUDGET_S = 0.005


def _open_global_store(cfg: NfHostConfig) -> GlobalStore:
    """The NF's global store; etcd over mutual TLS as the NF unless `tls` or `etcd_tls` is off."""
    from nf_host.global_state import open_store

    tls = nf_identity(cfg.pki_dir, cfg.nf_id) if cfg.tls and cfg.etcd_tls else None
    return open_store(cfg.global_store, tls)


class _Socket(Protocol):
    def send(self, data: bytes | bytearray, /) -> int: ...


class FrameSender:
    """Writes output frames to the data socket, in order, waiting a little when the interface
    queue is full; a frame it still cannot send is lost and counted.

    It never raises: it runs inside the backup's ack handler (`Link` -> `Worker.release_batch`), where an
    exception would abort the release of batches already taken from `OutputCommit` and end the
    link's task. A full queue (EAGAIN, or ENOBUFS: a burst, e.g. a promoted backup's replay) is
    waited out in place, up to `patience` seconds per frame (the worker pauses meanwhile: that is
    backpressure, and order is kept); only then is the frame lost. `queue_full` counts frames lost
    to a queue that stayed full, `errors` every other error (ENETDOWN, ENXIO, ...), by errno in
    `errnos`. Both are in Status (`tx_lost`, in `drops`).
    """

    _TRANSIENT = (errno.EAGAIN, errno.ENOBUFS)

    def __init__(self, sock: _Socket, patience: float = 0.2) -> None:
        self.sock = sock
        self.patience = patience
        self.queue_full = 0
        self.waits = 0  # frames that had to wait for room (sent in the end)
        self.errors = 0
        self.errnos: dict[int, int] = {}

    def __call__(self, frame: bytes | bytearray) -> None:
        deadline: float | None = None
        while True:
            try:
                self.sock.send(frame)
                return
            except OSError as exc:
                if exc.errno not in self._TRANSIENT:  # ENETDOWN, ENXIO...: lost, counted
                    self.errors += 1
                    self.errnos[exc.errno or 0] = self.errnos.get(exc.errno or 0, 0) + 1
                    if self.errors & (self.errors - 1) == 0:  # 1, 2, 4, 8...: not flooded
                        log.warning("output frame lost (%d so far): %s", self.errors, exc)
                    return
            now = time.monotonic()
            if deadline is None:
                deadline = now + self.patience
                self.waits += 1
            elif now >= deadline:  # the queue stayed full: the frame is lost, counted
                self.queue_full += 1
                if self.queue_full & (self.queue_full - 1) == 0:
                    log.warning("output frame lost (%d so far): transmit queue full for %.0f ms",
                                self.queue_full, self.patience * 1000)
                return
            time.sleep(0.0002)  # a full transmit queue drains in microseconds

    def report(self, status: WorkerStatus, *, repl_errors: int = 0,
               repl_refused: int = 0) -> WorkerStatus:
        """A worker's status with the transmit losses added, and what the worker process counts
        outside the worker (`repl_errors`, `repl_refused`), in one copy (a Status answer carries
        a row per slot)."""
        lost = self.queue_full + self.errors
        return replace(status, tx_lost=lost, tx_errors=self.errors, drops=status.drops + lost,
                       repl_errors=status.repl_errors + repl_errors,
                       repl_refused=status.repl_refused + repl_refused)


def worker_main(cfg: NfHostConfig, index: int, conn: Connection,
                clock: liveness.LoopClock | None = None, backup_to: Connection | None = None) -> None:
    """Entry point of worker process `index`; it names its backup to the heartbeat responder
    through `backup_to` (its watch on that backup: nf_host/death_watch.py)."""
    become_child(cfg.log_level, f"nf{cfg.nf_id}.w{index}")
    try:
        asyncio.run(_worker_async(cfg, index, conn, clock, backup_to))
    except OSError as exc:  # e.g. no such interface, address in use: say so without a traceback
        conn.send((0, False, f"worker {index} failed: {exc}"))
    except Exception as exc:
        log.exception("worker %d failed", index)
        conn.send((0, False, f"worker {index} failed: {exc}"))


async def _worker_async(cfg: NfHostConfig, index: int, conn: Connection,
                        clock: liveness.LoopClock | None, backup_to: Connection | None) -> None:
    tls: TlsStreams | None = None
    if cfg.tls:  # every replication server and link of this worker over mutual TLS
        tls = TlsStreams(nf_identity(cfg.pki_dir, cfg.nf_id))
        replication.TRANSPORT = tls
    for mod in cfg.nf_modules:
        importlib.import_module(mod)
    nf = make_nf(cfg.nf, cfg.params)
    store = _open_global_store(cfg)
    sock = open_port(cfg.interface, index, cfg.workers)
    loop = asyncio.get_running_loop()

    sender = FrameSender(sock)
    wcfg = cfg.worker_config(index)
    on_backup: Callable[[int, str], None] | None = None
    if backup_to is not None:
        responder = backup_to

        def name_backup(nf_id: int, address: str) -> None:
            with contextlib.suppress(OSError):  # (the responder is gone: so is this NF, soon)
                responder.send((nf_id, address))

        on_backup = name_backup

    def on_data() -> None:
        # one turn of the loop reads frames for at most TURN_BUDGET_S: a slow NF with a backlog
        # would otherwise keep the loop from heartbeats, acks and commands for hundreds of ms
        # and be failed over for being slow (the socket stays readable: the next turn goes on)
        deadline = time.monotonic() + TURN_BUDGET_S
        for frame in recv_frames(sock):
            worker.on_frame(frame)
            if worker.input_paused or time.monotonic() > deadline:
                break

    def on_pause(pause: bool) -> None:
        if pause:
            loop.remove_reader(sock.fileno())
        else:
            loop.add_reader(sock.fileno(), on_data)

    worker = Worker(wcfg, nf, store, sender, on_pause=on_pause,
                    drop_probe=lambda: socket_drops(sock), on_backup=on_backup)
    await worker.start()
    freeze_startup(f"worker {index}")
    # heartbeats (nf_host/liveness.py): answered by the responder process while this loop turns
    # (it marks its turns in `clock`), or by this loop itself
    echo: asyncio.DatagramTransport | None = None
    turning: asyncio.Task[None] | None = None
    if clock is None:
        echo, _ = await liveness.serve(wcfg.repl_host, wcfg.repl_port, cfg.nf_id, index,
                                       worker.started, nf_heartbeat_key(cfg))
    else:
        turning = loop.create_task(liveness.keep_turning(clock, cfg.loop_stall_ms / 4000))
    done = loop.create_future()
    tasks: set[asyncio.Task[None]] = set()

    async def run_command(rid: int, cmd: commands.Command) -> None:
        try:
            if isinstance(cmd, commands.UpdateNf):  # the worker cannot build an NF: it only
                try:                                # knows its instance
                    new_nf = make_nf(cfg.nf, cmd.params)
                except Exception as exc:  # whatever the NF's constructor raises on bad params
                    raise CommandError(f"NF {cfg.nf} refuses these params: {exc}") from exc
                worker.replace_nf(new_nf, dry_run=cmd.dry_run)
                conn.send((rid, True, None))
                return
            result = await worker.run(cmd)
            if isinstance(result, WorkerStatus):
                # link handler failures (each dropped and resynchronised its link) are errors
                # too, and peers refused in the TLS handshake refusals (nf_host/tls_streams.py)
                result = sender.report(
                    result, repl_errors=sum(link.errors for link in worker.links.values()),
                    repl_refused=tls.refused if tls is not None else 0)
            conn.send((rid, True, result))
        except (CommandError, ValueError, KeyError, TypeError) as exc:
            conn.send((rid, False, str(exc)))

    def on_command() -> None:
        try:
            rid, cmd = conn.recv()
        except (EOFError, OSError):
            if not done.done():
                done.set_result(None)
            return
        task = loop.create_task(run_command(rid, cmd))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    loop.add_reader(sock.fileno(), on_data)
    loop.add_reader(conn.fileno(), on_command)
    conn.send((0, True, "ready"))
    try:
        await done
    finally:
        if echo is not None:
            echo.close()
        if turning is not None:
            turning.cancel()
        await worker.stop()
        sock.close()


class WorkerPool:
    """The parent's handle on the worker processes."""

    def __init__(self, cfg: NfHostConfig) -> None:
        self.cfg = cfg
        # spawned: a forked child started 3x faster (0.7-0.8 s against 2-3.3 s for an NF here:
        # no second import), but a hot NF forked answered 3x slower (round trips p50 3.7 s
        # against 1.3 s in `topo run --hot`, the balancer's relief 5-7 s against 2.8 s), for a
        # reason not found yet (docs/nf_host.md, "Processes")
        ctx = mp.get_context("spawn")
        self.procs: list[BaseProcess] = []
        self.conns: list[Connection] = []
        self._ids = itertools.count(1)
        self._waiting: dict[int, Future[object]] = {}
        self._lock = threading.Lock()
        self._send_locks: list[threading.Lock] = []
        # each worker's loop clock (nf_host/liveness.py), unless the workers answer heartbeats
        responder = cfg.heartbeat_echo != "loop"
        self.clocks = [ctx.RawValue("d", time.monotonic())
                       for _ in range(cfg.workers if responder else 0)]
        self.responder: BaseProcess | None = None
        self.responder_counts = ctx.RawArray("Q", 3)  # its answered, withheld, ignored
        # each worker names its backup to the responder (its watch: nf_host/death_watch.py);
        # each pipe is made just before its worker is forked, so no earlier worker holds its
        # write end (the responder would never see it close)
        watch_reads: list[Connection] = []
        for i in range(cfg.workers):
            parent, child = ctx.Pipe()
            extra: tuple[object, ...] = ()
            write: Connection | None = None
            if responder:
                read, write = ctx.Pipe(duplex=False)
                watch_reads.append(read)
                extra = (self.clocks[i], write)
            proc = ctx.Process(target=worker_main, args=(cfg, i, child, *extra),
                               name=f"nf{cfg.nf_id}-w{i}")
            proc.start()
            child.close()
            if write is not None:
                write.close()
            self.procs.append(proc)
            self.conns.append(parent)
            self._send_locks.append(threading.Lock())
        for i, conn in enumerate(self.conns):
            if not conn.poll(30):
                raise RuntimeError(f"worker {i} did not start within 30 s")
            _rid, ok, msg = conn.recv()
            if not ok:
                raise RuntimeError(str(msg))
        self._readers = [
            threading.Thread(target=self._read, args=(c,), daemon=True) for c in self.conns
        ]
        for t in self._readers:
            t.start()
        if responder:
            self._start_responder(ctx, watch_reads)

    def _start_responder(self, ctx: SpawnContext, backups: list[Connection]) -> None:
        """The heartbeat responder process (nf_host/liveness.py), once the workers run; it reads
        each worker's backup from `backups`."""
        wcfg = self.cfg.worker_config(0)
        parent, child = ctx.Pipe()
        self.responder = ctx.Process(
            target=liveness.responder_main, name=f"nf{self.cfg.nf_id}-heartbeats",
            args=(wcfg.repl_host, wcfg.repl_port, self.cfg.nf_id,
                  [(p.pid, c) for p, c in zip(self.procs, self.clocks, strict=True)],
                  os.getpid(), time.monotonic(), self.cfg.loop_stall_ms / 1000,
                  self.cfg.heartbeat_echo == "realtime", self.responder_counts, child, backups,
                  nf_heartbeat_key(self.cfg),
                  nf_identity(self.cfg.pki_dir, self.cfg.nf_id) if self.cfg.tls else None))
        self.responder.start()
        child.close()
        for conn in backups:
            conn.close()
        if not parent.poll(30):
            raise RuntimeError("the heartbeat responder did not start within 30 s")
        said = str(parent.recv())
        parent.close()
        if not said.startswith("ok"):
            raise RuntimeError(said)
        log.info("heartbeats answered by process %d at %s", self.responder.pid, said[4:])

    def heartbeats_withheld(self) -> int:
        """Heartbeat requests not answered because a worker was stopped, gone or stuck."""
        return int(self.responder_counts[1])

    def _read(self, conn: Connection) -> None:
        while True:
            try:
                rid, ok, result = conn.recv()
            except (EOFError, OSError):
                break
            with self._lock:
                fut = self._waiting.pop(rid, None)
            if fut is None:
                # its caller gave up (`request`'s timeout): an answer too late, not an error
                log.warning("worker answered request %d after its caller gave up: %s", rid,
                            str(result)[:200])
                continue
            if ok:
                fut.set_result(result)
            else:
                fut.set_exception(CommandError(str(result)))
        with self._lock:  # the worker is gone: fail whatever waits for it
            for rid, fut in list(self._waiting.items()):
                if not fut.done():
                    fut.set_exception(CommandError("worker process exited"))
                self._waiting.pop(rid, None)

    def alive(self) -> bool:
        return all(p.is_alive() for p in self.procs) and (
            self.responder is None or self.responder.is_alive())

    def worker_of(self, slot: int) -> int:
        return slot % self.cfg.workers

    def request(self, worker: int, cmd: commands.Returns[R], timeout: float = 10.0) -> R:
        """Run `cmd` on `worker` and wait for its answer (`contract.results`, checked):
        CommandError if it failed, the worker is gone or it did not answer within `timeout`."""
        if not self.procs[worker].is_alive():
            raise CommandError(f"worker {worker} is not running")
        rid = next(self._ids)
        fut: Future[object] = Future()
        with self._lock:
            self._waiting[rid] = fut
        with self._send_locks[worker]:
            self.conns[worker].send((rid, commands.as_command(cmd)))
        try:
            return commands.answer(cmd, fut.result(timeout))
        except TimeoutError:
            with self._lock:
                self._waiting.pop(rid, None)
            raise CommandError(f"worker {worker} did not answer {cmd.NAME!r} within {timeout} s") from None

    def broadcast(self, cmd: commands.Returns[R]) -> list[R]:
        return [self.request(i, cmd) for i in range(self.cfg.workers)]

    def close(self) -> None:
        if self.responder is not None:
            self.responder.terminate()  # (SIGTERM: its watches end with a goodbye)
            self.responder.join(3)
            if self.responder.is_alive():
                self.responder.kill()
                self.responder.join(3)
        for conn in self.conns:
            # shut the socket down before closing it: a reader thread blocked in recv() keeps a
            # merely closed descriptor alive, and the worker would never see end-of-file
            with contextlib.suppress(OSError), socket.socket(fileno=os.dup(conn.fileno())) as sock:
                sock.shutdown(socket.SHUT_RDWR)
            conn.close()
        for proc in self.procs:
            proc.join(3)
            if proc.is_alive():
                proc.kill()
                proc.join(3)
