"""The controller's side of UDP heartbeats (`heartbeat.transport: udp`, nf_host/liveness.py).

One UDP socket for every NF: `ping` sends a numbered datagram to each worker of an NF (at its
replication host, base port + worker index) and returns the NF's uptime once every worker has
answered, or None when the deadline passes first. A datagram costs microseconds where a gRPC
heartbeat costs a unary call and the NF's pipe to its workers, so heartbeats can run every few
milliseconds without loading the machine they watch. Replies that come late or twice are
ignored (`stray`).

Heartbeats are authenticated (docs/security.md) unless the controller runs with `tls: false`:
each request and reply carries an HMAC-SHA256 tag with the NF's key (derived from the heartbeat
secret, mgmt/pki.py) and this socket's random session number, and a reply counts only if its
tag is right, its session is this one and it comes from the address the request went to (the
worker's replication host and port). Anything else is `rejected`, counted and logged at most once
a second: a forged reply never keeps a dead NF alive, a recorded one never answers a later
request (new counter) or another controller's (new session).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from contract import heartbeat

LOG = logging.getLogger(__name__)


def local_address_towards(host: str) -> str:
    """The local IPv4 address the kernel would send from to reach `host` (a UDP socket's
    `connect` picks the route and sends nothing)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((socket.gethostbyname(host), 9))
            return str(s.getsockname()[0])
    except OSError as exc:  # (no route or name now: loopback, never every address)
        LOG.warning("heartbeats: no local address routes to %s (%s); bound to loopback "
                    "(set heartbeat.bind)", host, exc)
        return "127.0.0.1"


@dataclass
class _Pending:
    workers: set[int]
    future: asyncio.Future[int]
    source: tuple[str, int]  # worker 0's address: worker i answers from port + i
    uptime: int | None = None
    answered: set[int] = field(default_factory=set)


class UdpHeartbeats(asyncio.DatagramProtocol):
    """See the module docstring. `start()` before the first `ping`, `close()` at the end."""

    def __init__(self, keys: Callable[[int], bytes | None] | None = None,
                 bind: str | None = None, towards: str = "127.0.0.1") -> None:
        """`keys`: each NF's heartbeat key (None for an NF unknown); None: unauthenticated
        heartbeats (`tls: false`). `bind`: the controller's management address; by default the
        local address that routes to `towards` (an NF's replication host): the socket never
        listens on every address."""
        self.transport: asyncio.DatagramTransport | None = None
        self.keys, self.bind, self.towards = keys, bind, towards
        self.session = secrets.randbits(64) if keys is not None else 0
        self._pending: dict[tuple[int, int], _Pending] = {}  # (nf id, counter)
        self._resolved: dict[str, str] = {}  # host -> IP address
        self.stray = 0  # replies nobody waited for (late, duplicated, unknown)
        # replies refused: a wrong tag, session or sender address, or an NF unknown
        self.rejected = 0
        self.rejected_by_nf: dict[int, int] = {}
        self._logged = 0.0

    async def start(self) -> None:
        if self.transport is None:
            if self.bind is None:
                self.bind = local_address_towards(self.towards)
            loop = asyncio.get_running_loop()
            await loop.create_datagram_endpoint(lambda: self, local_addr=(self.bind, 0),
                                                family=socket.AF_INET)

    @property
    def address(self) -> tuple[str, int] | None:
        """Where the socket is bound (None before `start`)."""
        if self.transport is None:
            return None
        host, port = self.transport.get_extra_info("sockname")[:2]
        return str(host), int(port)

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
        try:
            ip = self._ip(host)
        except OSError:
            return None
        pending = _Pending(set(range(workers)), loop.create_future(), (ip, port))
        self._pending[key] = pending
        try:
            mac_key = self.keys(nf_id) if self.keys is not None else None
            data = heartbeat.request(counter, mac_key, self.session)
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

    def _reject(self, nf_id: int, why: str, addr: Any) -> None:
        self.rejected += 1
        self.rejected_by_nf[nf_id] = self.rejected_by_nf.get(nf_id, 0) + 1
        now = time.monotonic()
        if now - self._logged >= 1.0:
            self._logged = now
            LOG.warning("heartbeat reply for NF %d from %s rejected: %s (%d rejected so far)",
                        nf_id, addr, why, self.rejected)

    def datagram_received(self, data: bytes, addr: Any) -> None:
        parsed = heartbeat.reply_fields(data)
        if parsed is None:
            self._reject(0, "not a heartbeat reply", addr)
            return
        (session, counter, nf_id, index, uptime), body, tag = parsed
        if self.keys is not None:
            key = self.keys(nf_id)
            if key is None:
                self._reject(nf_id, "no such NF", addr)
                return
            if not heartbeat.authentic(key, body, tag):
                self._reject(nf_id, "wrong MAC", addr)
                return
        if session != self.session:
            self._reject(nf_id, "another session's reply", addr)
            return
        pending = self._pending.get((nf_id, counter))
        if pending is None or index not in pending.workers or index in pending.answered:
            self.stray += 1
            return
        ip, port = pending.source
        if (str(addr[0]), int(addr[1])) != (ip, port + index):
            self._reject(nf_id, f"not from its worker's address {ip}:{port + index}", addr)
            return
        pending.answered.add(index)
        pending.uptime = uptime if pending.uptime is None else min(pending.uptime, uptime)
        if pending.answered == pending.workers and not pending.future.done():
            pending.future.set_result(pending.uptime)

    def error_received(self, exc: Exception) -> None:  # ICMP port unreachable: an NF gone
        LOG.debug("heartbeat socket: %s", exc)
