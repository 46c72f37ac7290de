"""The simulation's etcd: one in-memory key-value store with revisions and leases, and a client
per controller process with the interface of the `aetcd.Client` the controller uses (`get`,
`get_prefix`, `put`, `delete`, `delete_prefix`, `transaction`, `lease`, `transactions`).

It sits at the controller's etcd seam (`SlotStore(client=)`, `Leadership(client=)`,
`Controller(etcd_client=)`): the slot store, the move journal and the leader election run
unchanged over it. Each call takes a seeded round trip; the store applies it half-way, so a
caller that dies during a call may or may not have written (as with a real etcd). A call from a
process that is dead never takes effect. Leases expire `ttl` seconds after their last refresh,
with their keys, checked at every call (virtual time: deterministic).

Faults: `outage(seconds)` makes the store unavailable (no quorum, every member lost): calls wait
until it returns, so the callers' own deadlines (`with_retries`, `wait_for`) end them with a
`TimeoutError`, as aetcd's do. `step` is called before each write takes effect: the run's hook to
kill a controller at a chosen step (between a move's switch write and its etcd write).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import aetcd

from sim.network import SimNet


@dataclass
class KeyValue:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int = 0


@dataclass
class _Lease:
    id: int
    ttl: int
    deadline: float


class SimEtcd:
    """The store (see the module docstring)."""

    def __init__(self, net: SimNet, rng: random.Random,
                 step: Callable[[str, str], None] = lambda node, what: None) -> None:
        self.net, self.rng = net, rng
        self.step = step
        self.kv: dict[bytes, KeyValue] = {}
        self.revision = 1
        self.leases: dict[int, _Lease] = {}
        self._next_lease = 1
        self.down = False
        self._up = asyncio.Event()
        self._up.set()
        self.calls = 0

    def client(self, node: str) -> SimEtcdClient:
        return SimEtcdClient(self, node)

    # -- faults -------------------------------------------------------------------------------
    def outage(self, seconds: float) -> None:
        self.down = True
        self._up.clear()
        asyncio.get_running_loop().call_later(seconds, self.recover)

    def recover(self) -> None:
        self.down = False
        self._up.set()

    # -- the store ----------------------------------------------------------------------------
    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def expire(self) -> None:
        now = self._now()
        for lease in [x for x in self.leases.values() if x.deadline <= now]:
            self._drop_lease(lease.id)

    def _drop_lease(self, lease_id: int) -> None:
        self.leases.pop(lease_id, None)
        gone = [k for k, v in self.kv.items() if v.lease == lease_id]
        if gone:
            self.revision += 1
            for k in gone:
                del self.kv[k]

    def put(self, key: bytes, value: bytes, lease: int = 0) -> int:
        self.revision += 1
        old = self.kv.get(key)
        self.kv[key] = KeyValue(key, value, old.create_revision if old else self.revision,
                                self.revision, (old.version if old else 0) + 1, lease)
        return self.revision

    def delete_keys(self, keys: list[bytes]) -> None:
        if keys:
            self.revision += 1
            for k in keys:
                self.kv.pop(k, None)


class _Compare:
    def __init__(self, key: bytes) -> None:
        self.key = key

    def __eq__(self, other: object) -> Any:  # (aetcd's compare objects build a condition)
        return ("version", self.key, other)

    __hash__ = None  # type: ignore[assignment]


class _Transactions:
    """`client.transactions`: the operations a transaction is built of."""

    @staticmethod
    def version(key: bytes) -> _Compare:
        return _Compare(key)

    @staticmethod
    def put(key: bytes, value: bytes, lease: Any = None) -> tuple[str, bytes, bytes, int]:
        return ("put", key, value, 0 if lease is None else int(lease.id))


class SimLease:
    def __init__(self, client: SimEtcdClient, lease_id: int, ttl: int) -> None:
        self.id, self.ttl, self._client = lease_id, ttl, client

    async def refresh(self) -> Any:
        etcd = self._client.etcd

        def apply() -> Any:
            lease = etcd.leases.get(self.id)
            if lease is None:
                return SimpleNamespace(TTL=0)
            lease.deadline = etcd._now() + lease.ttl
            return SimpleNamespace(TTL=lease.ttl)

        return await self._client._rpc("refresh", apply)

    async def revoke(self) -> None:
        await self._client._rpc("revoke", lambda: self._client.etcd._drop_lease(self.id))


class SimEtcdClient:
    """One process's connection to `SimEtcd` (the calls of `aetcd.Client` the controller makes)."""

    transactions = _Transactions()

    def __init__(self, etcd: SimEtcd, node: str) -> None:
        self.etcd, self.node = etcd, node

    async def _rpc(self, what: str, apply: Callable[[], Any]) -> Any:
        etcd = self.etcd
        etcd.calls += 1
        await asyncio.sleep(etcd.rng.uniform(0.0001, 0.001))
        while etcd.down:
            await etcd._up.wait()
        node = etcd.net.nodes.get(self.node)
        if node is None or not node.alive:
            await asyncio.get_running_loop().create_future()  # a dead process writes nothing
            return None
        etcd.step(self.node, what)
        if not node.alive:  # (the step killed it: the call never reached etcd)
            await asyncio.get_running_loop().create_future()
        etcd.expire()
        result = apply()
        await asyncio.sleep(etcd.rng.uniform(0.0001, 0.001))
        return result

    async def connect(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def get(self, key: bytes) -> KeyValue | None:
        return await self._rpc("get", lambda: self.etcd.kv.get(key))  # type: ignore[no-any-return]

    async def get_prefix(self, prefix: bytes) -> list[KeyValue]:
        return await self._rpc("get", lambda: [  # type: ignore[no-any-return]
            v for k, v in sorted(self.etcd.kv.items()) if k.startswith(prefix)])

    async def put(self, key: bytes, value: bytes, lease: Any = None) -> None:
        what = "put " + key.decode(errors="replace")
        await self._rpc(what, lambda: self.etcd.put(key, value,
                                                    0 if lease is None else int(lease.id)))

    async def delete(self, key: bytes) -> None:
        await self._rpc("delete " + key.decode(errors="replace"),
                        lambda: self.etcd.delete_keys([key]))

    async def delete_prefix(self, prefix: bytes) -> None:
        await self._rpc("delete", lambda: self.etcd.delete_keys(
            [k for k in self.etcd.kv if k.startswith(prefix)]))

    async def lease(self, ttl: int) -> SimLease:
        def apply() -> SimLease:
            etcd = self.etcd
            lease_id = etcd._next_lease
            etcd._next_lease += 1
            etcd.leases[lease_id] = _Lease(lease_id, ttl, etcd._now() + ttl)
            return SimLease(self, lease_id, ttl)

        return await self._rpc("lease", apply)  # type: ignore[no-any-return]

    async def transaction(self, compare: list[Any], success: list[Any],
                          failure: list[Any]) -> tuple[bool, list[Any]]:
        def apply() -> tuple[bool, list[Any]]:
            etcd = self.etcd
            ok = True
            for _kind, key, want in compare:
                kv = etcd.kv.get(key)
                ok = ok and (kv.version if kv else 0) == want
            responses = []
            for op in success if ok else failure:
                _put, key, value, lease = op
                if lease and lease not in etcd.leases:
                    raise aetcd.PreconditionFailedError(
                        f"etcdserver: requested lease not found ({lease})")
                rev = etcd.put(key, value, lease)
                responses.append(SimpleNamespace(response_put=SimpleNamespace(
                    header=SimpleNamespace(revision=rev))))
            return ok, responses

        keys = ",".join(op[1].decode(errors="replace") for op in success)
        return await self._rpc("txn " + keys, apply)  # type: ignore[no-any-return]
