"""One etcd client over every member of an etcd cluster.

aetcd speaks to a single gRPC target. gRPC's `ipv4:` resolver takes a list of addresses
(`ipv4:10.0.0.1:2379,10.0.0.2:2379`) and its default `pick_first` policy moves to the next
address when the one in use fails, so one client rides over the loss of a member; a retry
policy (UNAVAILABLE only, a few attempts within 1 s) replays the calls that were in flight on
the lost connection. A write that a follower forwarded to a leader that then died is lost
inside etcd and would only fail at etcd's request timeout (7 s): `with_retries` gives each
attempt `ATTEMPT_TIMEOUT` and tries again until the caller's deadline, by which time a new
leader is elected (about 1 s). So a member's death, even the leader's, is invisible to the
caller; the operations retried must be idempotent (see `EtcdStore.compare_and_swap`). Without
a quorum a call fails at the caller's deadline, with an error that says so (the caller counts it).

Used by the NF runtime's global state store (`nf_host.global_state.EtcdStore`) and the
controller's slot store (`controlplane.slot_store.SlotStore`) and leadership.

Mutual TLS (docs/security.md): given a component's `Identity` (mgmt/tls.py), the client
presents its certificate and checks etcd's against the CA and the name "etcd" (`ETCD_NAME`, the
certificate `make pki` issues), whatever address it dials, like the NFs' control API. aetcd 1.0.0
dials plaintext only, so `_TlsClient` opens its channel with TLS credentials instead.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import aetcd
import grpc
from aetcd import rpc, watcher

from mgmt.tls import Identity

_T = TypeVar("_T")

# one attempt of an etcd call: a request lost with a dead leader is abandoned after this and tried
# again (until the caller's deadline) rather than failing at etcd's request timeout (7 s)
ATTEMPT_TIMEOUT = 0.5

# gRPC service config: retry calls that failed because their connection did (UNAVAILABLE)
RETRY_SERVICE_CONFIG = json.dumps({"methodConfig": [{
    "name": [{}],
    "retryPolicy": {
        "maxAttempts": 5, "initialBackoff": "0.05s", "maxBackoff": "0.5s",
        "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"],
    },
}]})


def parse_endpoints(spec: str | Sequence[str]) -> list[tuple[str, int]]:
    """HOST:PORT endpoints, from a list or a comma-separated string; ValueError naming the bad
    one. Several endpoints must be IPv4 addresses (what gRPC's address-list resolver takes)."""
    items = [e.strip() for e in (spec.split(",") if isinstance(spec, str) else spec)]
    if not items or not all(items):
        raise ValueError(f"etcd endpoints {spec!r}: expected HOST:PORT[,HOST:PORT...]")
    out = []
    for item in items:
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"etcd endpoint {item!r} is not HOST:PORT")
        if len(items) > 1:
            try:
                ipaddress.IPv4Address(host)
            except ValueError:
                raise ValueError(f"etcd endpoint {item!r}: with several endpoints each must be an "
                                 "IPv4 address (gRPC's address list), not a host name") from None
        out.append((host, int(port)))
    return out


ETCD_NAME = "etcd"  # the name in etcd's server certificate that clients check


class _TlsClient(aetcd.Client):  # type: ignore[misc]
    """aetcd's client over a channel with mutual TLS (aetcd 1.0.0 dials plaintext only): its
    `connect` without user/password authentication, on `grpc.aio.secure_channel`."""

    def __init__(self, credentials: grpc.ChannelCredentials, **kw: object) -> None:
        super().__init__(**kw)
        self._credentials = credentials

    async def connect(self) -> None:
        if self._connected.is_set():
            return
        if self._is_connecting:  # type: ignore[has-type]  # (another is connecting: wait)
            await asyncio.wait_for(self._connected.wait(), self._connect_wait_timeout)
            return
        try:
            self._is_connecting = True
            self.channel = grpc.aio.secure_channel(f"{self._host}:{self._port}", self._credentials,
                                                   options=list(self._options.items()))
            self.kvstub = rpc.KVStub(self.channel)
            self.clusterstub = rpc.ClusterStub(self.channel)
            self.leasestub = rpc.LeaseStub(self.channel)
            self.maintenancestub = rpc.MaintenanceStub(self.channel)
            self._watcher = watcher.Watcher(rpc.WatchStub(self.channel), timeout=self._timeout,
                                            metadata=self.metadata)
            self._connected.set()
        finally:
            self._is_connecting = False


def etcd_client(spec: str | Sequence[str], timeout: float,
                tls: Identity | None = None) -> aetcd.Client:
    """An aetcd client (not yet connected) over every endpoint of `spec`; each call has at most
    `timeout` (pass ATTEMPT_TIMEOUT when the calls go through `with_retries`). With `tls`, mutual
    TLS as that identity, etcd's certificate checked against the name "etcd"; plaintext without
    (debugging only: the components pass their identity unless run with `tls: false`)."""
    endpoints = parse_endpoints(spec)
    *first, (last_host, last_port) = endpoints
    # aetcd dials f"{host}:{port}": the address list goes in "host", its last port in "port"
    host = last_host if not first else "ipv4:" + ",".join(
        f"{h}:{p}" for h, p in first) + f",{last_host}"
    options: dict[str, object] = {"grpc.service_config": RETRY_SERVICE_CONFIG,
                                  "grpc.enable_retries": 1}
    if tls is None:
        return aetcd.Client(host=host, port=last_port, timeout=timeout, options=options)
    options["grpc.ssl_target_name_override"] = ETCD_NAME
    return _TlsClient(tls.grpc_channel(), host=host, port=last_port, timeout=timeout,
                      options=options)


async def with_retries(attempt: Callable[[], Awaitable[_T]], timeout: float) -> _T:
    """`attempt()` again after each timeout or lost connection, until `timeout` seconds have
    passed (then the last error is raised). `attempt` must be idempotent."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        try:
            return await asyncio.wait_for(attempt(), max(0.05, min(ATTEMPT_TIMEOUT, remaining)))
        except (TimeoutError, aetcd.ConnectionTimeoutError, aetcd.ConnectionFailedError):
            if time.monotonic() >= deadline:
                raise
            await asyncio.sleep(0.05)
