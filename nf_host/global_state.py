"""Global NF state stores: `EtcdStore` (linearizable, etcd v3 through aetcd) and `MemoryStore` (tests).

Both implement `nf_api.GlobalStore` synchronously, because `NetworkFunction.process` is synchronous.
`EtcdStore` runs aetcd's asyncio client on a private event-loop thread and blocks on the futures it
submits there. Every operation is a single etcd request, so it is linearizable (etcd serves ranges
through the Raft leader unless asked for serializable reads, which we never do):

- `get`/`put`/`delete`: Range / Put / DeleteRange on `prefix + key`.
- `compare_and_swap(key, expected, value)`: one Txn; the compare is `version(key) == 0` when
  `expected` is None (the key must be absent) and `value(key) == expected` otherwise.
- `increment(key, delta)`: a CAS loop on the key's mod revision (read, then a Txn that writes
  `old + delta` only if nobody wrote the key in between; retry otherwise). Counters are stored as
  ASCII decimal, so `etcdctl get` shows them plainly.

`EtcdStore` connects lazily, on its first operation, and only in the process that makes it: a store
created before `fork()` but first used in the child works there. One already used before the fork
cannot be (gRPC's core threads do not survive a fork, and a new channel in the child hangs), so
the child gets a clear `GlobalStoreError` instead; runtimes must open stores in each worker or
before any use. The same holds for any gRPC channel the parent used before the fork, not only a
store's: a forked child of a process that ever used gRPC hangs on its first channel (the NF
runtime starts its workers by spawning, not forking).

`open_store("memory")` or `open_store("etcd://HOST:PORT[/prefix]")` picks a backend from a spec.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

import aetcd

from mgmt.etcd_endpoints import ATTEMPT_TIMEOUT, etcd_client, parse_endpoints, with_retries
from mgmt.tls import Identity
from nf_host.nf_api import GlobalStore, GlobalStoreError

__all__ = ["EtcdStore", "GlobalStoreError", "MemoryStore", "open_store"]

T = TypeVar("T")

DEFAULT_PREFIX = "/nfc/global/"
_MAX_CAS_RETRIES = 1000


def _parse_counter(key: str, raw: bytes | None) -> int:
    if raw is None:
        return 0
    try:
        return int(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise GlobalStoreError(f"key {key!r} holds {raw[:32]!r}, not a decimal counter") from None


class MemoryStore:
    """A process-local, thread-safe store with the same semantics as `EtcdStore` (unit tests only)."""

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        with self._lock:
            return self._data.get(key)

    def put(self, key: str, value: bytes) -> None:
        with self._lock:
            self._data[key] = bytes(value)

    def delete(self, key: str) -> bool:
        with self._lock:
            return self._data.pop(key, None) is not None

    def compare_and_swap(self, key: str, expected: bytes | None, value: bytes) -> bool:
        with self._lock:
            if self._data.get(key) != expected:
                return False
            self._data[key] = bytes(value)
            return True

    def increment(self, key: str, delta: int = 1) -> int:
        with self._lock:
            new = _parse_counter(key, self._data.get(key)) + delta
            self._data[key] = str(new).encode("ascii")
            return new

    def keys(self) -> list[str]:
        """Every key, sorted (for tests and debugging)."""
        with self._lock:
            return sorted(self._data)

    def close(self) -> None:
        """Nothing to release; present so both backends can be closed alike."""


class EtcdStore:
    """Global state in etcd under `prefix`, with blocking calls (see the module docstring)."""

    def __init__(self, endpoint: str, prefix: str = DEFAULT_PREFIX, timeout: float = 5.0,
                 tls: Identity | None = None) -> None:
        """`tls`: the NF's identity to etcd (mutual TLS), None: plaintext."""
        self.tls = tls
        parse_endpoints(endpoint)  # a ValueError naming the bad endpoint, now rather than later
        self.endpoint = endpoint
        self.prefix = prefix
        self.timeout = timeout
        self._lock = threading.Lock()
        self._pid = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: aetcd.Client | None = None

    # -- the private event loop ------------------------------------------------------------

    def _ensure_loop(self) -> tuple[asyncio.AbstractEventLoop, aetcd.Client]:
        with self._lock:
            if self._pid not in (-1, os.getpid()):
                raise GlobalStoreError(
                    f"this EtcdStore ({self.endpoint}) was used in process {self._pid} before a fork;"
                    " open a new store in the child"
                )
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="nfc-etcd-loop", daemon=True
                )
                thread.start()
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
            if self._client is None:

                async def make_client() -> aetcd.Client:
                    client = etcd_client(self.endpoint, min(self.timeout, ATTEMPT_TIMEOUT),
                                         self.tls)
                    await client.connect()
                    return client

                future = asyncio.run_coroutine_threadsafe(make_client(), self._loop)
                try:
                    self._client = future.result(self.timeout)
                except Exception as exc:  # the loop stays, a later call tries again
                    future.cancel()
                    raise GlobalStoreError(
                        f"cannot connect to etcd at {self.endpoint}: {exc!r}"
                    ) from exc
            return self._loop, self._client

    def _run(self, coro_fn: Any, *args: Any) -> Any:
        loop, client = self._ensure_loop()
        # each attempt is bounded, then tried again until the deadline (the loss of etcd's leader
        # loses the requests it was forwarded; a new one is elected within the deadline)
        coro: Coroutine[Any, Any, Any] = with_retries(lambda: coro_fn(client, *args), self.timeout)
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(self.timeout + 1.0)
        except (TimeoutError, aetcd.ConnectionTimeoutError, aetcd.ConnectionFailedError):
            future.cancel()
            raise GlobalStoreError(
                f"etcd at {self.endpoint} did not answer within {self.timeout} s "
                "(no quorum, or no member reachable)"
            ) from None
        except aetcd.ClientError as exc:
            raise GlobalStoreError(f"etcd at {self.endpoint}: {exc!r}") from exc

    def _k(self, key: str) -> bytes:
        return (self.prefix + key).encode()

    # -- GlobalStore -----------------------------------------------------------------------

    def get(self, key: str) -> bytes | None:
        async def op(client: aetcd.Client, k: bytes) -> bytes | None:
            result = await client.get(k)
            return None if result is None else bytes(result.value)

        value: bytes | None = self._run(op, self._k(key))
        return value

    def put(self, key: str, value: bytes) -> None:
        async def op(client: aetcd.Client, k: bytes, v: bytes) -> None:
            await client.put(k, v)

        self._run(op, self._k(key), bytes(value))

    def delete(self, key: str) -> bool:
        async def op(client: aetcd.Client, k: bytes) -> bool:
            return await client.delete(k) is not None

        deleted: bool = self._run(op, self._k(key))
        return deleted

    def compare_and_swap(self, key: str, expected: bytes | None, value: bytes) -> bool:
        """Also True when a retried attempt finds `value` already there: the first attempt
        took effect and its answer was lost (so values must say who wrote them, as the NAT's
        claims do, for a True to mean "mine")."""
        attempts = 0

        async def op(client: aetcd.Client, k: bytes, exp: bytes | None, v: bytes) -> bool:
            nonlocal attempts
            attempts += 1
            tx = client.transactions
            compare = tx.version(k) == 0 if exp is None else tx.value(k) == exp
            succeeded, _ = await client.transaction(
                compare=[compare], success=[tx.put(k, v)], failure=[]
            )
            if not succeeded and attempts > 1:
                current = await client.get(k)
                return current is not None and bytes(current.value) == v
            return bool(succeeded)

        swapped: bool = self._run(op, self._k(key), expected, bytes(value))
        return swapped

    def increment(self, key: str, delta: int = 1) -> int:
        async def op(client: aetcd.Client, k: bytes, d: int) -> int:
            tx = client.transactions
            for _ in range(_MAX_CAS_RETRIES):
                current = await client.get(k)
                if current is None:
                    new = d
                    compare = tx.version(k) == 0
                else:
                    new = _parse_counter(key, bytes(current.value)) + d
                    compare = tx.mod(k) == current.mod_revision
                succeeded, _ = await client.transaction(
                    compare=[compare], success=[tx.put(k, str(new).encode("ascii"))], failure=[]
                )
                if succeeded:
                    return new
            raise GlobalStoreError(f"increment of {key!r} lost {_MAX_CAS_RETRIES} races in a row")

        value: int = self._run(op, self._k(key), delta)
        return value

    def close(self) -> None:
        """Close the etcd connection and stop the loop thread (safe to call twice)."""
        with self._lock:
            loop, client, thread = self._loop, self._client, self._thread
            self._loop = self._client = self._thread = None
            if loop is None or self._pid != os.getpid():
                return
            if client is not None:
                # closing a broken connection must not hide the error that broke it
                with contextlib.suppress(Exception):
                    asyncio.run_coroutine_threadsafe(client.close(), loop).result(self.timeout)
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join(self.timeout)
            loop.close()

    def __enter__(self) -> EtcdStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(spec: str, tls: Identity | None = None) -> GlobalStore:
    """A store from a spec: "memory", or "etcd://HOST:PORT[,HOST:PORT...]" (the members of an
    etcd cluster) with an optional "/prefix" path; etcd over mutual TLS as `tls` if given."""
    if spec == "memory":
        return MemoryStore()
    scheme = "etcd://"
    if not spec.startswith(scheme):
        raise ValueError(
            f"global store spec {spec!r} is neither 'memory' nor 'etcd://HOST:PORT[,...][/prefix]'"
        )
    rest = spec[len(scheme) :]
    endpoint, slash, path = rest.partition("/")
    prefix = "/" + path if slash else DEFAULT_PREFIX
    if slash and not prefix.endswith("/"):
        prefix += "/"
    return EtcdStore(endpoint, prefix, tls=tls)
