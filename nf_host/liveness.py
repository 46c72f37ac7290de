"""Heartbeats over UDP: each worker's event loop echoes the controller's datagrams.

Heartbeats of a few milliseconds catch an NF that hangs (SIGSTOP) or is cut off, which closes
nothing (docs/protocols.md §7). Over the gRPC control API each heartbeat costs a unary call in
the controller, a thread of the NF's parent, and a round trip through the pipe to every worker:
at 5 ms to ten NFs that is about a core of a 2-core machine, whose load then makes live NFs miss
their heartbeats. A datagram answered by the worker's own event loop costs two `sendto`s and two
wake-ups, and still answers only when the worker runs: a stopped or wedged worker is silent.

Each worker binds UDP on its replication address (host, base port + worker index; the TCP and
UDP port spaces are separate). Request: `NFHB`, counter (u64). Reply: `NFHB`, counter (u64), NF
id (u16), worker index (u16), milliseconds since the worker started (u64; a lower value than
before means the NF restarted). Anything else is ignored (never answered, never fatal).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from typing import Any, cast

log = logging.getLogger(__name__)

MAGIC = b"NFHB"
REQUEST = struct.Struct("!4sQ")
REPLY = struct.Struct("!4sQHHQ")


def request(counter: int) -> bytes:
    return REQUEST.pack(MAGIC, counter & 0xFFFFFFFFFFFFFFFF)


def parse_request(data: bytes) -> int | None:
    """The counter of a heartbeat request, or None if `data` is not one."""
    if len(data) != REQUEST.size:
        return None
    magic, counter = REQUEST.unpack(data)
    return int(counter) if magic == MAGIC else None


def reply(counter: int, nf_id: int, index: int, uptime_ms: int) -> bytes:
    return REPLY.pack(MAGIC, counter, nf_id, index, uptime_ms)


def parse_reply(data: bytes) -> tuple[int, int, int, int] | None:
    """(counter, NF id, worker index, uptime ms) of a heartbeat reply, or None."""
    if len(data) != REPLY.size:
        return None
    magic, counter, nf_id, index, uptime = REPLY.unpack(data)
    return (int(counter), int(nf_id), int(index), int(uptime)) if magic == MAGIC else None


class HeartbeatEcho(asyncio.DatagramProtocol):
    """Answers heartbeat datagrams from the worker's event loop."""

    def __init__(self, nf_id: int, index: int, started: float) -> None:
        self.nf_id, self.index, self.started = nf_id, index, started
        self.transport: asyncio.DatagramTransport | None = None
        self.answered = 0
        self.ignored = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: Any) -> None:
        counter = parse_request(data)
        if counter is None or self.transport is None:
            self.ignored += 1
            return
        uptime = int((time.monotonic() - self.started) * 1000)
        self.transport.sendto(reply(counter, self.nf_id, self.index, uptime), addr)
        self.answered += 1

    def error_received(self, exc: Exception) -> None:  # e.g. ICMP from a controller gone
        log.debug("heartbeat echo: %s", exc)


async def serve(host: str, port: int, nf_id: int, index: int,
                started: float) -> tuple[asyncio.DatagramTransport, HeartbeatEcho]:
    """Bind the echo on UDP host:port; close the transport to stop it."""
    loop = asyncio.get_running_loop()
    transport, proto = await loop.create_datagram_endpoint(
        lambda: HeartbeatEcho(nf_id, index, started), local_addr=(host, port))
    return transport, proto
