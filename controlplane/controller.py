"""The controller: builds its parts, wires them once, runs their loops and serves the API.

`Controller` is made of parts (docs/controller.md, "The controller made of parts"), built here
and handed to each other at construction:

* `core` (`controller_core.ControllerCore`): the cluster state, the slot map (etcd), the switch
  session and every switch and etcd write (`move_slot()`, `set_pair()`, `rewrite_group()`,
  `hand_over()`, ...), the reconcile when this controller becomes the switch's primary;
* `lifecycle` (`nf_lifecycle.NfLifecycle`): the registry's listener, what an NF's failure or
  return means (fail-over, a new backup, orphans, reconfiguration), the NFs' configuration;
* `slot_moves` (`slot_moves.SlotMoves`): `migrate()` (controlplane/migration.py, also reachable as
  `POST /slots/{slot}/move?to=NF`) and the journalled moves a previous leader left;
* `counters` (`switch_counters.SwitchCounters`), `history` (`run_history.RunHistory`: moves,
  fail-overs, the timeline), `tasks` (`background.BackgroundTasks`);
* `pool` (`spare_pool.SparePool`) and `balancer` (`balancer_loop.BalancerLoop`, a task when
  `load_balancer.enabled`), which take the controller itself (`PoolHost`, `BalancedController`).

It runs the loops (`run()`), answers the northbound views (`status()`, `nf_rows()`,
`slot_rows()`, `flow_rows()`) and the operator's commands, and keeps, as thin delegates to its
parts, the names the API, the simulation, topo/ and the tests use (`slot_map`, `pairs`,
`move_slot()`, `failovers`, ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from controlplane.background import BackgroundTasks
from controlplane.balancer_loop import BalancerLoop
from controlplane.cluster_state import ClusterState
from controlplane.config import ControllerConfig
from controlplane.controller_core import ControllerCore
from controlplane.failover import FailoverResult
from controlplane.flow_table import FlowTable
from controlplane.leader import Leadership
from controlplane.live_update import update_nf
from controlplane.metrics import ControllerMetrics
from controlplane.migration import MoveResult
from controlplane.nf_lifecycle import NfLifecycle
from controlplane.nf_registry import NfRegistry
from controlplane.run_history import RunHistory
from controlplane.slot_map import SlotEntry, SlotMap
from controlplane.slot_moves import SlotMoves
from controlplane.slot_store import MoveIntent, SlotStore
from controlplane.spare_pool import SparePool
from controlplane.switch_counters import SwitchCounters
from controlplane.switch_session import SwitchSession, switch_credentials
from controlplane.takeover_plan import takeover_loop
from controlplane.timeline import Timeline

LOG = logging.getLogger(__name__)

OnPrimary = Callable[[SwitchSession], Awaitable[None]]  # the session's callback on becoming primary


class Controller:
    """One controller instance (primary or standby for the switch)."""

    def __init__(
        self,
        cfg: ControllerConfig,
        *,
        election_id: int | None = None,
        use_etcd: bool = True,
        p4info: Path | None = None,
        device_config: Path | bytes | None = None,
        counter_interval: float = 1.0,
        load_interval: float | None = None,
        session: SwitchSession | None = None,
        session_factory: Callable[[OnPrimary], SwitchSession] | None = None,
        registry: NfRegistry | None = None,
        strict_state: bool = False,
        etcd_client: Any = None,
    ) -> None:
        self.metrics = ControllerMetrics()
        self.started = time.time()
        # NF load reports: the configuration's load_balancer.report_s unless given
        self.load_interval = cfg.load_balancer.report_s if load_interval is None else load_interval
        self.leadership: Leadership | None = None  # set by nfc-controller run when etcd is used
        # the switch session: given (tests), built by `session_factory` with this controller's
        # `_on_primary` (the simulation's switch model, sim/switch.py), or a P4Runtime session;
        # a given registry: the simulation's (sim/nf.py)
        if session is None and session_factory is not None:
            session = session_factory(self._on_primary)
        self.core = ControllerCore(
            cfg,
            registry=registry or NfRegistry(cfg),
            session=session or SwitchSession(
                cfg.switch,
                election_id=election_id,
                p4info=p4info,
                device_config=device_config,
                on_primary=self._on_primary,
                on_write=self.metrics.count_write,
                credentials=switch_credentials(cfg.security),
            ),
            metrics=self.metrics,
            use_etcd=use_etcd,
            strict_state=strict_state,
            etcd_client=etcd_client,
        )
        self.history = RunHistory()
        self.tasks = BackgroundTasks()
        self.counters = SwitchCounters(self.core, self.metrics, counter_interval)
        self.slot_moves = SlotMoves(self.core, self.history, self.tasks)
        # the registry's first listener: NF events acted on (it adds itself)
        self.lifecycle = NfLifecycle(self.core, self.slot_moves, self.history, self.tasks, self.metrics)
        self.registry.add_listener(self.timeline.nf_event)  # NFs down, up, restarted
        self.pool = SparePool(self)  # scale-out and drain (the balancer's executor, the API's)
        # runs when load_balancer.enabled; its decisions go into the timeline as they are taken
        self.balancer = BalancerLoop(self, executor=self.pool, on_decision=self.timeline.decision,
                                     traffic=self.core.slot_traffic)  # the counter loop's read

    async def _on_primary(self, session: SwitchSession) -> None:
        """The switch session's callback, each time this controller becomes the switch's
        primary: the core's reconcile, then the NFs declared down meanwhile acted on."""
        await self.core.on_primary(session)
        await self.lifecycle.act_on_missed_downs()

    async def run(self) -> None:
        """Run until cancelled: switch session, NF configuration, heartbeats, load, counters."""
        await self.load_slot_map()
        tasks = [
            asyncio.create_task(self.session.run(), name="switch"),
            asyncio.create_task(self.lifecycle.configure_nfs(), name="configure"),
            asyncio.create_task(self.registry.detector.heartbeat_loop(), name="heartbeats"),
            asyncio.create_task(self.registry.detector.watch_loop(), name="watch"),
            asyncio.create_task(self.registry.load_loop(self.load_interval), name="load"),
            asyncio.create_task(self.counters._counter_loop(), name="counters"),
        ]
        if self.cfg.heartbeat.self_takeover:
            tasks.append(asyncio.create_task(takeover_loop(self.core), name="takeovers"))
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
            self.core.stop_digests()
            self.tasks.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
            await self.close()

    # -- the parts' names the API, the simulation, topo/ and the tests use (thin delegates) ----
    @property
    def cfg(self) -> ControllerConfig:
        return self.core.cfg

    @cfg.setter
    def cfg(self, value: ControllerConfig) -> None:
        self.core.cfg = value

    @property
    def session(self) -> SwitchSession:
        return self.core.session

    @session.setter
    def session(self, value: SwitchSession) -> None:
        self.core.session = value

    @property
    def confirm_timeout(self) -> float:
        return self.core.confirm_timeout

    @confirm_timeout.setter
    def confirm_timeout(self, value: float) -> None:
        self.core.confirm_timeout = value

    @property
    def release_timeout(self) -> float:
        return self.core.release_timeout

    @release_timeout.setter
    def release_timeout(self, value: float) -> None:
        self.core.release_timeout = value

    @property
    def fence_patience(self) -> float:
        return self.core.fence_patience

    @fence_patience.setter
    def fence_patience(self, value: float) -> None:
        self.core.fence_patience = value

    @property
    def registry(self) -> NfRegistry:
        return self.core.registry

    @property
    def state(self) -> ClusterState:
        return self.core.state

    @property
    def slot_map(self) -> SlotMap:
        return self.core.slot_map

    @property
    def pairs(self) -> dict[int, int | None]:
        return self.core.pairs

    @property
    def groups(self) -> dict[int, int]:
        return self.core.groups

    @property
    def armed(self) -> dict[int, tuple[int, int]]:
        return self.core.armed

    @property
    def nfs_configured(self) -> frozenset[int]:
        return self.core.nfs_configured

    @property
    def orphans(self) -> frozenset[int]:
        return self.core.orphans

    @property
    def store(self) -> SlotStore | None:
        return self.core.store

    @property
    def resumed(self) -> bool:
        return self.core.resumed

    @property
    def flows(self) -> FlowTable:
        return self.core.flows

    @property
    def last_reconcile(self) -> dict[str, int] | None:
        return self.core.last_reconcile

    @property
    def reconciled_at(self) -> float | None:
        return self.core.reconciled_at

    @property
    def switch_ready(self) -> asyncio.Event:
        return self.core.switch_ready

    @property
    def open_moves(self) -> dict[int, MoveIntent]:
        return self.core.open_moves

    @property
    def untold_epochs(self) -> dict[int, dict[int, int]]:
        return self.core.untold_epochs

    @property
    def untold_cancels(self) -> dict[int, dict[int, int]]:
        return self.core.untold_cancels

    @property
    def moved_at(self) -> dict[int, float]:
        return self.core.moved_at

    @property
    def move_lock(self) -> asyncio.Lock:
        return self.core.move_lock

    @property
    def moves(self) -> deque[MoveResult]:
        return self.history.moves

    @property
    def failovers(self) -> deque[FailoverResult]:
        return self.history.failovers

    @property
    def timeline(self) -> Timeline:
        return self.history.timeline

    @property
    def move_counts(self) -> dict[str, int]:
        return self.history.move_counts

    @property
    def slot_counters(self) -> dict[int, tuple[int, int]]:
        return self.counters.slot_counters

    @property
    def switch_drops(self) -> dict[str, int]:
        return self.counters.switch_drops

    @property
    def switch_ports(self) -> dict[str, int] | None:
        return self.counters.switch_ports

    @property
    def port_packets(self) -> dict[str, dict[str, int]]:
        return self.counters.port_packets

    def role_lock(self, nf_id: int) -> asyncio.Lock:
        return self.core.role_lock(nf_id)

    async def move_slot(self, slot: int, to_nf: int) -> SlotEntry:
        return await self.core.move_slot(slot, to_nf)

    async def move_slots(self, slots: list[int], to_nf: int) -> list[SlotEntry]:
        return await self.core.move_slots(slots, to_nf)

    async def set_pair(self, primary: int, backup: int | None) -> None:
        await self.core.set_pair(primary, backup)

    async def copies_to(self, primary: int, backup: int) -> None:
        await self.core.copies_to(primary, backup)

    async def rewrite_group(self, dead: int, promoted: int, backup: int | None) -> None:
        await self.core.rewrite_group(dead, promoted, backup)

    async def hand_over(self, dead: int, promoted: int, backup: int | None) -> None:
        await self.core.hand_over(dead, promoted, backup)

    async def journal_failover(self, dead: int, promoted: int) -> None:
        await self.core.journal_failover(dead, promoted)

    async def retire_primary(self, nf: int) -> None:
        await self.core.retire_primary(nf)

    async def open_move(self, move: MoveIntent) -> None:
        await self.core.open_move(move)

    async def close_move(self, slot: int) -> None:
        await self.core.close_move(slot)

    async def drop_unwritten_move(self, slot: int) -> bool:
        return await self.core.drop_unwritten_move(slot)

    async def load_slot_map(self) -> None:
        await self.core.load_slot_map()

    async def next_seqs(self) -> dict[int, int] | None:
        return await self.core.next_seqs()

    async def configure_nfs(self, retry: float = 1.0) -> None:
        await self.lifecycle.configure_nfs(retry)

    async def migrate(self, slots: list[int], to_nf: int) -> list[MoveResult]:
        return await self.slot_moves.migrate(slots, to_nf)

    def record_move(self, result: MoveResult) -> None:
        self.history.record_move(result)

    def record_failover(self, result: FailoverResult) -> None:
        self.history.record_failover(result)

    def background_tasks(self) -> list[str]:
        """Names of the fail-overs, backup replacements and reconfigurations still running."""
        return self.tasks.names()

    async def read_switch_ports(self, address: str) -> None:
        await self.counters.read_switch_ports(address)

    async def refresh_port_packets(self) -> dict[str, Any]:
        return await self.counters.refresh_port_packets()

    def port_packets_view(self) -> dict[str, Any]:
        return self.counters.port_packets_view()

    async def close(self) -> None:
        await self.core.close()

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
                "last_reconcile": self.core.last_reconcile,
                "reconciled_at": self.core.reconciled_at,
            },
            "leadership": self.leadership_view(),
            "slots": self.cfg.slot_space,
            "stages": [{"id": st.id, "name": st.name, "chain": st.chain}
                       for st in self.cfg.stages()],
            "slot_map": {"resumed": self.core.resumed, "persisted": self.core.store is not None,
                         "per_nf": {str(k): v for k, v in sorted(self.slot_map.counts().items())}},
            "pairs": {str(p): b for p, b in sorted(self.pairs.items())},
            "nfs": {"total": len(self.registry.nfs), "alive": alive,
                    "configured": len(self.nfs_configured)},
            "flows": {"known": len(self.core.flows), "total": self.core.flows.total},
            "packets": sum(p for p, _ in self.counters.slot_counters.values()),
            "switch_drops": self.counters.switch_drops,
            "switch_ports": self.counters.switch_ports,
            "switch_stats_error": self.counters.switch_stats_error,
            "switch_port_packets": self.counters.port_packets,
            "nf_drops": {str(r["id"]): r["drops"] for r in self.registry.summaries() if r["drops"]},
            "moves": dict(self.history.move_counts),
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
            packets, nbytes = self.counters.slot_counters.get(e.slot, (0, 0))
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
        return [r.to_json(self.slot_map.owner(r.flow.slot)) for r in self.core.flows.records()]
