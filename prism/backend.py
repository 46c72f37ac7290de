"""The Prism backend server: serves objects on connections handed to it, or relayed to it.

    python -m prism.backend --addr 10.0.3.1 --controller http://192.168.77.254:8700

Two listeners on --addr: the data port (--data-port) takes the proxy baseline's plain
connections and is the local address every restored connection is bound to (the switch
rewrites the client's segments to it); the control port (--control-port) takes the frontend's
hand-off channel (prism.protocol frames). On HANDOFF: restore the connection (prism.repair),
commit the hand-off at the controller (the client's segments now come here), answer ACK with
the restore and commit times, then send the never-sent bytes and serve: the pending request,
then (mode "once") every later request until the client closes, after which the switch
entries are released (mode "once with snapshots": before answering each later request, a
live snapshot of the connection and the request go to the frontend, and the answer waits for
its SNAPACK, so a crash of this host leaves the frontend a state it can resume from); or
(mode "every") hand the connection back to the frontend once the
response is acknowledged and the client's next request has arrived whole (lock, dump with the
request in the receive queue, close silently, HANDBACK) -- unless the client closes the
connection instead: then the backend closes it and releases the entries itself.
"""

from __future__ import annotations

import argparse
import json
import logging
import socket
import threading
import time

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
    object_bytes,
    read_frame,
    read_request,
    send_frame,
)
from prism.repair import TcpState, close_silently, dump, restore, snapshot, wait_acknowledged
from prism.switch_entries import Endpoint

LOG = logging.getLogger("prism.backend")
MODE_ONCE, MODE_EVERY, MODE_ONCE_SNAPSHOTS = 0, 1, 2
DRAIN_TIMEOUT_S = 10.0
SNAPACK_TIMEOUT_S = 10.0


class Channel:
    """One frontend's hand-off channel on the backend: frames out under a lock, and the
    snapshots waiting for the frontend's SNAPACK (by client port)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.lock = threading.Lock()
        self.snapacks: dict[int, threading.Event] = {}

    def send(self, kind: int, body: bytes) -> None:
        with self.lock:
            send_frame(self.sock, kind, body)

    def closed(self, client: Endpoint) -> None:
        """Tell the frontend the connection is over (it stops holding a copy of it)."""
        self.send(KIND_CLOSED, json.dumps({"client_port": client.port}).encode())

    def snapshot(self, sock: socket.socket, req: Request) -> bool:
        """Ship the connection's live state and the request about to be answered; wait for
        the frontend's SNAPACK. False when none came in time (the connection is served on, but
        a crash of this host would lose it: the frontend's copy is older)."""
        state = snapshot(sock)
        event = threading.Event()
        self.snapacks[state.remote[1]] = event
        self.send(KIND_SNAPSHOT, req.encode() + state.encode())
        if event.wait(SNAPACK_TIMEOUT_S):
            return True
        self.snapacks.pop(state.remote[1], None)
        LOG.error("no SNAPACK for port %d: served unsaved", state.remote[1])
        return False

    def snapack(self, body: bytes) -> None:
        event = self.snapacks.pop(int(json.loads(body)["client_port"]), None)
        if event is not None:
            event.set()


def respond(sock: socket.socket, req: Request) -> None:
    sock.sendall(object_bytes(req.size, req.seed))


def serve_requests(sock: socket.socket) -> None:
    """Answer requests until the peer closes (plain connections: the proxy's)."""
    with sock:
        while (req := read_request(sock)) is not None:
            respond(sock, req)


def request_waiting(sock: socket.socket) -> bool:
    """Block until a whole request is in the receive queue (True) or the client closed (False);
    nothing is consumed: the request travels in the dumped receive queue."""
    return len(sock.recv(REQUEST_SIZE, socket.MSG_PEEK | socket.MSG_WAITALL)) == REQUEST_SIZE


class Backend:
    def __init__(self, addr: str, data_port: int, control_port: int, api: HandOffApi) -> None:
        self.me = Endpoint(addr, data_port)
        self.control_port = control_port
        self.api = api

    def start(self) -> list[threading.Thread]:
        threads = []
        for port, handler in ((self.me.port, serve_requests), (self.control_port, self.control)):
            lsock = socket.create_server((self.me.addr, port), reuse_port=False, backlog=256)
            threads.append(threading.Thread(target=self._accept, args=(lsock, handler), daemon=True))
        for t in threads:
            t.start()
        return threads

    @staticmethod
    def _accept(lsock: socket.socket, handler: object) -> None:
        while True:
            sock, _ = lsock.accept()
            threading.Thread(target=handler, args=(sock,), daemon=True).start()  # type: ignore[arg-type]

    def control(self, ctrl: socket.socket) -> None:
        """One frontend's hand-off channel."""
        channel = Channel(ctrl)
        mark_channel(ctrl)
        with ctrl:
            while (frame := read_frame(ctrl)) is not None:
                kind, body = frame
                if kind == KIND_PING:
                    channel.send(KIND_PONG, b"")
                    continue
                if kind == KIND_SNAPACK:
                    channel.snapack(body)
                    continue
                if kind != KIND_HANDOFF:
                    raise ProtocolError(f"backend got frame kind {kind}")
                mode = body[0]
                req = Request.decode(body[1:1 + REQUEST_SIZE])
                state = TcpState.decode(body[1 + REQUEST_SIZE:])
                # one thread per connection from here: the channel's next frame does not wait
                # for this one's commit
                threading.Thread(target=self.serve_handed, daemon=True,
                                 args=(state, req, mode, channel)).start()

    def serve_handed(self, state: TcpState, req: Request, mode: int, channel: Channel) -> None:
        frontend, client = Endpoint(*state.local), Endpoint(*state.remote)
        t0 = time.perf_counter()
        sock = restore(state.moved_to((self.me.addr, self.me.port)))
        t1 = time.perf_counter()
        try:
            write_ms = self.api.step("commit", client, frontend, self.me)
            t2 = time.perf_counter()
            ack = {"client_port": client.port, "restore_ms": (t1 - t0) * 1e3,
                   "commit_ms": (t2 - t1) * 1e3, "commit_write_ms": write_ms}
            channel.send(KIND_ACK, json.dumps(ack).encode())
            sock.sendall(state.unsent_bytes)
            respond(sock, req)
            if mode == MODE_EVERY:
                # the hand-back point: the client's next request has arrived whole (so every
                # segment it sent before has too, and it sends nothing more until answered)
                # and our response is acknowledged: nothing of this connection is in flight
                if not request_waiting(sock):
                    sock.close()  # the client closed after its last response: end here
                    self.api.step("release", client, frontend, self.me)
                    channel.closed(client)
                    return
                # then a hand-back carries no data in flight: nothing needs the new owner's
                # retransmission timer
                wait_acknowledged(sock, DRAIN_TIMEOUT_S)
                self.api.step("lock", client, frontend, self.me)
                back = dump(sock)
                # closed, not parked as the frontend does (docs/prism.md, invariant 1): a
                # frozen socket still sends ACKs, and after `release` they reach the client
                # unrewritten; its RST back would reset this connection restored here again
                close_silently(sock)
                channel.send(KIND_HANDBACK, back.encode())
                return
            if mode == MODE_ONCE_SNAPSHOTS:
                with sock:
                    while (later := read_request(sock)) is not None:
                        channel.snapshot(sock, later)
                        respond(sock, later)
            else:
                serve_requests(sock)
            self.api.step("release", client, frontend, self.me)
            channel.closed(client)
        except (OSError, ProtocolError) as exc:
            LOG.error("connection %s:%d failed: %s", client.addr, client.port, exc)
            sock.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="prism-backend", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--addr", required=True, help="this backend's data address")
    parser.add_argument("--data-port", type=int, default=9090,
                        help="plain connections, and the local port of restored ones")
    parser.add_argument("--control-port", type=int, default=9091,
                        help="the frontend's hand-off channel")
    parser.add_argument("--controller", default="http://127.0.0.1:8700", help="hand-off API URL")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    backend = Backend(args.addr, args.data_port, args.control_port, HandOffApi(args.controller))
    for t in backend.start():
        t.join()


if __name__ == "__main__":
    main()
