"""The load balancer's loop: poll the signals, decide, act, and remember every decision.

Each `load_balancer.period_s` (while this controller is the switch's primary) `BalancerLoop.step()`

1. builds a `LoadSnapshot` (controlplane/load_signals.py) from the NF registry's last load reports,
   the switch's `slot_traffic` counter and the slot map. The counter (one wildcard read of every
   slot) is read only in rounds where some NF is above the high-water mark: the decision looks at
   the slots' rates of those NFs only. The read is the one shared with the counter loop
   (`SharedRead`, controlplane/shared_read.py: one not older than half a period is reused); in
   the other rounds a read the counter loop made meanwhile becomes the base the next rates are
   measured from, so the first hot round has rates already;
2. calls the pure `decide()` (controlplane/load_balancer.py);
3. executes the moves one after the other with the controller's migration (controlplane/
   migration.py: adopt, backup told, one switch write, release, undo on failure), and the scale
   actions through a `ScaleExecutor` in the background (a cluster with a scale action under way is
   not scaled again; an NF being drained is no destination);
4. logs every decision with its inputs (the loads of the NFs involved) and its reason and outcome,
   keeps the last `load_balancer.history` of them (`GET /lb/history`, `nfc lb history`), and counts
   them per kind (`nfc_lb_actions_total{kind}`).

The controller is reached through the narrow `BalancedController` protocol, the spare pool through
`ScaleExecutor`; without an executor scale actions are decided and recorded as not executed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from controlplane.config import ControllerConfig
from controlplane.load_balancer import Action, Knobs, Move, ScaleIn, ScaleOut, action_kind, decide
from controlplane.load_signals import LoadSnapshot, SnapshotBuilder
from controlplane.metrics import ControllerMetrics
from controlplane.migration import MoveError, MoveResult
from controlplane.nf_state import NfLoad, NfState
from controlplane.pipeline_state import SLOT_COUNTER
from controlplane.shared_read import SharedRead

LOG = logging.getLogger(__name__)


class ScaleExecutor(Protocol):
    """Elasticity, implemented by the spare pool (controlplane/spare_pool.py)."""

    async def scale_out(self, cluster: str) -> int:
        """Make a spare of `cluster` (or of another cluster) a primary with a backup; returns its id.
        Raises an exception when it cannot (no spare)."""
        ...

    async def drain(self, nf: int) -> None:
        """Move every slot of primary `nf` to its cluster peers and return it (and its backup) to
        the pool. Raises an exception when it cannot."""
        ...


class _Session(Protocol):
    @property
    def is_primary(self) -> bool: ...
    async def read_counter(self, short: str) -> dict[int, tuple[int, int]]: ...


class _Registry(Protocol):
    nfs: dict[int, NfState]


class _SlotMap(Protocol):
    def owners(self) -> list[int]: ...


class BalancedController(Protocol):
    """What the loop needs from the controller (controlplane/controller.py)."""

    cfg: ControllerConfig
    metrics: ControllerMetrics

    @property
    def pairs(self) -> dict[int, int | None]: ...
    @property
    def session(self) -> _Session: ...
    @property
    def registry(self) -> _Registry: ...
    @property
    def slot_map(self) -> _SlotMap: ...
    async def migrate(self, slots: list[int], to_nf: int) -> list[MoveResult]: ...


@dataclass
class Decision:
    """One action of the balancer, why it was taken, on which inputs, and what came of it."""

    id: int
    at: float                  # time.time()
    kind: str                  # intra | inter | scale_out | scale_in
    action: dict[str, Any]
    inputs: dict[str, Any]     # the loads of the NFs involved, as the snapshot had them
    outcome: str = "pending"   # moved | undone | refused | done | failed | not executed
    ok: bool | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _involved(action: Action, snap: LoadSnapshot) -> Iterable[int]:
    if isinstance(action, Move):
        return (action.src, action.dst)
    if isinstance(action, ScaleOut):
        return [n.nf_id for n in snap.nfs.values() if n.cluster == action.cluster]
    cluster = snap.nfs[action.nf].cluster
    return [n.nf_id for n in snap.nfs.values() if n.cluster == cluster]


def _inputs(action: Action, snap: LoadSnapshot) -> dict[str, Any]:
    nfs = snap.summary()["nfs"]
    assert isinstance(nfs, dict)
    out: dict[str, Any] = {"nfs": {str(i): nfs[str(i)] for i in _involved(action, snap)
                                   if str(i) in nfs}}
    src = snap.nfs.get(action.src) if isinstance(action, Move) else None
    if isinstance(action, Move) and src is not None:
        for s in src.slots:
            if s.slot == action.slot:
                out["slot"] = {"slot": s.slot, "pps": round(s.pps, 1), "bps": round(s.bps, 1),
                               "state_bytes": s.state_bytes, "delta_bytes": s.delta_bytes}
    return out


class BalancerLoop:
    """The balancer of one controller: its memory, its history and its loop."""

    def __init__(self, ctl: BalancedController, executor: ScaleExecutor | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 on_decision: Callable[[Decision], None] | None = None,
                 traffic: SharedRead[dict[int, tuple[int, int]]] | None = None) -> None:
        self.ctl = ctl
        # the `slot_traffic` read shared with the counter loop (the controller's core gives it;
        # a read of our own through the session otherwise)
        self.traffic = traffic if traffic is not None else SharedRead(
            lambda: ctl.session.read_counter(SLOT_COUNTER), clock=clock)
        self._traffic_seq = 0  # the last read of it the snapshot builder was given
        self.on_decision = on_decision  # told of every decision as it is taken (the timeline)
        self.cfg = ctl.cfg.load_balancer
        self.knobs = Knobs.from_config(ctl.cfg)
        self.executor = executor
        self.clock = clock
        self.builder = SnapshotBuilder(ctl.cfg)
        self.history: deque[Decision] = deque(maxlen=self.cfg.history)
        self.draining: set[int] = set()
        self.scaling: set[str] = set()  # clusters with a scale action under way
        self.cluster_scaled_at: dict[str, float] = {}
        self.paused = self.cfg.paused  # `POST /lb/pause` / `/lb/resume`: no rounds while paused
        self.rounds = 0
        self.decision_seconds = 0.0
        self.last: LoadSnapshot | None = None
        self._next_id = 1
        self._tasks: set[asyncio.Task[None]] = set()

    # -- one round --------------------------------------------------------------------------------
    async def _inputs(self) -> dict[str, Any]:
        """Everything the snapshot needs, gathered on the event loop (copies); the counter read
        only when some NF is above the high-water mark (the module docstring)."""
        loads: dict[int, NfLoad | None] = {
            i: st.load for i, st in self.ctl.registry.nfs.items() if not st.declared_down}
        primaries = [p for p in self.ctl.pairs if p not in self.draining]
        counters, counters_at = None, None
        if self.ctl.session.is_primary:
            if self.builder.needs_rates(loads, primaries):
                try:
                    read = await self.traffic.get(self.cfg.period_s / 2)
                    if read.seq == self._traffic_seq:  # (young, but already ours: a new one)
                        read = await self.traffic.get(-1.0)
                    if read.seq != self._traffic_seq:
                        counters, counters_at = read.value, self._when(read.at)
                        self._traffic_seq = read.seq
                except Exception as exc:  # keep the last rates; the NF reports still count
                    LOG.debug("slot counter read failed: %s", exc)
            elif (last := self.traffic.last) is not None and last.seq != self._traffic_seq:
                self.builder.rates.base(last.value, self._when(last.at))
                self._traffic_seq = last.seq
        owners = self.ctl.slot_map.owners()
        return {"now": self.clock(), "loads": loads, "primaries": primaries,
                "owners": enumerate(owners), "counters": counters, "counters_at": counters_at,
                "scaling": frozenset(self.scaling), "cluster_scaled_at": dict(self.cluster_scaled_at)}

    def _when(self, at: float) -> float:
        """A time of the shared read's clock on ours (the same clock unless a test gives one)."""
        return self.clock() - (self.traffic.clock() - at)

    async def snapshot(self) -> LoadSnapshot:
        return self.builder.build(**await self._inputs())

    def _build_and_decide(self, inputs: dict[str, Any]) -> tuple[LoadSnapshot, list[Action]]:
        snap = self.builder.build(**inputs)
        t0 = time.perf_counter()
        actions = decide(snap, self.knobs)
        self.decision_seconds = time.perf_counter() - t0
        return snap, actions

    async def step(self) -> list[Decision]:
        """Poll, decide, act; returns the round's decisions (the moves are done when it returns,
        scale actions are under way). The snapshot and the decision are computed in a thread: with
        65,536 slots they take long enough to delay heartbeats on the event loop."""
        snap, actions = await asyncio.to_thread(self._build_and_decide, await self._inputs())
        self.rounds += 1
        self.last = snap
        for nf in snap.nfs.values():
            self.ctl.metrics.nf_load.labels(nf=str(nf.nf_id)).set(nf.load)
        decisions = []
        for action in actions:
            decision = self._record(action, snap)
            decisions.append(decision)
            if isinstance(action, Move):
                await self._move(action, decision)
            else:
                self._scale(action, decision)
        return decisions

    def _record(self, action: Action, snap: LoadSnapshot) -> Decision:
        kind = action_kind(action)
        decision = Decision(self._next_id, time.time(), kind, action.to_json(), _inputs(action, snap))
        self._next_id += 1
        self.history.append(decision)
        if self.on_decision is not None:
            self.on_decision(decision)
        self.ctl.metrics.lb_actions.labels(kind=kind).inc()
        LOG.info("load balancer #%d %s: %s; inputs %s", decision.id, kind, action.reason,
                 decision.inputs)
        return decision

    async def _move(self, move: Move, decision: Decision) -> None:
        try:
            [result] = await self.ctl.migrate([move.slot], move.dst)
        except MoveError as exc:  # the slot map changed since the snapshot (fail-over, operator)
            decision.outcome, decision.ok, decision.detail = "refused", False, {"error": str(exc)}
            LOG.info("load balancer #%d refused: %s", decision.id, exc)
            return
        self.builder.note_move(move.slot, move.src, move.dst, self.clock())
        if result.ok and not result.delta:
            self.builder.note_shipped(result.bytes_shipped, result.flows_shipped)
        decision.ok = result.ok
        decision.outcome = "moved" if result.ok else "undone" if result.undone else "failed"
        decision.detail = result.to_json()
        LOG.info("load balancer #%d %s: slot %d %d -> %d, %d bytes (%s) in %.3f s%s", decision.id,
                 decision.outcome, move.slot, move.src, move.dst, result.bytes_shipped,
                 "delta" if result.delta else "full", result.seconds,
                 f": {result.error}" if result.error else "")

    def _scale(self, action: ScaleOut | ScaleIn, decision: Decision) -> None:
        if self.executor is None:
            decision.outcome, decision.ok = "not executed", False
            decision.detail = {"error": "no scale executor (spare pool) in this controller"}
            return
        cluster = action.cluster if isinstance(action, ScaleOut) else self.ctl.cfg.nf(action.nf).cluster
        self.scaling.add(cluster)
        if isinstance(action, ScaleIn):
            self.draining.add(action.nf)
        task = asyncio.create_task(self._run_scale(action, decision, cluster))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_scale(self, action: ScaleOut | ScaleIn, decision: Decision, cluster: str) -> None:
        assert self.executor is not None
        t0 = time.monotonic()
        try:
            if isinstance(action, ScaleOut):
                new = await self.executor.scale_out(action.cluster)
                decision.detail = {"new_primary": new}
            else:
                await self.executor.drain(action.nf)
                decision.detail = {"drained": action.nf}
            decision.outcome, decision.ok = "done", True
        except asyncio.CancelledError:
            decision.outcome, decision.ok = "failed", False
            raise
        except Exception as exc:
            decision.outcome, decision.ok = "failed", False
            decision.detail = {"error": str(exc) or type(exc).__name__}
        finally:
            decision.detail["seconds"] = round(time.monotonic() - t0, 3)
            self.scaling.discard(cluster)
            self.cluster_scaled_at[cluster] = self.clock()
            if isinstance(action, ScaleIn):
                self.draining.discard(action.nf)
        LOG.info("load balancer #%d %s: %s %s", decision.id, decision.kind, decision.outcome,
                 decision.detail)

    async def wait_scaling(self) -> None:
        """Wait for the scale actions under way (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def cancel_scaling(self) -> None:
        """Cancel the scale actions under way (shutdown)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # -- the loop ---------------------------------------------------------------------------------
    async def run(self) -> None:
        """Every `period_s` while primary and not paused, one round; forever (cancel to stop)."""
        try:
            while True:
                started = time.monotonic()
                if self.ctl.session.is_primary and not self.paused:
                    try:
                        await self.step()
                    except Exception:  # a round that fails must not stop balancing
                        LOG.exception("load balancer round failed")
                await asyncio.sleep(max(0.0, self.cfg.period_s - (time.monotonic() - started)))
        finally:
            await self.cancel_scaling()

    # -- northbound -------------------------------------------------------------------------------
    def view(self, limit: int | None = None) -> dict[str, Any]:
        """`GET /lb/history`: the knobs, the last loads and the decisions, newest last."""
        rows = list(self.history)
        if limit is not None:
            rows = rows[-limit:] if limit else []
        return {
            "enabled": self.cfg.enabled, "paused": self.paused, "period_s": self.cfg.period_s,
            "rounds": self.rounds,
            "decision_ms": round(self.decision_seconds * 1000, 3),
            "knobs": asdict(self.knobs) | {"target": self.knobs.target},
            "loads": self.last.summary()["nfs"] if self.last is not None else {},
            "scaling": sorted(self.scaling), "draining": sorted(self.draining),
            "decisions": [d.to_json() for d in rows],
        }
