"""The worker's flow bounds: idle timeouts and the per-worker maximum, applied to the flows of the
slots it owns (the table itself is `nf_host.flow_table`). An eviction is a state change of the
open batch: the flow's deletion is sealed, replicated and committed with it, and a flow whose
output is still held is never chosen. A layer of the worker (`nf_host.worker`).
"""

from __future__ import annotations

import time

from contract.roles import SlotRole
from nf_host.nf_api import NetworkFunction
from nf_host.receiving import Receiving
from nf_host.state_store import FlowId
from nf_host.worker_types import SlotRuntime


def eviction_policy(nf: NetworkFunction) -> str:
    """The NF's eviction policy: its `eviction` param, else its class's."""
    return str(nf.params.get("eviction", nf.eviction))


class FlowBounds(Receiving):
    """Evictions (see the module docstring)."""

    def bound_flows(self, nf: NetworkFunction) -> None:
        """Take `nf`'s flow bounds (a live update's new NF)."""
        self.flow_table.max_flows = int(nf.limit("max_flows"))
        self.flow_table.policy = eviction_policy(nf)
        self.flow_table.__post_init__()

    def _flow_valid(self, slot: int, key: FlowId) -> bool:
        rt = self.slots.get(slot)
        return (rt is not None and rt.role == SlotRole.PRIMARY and key in rt.state.flows
                and rt.state.last_seq is not None)

    def _evict(self, slot: int, key: FlowId, reason: str, now: float) -> None:
        """Delete a flow's state: a change of the open batch like any other (replicated)."""
        st = self.slots[slot].state
        st.delete(key)
        batch = self.batch or self._open_batch(now)
        if slot not in batch.slot_seqs and st.last_seq is not None:
            batch.slot_seqs[slot] = st.last_seq
        self.flow_table.counted(reason)

    def _evict_for_room(self, now: float) -> None:
        victim = self.flow_table.victim(self.released_id, self._flow_valid)
        if victim is None:
            self.flow_table.over_bound += 1  # every flow's output is held: over for a while
            return
        self._evict(victim[0], victim[1], "max", now)

    def expire_flows(self, now: float, limit: int = 20000) -> int:
        """Evict the flows idle past their timeout (at most `limit` at a time); their deletions
        leave with the open batch (sealed now if it holds nothing else)."""
        n = 0
        for slot, key, reason in self.flow_table.expire(now, self.released_id, self._flow_valid,
                                                        limit):
            self._evict(slot, key, reason, now)
            n += 1
        table = self.flow_table
        while table.max_flows and len(table) > table.max_flows:  # over while output was held
            victim = table.victim(self.released_id, self._flow_valid)
            if victim is None:
                break
            self._evict(victim[0], victim[1], "max", now)
            n += 1
        if n and self.batch is not None and not self.batch.packets:
            self.close_batch()
        return n

    def track_slot(self, rt: SlotRuntime) -> None:
        """Enter a slot's flows in the table (owned again, or anew), used now."""
        now, batch, table = time.monotonic(), self.commit.last_id, self.flow_table
        name, timeout = "idle", self.nf.limit("idle_timeout")
        for key, fs in rt.state.flows.items():
            if key is not None:
                name, timeout = self.nf.flow_timeout(fs, None)
            table.touch(rt.slot, key, name, timeout, now, batch)
