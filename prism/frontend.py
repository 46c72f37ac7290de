"""The Prism frontend: accepts clients, reads each request, and hands the connection to a
backend (modes "once" and "every", the thesis's two variants), or relays it (mode "proxy", the
baseline).

    python -m prism.frontend --addr 10.0.2.1 --backends 10.0.3.1,10.0.3.2 --mode once \
        --controller http://192.168.77.254:8700 --stats handoffs.jsonl

A hand-off of connection C to backend B (docs/prism.md, "Hand-off protocol"):
  1. controller `begin`: C's client->frontend segments dropped (lock), B->client rewrite added;
  2. dump C (TCP_REPAIR) and close it silently;
  3. HANDOFF frame (mode, the request already read, the state) to B on the hand-off channel;
  4. B restores C, commits (client->frontend segments now rewritten to B) and answers ACK.
Mode "once" with --snapshots: before answering each later request B ships a live snapshot of C
and the request (SNAPSHOT) and waits for this frontend's SNAPACK; the frontend keeps the newest
one, so a crashed B's connections are resumed here as in mode "every" (prism.recovery).
Mode "every": B hands C back after each response (HANDBACK): the frontend restores it, has the
controller `release` both entries, reads the next request and hands it to the next backend.
Each hand-off's times go to --stats (one JSON object per line): begin (switch write), dump
(serialise), handoff (frame sent until ACK: transfer + restore + commit), restore and commit
(measured at the backend), total.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import socket
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import IO

from prism.api_client import HandOffApi
from prism.protocol import (
    KIND_ACK,
    KIND_CLOSED,
    KIND_HANDBACK,
    KIND_HANDOFF,
    KIND_PING,
    KIND_PONG,
    KIND_SNAPACK,
    KIND_SNAPSHOT,
    REQUEST_SIZE,
    ProtocolError,
    Request,
    mark_channel,
    read_frame,
    read_request,
    send_frame,
)
from prism.recovery import FAIL_AFTER_S, PING_INTERVAL_S, REQUEST_WAIT_S, Held, resumed_state
from prism.repair import TcpState, dump, park, probe, restore, wait_acknowledged
from prism.switch_entries import Endpoint

LOG = logging.getLogger("prism.frontend")
MODES = {"once": 0, "every": 1, "once+snapshots": 2}
ACK_TIMEOUT_S = 10.0
RESUMED_DRAIN_S = 60.0  # a resumed response's retransmission, at worst many at once on one link


class BackendDown(RuntimeError):
    """The backend of a hand-off failed (or no backend is alive)."""


class BackendChannel:
    """The hand-off channel to one backend: frames out under a lock, ACKs matched by client port,
    the connections the backend holds (`held`), and when it was last heard from."""

    def __init__(self, frontend: Frontend, addr: str, data_port: int, control_port: int) -> None:
        self.frontend = frontend
        self.endpoint = Endpoint(addr, data_port)
        self.control_port = control_port
        self.sock: socket.socket | None = None
        self.lock = threading.Lock()
        self.acks: dict[int, tuple[threading.Event, list[dict[str, float]]]] = {}
        self.held: dict[int, Held] = {}
        self.alive = True
        self.last_heard = time.monotonic()

    def connect(self) -> None:
        self.sock = socket.create_connection((self.endpoint.addr, self.control_port), timeout=30)
        self.sock.settimeout(None)
        mark_channel(self.sock)
        self.last_heard = time.monotonic()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.sock is not None
        try:
            while (frame := read_frame(self.sock)) is not None:
                self.last_heard = time.monotonic()
                kind, body = frame
                if kind == KIND_ACK:
                    ack = json.loads(body)
                    event, box = self.acks.pop(int(ack["client_port"]))
                    box.append(ack)
                    event.set()
                elif kind == KIND_HANDBACK:
                    threading.Thread(target=self.frontend.take_back, args=(self, body),
                                     daemon=True).start()
                elif kind == KIND_SNAPSHOT:
                    self.frontend.keep_snapshot(self, body)
                elif kind == KIND_CLOSED:
                    self.frontend.forget(self, int(json.loads(body)["client_port"]))
                elif kind != KIND_PONG:
                    raise ProtocolError(f"frontend got frame kind {kind}")
        except (OSError, ProtocolError) as exc:
            self.frontend.backend_failed(self, f"channel: {exc}")
            return
        self.frontend.backend_failed(self, "channel closed")

    def ping(self) -> None:
        assert self.sock is not None
        with self.lock:
            send_frame(self.sock, KIND_PING, b"")

    def snapack(self, client_port: int) -> None:
        assert self.sock is not None
        with self.lock:
            send_frame(self.sock, KIND_SNAPACK, json.dumps({"client_port": client_port}).encode())

    def hand_off(self, mode: int, req: Request, state: TcpState) -> dict[str, float]:
        """Send the state; wait for the backend's ACK (it has restored and committed)."""
        assert self.sock is not None
        event = threading.Event()
        box: list[dict[str, float]] = []
        self.acks[state.remote[1]] = (event, box)
        try:
            with self.lock:
                send_frame(self.sock, KIND_HANDOFF, bytes([mode]) + req.encode() + state.encode())
        except OSError as exc:
            raise BackendDown(f"{self.endpoint.addr}: {exc}") from exc
        if not event.wait(ACK_TIMEOUT_S):
            raise BackendDown(f"no ACK from {self.endpoint.addr} for port {state.remote[1]}")
        if not box:
            raise BackendDown(f"{self.endpoint.addr} failed before its ACK")
        return box[0]


class Frontend:
    def __init__(self, addr: str, port: int, mode: str, api: HandOffApi | None,
                 backends: list[tuple[str, int, int]], stats: IO[str] | None,
                 fail_after: float = FAIL_AFTER_S, request_wait: float = REQUEST_WAIT_S,
                 extra_ms: float = 0.0, snapshots: bool = False, direct: bool = False) -> None:
        self.me = Endpoint(addr, port)
        self.mode = mode
        # what a Held records and the backend is told: "once" with snapshots is its own mode
        self.held_mode = "once+snapshots" if snapshots and mode == "once" else mode
        self.api = api
        self.channels = [BackendChannel(self, a, d, c) for a, d, c in backends]
        self._next = itertools.cycle(range(len(self.channels)))
        self._next_lock = threading.Lock()
        self.stats = stats
        self.stats_lock = threading.Lock()
        self.held_lock = threading.Lock()
        self.fail_after = fail_after
        self.request_wait = request_wait
        self.extra_s = extra_ms / 1e3
        self.handoffs = self.failures = self.snapshots = 0
        self.direct = direct

    def pick(self, avoid: BackendChannel | None = None) -> BackendChannel:
        """The next live backend, round robin; not `avoid` (the backend that just handed the
        connection back) unless it is the only live one. A connection restored on the host it
        has just left shares its 4-tuple with the socket closed there, and a segment that socket
        sent before its close (an ACK still queued on the backend's shaped link) reaching the
        client after `release` leaves unrewritten: the client's RST to it would reset the
        restored connection (docs/prism.md, invariant 1)."""
        with self._next_lock:
            fallback = None
            for _ in range(len(self.channels)):
                ch = self.channels[next(self._next)]
                if ch.alive and ch is not avoid:
                    return ch
                if ch.alive:
                    fallback = ch
        if fallback is not None:
            return fallback
        raise BackendDown("no live backend")

    def run(self) -> None:
        if self.mode != "proxy":
            for ch in self.channels:
                ch.connect()
            threading.Thread(target=self._watch, daemon=True).start()
        lsock = socket.create_server((self.me.addr, self.me.port), backlog=1024)
        LOG.info("frontend %s:%d mode %s, %d backends", self.me.addr, self.me.port, self.mode,
                 len(self.channels))
        while True:
            sock, _ = lsock.accept()
            target = self.relay if self.mode == "proxy" else self.serve
            threading.Thread(target=target, args=(sock,), daemon=True).start()

    # -- failure detection and recovery (prism.recovery) --------------------------------------
    def _watch(self) -> None:
        """Ping every live backend; one silent for `fail_after` seconds has failed."""
        while True:
            time.sleep(PING_INTERVAL_S)  # the detector's period, not a synchronisation
            for ch in self.channels:
                if not ch.alive:
                    continue
                if time.monotonic() - ch.last_heard > self.fail_after:
                    self.backend_failed(ch, f"silent for {self.fail_after:g} s")
                    continue
                try:
                    ch.ping()
                except OSError as exc:
                    self.backend_failed(ch, f"ping: {exc}")

    def backend_failed(self, ch: BackendChannel, why: str) -> None:
        """Declare `ch`'s backend failed (once): no more hand-offs to it, hand-offs waiting for
        its ACK fail, and every connection it held is recovered or recorded as lost."""
        with self.held_lock:
            if not ch.alive:
                return
            ch.alive = False
            held = list(ch.held.values())
            ch.held.clear()
        LOG.error("backend %s failed (%s): %d connection(s) held", ch.endpoint.addr, why,
                  len(held))
        self.record({"kind": "backend_failed", "backend": ch.endpoint.addr, "why": why,
                     "held": len(held)})
        for event, _box in list(ch.acks.values()):
            event.set()  # an empty box: BackendDown in hand_off
        if ch.sock is not None:
            with contextlib.suppress(OSError):
                ch.sock.shutdown(socket.SHUT_RDWR)
        for h in held:
            threading.Thread(target=self.recover, args=(ch, h), daemon=True).start()

    def forget(self, ch: BackendChannel, client_port: int) -> Held | None:
        """The connection is no longer the backend's (back here, or closed): its Held, if the
        backend still held it (a failure may have taken it first)."""
        with self.held_lock:
            return ch.held.pop(client_port, None)

    def keep_snapshot(self, ch: BackendChannel, body: bytes) -> None:
        """A SNAPSHOT (mode once with snapshots): the connection's live state at the backend and
        the request it is about to answer replace the Held copy; then SNAPACK, and the backend
        answers. A connection no longer held (the backend was declared failed) gets no SNAPACK:
        its recovery owns it."""
        req = Request.decode(body[:REQUEST_SIZE])
        state = TcpState.decode(body[REQUEST_SIZE:])
        port = state.remote[1]
        with self.held_lock:
            if not ch.alive or port not in ch.held:
                return
            ch.held[port] = Held(state, req, self.held_mode, time.monotonic())
        ch.snapack(port)
        self.snapshots += 1
        self.record({"kind": "snapshot", "backend": ch.endpoint.addr, "client_port": port,
                     "state_bytes": len(body)})

    def recover(self, ch: BackendChannel, held: Held) -> None:
        """Take a failed backend's connection back (modes every, once with snapshots), or record
        it as lost (once)."""
        assert self.api is not None
        client = Endpoint(*held.state.remote)
        lost = {"kind": "lost", "backend": ch.endpoint.addr, "client_port": client.port}
        if not held.resumable:
            self.record({**lost, "why": "once: its state since the hand-off was the backend's"})
            return
        t0 = time.perf_counter()
        try:
            state = resumed_state(held)
            # bound to our own address (a snapshot's local address is the backend's)
            sock = restore(state.moved_to((self.me.addr, self.me.port)))
            self.api.step("release", client, self.me, ch.endpoint)
            probe(sock)  # the client's ACK now reaches us: have it say what it already has
        except (OSError, RuntimeError) as exc:
            self.failures += 1
            self.record({**lost, "why": f"recovery failed: {exc}"})
            return
        self.record({"kind": "recovered", "backend": ch.endpoint.addr, "client_port": client.port,
                     "recover_ms": (time.perf_counter() - t0) * 1e3,
                     "since_dump_ms": (time.monotonic() - held.dumped_at) * 1e3,
                     "resent_bytes": len(state.send_queue)})
        # the client sends its next request only once it has the whole response: the wait for
        # it starts when the resumed response is acknowledged, not at the restore (a resumed
        # response can take seconds, several recovered at once on the frontend's link)
        try:
            wait_acknowledged(sock, RESUMED_DRAIN_S)
        except (OSError, TimeoutError) as exc:
            self.record({**lost, "why": f"resumed response not acknowledged: {exc}"})
            sock.close()
            return
        self.serve(sock, first_wait=self.request_wait, after_failure=lost)

    # -- proxy baseline ---------------------------------------------------------------------
    # -- proxy baseline ---------------------------------------------------------------------
    def relay(self, sock: socket.socket) -> None:
        ch = self.pick()
        with sock, socket.create_connection((ch.endpoint.addr, ch.endpoint.port)) as up:
            while (req := read_request(sock)) is not None:
                up.sendall(req.encode())
                left = req.size
                while left:
                    chunk = up.recv(min(left, 1 << 18))
                    if not chunk:
                        raise ProtocolError("backend closed mid-response")
                    sock.sendall(chunk)
                    left -= len(chunk)

    # -- Prism -------------------------------------------------------------------------------
    def serve(self, sock: socket.socket, first_wait: float | None = None,
              after_failure: dict[str, object] | None = None,
              avoid: BackendChannel | None = None) -> None:
        """Read the connection's next request and hand the connection off. A connection
        recovered from a failed backend (`after_failure`) waits `first_wait` seconds at most:
        a request that does not come was acknowledged by the failed backend (prism.recovery)."""
        try:
            sock.settimeout(first_wait)
            try:
                req = read_request(sock)
            except TimeoutError:
                self.record({**(after_failure or {}), "why": "no request after recovery: the "
                             "failed backend had acknowledged it"})
                sock.close()
                return
            sock.settimeout(None)
            if req is None:
                sock.close()
                return
            self.hand_off(sock, req, avoid)
        except (OSError, ProtocolError, TimeoutError, BackendDown) as exc:
            self.failures += 1
            LOG.error("hand-off failed: %s", exc)

    def hand_off(self, sock: socket.socket, req: Request,
                 avoid: BackendChannel | None = None) -> None:
        assert self.api is not None
        ch = self.pick(avoid)
        peer = sock.getpeername()
        client = Endpoint(peer[0], peer[1])
        t0 = time.perf_counter()
        begin_ms = self.api.step("begin", client, self.me, ch.endpoint)
        t1 = time.perf_counter()
        state = dump(sock)
        park(sock)  # frozen, not closed: a stray segment meets it (no RST)
        if self.extra_s:
            time.sleep(self.extra_s)  # the thesis's 5.3: latency added to every hand-off
        self._ship(ch, req, state, {"begin_ms": (t1 - t0) * 1e3, "begin_write_ms": begin_ms,
                                    "dump_ms": (time.perf_counter() - t1) * 1e3}, t0)

    def _ship(self, ch: BackendChannel, req: Request, state: TcpState,
              times: dict[str, float], t0: float) -> None:
        """The state (local address: ours) to `ch`'s backend, held until it is back; its
        times recorded once the backend's ACK came."""
        client = Endpoint(*state.remote)
        t2 = time.perf_counter()
        with self.held_lock:
            if ch.alive:
                ch.held[client.port] = Held(state, req, self.held_mode, time.monotonic())
        if not ch.alive:  # failed between pick and now: recover it like a held one
            self.recover(ch, Held(state, req, self.held_mode, time.monotonic()))
            return
        try:
            ack = ch.hand_off(MODES[self.held_mode], req, state)
        except BackendDown as exc:
            # the failure's recovery owns the connection now (backend_failed took `held`)
            self.backend_failed(ch, str(exc))
            return
        t3 = time.perf_counter()
        self.handoffs += 1
        self.record({"kind": "handoff", "backend": ch.endpoint.addr, "client_port": client.port,
                     **times, "handoff_ms": (t3 - t2) * 1e3,
                     "restore_ms": ack["restore_ms"], "commit_ms": ack["commit_ms"],
                     "total_ms": (t3 - t0) * 1e3, "state_bytes": len(state.encode())})

    def pass_on(self, old: BackendChannel, state: TcpState) -> bool:
        """The direct hand-over of a handed-back connection (--direct): the request is already
        in its receive queue and the forward entry is locked (the old backend's `lock`), so
        the state goes straight to the next backend after ONE step (`handover`: the return
        entry moves to it), without a restore, `release`, read, `begin` and dump here. False
        (nothing done) when it does not apply: no whole request alone in the queue, no live
        backend, or the step failed -- the caller takes the connection back instead."""
        assert self.api is not None
        if len(state.recv_queue) != REQUEST_SIZE:
            return False
        try:
            req = Request.decode(state.recv_queue)
            ch = self.pick(old)
            client = Endpoint(*state.remote)
            t0 = time.perf_counter()
            write_ms = 0.0  # the same backend again: its return entry is already there
            if ch is not old:
                write_ms = self.api.step("handover", client, self.me, ch.endpoint, old.endpoint)
        except (OSError, RuntimeError, ProtocolError) as exc:  # BackendDown is a RuntimeError
            LOG.warning("direct hand-over not possible (%s): taken back", exc)
            return False
        t1 = time.perf_counter()
        stripped = replace(state.moved_to((self.me.addr, self.me.port)), recv_queue=b"")
        self._ship(ch, req, stripped, {"begin_ms": (t1 - t0) * 1e3, "begin_write_ms": write_ms,
                                       "dump_ms": 0.0, "direct": 1.0,
                                       "handover_steps": float(ch is not old)}, t0)
        return True

    def take_back(self, ch: BackendChannel, body: bytes) -> None:
        """A HANDBACK: with --direct, on to the next backend at once (`pass_on`); else restore
        here, release the switch entries, go on with the next request."""
        assert self.api is not None
        try:
            state = TcpState.decode(body)
            client = Endpoint(*state.remote)
            if self.forget(ch, client.port) is None:
                return  # declared failed first: the recovery has the connection
            if self.direct and self.pass_on(ch, state):
                return
            t0 = time.perf_counter()
            sock = restore(state.moved_to((self.me.addr, self.me.port)))
            t1 = time.perf_counter()
            self.api.step("release", client, self.me, ch.endpoint)
            t2 = time.perf_counter()
            sock.sendall(state.unsent_bytes)
            self.record({"kind": "handback", "client_port": client.port,
                         "restore_ms": (t1 - t0) * 1e3, "release_ms": (t2 - t1) * 1e3})
        except (OSError, ProtocolError) as exc:
            self.failures += 1
            LOG.error("hand-back failed: %s", exc)
            return
        self.serve(sock, avoid=ch)

    def record(self, row: dict[str, object]) -> None:
        if self.stats is not None:
            with self.stats_lock:
                self.stats.write(json.dumps(row) + "\n")
                self.stats.flush()


def parse_backends(text: str, data_port: int, control_port: int) -> list[tuple[str, int, int]]:
    return [(a.strip(), data_port, control_port) for a in text.split(",") if a.strip()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="prism-frontend", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--addr", required=True, help="the service address clients connect to")
    parser.add_argument("--port", type=int, default=8080, help="the service port")
    parser.add_argument("--backends", required=True, help="comma-separated backend addresses")
    parser.add_argument("--backend-data-port", type=int, default=9090,
                        help="backends' data port (restored connections are bound to it)")
    parser.add_argument("--backend-control-port", type=int, default=9091,
                        help="backends' hand-off channel port")
    parser.add_argument("--mode", choices=("once", "every", "proxy"), default="once",
                        help="hand off once per connection, at every request, or relay")
    parser.add_argument("--controller", default="http://127.0.0.1:8700", help="hand-off API URL")
    parser.add_argument("--stats", type=Path, help="append one JSON line per hand-off here")
    parser.add_argument("--fail-after", type=float, default=FAIL_AFTER_S,
                        help="seconds without a frame from a backend before it is failed")
    parser.add_argument("--request-wait", type=float, default=REQUEST_WAIT_S,
                        help="seconds a recovered connection waits for its next request")
    parser.add_argument("--snapshots", action="store_true",
                        help="mode once: backends ship a live snapshot before each answer, so "
                             "a crashed backend's connections are resumed (one channel round "
                             "trip per request)")
    parser.add_argument("--direct", action="store_true",
                        help="mode every: a handed-back connection goes straight to the next "
                             "backend (one controller step, not restore, release, begin)")
    parser.add_argument("--extra-handoff-ms", type=float, default=0.0,
                        help="latency added to every hand-off (the thesis's figure 5.2)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stats = args.stats.open("a") if args.stats else None
    api = None if args.mode == "proxy" else HandOffApi(args.controller)
    backends = parse_backends(args.backends, args.backend_data_port, args.backend_control_port)
    Frontend(args.addr, args.port, args.mode, api, backends, stats, args.fail_after,
             args.request_wait, args.extra_handoff_ms, args.snapshots, args.direct).run()


if __name__ == "__main__":
    main()
