"""Leadership of the controllers: one leader at a time, by an etcd lease.

Every `nfc-controller` that uses etcd campaigns for the key `{prefix}/leader`: it creates the key,
bound to a lease of `ttl_s`, in a transaction that succeeds only when the key does not exist.
The winner is the leader until its lease expires; the others (standbys) wait, serving their
read-only API, and campaign again as soon as the key is gone: deleted when the leader stops,
expired `ttl_s` after it died or was cut off from etcd.

The **term** of a leader is the etcd revision of its key's creation. Terms only grow, so a new
leader connects to the switch with election id `switch.election_id + term`, above every earlier
leader's: the switch makes it primary even if the old leader is still connected (alive but cut
off from etcd), and demotes the old one, which can no longer write. A leader that cannot renew
its lease before it expires has lost leadership: `hold()` raises `LeadershipLost` and the
controller stops at once (crash-only: it starts again as a standby).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

import aetcd

from mgmt.etcd_endpoints import ATTEMPT_TIMEOUT, etcd_client, with_retries
from mgmt.tls import Identity

LOG = logging.getLogger(__name__)


class LeadershipLost(Exception):
    """The lease could not be renewed before it expired: another controller may lead now."""


class Leadership:
    """One controller's campaign for, and tenure of, the leadership (module docstring)."""

    def __init__(self, endpoints: str | Sequence[str], prefix: str, name: str,
                 ttl_s: float = 5.0, poll_s: float = 0.1, tls: Identity | None = None,
                 client: aetcd.Client | None = None) -> None:
        """`tls`: the controller's identity to etcd (mutual TLS), None: plaintext. `client`: an
        etcd client to use instead of one to `endpoints` (the simulation's in-memory etcd)."""
        self.key = f"{prefix.rstrip('/')}/leader".encode()
        self.name = name
        self.ttl = max(1, round(ttl_s))  # etcd leases are whole seconds
        self.poll = poll_s
        self._client = client or etcd_client(endpoints, ATTEMPT_TIMEOUT, tls)
        self._lease: aetcd.Lease | None = None
        self.term: int | None = None  # the etcd revision at which this controller became leader
        self.leader: str | None = None  # who leads, as last seen

    async def campaign(self) -> int:
        """Wait until this controller is the leader; returns its term."""
        await self._client.connect()
        while True:
            try:
                term = await self._try_once()
            except (aetcd.ClientError, TimeoutError) as exc:  # no quorum: keep trying
                LOG.warning("leader election: etcd unavailable (%s); trying again", exc)
                term = None
            if term is not None:
                self.term, self.leader = term, self.name
                LOG.warning("leader (term %d, lease %d s)", term, self.ttl)
                return term
            await asyncio.sleep(self.poll)

    async def _try_once(self) -> int | None:
        current = await self._client.get(self.key)
        if current is not None:  # someone leads: no lease of ours meanwhile (it would expire)
            leader = bytes(current.value).decode(errors="replace")
            if leader != self.leader:
                LOG.info("standby: %s leads", leader)
            self.leader = leader
            return None
        lease = self._lease = await self._client.lease(self.ttl)
        tx = self._client.transactions
        won, responses = await self._client.transaction(
            compare=[tx.version(self.key) == 0],
            success=[tx.put(self.key, self.name.encode(), lease=lease)],
            failure=[],
        )
        if not won:  # another standby was faster
            await lease.revoke()
            self._lease = None
            return None
        # the put's revision is the key's create revision (the key did not exist)
        return int(responses[0].response_put.header.revision)

    async def hold(self) -> None:
        """Renew the lease every third of its life until cancelled; raise LeadershipLost when it
        could not be renewed in time (or was revoked: someone deleted the key)."""
        assert self._lease is not None, "campaign() first"
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(self.ttl / 3)
            try:
                reply = await with_retries(self._lease.refresh, max(0.1, self.ttl - (time.monotonic() - renewed)))
                ttl = getattr(reply, "TTL", 1)
                if ttl <= 0:
                    raise LeadershipLost(f"lease {self._lease.id} expired or was revoked")
                renewed = time.monotonic()
            except (aetcd.ClientError, TimeoutError) as exc:
                if time.monotonic() - renewed >= self.ttl:
                    raise LeadershipLost(f"lease not renewed for {self.ttl} s: {exc}") from exc

    async def resign(self) -> None:
        """Give the leadership up (the key goes with the lease), so a standby takes over now."""
        if self._lease is not None:
            try:
                await asyncio.wait_for(self._lease.revoke(), ATTEMPT_TIMEOUT)
            except (aetcd.ClientError, TimeoutError) as exc:
                LOG.warning("resign: lease not revoked (%s); it expires in %d s", exc, self.ttl)
            self._lease = None

    async def close(self) -> None:
        await self._client.close()
