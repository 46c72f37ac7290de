"""The worker's flow table: which owned flows exist, when each was last used, and which to evict.

Per-flow state lives in each slot's `SlotState`; this table keeps, over all slots a worker owns,
the order in which flows were last used, grouped by idle class. An NF puts a flow in a class
with `NetworkFunction.flow_timeout(state, key)`, which returns a (reason, seconds) pair: the
default is ("idle", the NF's `idle_timeout`), a TCP-aware NF returns ("closed", a short timeout)
once it saw a connection end, as conntrack does. Within a class flows are kept oldest use first
(a dict re-inserted on every packet), so the flows whose timeout has passed are always at the
front: `expire` stops at the first one still fresh.

A flow is never evicted while output of a batch that touched it is held (the backup has not
acknowledged it): `touch` records that batch, and a flow is eligible only once the worker's
released batch id has reached it. Its deletion then goes into the open batch like any state
change (`SlotState.delete`), is replicated to the backup and peers, and is committed with it.

The bound: at most `max_flows` flows per worker. A new flow over it evicts one eligible flow,
chosen by the NF's `eviction` policy: "lru" (oldest idle first, the default) or "expiry" (the
flow closest to its own timeout: closed connections first). When every flow is held (a burst of
new flows faster than the backup acknowledges) the table goes over the bound for as long as their
output is held: the excess is at most the held output, itself bounded by `max_held`.

Entries of slots the worker no longer owns as primary (released, demoted) are not removed at
once: the worker's `valid` check finds them stale when they reach the front, and they go then
without a deletion (the slot's state left with it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from nf_host.state_store import FlowId

TableKey = tuple[int, FlowId]
"""(slot, flow)"""

EVICTION_POLICIES = ("lru", "expiry")
REASONS = ("idle", "closed", "max", "nf")
"""Eviction reasons as counted: a timeout class named by the NF ("idle", "closed", or another
name it chooses), the bound ("max"), or the NF's own request (`Verdict.DROP_FORGET`: "nf")."""


@dataclass
class _Class:
    timeout: float
    # (slot, flow) -> (last use, the last batch that touched it), oldest use first
    order: dict[TableKey, tuple[float, int]] = field(default_factory=dict)


@dataclass
class FlowTable:
    max_flows: int = 0  # 0: no bound
    policy: str = "lru"
    classes: dict[str, _Class] = field(default_factory=dict)
    where: dict[TableKey, str] = field(default_factory=dict)  # flow -> its class's name
    evicted: dict[str, int] = field(default_factory=dict)  # by reason
    over_bound: int = 0  # new flows admitted over the bound (every flow's output was held)

    def __post_init__(self) -> None:
        if self.policy not in EVICTION_POLICIES:
            raise ValueError(f"unknown eviction policy {self.policy!r}; known: "
                             f"{', '.join(EVICTION_POLICIES)}")

    def __len__(self) -> int:
        return len(self.where)

    def touch(self, slot: int, key: FlowId, reason: str, timeout: float, now: float,
              batch: int) -> None:
        """Flow `key` of `slot` was used at `now` by batch `batch`, and is now in class `reason`."""
        k = (slot, key)
        old = self.where.get(k)
        if old is not None:
            del self.classes[old].order[k]
        if old != reason:
            self.where[k] = reason
        cls = self.classes.get(reason)
        if cls is None or cls.timeout != timeout:
            cls = self._class(reason, timeout)
        cls.order[k] = (now, batch)

    def _class(self, reason: str, timeout: float) -> _Class:
        cls = self.classes.get(reason)
        if cls is None:
            cls = self.classes[reason] = _Class(timeout)
        else:  # the NF changed a class's timeout (a live update): later flows use the new one
            cls.timeout = timeout
        return cls

    def forget(self, slot: int, key: FlowId) -> None:
        """Drop a flow from the table (its state is gone already)."""
        name = self.where.pop((slot, key), None)
        if name is not None:
            self.classes[name].order.pop((slot, key), None)

    def counted(self, reason: str, n: int = 1) -> None:
        self.evicted[reason] = self.evicted.get(reason, 0) + n

    def expire(self, now: float, released: int, valid: Callable[[int, FlowId], bool],
               limit: int) -> Iterator[tuple[int, FlowId, str]]:
        """The flows whose idle timeout has passed and whose output is not held, oldest first,
        at most `limit` (removed from the table as they are yielded; stale entries go silently)."""
        n = 0
        for name, cls in self.classes.items():
            order = cls.order
            while order and n < limit:
                k = next(iter(order))
                used, batch = order[k]
                if not valid(*k):
                    del order[k]
                    del self.where[k]
                    continue
                if used + cls.timeout > now or batch > released:
                    break
                del order[k]
                del self.where[k]
                n += 1
                yield k[0], k[1], name

    def victim(self, released: int, valid: Callable[[int, FlowId], bool]) -> TableKey | None:
        """The flow to evict for a new one (removed from the table), by the policy; None if
        every flow's output is held."""
        best: tuple[float, str, TableKey] | None = None
        for name, cls in self.classes.items():
            order = cls.order
            while order:
                k = next(iter(order))
                if valid(*k):
                    break
                del order[k]  # stale: goes without a deletion
                del self.where[k]
            else:
                continue
            used, batch = order[k]
            if batch > released:
                continue  # the oldest of its class is held, so are the others
            rank = used if self.policy == "lru" else used + cls.timeout
            if best is None or rank < best[0]:
                best = (rank, name, k)
        if best is None:
            return None
        _rank, name, k = best
        del self.classes[name].order[k]
        del self.where[k]
        return k
