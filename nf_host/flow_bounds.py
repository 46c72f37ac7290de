"""The worker's flow bounds: idle timeouts and the per-worker maximum, applied to the flows of the
slots it owns (the table itself is `nf_host.flow_table`). An eviction is a state change of the
open batch: the flow's deletion is sealed, replicated and committed with it, and a flow whose
output is still held is never chosen. A part of the worker (`nf_host.worker`), given the table and
a narrow view of the worker's slots and open batch (`BatchOwner`) when the worker is built.
"""

from __future__ import annotations

import time
from typing import Protocol

from contract.roles import SlotRole
from nf_host.commit import Batch, OutputCommit
from nf_host.flow_table import FlowTable
from nf_host.nf_api import NetworkFunction
from nf_host.state_store import FlowId
from nf_host.worker_types import SlotRuntime


def eviction_policy(nf: NetworkFunction) -> str:
    """The NF's eviction policy: its `eviction` param, else its class's."""
    return str(nf.params.get("eviction", nf.eviction))


class BatchOwner(Protocol):
    """What `FlowBounds` sees of the worker: the owned slots, the NF (replaced by an update), the
    last released batch, and the open batch an eviction joins."""

    @property
    def slots(self) -> dict[int, SlotRuntime]: ...
    @property
    def nf(self) -> NetworkFunction: ...
    @property
    def released_id(self) -> int: ...
    @property
    def commit(self) -> OutputCommit: ...
    @property
    def batch(self) -> Batch | None: ...
    def open_batch(self, now: float) -> Batch: ...
    def close_batch(self) -> None: ...


class FlowBounds:
    """Evictions (see the module docstring)."""

    def __init__(self, table: FlowTable, owner: BatchOwner) -> None:
        self.table = table
        self._owner = owner

    def bound(self, nf: NetworkFunction) -> None:
        """Take `nf`'s flow bounds (a live update's new NF)."""
        self.table.max_flows = int(nf.limit("max_flows"))
        self.table.policy = eviction_policy(nf)
        self.table.__post_init__()

    def _flow_valid(self, slot: int, key: FlowId) -> bool:
        rt = self._owner.slots.get(slot)
        return (rt is not None and rt.role == SlotRole.PRIMARY and key in rt.state.flows
                and rt.state.last_seq is not None)

    def _evict(self, slot: int, key: FlowId, reason: str, now: float) -> None:
        """Delete a flow's state: a change of the open batch like any other (replicated)."""
        st = self._owner.slots[slot].state
        st.delete(key)
        batch = self._owner.batch or self._owner.open_batch(now)
        if slot not in batch.slot_seqs and st.last_seq is not None:
            batch.slot_seqs[slot] = st.last_seq
        self.table.counted(reason)

    def evict_for_room(self, now: float) -> None:
        """A new flow took the worker over its bound: the least recently used flow whose output
        has left goes (none: counted over the bound for a while)."""
        victim = self.table.victim(self._owner.released_id, self._flow_valid)
        if victim is None:
            self.table.over_bound += 1  # every flow's output is held: over for a while
            return
        self._evict(victim[0], victim[1], "max", now)

    def expire(self, now: float, limit: int = 20000) -> int:
        """Evict the flows idle past their timeout (at most `limit` at a time); their deletions
        leave with the open batch (sealed now if it holds nothing else)."""
        n = 0
        released = self._owner.released_id
        for slot, key, reason in self.table.expire(now, released, self._flow_valid, limit):
            self._evict(slot, key, reason, now)
            n += 1
        table = self.table
        while table.max_flows and len(table) > table.max_flows:  # over while output was held
            victim = table.victim(self._owner.released_id, self._flow_valid)
            if victim is None:
                break
            self._evict(victim[0], victim[1], "max", now)
            n += 1
        batch = self._owner.batch
        if n and batch is not None and not batch.packets:
            self._owner.close_batch()
        return n

    def track(self, rt: SlotRuntime) -> None:
        """Enter a slot's flows in the table (owned again, or anew), used now."""
        now, batch, table = time.monotonic(), self._owner.commit.last_id, self.table
        nf = self._owner.nf
        name, timeout = "idle", nf.limit("idle_timeout")
        for key, fs in rt.state.flows.items():
            if key is not None:
                name, timeout = nf.flow_timeout(fs, None)
            table.touch(rt.slot, key, name, timeout, now, batch)
