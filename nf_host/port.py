"""The data interface: an AF_PACKET socket per worker, and entering network namespaces.

`open_port` binds a raw socket to one interface, ignores the frames the host itself sends
(PACKET_IGNORE_OUTGOING: our own output must not come back as input), enlarges the receive buffer
and attaches the worker's BPF filter. `in_netns` runs a function with the calling thread inside a
named network namespace, so a test or the harness can open sockets there without a subprocess.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import struct
from collections.abc import Callable, Iterator
from typing import TypeVar

from nf_host import fanout

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
SO_RCVBUFFORCE = 33
SO_SNDBUFFORCE = 32
CLONE_NEWNET = 0x40000000
MAX_FRAME = 65536

T = TypeVar("T")


def open_port(
    iface: str, worker: int = 0, workers: int = 1, rcvbuf: int = 8 << 20, filtered: bool = True
) -> socket.socket:
    """A non-blocking raw socket on `iface` that receives this worker's share of the frames."""
    # protocol 0: the kernel hands the socket nothing until bind names the interface and the
    # protocol. Opened with ETH_P_ALL, it would take every frame of every interface of the
    # namespace until bind (a node holds several NFs' data interfaces and the management one),
    # and keep them queued after: another interface's frames, counted as this NF's input
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    try:
        if filtered:  # attach before bind, so no frame of another worker slips in
            fanout.attach(sock, fanout.worker_filter(worker, workers))
        # kernels before 4.20 lack it: outgoing frames are then filtered in `recv_frames`
        try:
            sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            _ignores_outgoing.add(sock.fileno())
        except OSError:
            pass
        for opt, size in ((SO_RCVBUFFORCE, rcvbuf), (SO_SNDBUFFORCE, rcvbuf)):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, opt, size)
        sock.bind((iface, ETH_P_ALL))  # from here on: this interface's frames only
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


_ignores_outgoing: set[int] = set()


def recv_frames(sock: socket.socket, limit: int = 256) -> Iterator[bytes]:
    """Up to `limit` frames that are waiting on a non-blocking socket (skips outgoing ones)."""
    if sock.fileno() in _ignores_outgoing:  # the kernel already dropped our own frames
        recv = sock.recv
        for _ in range(limit):
            try:
                yield recv(MAX_FRAME)
            except (BlockingIOError, InterruptedError):
                return
        return
    for _ in range(limit):
        try:
            data, addr = sock.recvfrom(MAX_FRAME)
        except (BlockingIOError, InterruptedError):
            return
        if addr[2] == socket.PACKET_OUTGOING:
            continue
        yield data


PACKET_STATISTICS = 6
_TPACKET_STATS = struct.Struct("II")  # tp_packets, tp_drops


def socket_drops(sock: socket.socket) -> int:
    """Frames the kernel dropped on this socket (full receive buffer) since the last call."""
    try:
        raw = sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, _TPACKET_STATS.size)
    except OSError:
        return 0
    return int(_TPACKET_STATS.unpack(raw)[1])  # reading resets the kernel's counters


_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def in_netns(name: str, fn: Callable[[], T]) -> T:
    """Run `fn` with this thread in network namespace `name` (from `ip netns add`), then return."""
    with open("/proc/thread-self/ns/net", "rb") as home, open(f"/run/netns/{name}", "rb") as target:
        _setns(target.fileno())
        try:
            return fn()
        finally:
            _setns(home.fileno())
