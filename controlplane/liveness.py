"""The controller's side of UDP heartbeats (`heartbeat.transport: udp`, nf_host/liveness.py).

One UDP socket for every NF: `ping` sends a numbered datagram to each worker of an NF (at its
replication host, base port + worker index) and returns the NF's uptime once every worker has
answered, or None when the deadline passes first. A datagram costs microseconds where a gRPC
heartbeat costs a unary call and the NF's pipe to its workers, so heartbeats can run every few
milliseconds without loading the machine they watch. Replies that come late, twice, or from an
unexpected sender are ignored.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from dataclasses import dataclass, field
from typing import Any, cast

from nf_host import liveness

LOG = logging.getLogger(__name__)


@dataclass
class _Pending:
    workers: set[int]
    future: asyncio.Future[int]
    uptime: int | None = None
    answered: set[int] = field(default_factory=set)


class UdpHeartbeats(asyncio.DatagramProtocol):
    """See the module docstring. `start()` before the first `ping`, `close()` at the end."""

    def __init__(self) -> None:
        self.transport: asyncio.DatagramTransport | None = None
        self._pending: dict[tuple[int, int], _Pending] = {}  # (nf id, counter)
        self._resolved: dict[str, str] = {}  # host -> IP address
        self.stray = 0  # replies nobody waited for (late, duplicated, unknown)

    async def start(self) -> None:
        if self.transport is None:
            loop = asyncio.get_running_loop()
            await loop.create_datagram_endpoint(lambda: self, local_addr=("0.0.0.0", 0),
                                                family=socket.AF_INET)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
            self.transport = None

    def _ip(self, host: str) -> str:
        ip = self._resolved.get(host)
        if ip is None:
            ip = self._resolved[host] = socket.gethostbyname(host)
        return ip

    async def ping(self, nf_id: int, host: str, port: int, workers: int, counter: int,
                   timeout: float, sends: int = 1) -> int | None:
        """Heartbeat `workers` workers of NF `nf_id` (worker i at host:port+i); its uptime in ms
        (the lowest a worker reported) if all answered within `timeout` s, else None. With
        `sends` > 1 the datagrams are sent again at even intervals of the deadline (a probe: a
        datagram lost on a loaded machine must not make a live NF look dead)."""
        await self.start()
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        key = (nf_id, counter)
        pending = _Pending(set(range(workers)), loop.create_future())
        self._pending[key] = pending
        try:
            ip = self._ip(host)
            data = liveness.request(counter)
            deadline = loop.time() + timeout
            for n in range(max(1, sends)):
                for w in range(workers):
                    if w not in pending.answered and self.transport is not None:
                        self.transport.sendto(data, (ip, port + w))
                until = deadline if n == sends - 1 else loop.time() + timeout / max(1, sends)
                done, _ = await asyncio.wait([pending.future], timeout=max(0.0, until - loop.time()))
                if done:
                    return pending.future.result()
            return None
        except (TimeoutError, OSError):
            return None
        finally:
            self._pending.pop(key, None)

    def datagram_received(self, data: bytes, addr: Any) -> None:
        parsed = liveness.parse_reply(data)
        if parsed is None:
            self.stray += 1
            return
        counter, nf_id, index, uptime = parsed
        pending = self._pending.get((nf_id, counter))
        if pending is None or index not in pending.workers or index in pending.answered:
            self.stray += 1
            return
        pending.answered.add(index)
        pending.uptime = uptime if pending.uptime is None else min(pending.uptime, uptime)
        if pending.answered == pending.workers and not pending.future.done():
            pending.future.set_result(pending.uptime)

    def error_received(self, exc: Exception) -> None:  # ICMP port unreachable: an NF gone
        LOG.debug("heartbeat socket: %s", exc)
