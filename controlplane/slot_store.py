"""Persistence of the slot map in etcd, so a restarted controller resumes with the same ownership.

Layout under the configured prefix (default `/nfcluster`):

    {prefix}/slots/meta          JSON {"slot_count": S}
    {prefix}/slots/s/{slot:05d}  "group:epoch"   (one key per slot, so a move is one small write;
                                 the slot's replica group, not its primary: a fail-over hands a
                                 whole group to the backup, so it writes `groups`, not every slot)
    {prefix}/slots/pairs         JSON {"primary id": backup id or null}, written when a fail-over
                                 changes the pairs (absent: the configuration's pairs hold)
    {prefix}/slots/groups        JSON {"primary id": replica group id}, written when a fail-over
                                 hands a dead primary's group to its backup (absent: group = id)
    {prefix}/slots/moves/{slot:05d}  "from group:to group:epoch", the journal of a move under way
                                 (`MoveIntent`): written before the move's switch write, deleted
                                 once the move is complete or undone; a new leader finishes it
    {prefix}/slots/failovers/{dead:05d}  "promoted", the journal of a fail-over under way
                                 (`failover_journal`): written before its first step, deleted
                                 once `groups` and `pairs` hold it; a new leader finishes it

Every call that writes or reads slots takes the current `groups` (primary -> group; a primary
missing from it has its own id as its group), to write a slot's group and read back its primary.

A whole map is written in transactions of `TXN_OPS` puts (etcd's default limit is 128 per txn).
The store speaks to etcd through aetcd (asyncio).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TypeVar

import aetcd

from controlplane.slot_map import SlotEntry, SlotMap, next_epoch
from mgmt.etcd_endpoints import ATTEMPT_TIMEOUT, etcd_client, with_retries
from mgmt.tls import Identity

_T = TypeVar("_T")
TXN_OPS = 100


@dataclass(frozen=True)
class MoveIntent:
    """A move under way, as journalled before its switch write: `slot` from primary `src` to
    primary `dst`, whose `slot_owner` entry gets `epoch` (docs/protocols.md §5)."""

    slot: int
    src: int
    dst: int
    epoch: int
    src_group: int = -1  # A's replica group (its primary after a fail-over of A holds the state)

    def unwritten_in(self, entry: SlotEntry) -> bool:
        """`entry` (the slot's, in the map) is still the old owner's, the epoch before the
        move's: its switch write has not happened, or not reached etcd."""
        return entry.owner == self.src and next_epoch(entry.epoch) == self.epoch


class SlotStoreError(Exception):
    """Persisted data that cannot be used (wrong slot count, malformed value)."""


class SlotStore:
    """Reads and writes the slot map under `prefix` in etcd."""

    def __init__(self, endpoints: str | Sequence[str], prefix: str = "/nfcluster",
                 timeout: float = 5.0, tls: Identity | None = None,
                 client: aetcd.Client | None = None) -> None:
        """`tls`: the controller's identity to etcd (mutual TLS), None: plaintext. `client`: an
        etcd client to use instead of one to `endpoints` (the simulation's in-memory etcd)."""
        self.prefix = prefix.rstrip("/")
        self.timeout = timeout
        # every member, each call retried until `timeout`: rides over the loss of one, even the leader
        self._client = client or etcd_client(endpoints, min(timeout, ATTEMPT_TIMEOUT), tls)

    async def __aenter__(self) -> SlotStore:
        await self._client.connect()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def _retry(self, attempt: Callable[[], Awaitable[_T]]) -> _T:
        return await with_retries(attempt, self.timeout)

    async def close(self) -> None:
        await self._client.close()

    def _meta_key(self) -> bytes:
        return f"{self.prefix}/slots/meta".encode()

    def _slot_prefix(self) -> bytes:
        return f"{self.prefix}/slots/s/".encode()

    def _slot_key(self, slot: int) -> bytes:
        return f"{self.prefix}/slots/s/{slot:05d}".encode()

    async def save(self, slot_map: SlotMap, groups: Mapping[int, int] | None = None) -> None:
        """Write the whole map: every slot, then the meta key, so that a save interrupted half-way
        looks like no map at all (the next start builds a fresh one) rather than a broken one."""
        await self.save_entries(slot_map.entries(), groups)
        await self._retry(lambda: self._client.put(self._meta_key(), json.dumps({"slot_count": slot_map.slot_count}).encode()))

    async def save_entries(self, entries: Iterable[SlotEntry],
                           groups: Mapping[int, int] | None = None) -> None:
        """Write changed slots; each transaction holds at most TXN_OPS puts."""
        tx = self._client.transactions
        ops = [tx.put(self._slot_key(e.slot), _value(e, groups)) for e in entries]
        for start in range(0, len(ops), TXN_OPS):
            chunk = ops[start : start + TXN_OPS]
            await self._retry(lambda chunk=chunk: self._client.transaction(  # type: ignore[misc]
                compare=[], success=chunk, failure=[]))

    def _pairs_key(self) -> bytes:
        return f"{self.prefix}/slots/pairs".encode()

    async def save_pairs(self, pairs: Mapping[int, int | None]) -> None:
        await self._retry(lambda: self._client.put(self._pairs_key(), json.dumps({str(p): b for p, b in pairs.items()}).encode()))

    async def load_pairs(self) -> dict[int, int | None] | None:
        """The primary -> backup pairs a fail-over left, or None when none were stored."""
        kv = await self._retry(lambda: self._client.get(self._pairs_key()))
        if kv is None:
            return None
        try:
            raw = json.loads(kv.value)
            return {int(p): None if b is None else int(b) for p, b in raw.items()}
        except (ValueError, AttributeError, TypeError) as exc:
            raise SlotStoreError(f"{self._pairs_key().decode()}: malformed ({exc})") from None

    def _groups_key(self) -> bytes:
        return f"{self.prefix}/slots/groups".encode()

    async def save_groups(self, groups: Mapping[int, int]) -> None:
        await self._retry(lambda: self._client.put(self._groups_key(), json.dumps({str(p): g for p, g in groups.items()}).encode()))

    async def load_groups(self) -> dict[int, int] | None:
        """The primary -> replica group map a fail-over left, or None when none was stored."""
        kv = await self._retry(lambda: self._client.get(self._groups_key()))
        if kv is None:
            return None
        try:
            return {int(p): int(g) for p, g in json.loads(kv.value).items()}
        except (ValueError, AttributeError, TypeError) as exc:
            raise SlotStoreError(f"{self._groups_key().decode()}: malformed ({exc})") from None

    async def save_handover(self, groups: Mapping[int, int],
                            pairs: Mapping[int, int | None]) -> None:
        """A fail-over's `groups` and `pairs` in one transaction: both or neither."""
        tx = self._client.transactions
        ops = [tx.put(self._groups_key(), json.dumps({str(p): g for p, g in groups.items()}).encode()),
               tx.put(self._pairs_key(), json.dumps({str(p): b for p, b in pairs.items()}).encode())]
        await self._retry(lambda: self._client.transaction(compare=[], success=ops, failure=[]))

    def _failover_prefix(self) -> bytes:
        return f"{self.prefix}/slots/failovers/".encode()

    def _failover_key(self, dead: int) -> bytes:
        return f"{self.prefix}/slots/failovers/{dead:05d}".encode()

    async def save_failover(self, dead: int, promoted: int) -> None:
        """Journal the fail-over of primary `dead` to its backup `promoted` before its first
        step (docs/protocols.md §8, L3)."""
        await self._retry(lambda: self._client.put(self._failover_key(dead),
                                                   str(promoted).encode()))

    async def clear_failover(self, dead: int) -> None:
        """The fail-over of `dead` is persisted (`save_handover`)."""
        await self._retry(lambda: self._client.delete(self._failover_key(dead)))

    async def load_failovers(self) -> dict[int, int]:
        """The fail-overs journalled and not cleared: dead primary -> its promoted backup."""
        out: dict[int, int] = {}
        result = await self._retry(lambda: self._client.get_prefix(self._failover_prefix()))
        for kv in result:
            key = kv.key.decode(errors="replace")
            try:
                out[int(key.rsplit("/", 1)[1])] = int(kv.value.decode())
            except ValueError:
                raise SlotStoreError(f"{key}: malformed value {kv.value!r}") from None
        return out

    async def save_entry(self, entry: SlotEntry, groups: Mapping[int, int] | None = None) -> None:
        await self._retry(lambda: self._client.put(self._slot_key(entry.slot), _value(entry, groups)))

    async def load(self, slot_count: int, groups: Mapping[int, int] | None = None) -> SlotMap | None:
        """The persisted map, or None when nothing is stored; fails if it does not fit `slot_count`.
        Slots are stored by group: `groups` (primary -> group) gives each group's primary."""
        primary_of = {g: p for p, g in (groups or {}).items()}
        meta = await self._retry(lambda: self._client.get(self._meta_key()))
        if meta is None:
            return None
        try:
            stored = int(json.loads(meta.value)["slot_count"])
        except (ValueError, KeyError, TypeError) as exc:
            raise SlotStoreError(f"{self._meta_key().decode()}: malformed ({exc})") from None
        if stored != slot_count:
            raise SlotStoreError(
                f"{self._meta_key().decode()}: stored map has {stored} slots, the switch has {slot_count}"
            )
        owners = [-1] * slot_count
        epochs = [0] * slot_count
        result = await self._retry(lambda: self._client.get_prefix(self._slot_prefix()))
        for kv in result:
            key = kv.key.decode(errors="replace")
            try:
                slot = int(key.rsplit("/", 1)[1])
                owner_s, epoch_s = kv.value.decode().split(":")
                owner, epoch = int(owner_s), int(epoch_s)
            except ValueError:
                raise SlotStoreError(f"{key}: malformed value {kv.value!r}") from None
            if not 0 <= slot < slot_count:
                raise SlotStoreError(f"{key}: slot outside 0..{slot_count - 1}")
            owners[slot], epochs[slot] = primary_of.get(owner, owner), epoch
        missing = [s for s, o in enumerate(owners) if o < 0]
        if missing:
            raise SlotStoreError(f"{len(missing)} slots missing from etcd (first: {missing[0]})")
        return SlotMap(slot_count, owners, epochs)

    def _move_prefix(self) -> bytes:
        return f"{self.prefix}/slots/moves/".encode()

    def _move_key(self, slot: int) -> bytes:
        return f"{self.prefix}/slots/moves/{slot:05d}".encode()

    async def save_move(self, move: MoveIntent, groups: Mapping[int, int] | None = None) -> None:
        """Journal a move before its switch write (by replica group, as slots are stored)."""
        g = groups or {}
        src = move.src_group if move.src_group >= 0 else g.get(move.src, move.src)
        value = f"{src}:{g.get(move.dst, move.dst)}:{move.epoch}".encode()
        await self._retry(lambda: self._client.put(self._move_key(move.slot), value))

    async def clear_move(self, slot: int) -> None:
        """The move of `slot` is complete or undone."""
        await self._retry(lambda: self._client.delete(self._move_key(slot)))

    async def load_moves(self, groups: Mapping[int, int] | None = None) -> dict[int, MoveIntent]:
        """The moves journalled and not cleared, by slot (each group read back as its primary)."""
        primary_of = {g: p for p, g in (groups or {}).items()}
        out: dict[int, MoveIntent] = {}
        result = await self._retry(lambda: self._client.get_prefix(self._move_prefix()))
        for kv in result:
            key = kv.key.decode(errors="replace")
            try:
                slot = int(key.rsplit("/", 1)[1])
                src_s, dst_s, epoch_s = kv.value.decode().split(":")
                src, dst = int(src_s), int(dst_s)
                out[slot] = MoveIntent(slot, primary_of.get(src, src), primary_of.get(dst, dst),
                                       int(epoch_s), src)
            except ValueError:
                raise SlotStoreError(f"{key}: malformed value {kv.value!r}") from None
        return out

    async def clear(self) -> None:
        await self._retry(lambda: self._client.delete_prefix(f"{self.prefix}/slots/".encode()))


def _value(entry: SlotEntry, groups: Mapping[int, int] | None) -> bytes:
    group = (groups or {}).get(entry.owner, entry.owner)
    return f"{group}:{entry.epoch}".encode()


async def load_or_build(store: SlotStore, fresh: SlotMap,
                        groups: Mapping[int, int] | None = None) -> tuple[SlotMap, bool]:
    """The persisted map if there is one (resumed=True), else `fresh` saved to etcd.

    A resumed map whose owners are not all among the configured primaries is kept as it is:
    reconciling it with the configuration is the orchestrator's job (fail-over of the missing
    owners).
    """
    stored = await store.load(fresh.slot_count, groups)
    if stored is not None:
        return stored, True
    await store.save(fresh, groups)
    return fresh, False
