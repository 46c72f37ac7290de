"""The Prism backend server: serves objects on connections handed to it, or relayed to it.

    python -m prism.backend --addr 10.0.3.1 --controller http://192.168.77.254:8700

Two listeners on --addr: the data port (--data-port) takes the proxy baseline's plain
connections and is the local address every restored connection is bound to (the switch
rewrites the client's segments to it); the control port (--control-port) takes the frontend's
hand-off channel (prism.protocol frames). On HANDOFF: restore the connection (prism.repair),
commit the hand-off at the controller (the client's segments now come here), answer ACK with
the restore and commit times, then send the never-sent bytes and serve: the pending request,
then (mode "once") every later request until the client closes, after which the switch
entries are released; or (mode "every") hand the connection back to the frontend once the
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
    REQUEST_SIZE,
    ProtocolError,
    Request,
    mark_channel,
    object_bytes,
    read_frame,
    read_request,
    send_frame,
)
from prism.repair import TcpState, close_silently, dump, restore, unacknowledged_bytes
from prism.switch_entries import Endpoint

LOG = logging.getLogger("prism.backend")
MODE_ONCE, MODE_EVERY = 0, 1
DRAIN_TIMEOUT_S = 10.0


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


def wait_acknowledged(sock: socket.socket, timeout: float = DRAIN_TIMEOUT_S) -> None:
    """Until every byte sent is acknowledged (send queue empty): then a hand-back carries no
    data in flight, so nothing needs the new owner's retransmission timer."""
    deadline = time.monotonic() + timeout
    delay = 0.0002
    while unacknowledged_bytes(sock) > 0:
        if time.monotonic() > deadline:
            raise TimeoutError("send queue not acknowledged")
        time.sleep(delay)  # no event tells an ACK's arrival: a short, growing poll
        delay = min(delay * 2, 0.005)


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
        lock = threading.Lock()
        mark_channel(ctrl)
        with ctrl:
            while (frame := read_frame(ctrl)) is not None:
                kind, body = frame
                if kind == KIND_PING:
                    with lock:
                        send_frame(ctrl, KIND_PONG, b"")
                    continue
                if kind != KIND_HANDOFF:
                    raise ProtocolError(f"backend got frame kind {kind}")
                mode = body[0]
                req = Request.decode(body[1:1 + REQUEST_SIZE])
                state = TcpState.decode(body[1 + REQUEST_SIZE:])
                # one thread per connection from here: the channel's next frame does not wait
                # for this one's commit
                threading.Thread(target=self.serve_handed, daemon=True,
                                 args=(state, req, mode, ctrl, lock)).start()

    def serve_handed(self, state: TcpState, req: Request, mode: int, ctrl: socket.socket,
                     lock: threading.Lock) -> None:
        frontend, client = Endpoint(*state.local), Endpoint(*state.remote)
        t0 = time.perf_counter()
        sock = restore(state.moved_to((self.me.addr, self.me.port)))
        t1 = time.perf_counter()
        try:
            write_ms = self.api.step("commit", client, frontend, self.me)
            t2 = time.perf_counter()
            ack = {"client_port": client.port, "restore_ms": (t1 - t0) * 1e3,
                   "commit_ms": (t2 - t1) * 1e3, "commit_write_ms": write_ms}
            with lock:
                send_frame(ctrl, KIND_ACK, json.dumps(ack).encode())
            sock.sendall(state.unsent_bytes)
            respond(sock, req)
            if mode == MODE_EVERY:
                # the hand-back point: the client's next request has arrived whole (so every
                # segment it sent before has too, and it sends nothing more until answered)
                # and our response is acknowledged: nothing of this connection is in flight
                if not request_waiting(sock):
                    sock.close()  # the client closed after its last response: end here
                    self.api.step("release", client, frontend, self.me)
                    self._closed(ctrl, lock, client)
                    return
                wait_acknowledged(sock)
                self.api.step("lock", client, frontend, self.me)
                back = dump(sock)
                close_silently(sock)
                with lock:
                    send_frame(ctrl, KIND_HANDBACK, back.encode())
                return
            serve_requests(sock)
            self.api.step("release", client, frontend, self.me)
            self._closed(ctrl, lock, client)
        except (OSError, ProtocolError) as exc:
            LOG.error("connection %s:%d failed: %s", client.addr, client.port, exc)
            sock.close()


    @staticmethod
    def _closed(ctrl: socket.socket, lock: threading.Lock, client: Endpoint) -> None:
        """Tell the frontend the connection is over (it stops holding a copy of it)."""
        with lock:
            send_frame(ctrl, KIND_CLOSED, json.dumps({"client_port": client.port}).encode())


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
