"""Linux TCP_REPAIR: serialise a live TCP connection and restore it in another socket.

No maintained Python library wraps TCP_REPAIR (CRIU's libsoccr is C, for CRIU), so this module
drives the socket options directly, in libsoccr's order (docs/prism.md "TCP_REPAIR"):

dump (the owner's socket, ESTABLISHED):
    TCP_REPAIR on; per queue (receive, send): TCP_REPAIR_QUEUE, TCP_QUEUE_SEQ (rcv_nxt /
    write_seq) and its bytes (recv MSG_PEEK in repair mode); SIOCOUTQNSD: how much of the send
    queue was never sent; TCP_INFO (options, window scales), TCP_MAXSEG, TCP_TIMESTAMP,
    TCP_REPAIR_WINDOW. Then `close_silently`: closed in repair mode, the kernel sends nothing
    (no FIN, no RST).
restore (a new socket, maybe on another host, bound to the new owner's address):
    TCP_REPAIR on; bind; the queue sequence numbers (first byte of each queue); connect (in
    repair mode: no SYN, the socket is ESTABLISHED at once); TCP_REPAIR_OPTIONS (MSS, window
    scales, SACK, timestamps); TCP_TIMESTAMP (the peer sees no timestamp going back: PAWS);
    the receive queue written in repair mode, then TCP_REPAIR_WINDOW (its rcv_wup must not
    be beyond rcv_nxt); the sent-but-unacknowledged part of the send
    queue written in repair mode; TCP_REPAIR off without a window probe (the restored socket sends
    nothing until it has something to send: docs/prism.md, invariant 1). The never-sent
    part of the send queue is the caller's to write normally once the peer's segments reach the
    new socket (`TcpState.unsent_bytes`).
Needs CAP_NET_ADMIN. IPv4 only.
"""

from __future__ import annotations

import fcntl
import socket
import struct
import threading
import time
from dataclasses import dataclass

TCP_REPAIR = 19
TCP_REPAIR_QUEUE = 20
TCP_QUEUE_SEQ = 21
TCP_REPAIR_OPTIONS = 22
TCP_TIMESTAMP = 24
TCP_REPAIR_WINDOW = 29
TCP_RECV_QUEUE = 1
TCP_SEND_QUEUE = 2
TCP_REPAIR_ON = 1
TCP_REPAIR_OFF = 0
TCP_REPAIR_OFF_NO_WP = -1  # off without the window probe: the restored socket sends nothing

TCPOPT_MAXSEG = 2
TCPOPT_WINDOW = 3
TCPOPT_SACK_PERM = 4
TCPOPT_TIMESTAMP = 8
TCPI_OPT_TIMESTAMPS = 1
TCPI_OPT_SACK = 2
TCPI_OPT_WSCALE = 4

SO_SNDBUFFORCE = 32
SIOCINQ = 0x541B
SIOCOUTQ = 0x5411
SIOCOUTQNSD = 0x894B
TCP_ESTABLISHED = 1

_WINDOW = struct.Struct("=5I")  # struct tcp_repair_window: snd_wl1 snd_wnd max_window rcv_wnd rcv_wup
_HEADER = struct.Struct("!4s4sH4sHIIIIBBBBIIIIIIII")
_MAGIC = b"TCPR"


class RepairError(OSError):
    """A socket that cannot be dumped (not ESTABLISHED) or a state that cannot be restored."""


@dataclass(frozen=True)
class TcpState:
    """Everything a restore needs: addresses, sequence numbers, options, windows and queues."""

    local: tuple[str, int]
    remote: tuple[str, int]
    send_seq: int          # write_seq: the sequence number after the send queue's last byte
    recv_seq: int          # rcv_nxt: the sequence number after the receive queue's last byte
    send_queue: bytes      # sent-but-unacknowledged bytes, then never-sent bytes
    unsent: int            # how many of send_queue's last bytes were never sent
    recv_queue: bytes      # received, not yet read by the application
    mss: int
    options: int           # TCPI_OPT_* bits
    snd_wscale: int
    rcv_wscale: int
    timestamp: int
    window: tuple[int, int, int, int, int]

    def encode(self) -> bytes:
        """A byte string `decode` turns back into this state (header, then the two queues)."""
        head = _HEADER.pack(
            _MAGIC, socket.inet_aton(self.local[0]), self.local[1],
            socket.inet_aton(self.remote[0]), self.remote[1],
            self.send_seq, self.recv_seq, self.unsent, self.mss,
            self.options, self.snd_wscale, self.rcv_wscale, 0, self.timestamp,
            *self.window, len(self.send_queue), len(self.recv_queue))
        return head + self.send_queue + self.recv_queue

    @classmethod
    def decode(cls, data: bytes) -> TcpState:
        fields = _HEADER.unpack_from(data)
        if fields[0] != _MAGIC:
            raise RepairError("not an encoded TcpState")
        (_, lip, lport, rip, rport, send_seq, recv_seq, unsent, mss, options, snd_ws, rcv_ws,
         _pad, ts, w0, w1, w2, w3, w4, send_len, recv_len) = fields
        off = _HEADER.size
        if len(data) != off + send_len + recv_len:
            raise RepairError(f"encoded TcpState of {len(data)} bytes, header says "
                              f"{off + send_len + recv_len}")
        return cls(
            local=(socket.inet_ntoa(lip), lport), remote=(socket.inet_ntoa(rip), rport),
            send_seq=send_seq, recv_seq=recv_seq,
            send_queue=data[off:off + send_len], unsent=unsent,
            recv_queue=data[off + send_len:], mss=mss, options=options,
            snd_wscale=snd_ws, rcv_wscale=rcv_ws, timestamp=ts, window=(w0, w1, w2, w3, w4))

    @property
    def unsent_bytes(self) -> bytes:
        """The send queue's never-sent tail: the new owner sends it normally after the unlock."""
        return self.send_queue[len(self.send_queue) - self.unsent:]

    def moved_to(self, local: tuple[str, int]) -> TcpState:
        """The same connection with another local address (the new owner's, behind the switch)."""
        return TcpState(local, self.remote, self.send_seq, self.recv_seq, self.send_queue,
                        self.unsent, self.recv_queue, self.mss, self.options, self.snd_wscale,
                        self.rcv_wscale, self.timestamp, self.window)


def wait_acknowledged(sock: socket.socket, timeout: float) -> None:
    """Until every byte sent is acknowledged (send queue empty); TimeoutError after `timeout`."""
    deadline = time.monotonic() + timeout
    delay = 0.0002
    while unacknowledged_bytes(sock) > 0:
        if time.monotonic() > deadline:
            raise TimeoutError("send queue not acknowledged")
        time.sleep(delay)  # no event tells an ACK's arrival: a short, growing poll
        delay = min(delay * 2, 0.005)


def _ioctl_int(sock: socket.socket, request: int) -> int:
    buf = fcntl.ioctl(sock.fileno(), request, b"\0" * 4)
    return int(struct.unpack("i", buf)[0])


def unacknowledged_bytes(sock: socket.socket) -> int:
    """Bytes in the socket's send queue (sent and not acknowledged, or not sent yet)."""
    return _ioctl_int(sock, SIOCOUTQ)


def _getint(sock: socket.socket, opt: int) -> int:
    return int(sock.getsockopt(socket.IPPROTO_TCP, opt))


def _peek_queue(sock: socket.socket, queue: int, length: int) -> tuple[int, bytes]:
    """(TCP_QUEUE_SEQ, the queue's bytes) of one queue; the socket is in repair mode."""
    sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR_QUEUE, queue)
    seq = _getint(sock, TCP_QUEUE_SEQ) & 0xFFFFFFFF
    data = b""
    if length:
        data = sock.recv(length, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        if len(data) != length:
            raise RepairError(f"queue {queue}: peeked {len(data)} of {length} bytes")
    return seq, data


def dump(sock: socket.socket) -> TcpState:
    """Put `sock` in repair mode and read its state; the socket stays in repair mode (frozen:
    it sends nothing, timers stopped) for `close_silently`."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    if info[0] != TCP_ESTABLISHED:
        raise RepairError(f"socket in TCP state {info[0]}, not ESTABLISHED")
    sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, TCP_REPAIR_ON)
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    options, wscales = info[5], info[6]
    in_len = _ioctl_int(sock, SIOCINQ)
    out_len = _ioctl_int(sock, SIOCOUTQ)
    unsent = _ioctl_int(sock, SIOCOUTQNSD)
    recv_seq, recv_queue = _peek_queue(sock, TCP_RECV_QUEUE, in_len)
    send_seq, send_queue = _peek_queue(sock, TCP_SEND_QUEUE, out_len)
    window = _WINDOW.unpack(sock.getsockopt(socket.IPPROTO_TCP, TCP_REPAIR_WINDOW, _WINDOW.size))
    local = sock.getsockname()
    remote = sock.getpeername()
    return TcpState(
        local=(local[0], local[1]), remote=(remote[0], remote[1]),
        send_seq=send_seq, recv_seq=recv_seq, send_queue=send_queue, unsent=unsent,
        recv_queue=recv_queue, mss=_getint(sock, socket.TCP_MAXSEG), options=options,
        snd_wscale=wscales & 0x0F, rcv_wscale=wscales >> 4,
        timestamp=_getint(sock, TCP_TIMESTAMP) & 0xFFFFFFFF,
        window=(window[0], window[1], window[2], window[3], window[4]))


def snapshot(sock: socket.socket) -> TcpState:
    """Dump a live socket and leave it running (CRIU's leave-running dump): repair mode on, the
    state read, repair mode off without a window probe. While it is in repair mode (tens of
    microseconds) the socket sends nothing; what arrives is processed as usual. Callers take it
    where the peer has nothing in flight (docs/prism.md, "Backend failure")."""
    try:
        return dump(sock)
    finally:
        sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, TCP_REPAIR_OFF_NO_WP)


def probe(sock: socket.socket) -> None:
    """Have the peer of a live socket announce its receive point at once: repair mode on, then
    off *with* the window probe (a segment just below the window, which the peer answers with
    an ACK). For a socket resumed with bytes queued as sent that the peer may already have:
    the ACK frees what it has and re-arms the retransmission timer with an RTT from it, instead
    of the first retransmission waiting a cold RTO and its ACK backing the timer off further."""
    sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, TCP_REPAIR_ON)
    sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, TCP_REPAIR_OFF)


def close_silently(sock: socket.socket) -> None:
    """Close a socket in repair mode: the kernel forgets the connection, the peer hears nothing."""
    sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, TCP_REPAIR_ON)
    sock.close()


PARK_S = 5.0
_Key = tuple[tuple[str, int], tuple[str, int]]
_parked: dict[_Key, tuple[socket.socket, float]] = {}
_parked_lock = threading.Lock()


def park(sock: socket.socket) -> None:
    """Keep a dumped socket frozen (in repair mode: it sends nothing) instead of closing it, for
    PARK_S seconds or until its connection is restored on this host again. A stray segment of
    the connection that reaches this host after the dump -- a retransmission that was past the
    switch when the lock was written, which loss and queueing make possible -- then meets this
    socket, which absorbs it. With no socket the host's kernel would answer it with an RST, and
    the switch's return entry (or the frontend's own address) takes that RST to the client,
    which accepts it: its sequence number is the stray's acknowledgement, the client's rcv_nxt."""
    key = _key(sock.getsockname(), sock.getpeername())
    now = time.monotonic()
    with _parked_lock:
        done = [k for k, (_, at) in _parked.items() if k == key or now - at > PARK_S]
        gone = [_parked.pop(k)[0] for k in done]
        _parked[key] = (sock, now)
    for s in gone:
        close_silently(s)


def unpark(local: tuple[str, int], remote: tuple[str, int]) -> None:
    """Close silently the parked socket of this connection, if any (it is being restored here)."""
    with _parked_lock:
        found = _parked.pop(_key(local, remote), None)
    if found is not None:
        close_silently(found[0])


def parked() -> int:
    with _parked_lock:
        return len(_parked)


def _key(local: tuple[str, int], remote: tuple[str, int]) -> _Key:
    return (str(local[0]), int(local[1])), (str(remote[0]), int(remote[1]))


def _u32(value: int) -> bytes:
    """A sequence number or timestamp as the kernel's u32 (Python's int option is a signed int)."""
    return struct.pack("=I", value & 0xFFFFFFFF)


def _write_queue(sock: socket.socket, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = sock.send(view[: 1 << 16])
        view = view[n:]


def restore(state: TcpState) -> socket.socket:
    """A new socket carrying the connection, bound to `state.local`, out of repair mode.

    The never-sent bytes (`state.unsent_bytes`) are NOT written: the caller sends them once the
    switch delivers the peer's segments here (a blocking send before that waits for ACKs that
    the lock drops)."""
    unpark(state.local, state.remote)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        # repair mode forces address reuse (SK_FORCE_REUSE: the bind may share a listener's
        # port); SO_REUSEADDR after it would undo that, so it is not set
        sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, TCP_REPAIR_ON)
        sock.bind(state.local)
        sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR_QUEUE, TCP_RECV_QUEUE)
        sock.setsockopt(socket.IPPROTO_TCP, TCP_QUEUE_SEQ, _u32(state.recv_seq - len(state.recv_queue)))
        sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR_QUEUE, TCP_SEND_QUEUE)
        sock.setsockopt(socket.IPPROTO_TCP, TCP_QUEUE_SEQ, _u32(state.send_seq - len(state.send_queue)))
        sock.connect(state.remote)
        opts = [(TCPOPT_MAXSEG, state.mss)]
        if state.options & TCPI_OPT_WSCALE:
            opts.append((TCPOPT_WINDOW, state.snd_wscale | (state.rcv_wscale << 16)))
        if state.options & TCPI_OPT_TIMESTAMPS:
            opts.append((TCPOPT_TIMESTAMP, 0))
        if state.options & TCPI_OPT_SACK:
            opts.append((TCPOPT_SACK_PERM, 0))
        sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR_OPTIONS,
                        b"".join(struct.pack("=II", code, val) for code, val in opts))
        if state.options & TCPI_OPT_TIMESTAMPS:
            sock.setsockopt(socket.IPPROTO_TCP, TCP_TIMESTAMP, _u32(state.timestamp))
        sent = len(state.send_queue) - state.unsent
        sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR_QUEUE, TCP_RECV_QUEUE)
        _write_queue(sock, state.recv_queue)
        # after the receive queue: the kernel refuses an rcv_wup beyond rcv_nxt
        sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR_WINDOW, _WINDOW.pack(*state.window))
        sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR_QUEUE, TCP_SEND_QUEUE)
        if sent > sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) // 2:
            # a repair-mode write waits for send buffer space no ACK can free: room for all
            # (the kernel doubles the value; SO_SNDBUFFORCE passes wmem_max, CAP_NET_ADMIN)
            sock.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, sent + (1 << 16))
        _write_queue(sock, state.send_queue[:sent])
        sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, TCP_REPAIR_OFF_NO_WP)
    except OSError:
        close_silently(sock)
        raise
    return sock
