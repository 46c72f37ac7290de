"""The Prism object protocol over TCP, and the frames of the frontend-backend hand-off channel.

Client protocol (persistent connections, one request at a time):
    request  = "PRSM" magic, object size (u64), seed (u64)      -- 20 bytes
    response = exactly `size` bytes: object_bytes(size, seed)
The content is a function of (size, seed) only, so the client checks every response's length
and every byte, whichever server (frontend, backend, proxy) sent it.

Hand-off channel (frontend <-> backend, one TCP connection per peer pair): frames of a kind
byte and a u32 length, then the body:
    HANDOFF  body = request (20 bytes) + encoded TcpState: serve this connection, starting
             with this request (already read by the sender)
    HANDBACK body = encoded TcpState: the connection returns to the frontend
    ACK      body = JSON {"client_port", times}: the receiver has restored and committed it
    PING / PONG  empty: the frontend's failure detector (prism.recovery)
    CLOSED   body = JSON {"client_port"}: the client closed a connection the backend held
    SNAPSHOT body = request (20 bytes) + encoded TcpState: mode "once" with snapshots, sent by
             the backend after reading each later request and before answering it: the
             connection as it is now (left running), and the request it is about to answer
    SNAPACK  body = JSON {"client_port"}: the frontend keeps that snapshot; the backend answers
"""

from __future__ import annotations

import random
import socket
import struct
from dataclasses import dataclass

MAGIC = b"PRSM"
_REQUEST = struct.Struct("!4sQQ")
REQUEST_SIZE = _REQUEST.size
_FRAME = struct.Struct("!BI")
MAX_OBJECT = 1 << 30

CHANNEL_TOS = 0xB8  # DSCP EF (46): the hand-off channel's packets, a band of their own in tc

KIND_HANDOFF = 1
KIND_HANDBACK = 2
KIND_ACK = 3
KIND_PING = 4    # frontend -> backend, empty: are you alive?
KIND_PONG = 5    # backend -> frontend, empty
KIND_CLOSED = 6  # backend -> frontend, {"client_port"}: the client closed, the entries released
KIND_SNAPSHOT = 7  # backend -> frontend, request + TcpState: a once-mode connection's live state
KIND_SNAPACK = 8   # frontend -> backend, {"client_port"}: the snapshot is kept


class ProtocolError(ValueError):
    """A malformed request or frame, or a peer that closed mid-message."""


@dataclass(frozen=True)
class Request:
    size: int
    seed: int

    def encode(self) -> bytes:
        return _REQUEST.pack(MAGIC, self.size, self.seed)

    @classmethod
    def decode(cls, data: bytes) -> Request:
        magic, size, seed = _REQUEST.unpack(data)
        if magic != MAGIC or size > MAX_OBJECT:
            raise ProtocolError(f"bad request {data!r}")
        return cls(size, seed)


def object_bytes(size: int, seed: int) -> bytes:
    """The object a request names: `size` pseudo-random bytes from `seed`."""
    return random.Random(seed).randbytes(size)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly `n` bytes from `sock`, or ProtocolError when the peer closes first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ProtocolError(f"peer closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def read_request(sock: socket.socket) -> Request | None:
    """The next request on a client connection, or None when the client closed between requests."""
    first = sock.recv(REQUEST_SIZE)
    if not first:
        return None
    return Request.decode(first + recv_exact(sock, REQUEST_SIZE - len(first)))


def mark_channel(sock: socket.socket) -> None:
    """A hand-off channel socket: no Nagle delay, and DSCP EF on its packets (the testbed's tc
    gives them priority over responses on the shaped links: docs/prism.md)."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, CHANNEL_TOS)


def send_frame(sock: socket.socket, kind: int, body: bytes) -> None:
    sock.sendall(_FRAME.pack(kind, len(body)) + body)


def read_frame(sock: socket.socket) -> tuple[int, bytes] | None:
    """(kind, body) of the next frame, or None when the peer closed between frames."""
    first = sock.recv(_FRAME.size)
    if not first:
        return None
    head = first + recv_exact(sock, _FRAME.size - len(first))
    kind, length = _FRAME.unpack(head)
    return kind, recv_exact(sock, length)
