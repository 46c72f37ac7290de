"""The controller: wires configuration, slot map (etcd), switch session, NF registry and metrics.

`Controller` owns the live state (current primary/backup pairs, the slot map, learned flows, the
last switch counters) and the building blocks: `move_slot()` (one `slot_owner` write + one etcd
write, epoch + 1), `move_slots()` (the same in batches) and `set_pair()` (a primary's multicast
group). On them it runs the protocols of docs/protocols.md: `migrate()` (controlplane/migration.py,
also reachable as `POST /slots/{slot}/move?to=NF`) and fail-over of a primary declared down by the
`NfRegistry` heartbeats (controlplane/failover.py). Moves and fail-overs are serialised by one lock
and recorded (`moves`, `failovers`) for the API. The load balancer (controlplane/balancer_loop.py)
runs as one more task when `load_balancer.enabled`.
It also answers the northbound views (`status()`, `nf_rows()`, `slot_rows()`, `flow_rows()`).

The class is built in layers: `controller_core.ControllerCore` (state and building blocks),
`nf_lifecycle.NfLifecycle` (NF failures and returns), and here `Controller` (the run loop, the
spare pool and the balancer, the views and the operator's commands).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from controlplane.balancer_loop import BalancerLoop
from controlplane.config import ControllerConfig
from controlplane.live_update import update_nf
from controlplane.nf_lifecycle import NfLifecycle
from controlplane.spare_pool import SparePool
from controlplane.takeover_plan import takeover_loop

LOG = logging.getLogger(__name__)


class Controller(NfLifecycle):
    """One controller instance (primary or standby for the switch)."""

    def __init__(self, cfg: ControllerConfig, **kw: Any) -> None:
        super().__init__(cfg, **kw)
        self.pool = SparePool(self)  # scale-out and drain (the balancer's executor, the API's)
        # runs when load_balancer.enabled; its decisions go into the timeline as they are taken
        self.balancer = BalancerLoop(self, executor=self.pool, on_decision=self.timeline.decision)
        self.registry.add_listener(self.timeline.nf_event)  # NFs down, up, restarted

    async def run(self) -> None:
        """Run until cancelled: switch session, NF configuration, heartbeats, load, counters."""
        await self.load_slot_map()
        tasks = [
            asyncio.create_task(self.session.run(), name="switch"),
            asyncio.create_task(self.configure_nfs(), name="configure"),
            asyncio.create_task(self.registry.detector.heartbeat_loop(), name="heartbeats"),
            asyncio.create_task(self.registry.detector.watch_loop(), name="watch"),
            asyncio.create_task(self.registry.load_loop(self.load_interval), name="load"),
            asyncio.create_task(self._counter_loop(), name="counters"),
        ]
        if self.cfg.heartbeat.self_takeover:
            tasks.append(asyncio.create_task(takeover_loop(self), name="takeovers"))
        if self.cfg.load_balancer.enabled:
            tasks.append(asyncio.create_task(self.balancer.run(), name="balancer"))
        try:
            done, _ = await asyncio.wait(
                [t for t in tasks if t.get_name() != "configure"], return_when=asyncio.FIRST_EXCEPTION
            )
            for t in done:
                t.result()
        finally:
            for t in tasks:
                t.cancel()
            if self._digest_task is not None:
                self._digest_task.cancel()
            for bg in list(self._background):
                bg.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
            await self.close()

    # -- northbound views -------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        out = self.brief_status()
        del out["failover_count"]
        out["failovers"] = [f.to_json() for f in self.failovers]
        return out

    def brief_status(self) -> dict[str, Any]:
        """`status()` but the list of every fail-over (up to HISTORY: building it takes ms):
        how many it holds instead (`failover_count`). What the web view polls."""
        alive = sum(1 for s in self.registry.nfs.values() if s.alive)
        return {
            "switch": {
                "address": self.cfg.switch.address,
                "target": self.cfg.switch.target,
                "device_id": self.cfg.switch.device_id,
                "primary": self.session.is_primary,
                "election_id": self.session.switch.election_id,
                "last_reconcile": self.last_reconcile,
                "reconciled_at": self.reconciled_at,
            },
            "leadership": self.leadership_view(),
            "slots": self.cfg.slot_space,
            "stages": [{"id": st.id, "name": st.name, "chain": st.chain}
                       for st in self.cfg.stages()],
            "slot_map": {"resumed": self.resumed, "persisted": self.store is not None,
                         "per_nf": {str(k): v for k, v in sorted(self.slot_map.counts().items())}},
            "pairs": {str(p): b for p, b in sorted(self.pairs.items())},
            "nfs": {"total": len(self.registry.nfs), "alive": alive,
                    "configured": len(self.nfs_configured)},
            "flows": {"known": len(self.flows), "total": self.flows.total},
            "packets": sum(p for p, _ in self.slot_counters.values()),
            "switch_drops": self.switch_drops,
            "switch_ports": self.switch_ports,
            "switch_stats_error": self.switch_stats_error,
            "switch_port_packets": self.port_packets,
            "nf_drops": {str(r["id"]): r["drops"] for r in self.registry.summaries() if r["drops"]},
            "moves": dict(self.move_counts),
            "failover_count": len(self.failovers),
            "orphans": sorted(self.orphans),  # primaries thought dead with no live backup
            # transitions and invariants the cluster state did not expect (cluster_state.py)
            "state_violations": self.state.violations.count,
            # backups armed to take over by themselves (docs/protocols.md §4.3), by backup
            "self_takeover": self.cfg.heartbeat.self_takeover,
            "armed": {str(b): {"primary": p, "successor": s}
                      for b, (p, s) in sorted(self.armed.items())},
            "security": self.registry.security(),
            "uptime_s": round(time.time() - self.started, 1),
        }

    def slot_owners(self) -> tuple[int, list[int]]:
        """Slots per stage and the owner of every slot (stage by stage): the web view's slot map
        without a row per slot."""
        return self.cfg.switch.slot_count, self.slot_map.owners()

    def leadership_view(self) -> dict[str, Any]:
        lead = self.leadership
        if lead is None:
            return {"elected": False, "leader": None, "term": None}
        return {"elected": lead.term is not None, "name": lead.name, "leader": lead.leader,
                "term": lead.term}

    async def refresh_nfs(self) -> None:
        """Ask every NF for its status now (`GET /nfs?refresh=1`), not at the next load poll."""
        await self.registry.poll_all()

    def nf_rows(self) -> list[dict[str, Any]]:
        counts = self.slot_map.counts()
        rows = self.registry.summaries()
        for row in rows:
            row["slots_owned"] = counts.get(row["id"], 0)
            row["stage"] = self.cfg.stage_of(row["id"])
            row["backup"] = self.pairs.get(row["id"])
        return rows

    def slot_rows(self, nf: int | None = None) -> list[dict[str, Any]]:
        rows = []
        for e in self.slot_map.entries():
            if nf is not None and e.owner != nf:
                continue
            packets, nbytes = self.slot_counters.get(e.slot, (0, 0))
            stage, local = divmod(e.slot, self.cfg.switch.slot_count)
            rows.append({"slot": e.slot, "stage": stage, "stage_slot": local, "owner": e.owner,
                         "backup": self.pairs.get(e.owner),
                         "epoch": e.epoch, "packets": packets, "bytes": nbytes})
        return rows

    def lb_view(self, limit: int | None = None) -> dict[str, Any]:
        return self.balancer.view(limit)

    def lb_pause(self, paused: bool) -> dict[str, Any]:
        """Pause or resume the load balancer's rounds (a round under way finishes)."""
        self.balancer.paused = paused
        return {"enabled": self.cfg.load_balancer.enabled, "paused": paused}

    async def scale_out(self, cluster: str | None = None) -> dict[str, Any]:
        """A spare becomes a primary (of `cluster`, by default the one with the fewest
        primaries); the operator's and the API's entry to `SparePool.scale_out`."""
        if cluster is None:
            counts = {c.name: 0 for c in self.cfg.clusters}
            for p in self.pairs:
                counts[self.cfg.nf(p).cluster] += 1
            cluster = min(counts, key=lambda c: (counts[c], c))
        nf = await self.pool.scale_out(cluster)
        return {"nf": nf, "cluster": self.cfg.nf(nf).cluster, "backup": self.pairs.get(nf)}

    async def drain(self, nf: int) -> dict[str, Any]:
        """Move every slot of primary `nf` to its cluster peers and return it to the pool."""
        slots = len(self.slot_map.slots_of(nf))
        backup = self.pairs.get(nf)
        self.balancer.draining.add(nf)
        try:
            await self.pool.drain(nf)
        finally:
            self.balancer.draining.discard(nf)
        return {"nf": nf, "slots_moved": slots, "returned": [n for n in (nf, backup) if n]}

    async def update_nf(self, nf: int, params: dict[str, Any]) -> dict[str, Any]:
        """Live update of NF `nf` with new parameters (live_update.py)."""
        return (await update_nf(self, nf, params, targets_of=self.pool.targets,
                                hands_off=self.balancer.draining)).to_json()

    def move_rows(self) -> list[dict[str, Any]]:
        return [m.to_json() for m in self.moves]

    def flow_rows(self) -> list[dict[str, Any]]:
        return [r.to_json(self.slot_map.owner(r.flow.slot)) for r in self.flows.records()]
