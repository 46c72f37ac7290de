"""Port I/O of p4sim: Linux interfaces attached with AF_PACKET raw sockets (like BMv2's `-i N@iface`).

`PortSet` opens one raw socket per interface (promiscuous, our own transmissions ignored), runs
one receive thread that polls all of them and hands each frame to a callback, and sends frames out
by port number. Frames are bounded by the receive buffer size; errors on one interface (it went
down, it was deleted) are counted and never stop the others.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import socket
import struct
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

LOG = logging.getLogger("p4sim.ports")

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1
PACKET_IGNORE_OUTGOING = 23
PACKET_OUTGOING = 4
MAX_FRAME = 65536
BATCH = 64  # frames read from one socket before looking at the others


def parse_interface(spec: str) -> tuple[int, str]:
    """'1@veth1' -> (1, 'veth1'); a bare name is refused (port numbers are explicit)."""
    port, sep, name = spec.partition("@")
    if not sep or not port.isdigit() or not name:
        raise ValueError(f"interface must be PORT@NAME, got {spec!r}")
    return int(port), name


@dataclass
class PortStats:
    rx: int = 0
    tx: int = 0
    tx_errors: int = 0
    rx_errors: int = 0
    gone: bool = False  # the interface disappeared: the port is out of the receive loop


@dataclass
class PortSet:
    """Raw sockets on a set of interfaces, by port number."""

    interfaces: Mapping[int, str]
    stats: dict[int, PortStats] = field(default_factory=dict)
    _socks: dict[int, socket.socket] = field(default_factory=dict)
    _by_fd: dict[int, int] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def open(self) -> None:
        """Open every interface; on failure close what was opened and name the interface."""
        for port, name in self.interfaces.items():
            try:
                s = self._open_one(name)
            except OSError as exc:
                self.close()
                raise OSError(exc.errno, f"interface {name} (port {port}): {exc.strerror}") from exc
            self._socks[port] = s
            self._by_fd[s.fileno()] = port
            self.stats[port] = PortStats()

    @staticmethod
    def _open_one(name: str) -> socket.socket:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        try:
            s.bind((name, 0))
            with contextlib.suppress(OSError):  # Linux >= 4.20
                s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            mreq = struct.pack("iHH8s", socket.if_nametoindex(name), PACKET_MR_PROMISC, 0, b"")
            s.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
            s.setblocking(False)
        except OSError:
            s.close()
            raise
        return s

    def send(self, port: int, data: bytes) -> None:
        s = self._socks.get(port)
        st = self.stats.get(port)
        if s is None or st is None:
            return  # a port with no interface drops, like an unconnected BMv2 port
        try:
            s.send(data)
            st.tx += 1
        except OSError as exc:
            st.tx_errors += 1
            if exc.errno not in (
                errno.ENXIO,
                errno.ENETDOWN,
                errno.EMSGSIZE,
                errno.EAGAIN,
                errno.ENOBUFS,
            ):
                LOG.warning("send on port %d failed: %s", port, exc)

    def start(self, deliver: Callable[[int, bytes], None]) -> None:
        """Receive on every port in a background thread, calling deliver(port, frame)."""
        self._thread = threading.Thread(
            target=self._loop, args=(deliver,), name="p4sim-ports", daemon=True
        )
        self._thread.start()

    def _loop(self, deliver: Callable[[int, bytes], None]) -> None:
        poller = select.poll()
        for fd in self._by_fd:
            poller.register(fd, select.POLLIN)
        while not self._stop.is_set():
            for fd, events in poller.poll(200):
                port = self._by_fd.get(fd)
                if port is None:
                    continue
                if events & (select.POLLERR | select.POLLNVAL | select.POLLHUP):
                    self._error(port, events, poller)
                    continue
                self._drain(port, deliver, poller)

    _GONE = (errno.ENETDOWN, errno.ENXIO, errno.ENODEV)

    def _error(self, port: int, events: int, poller: select.poll) -> None:
        """Count a socket error and clear it (reading SO_ERROR does: left pending, poll would
        report it again at once, a busy loop); a port whose interface is gone leaves the loop."""
        st, s = self.stats[port], self._socks[port]
        st.rx_errors += 1
        err = 0 if events & select.POLLNVAL else s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if events & (select.POLLNVAL | select.POLLHUP) or err in self._GONE or not self._exists(port):
            self._gone(port, poller, os.strerror(err) if err else "hang-up")

    def _exists(self, port: int) -> bool:
        try:
            socket.if_nametoindex(self.interfaces[port])
        except OSError:
            return False
        return True

    def _gone(self, port: int, poller: select.poll, why: str) -> None:
        if self.stats[port].gone:
            return
        self.stats[port].gone = True
        with contextlib.suppress(KeyError, ValueError):
            poller.unregister(self._socks[port].fileno())
        LOG.warning("port %d (%s) went away (%s): no longer received on", port,
                    self.interfaces[port], why)

    def _drain(self, port: int, deliver: Callable[[int, bytes], None], poller: select.poll) -> None:
        s = self._socks[port]
        for _ in range(BATCH):
            try:
                data, addr = s.recvfrom(MAX_FRAME)
            except BlockingIOError:
                return
            except OSError as exc:
                self.stats[port].rx_errors += 1
                if exc.errno in self._GONE:
                    self._gone(port, poller, str(exc))
                return
            if addr[2] == PACKET_OUTGOING:
                continue
            self.stats[port].rx += 1
            try:
                deliver(port, data)
            except Exception:
                LOG.exception("packet from port %d failed", port)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
        for s in self._socks.values():
            s.close()
        self._socks.clear()
        self._by_fd.clear()
