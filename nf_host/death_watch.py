"""The early crash signal of a primary: a connection to its backup that closes first when the
`nf-host` is killed (docs/protocols.md §4.3).

A SIGKILLed process's sockets close only while the kernel tears the process down, after its
memory is freed: a worker of 50 MiB, at normal priority on a loaded host, closed its replication
link to the backup 3-24 ms after the signal (`make bench-teardown`, `make bench-failover`). The
`nf-host`'s heartbeat responder is a small process at real-time priority in the same process group:
killed with the rest, it is torn down first. So it keeps, for each worker i, a connection to worker
i of that worker's backup (the *watch*): a hello marked `watch`, then nothing but a goodbye when the
backup changes or `nf-host` stops on purpose. The backup's replication server treats the end of
the newest watch from a sender without its goodbye exactly like the end of that sender's data
connection (`on_lost`): an armed backup takes over at once, its primary's in-flight deltas, never
acknowledged so never released, are refused afterwards and their input replayed.

Each worker tells the responder its backup through a one-way pipe (`(nf id, worker address)`,
`(0, "")`: none); `DeathWatch` runs inside the responder's selector loop (`HeartbeatResponder`):
non-blocking connects, retried with a growing delay while the backup refuses (it may not know
this NF as its primary yet). With TLS (the default, mgmt/tls.py's contexts), each watch is a TLS
connection like the replication links, its handshake driven by the same selector.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import selectors
import socket
import ssl
import time
from collections.abc import Sequence
from dataclasses import replace
from multiprocessing.connection import Connection

from contract.replication import encode
from nf_host.peer_policy import hello
from nf_host.replication import BYE_FRAME, split_address

log = logging.getLogger(__name__)

RETRY_S = 0.05  # the first wait before connecting again, doubled after each short connection
MAX_RETRY_S = 1.0
LASTING_S = 1.0  # a watch that lasted this long was accepted: the next retry starts short again


class _Watch:
    """Worker `index`'s watch: its backup worker's address and the connection to it."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.address = ""
        self.sock: socket.socket | None = None
        self.handshaking = False  # (TLS) connected, handshake under way
        self.connected = False
        self.since = 0.0
        self.retry_at: float | None = None
        self.delay = RETRY_S


class DeathWatch:
    """Every worker's watch on its backup, driven by `selector` (the responder's)."""

    def __init__(self, selector: selectors.BaseSelector, nf_id: int,
                 updates: Sequence[Connection], tls: ssl.SSLContext | None = None) -> None:
        self.selector, self.nf_id, self.updates, self.tls = selector, nf_id, list(updates), tls
        self.watches = [_Watch(i) for i in range(len(self.updates))]
        for i, conn in enumerate(self.updates):
            selector.register(conn, selectors.EVENT_READ, lambda _m, i=i: self._update(i))

    def timeout(self, now: float) -> float | None:
        """Seconds until the next reconnection is due (None: none is)."""
        due = [w.retry_at for w in self.watches if w.retry_at is not None]
        return max(0.0, min(due) - now) if due else None

    def run_due(self, now: float) -> None:
        for w in self.watches:
            if w.retry_at is not None and w.retry_at <= now:
                w.retry_at = None
                self._connect(w)

    def _update(self, index: int) -> None:
        """Worker `index` named its backup (or none)."""
        try:
            nf, address = self.updates[index].recv()
        except (EOFError, OSError):  # the worker is gone: its watch stays as it was
            self.selector.unregister(self.updates[index])
            return
        w = self.watches[index]
        address = str(address) if nf else ""
        if address == w.address:
            return
        self._drop(w, goodbye=True)
        w.address, w.delay, w.retry_at = address, RETRY_S, None
        if address:
            log.info("worker %d: watching its backup NF %d at %s", index, nf, address)
            self._connect(w)

    def _connect(self, w: _Watch) -> None:
        try:
            host, port = split_address(w.address)
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
        except (ValueError, OSError) as exc:
            log.warning("worker %d: cannot watch %s: %s", w.index, w.address, exc)
            return
        sock.setblocking(False)
        err = sock.connect_ex((host, port))
        if err not in (0, errno.EINPROGRESS):
            sock.close()
            self._retry(w)
            return
        w.sock, w.connected, w.since = sock, False, time.monotonic()
        self.selector.register(sock, selectors.EVENT_WRITE, lambda _m, w=w: self._writable(w))

    def _writable(self, w: _Watch) -> None:
        sock = w.sock
        assert sock is not None
        if not w.handshaking and sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
            self._drop(w, goodbye=False)
            self._retry(w)
            return
        if self.tls is not None and not self._handshake(w):
            return
        msg = hello(self.nf_id, w.index, len(self.watches))
        try:
            sock.send(encode(replace(msg, watch=True)))  # (a few bytes: an empty buffer takes them)
        except OSError:
            self._drop(w, goodbye=False)
            self._retry(w)
            return
        w.connected = True
        self.selector.modify(sock, selectors.EVENT_READ, lambda _m, w=w: self._readable(w))

    def _handshake(self, w: _Watch) -> bool:
        """Drive the TLS handshake of `w` one step; True once it is done (False: wait for the
        selector, or it failed and a retry is due)."""
        assert self.tls is not None and w.sock is not None
        if not w.handshaking:
            try:
                self.selector.unregister(w.sock)
                w.sock = self.tls.wrap_socket(w.sock, do_handshake_on_connect=False)
            except (OSError, ValueError) as exc:
                log.warning("worker %d: watch of %s: %s", w.index, w.address, exc)
                self._drop(w, goodbye=False)
                self._retry(w)
                return False
            w.handshaking = True
            self.selector.register(w.sock, selectors.EVENT_WRITE,
                                   lambda _m, w=w: self._writable(w))
        sock = w.sock
        assert isinstance(sock, ssl.SSLSocket)
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            self.selector.modify(sock, selectors.EVENT_READ, lambda _m, w=w: self._writable(w))
            return False
        except ssl.SSLWantWriteError:
            self.selector.modify(sock, selectors.EVENT_WRITE, lambda _m, w=w: self._writable(w))
            return False
        except OSError as exc:  # (ssl.SSLError too: a certificate the backup refused)
            log.info("worker %d: TLS handshake of the watch of %s: %s", w.index, w.address, exc)
            self._drop(w, goodbye=False)
            self._retry(w)
            return False
        w.handshaking = False
        return True

    def _readable(self, w: _Watch) -> None:
        """The backup closed the watch (it refused it, or it stopped): connect again later."""
        sock = w.sock
        assert sock is not None
        try:
            data = sock.recv(4096)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return
        except OSError:
            data = b""
        if data:
            return  # (a backup sends nothing on a watch)
        self._drop(w, goodbye=False)
        self._retry(w)

    def _retry(self, w: _Watch) -> None:
        lasted = time.monotonic() - w.since if w.since else 0.0
        w.delay = RETRY_S if lasted >= LASTING_S else min(w.delay * 2, MAX_RETRY_S)
        w.retry_at = time.monotonic() + w.delay

    def _drop(self, w: _Watch, goodbye: bool) -> None:
        sock, w.sock = w.sock, None
        if sock is None:
            return
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(sock)
        if goodbye and w.connected:
            with contextlib.suppress(OSError):
                sock.send(BYE_FRAME)
        w.connected = w.handshaking = False
        sock.close()

    def close(self) -> None:
        """Stop watching, with a goodbye on every watch: this NF stops on purpose."""
        for w in self.watches:
            self._drop(w, goodbye=True)
