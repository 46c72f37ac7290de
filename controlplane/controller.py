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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import aiohttp

from controlplane import switch_stats
from controlplane.balancer_loop import BalancerLoop
from controlplane.config import ControllerConfig
from controlplane.failover import FailoverResult, fail_over, protect, replace_backup, state_lost
from controlplane.flow_table import FlowTable
from controlplane.leader import Leadership
from controlplane.live_update import update_nf
from controlplane.metrics import ControllerMetrics
from controlplane.migration import RELEASE_TIMEOUT, MoveResult, NotPrimaryError, migrate_slot
from controlplane.nf_registry import NfControlError, NfEvent, NfRegistry
from controlplane.slot_map import SlotEntry, SlotMap, next_epoch
from controlplane.slot_store import SlotStore, load_or_build
from controlplane.spare_pool import SparePool
from controlplane.switch_session import SwitchSession
from nf_host.proto import nf_control_pb2 as pb
from nf_host.reorder import seq_after

LOG = logging.getLogger(__name__)

# Counters of the switch indexed by a drop reason, and the reasons in index order
# (OUTPUT_DROP_*, SLOT_MAP_DROP_*, PUNT_DROP_* in p4src/shared/define.p4).
SWITCH_DROP_REASONS: dict[str, tuple[str, ...]] = {
    "nf_output_drops": ("duplicate", "stale_epoch", "bad_slot", "wrong_stage"),
    "slot_map_drops": ("orphan_fragment",),
    "punt_drops": ("no_handler", "over_rate"),
}


# an NF that answers heartbeats but refuses its configuration is tried again after 50 ms, then
# twice as long each time, until the wait would exceed a few seconds
RECONFIGURE_RETRY = 0.05
RECONFIGURE_PATIENCE = 3.0


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
    ) -> None:
        self.cfg = cfg
        self.metrics = ControllerMetrics()
        self.flows = FlowTable()
        self.registry = NfRegistry(cfg)
        self.registry.add_listener(self._nf_event)
        self.pairs: dict[int, int | None] = {p.id: p.backup for p in cfg.primaries()}
        # each primary's replica group (multicast group, the switch's `slot_owner` points at it):
        # its own id at first; a promoted backup takes over its dead primary's group
        self.groups: dict[int, int] = {p: p for p in self.pairs}
        self.slot_map = self.fresh_slot_map()
        self.resumed = False
        self.use_etcd = use_etcd
        self.store: SlotStore | None = None
        self.session = SwitchSession(
            cfg.switch,
            election_id=election_id,
            p4info=p4info,
            device_config=device_config,
            on_primary=self._on_primary,
            on_write=self.metrics.count_write,
        )
        self.slot_counters: dict[int, tuple[int, int]] = {}
        self.switch_drops: dict[str, int] = {}  # Controller.read_switch_drops, every counter round
        # p4sim's port losses (switch.stats), "port/reason" -> packets; None: not read (yet)
        self.switch_ports: dict[str, int] | None = None
        self.switch_stats_error: str | None = None
        self.last_reconcile: dict[str, int] | None = None
        self.reconciled_at: float | None = None  # time.time() of the last reconcile
        self.nfs_configured: set[int] = set()
        # NFs configured at least once: they may hold state, so their death is always acted on
        # (also while a reconfiguration after a false alarm is still under way)
        self.ever_configured: set[int] = set()
        self.started = time.time()
        self.counter_interval = counter_interval
        # NF load reports: the configuration's load_balancer.report_s unless given
        self.load_interval = cfg.load_balancer.report_s if load_interval is None else load_interval
        self._digest_task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self.move_lock = asyncio.Lock()  # one migration or fail-over at a time
        self.release_timeout = RELEASE_TIMEOUT
        self.confirm_timeout = cfg.heartbeat.confirm_timeout_ms / 1000  # the probe before a fail-over
        self.moves: list[MoveResult] = []
        self.failovers: list[FailoverResult] = []
        # primaries confirmed dead whose fail-over found no live backup (a double fault, or a
        # backup only suspected then): retried when their backup answers again
        self.orphans: set[int] = set()
        # NFs whose failure was acted on (failed over, replaced as a backup) since they were
        # last configured: when they answer again they are configured anew (as spares)
        self.acted_on: set[int] = set()
        self._nf_locks: dict[int, asyncio.Lock] = {}  # one reconfiguration of an NF at a time
        self._background: set[asyncio.Task[None]] = set()
        self.leadership: Leadership | None = None  # set by nfc-controller run when etcd is used
        self.switch_ready = asyncio.Event()  # primary, pipeline pushed, entries reconciled
        self.pool = SparePool(self)  # scale-out and drain (the balancer's executor, the API's)
        self.balancer = BalancerLoop(self, executor=self.pool)  # runs when load_balancer.enabled

    # -- start-up ---------------------------------------------------------------------------------
    def fresh_slot_map(self) -> SlotMap:
        """Every stage's slots spread by Maglev over that stage's configured primaries."""
        cfg = self.cfg
        return SlotMap.build_staged(
            [sorted(p for p in self.pairs if cfg.stage_of(p) == st.id) for st in cfg.stages()],
            cfg.switch.slot_count)

    async def load_slot_map(self) -> None:
        """Resume the slot map from etcd, or build and persist a fresh one."""
        if not self.use_etcd:
            return
        endpoints = self.cfg.etcd.endpoints
        self.store = SlotStore(endpoints, self.cfg.etcd.prefix)
        self.slot_map, self.resumed = await load_or_build(self.store, self.fresh_slot_map())
        if self.resumed:
            self.pairs = await self.store.load_pairs() or self.pairs  # after fail-overs
            self.groups = await self.store.load_groups() or self.groups
            self._resumed_nfs_hold_state()
        LOG.info("slot map %s from etcd %s", "resumed" if self.resumed else "created",
                 ",".join(endpoints))
        self.metrics.update_slot_counts(self.slot_map.counts())

    def _resumed_nfs_hold_state(self) -> None:
        """A map resumed from etcd was running: its primaries and backups may hold state, so
        their death must be acted on even before this controller configured them (an NF that
        died while no controller led is failed over as soon as this one leads)."""
        self.ever_configured.update(self.pairs)
        self.ever_configured.update(b for b in self.pairs.values() if b is not None)

    async def _on_primary(self, session: SwitchSession) -> None:
        """Runs each time we become the switch's primary: make the switch equal to our state."""
        async with self._lock:
            self.metrics.is_primary.set(1)
            if self.store is not None:
                # a standby taking over: the previous primary may have moved slots since we loaded
                stored = await self.store.load(self.cfg.slot_space)
                if stored is not None:
                    self.slot_map = stored
                    self.pairs = await self.store.load_pairs() or self.pairs
                    self.groups = await self.store.load_groups() or self.groups
            await self._resume_numbering(session)
            desired = session.builder.desired(self.cfg, self.pairs, self.slot_map, self.groups)
            changes = await session.reconcile(desired)
            self.last_reconcile = changes.counts()
            self.reconciled_at = time.time()
            self.switch_ready.set()
            self.metrics.reconciles.inc()
            try:
                await session.enable_new_flow_digest()
            except Exception as exc:  # a target without digest support still forwards
                LOG.warning("new-flow digest not enabled: %s", exc)
            if self._digest_task is None or self._digest_task.done():
                self._digest_task = asyncio.create_task(self._digest_loop())
        # NFs declared down while we were not primary (a standby watching, or nobody leading):
        # their "down" was not acted on then; it is now
        for nf_id, state in sorted(self.registry.nfs.items()):
            if state.declared_down and nf_id in self.ever_configured:
                await self._nf_event(NfEvent("down", nf_id, state.misses))

    async def _resume_numbering(self, session: SwitchSession) -> None:
        """A restarted switch numbers every slot from 1 again, while the NFs expect the numbers
        after those they have seen: they would drop the new packets as duplicates. Before the
        slots get their owners back (the reconcile that follows), every slot whose `slot_seq` is
        behind the highest number an NF received (processed, buffered or held as a backup's
        copy) is set to it, so the numbering goes on where the NFs are. After a mere reconnect
        the switch is ahead and nothing is written. (Targets without register access: nothing.)"""
        # the NFs first, the switch second: on a live switch (a reconnect) the numbers only grow,
        # so what it says then is at least what any NF saw before, and nothing is written
        # (read the other way round, packets stamped in between would look like a switch behind)
        seen: dict[int, int] = {}
        for nf_id, state in sorted(self.registry.nfs.items()):
            if state.declared_down or state.alive is False:
                continue
            try:
                reply = await self.registry.call(nf_id, "Status", pb.StatusRequest(), timeout=1.0)
            except NfControlError:
                continue
            for st in reply.slots:
                if st.has_seen and (st.slot not in seen or seq_after(st.highest_seen, seen[st.slot])):
                    seen[st.slot] = st.highest_seen
        stamped = await self.next_seqs()
        if stamped is None:
            return
        behind = {slot: top for slot, top in seen.items()
                  if seq_after(top, (stamped.get(slot, 1) - 1) & 0xFFFFFFFF)}
        if behind:
            await session.write_register("slot_seq", behind)
            LOG.warning("the switch restarted: numbering of %d slots resumed where the NFs are",
                        len(behind))
            self.metrics.numbering_resumed.inc(len(behind))

    async def _digest_loop(self) -> None:
        async for flows in self.session.new_flows():
            self.metrics.digests.inc()
            self.metrics.new_flows.inc(self.flows.add(flows))

    async def configure_nfs(self, retry: float = 1.0) -> None:
        """Once primary, configure every NF, retrying the unreachable ones until all are configured."""
        while len(self.nfs_configured) < len(self.registry.nfs):
            await self.switch_ready.wait()  # next_seqs come from the switch's registers
            next_seqs = await self.next_seqs()
            for nf_id in sorted(set(self.registry.nfs) - self.nfs_configured):
                try:
                    await self.registry.configure_nf(nf_id, self.pairs, self.slot_map, next_seqs)
                    self.nfs_configured.add(nf_id)
                    self.ever_configured.add(nf_id)
                    LOG.info("NF %d configured", nf_id)
                except NfControlError as exc:
                    LOG.debug("NF %d not configured yet: %s", nf_id, exc)
            if len(self.nfs_configured) < len(self.registry.nfs):
                await asyncio.sleep(retry)

    async def _nf_event(self, event: NfEvent) -> None:
        self.metrics.nf_events.labels(kind=event.kind).inc()
        if not self.session.is_primary:
            return  # a standby watches but does not act
        if event.kind in ("up", "restarted"):
            restarted = event.kind == "restarted" or event.restarted
            if not restarted and event.nf_id in self.ever_configured \
                    and event.nf_id not in self.acted_on:
                # a suspicion that came to nothing (late heartbeats): the NF kept its role and
                # slots, and configuring it again would only load a loaded machine more
                self._spawn(self._back_after_false_alarm(event.nf_id))
                return
            # an NF that comes back has lost its configuration (a new process), or was failed
            # over or replaced meanwhile: give it its role and slots again
            self.nfs_configured.discard(event.nf_id)
            self._spawn(self._reconfigure(event.nf_id, restarted))
        elif event.kind == "down" and event.nf_id in self.ever_configured:
            # an NF never configured (not started yet) holds no state: nothing to fail over
            self.nfs_configured.discard(event.nf_id)
            if event.nf_id in self.pairs:
                self._spawn(self._fail_over(event.nf_id, event.confirmed, event.since,
                                            time.time()))
            elif event.nf_id in self.pairs.values():
                self._spawn(self._replace_backup(event.nf_id, event.confirmed, event.since))

    async def _really_down(self, nf_id: int, confirmed: bool = False, since: float = 0.0) -> bool:
        """Confirm a "down" before acting on it: still declared down, and a last probe fails
        (unless the registry's probe already failed: `confirmed`). A loaded machine can delay a
        few heartbeats of a live NF; failing over a live primary would leave two NFs processing
        its slots' state. The NF must have been silent for `confirm_timeout` in all: the probe's
        deadline is what remains of it after the first missed heartbeat (`since`), and at least
        a heartbeat's deadline."""
        if not self.registry.nfs[nf_id].declared_down:
            return False
        if confirmed:
            return True
        silent = time.time() - since if since else 0.0
        deadline = max(self.confirm_timeout - silent, self.cfg.heartbeat.timeout_ms / 1000)
        if await self.registry.probe_hang(nf_id, deadline):
            LOG.warning("NF %d missed heartbeats but answers: not failed over", nf_id)
            return False
        return self.registry.nfs[nf_id].declared_down

    async def _fail_over(self, dead: int, confirmed: bool = False, since: float = 0.0,
                         emitted: float = 0.0) -> None:
        async with self.move_lock:
            if dead in self.pairs and await self._really_down(dead, confirmed, since):
                result = await fail_over(self, dead, since, time.time() if not confirmed else emitted)
                if result.ok:
                    self.orphans.discard(dead)
                    self._acted_on(dead)
                if result.ok or result.promoted is not None:
                    self.failovers.append(result)
                else:
                    # no live backup: its slots stay with it (status "orphans"), tried again when
                    # its backup answers again; recorded once resolved (failed over, or its state
                    # lost); an orphan that answers again itself was a false alarm: nothing to record
                    self.orphans.add(dead)
            else:
                self.nfs_configured.add(dead)

    async def _orphan_back(self, nf_id: int) -> bool:
        """Orphaned primary `nf_id` (it died without a live backup) came back as a new process:
        its backup takes over now if it answers; otherwise its state is gone (a double fault),
        which is recorded, and it owns its slots again from empty state. True if it was failed
        over (it is a spare now)."""
        async with self.move_lock:
            if nf_id not in self.orphans or nf_id not in self.pairs:
                return False
            self.orphans.discard(nf_id)
            result = await fail_over(self, nf_id)
            self.failovers.append(result if result.ok else state_lost(self, nf_id))
            if result.ok:
                self._acted_on(nf_id)
            return result.ok

    def _acted_on(self, nf_id: int) -> None:
        """`nf_id` was failed over or replaced: it holds a role it must lose. If it answered
        again while that was under way (a false alarm whose "up" came first), nothing else will
        tell it: it is configured anew now (a spare: its runtime drops the slots it owned)."""
        self.acted_on.add(nf_id)
        if not self.registry.nfs[nf_id].declared_down:
            self.nfs_configured.discard(nf_id)
            self._spawn(self._reconfigure(nf_id))

    async def _back_after_false_alarm(self, nf_id: int) -> None:
        """`nf_id` answers again, the same process, and nothing was done about it meanwhile: it
        is configured as it was. Only the cluster views sent while it was thought down (which
        left it out) are sent again, and the primaries it backs up that died meanwhile are
        failed over now."""
        self.orphans.discard(nf_id)
        self.nfs_configured.add(nf_id)
        if self.registry.left_out.pop(nf_id, None) is not None:
            await self.registry.refresh_peers(self.cfg.nf(nf_id).cluster)
        await self._retry_orphans(nf_id)

    async def _retry_orphans(self, backup: int) -> None:
        """`backup` answers again without having restarted (a false alarm: it kept its state):
        fail over the orphaned primaries it backs up."""
        for dead in sorted(self.orphans):
            if self.pairs.get(dead) == backup and self.registry.nfs[dead].declared_down:
                await self._fail_over(dead, confirmed=True)

    async def _replace_backup(self, dead: int, confirmed: bool = False, since: float = 0.0) -> None:
        async with self.move_lock:
            if not await self._really_down(dead, confirmed, since):
                self.nfs_configured.add(dead)
                return
            result = await replace_backup(self, dead)
            if result is not None:
                self.failovers.append(result)
                self._acted_on(dead)
        await self.registry.refresh_peers(self.cfg.nf(dead).cluster)

    async def migrate(self, slots: list[int], to_nf: int) -> list[MoveResult]:
        """Move `slots` to primary `to_nf`, one after the other (migration.py). Raises
        MoveError before the first move for a bad request; a failed move is undone and reported."""
        results = []
        async with self.move_lock:
            for slot in slots:
                result = await migrate_slot(self, slot, to_nf, self.release_timeout)
                self.moves.append(result)
                results.append(result)
        return results

    def background_tasks(self) -> list[str]:
        """Names of the fail-overs, backup replacements and reconfigurations still running."""
        return sorted(t.get_name() for t in self._background if not t.done())

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro, name=getattr(coro, "__qualname__", "task"))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def next_seqs(self) -> dict[int, int] | None:
        """Per slot, the next sequence number the switch will stamp (one wildcard read of its
        `slot_seq` register, which holds the last one stamped); None if it cannot be read."""
        try:
            last = await self.session.read_register("slot_seq")
        except Exception as exc:  # a target without register reads: NFs learn from traffic
            LOG.warning("slot_seq not read (%s): NFs learn each slot's first number from traffic", exc)
            return None
        return {slot: (value + 1) & 0xFFFFFFFF for slot, value in last.items()}

    async def _reconfigure(self, nf_id: int, restarted: bool = False) -> None:
        """Configure `nf_id` again from the current state. One at a time per NF: two racing
        ones configured an NF from two states (a spare given slots to back up by the first's
        `protect`, then made idle by the second, dropping them: its primary then died with a
        backup that held nothing)."""
        lock = self._nf_locks.setdefault(nf_id, asyncio.Lock())
        async with lock:
            await self._reconfigure_now(nf_id, restarted)

    async def _reconfigure_now(self, nf_id: int, restarted: bool) -> None:
        if nf_id in self.orphans:
            if restarted:  # a new process: it holds nothing of its slots
                await self._orphan_back(nf_id)
            else:  # alive all along (it was slow or hung, then went on): it keeps its slots
                self.orphans.discard(nf_id)
        wait = RECONFIGURE_RETRY
        while True:
            try:
                await self.registry.configure_nf(nf_id, self.pairs, self.slot_map,
                                                 await self.next_seqs())
                break
            except NfControlError as exc:
                # an NF that answers heartbeats may not serve its control API yet (a restarted
                # runtime's workers echo UDP heartbeats before its gRPC server listens): it is
                # tried again while it answers, else its next "up" configures it
                state = self.registry.nfs[nf_id]
                if state.declared_down or wait > RECONFIGURE_PATIENCE:
                    LOG.warning("NF %d not reconfigured: %s", nf_id, exc)
                    return
                LOG.info("NF %d not reconfigured yet (%s): again in %.2f s", nf_id, exc, wait)
                await asyncio.sleep(wait)  # a retry's back-off
                wait *= 2
        self.nfs_configured.add(nf_id)
        self.ever_configured.add(nf_id)
        self.acted_on.discard(nf_id)
        self.registry.left_out.pop(nf_id, None)
        LOG.info("NF %d reconfigured", nf_id)
        await self.registry.refresh_peers(self.cfg.nf(nf_id).cluster)  # a member again
        if not restarted:
            await self._retry_orphans(nf_id)
        if self.registry.nfs[nf_id].role == "spare":  # the pool grew: protect who needs it
            async with self.move_lock:
                self.failovers.extend(await protect(self))

    # -- building blocks for migration / fail-over / load balancing -------------------------------
    async def move_slot(self, slot: int, to_nf: int) -> SlotEntry:
        """Give `slot` to primary `to_nf`: epoch + 1, one slot_owner write, persisted in etcd.
        All or nothing: the controller's map changes only once the switch and etcd hold the new
        entry; a failed etcd write puts the switch's entry back. Raises NotPrimaryError when
        this controller is not the switch's primary (nothing is written)."""
        if to_nf not in self.pairs:
            raise ValueError(f"NF {to_nf} is not a primary")
        if not self.session.is_primary:
            raise NotPrimaryError("not the switch's primary controller: the slot is not moved")
        async with self._lock:
            old = self.slot_map.entry(slot)
            entry = SlotEntry(slot, to_nf, next_epoch(old.epoch))
            await self.session.write_slot(entry, self.groups.get(to_nf, to_nf))
            if self.store is not None:
                try:
                    await self.store.save_entry(entry)
                except Exception:
                    await self.session.write_slot(old, self.groups.get(old.owner, old.owner))
                    raise
            self.slot_map.set_entry(entry)
            self.metrics.slot_moves.inc()
            self.metrics.update_slot_counts(self.slot_map.counts())
            return entry

    async def move_slots(self, slots: list[int], to_nf: int) -> list[SlotEntry]:
        """`move_slot` for many slots: batched switch writes (512) and etcd transactions (100)."""
        if to_nf not in self.pairs:
            raise ValueError(f"NF {to_nf} is not a primary")
        async with self._lock:
            entries = [self.slot_map.move(s, to_nf) for s in slots]
            if self.session.is_primary and entries:
                await self.session.write_slots(entries, groups=self.groups)
            if self.store is not None and entries:
                await self.store.save_entries(entries)
            self.metrics.slot_moves.inc(len(entries))
            self.metrics.update_slot_counts(self.slot_map.counts())
            return entries

    async def rewrite_group(self, dead: int, promoted: int, backup: int | None) -> None:
        """Fail-over's one switch write: the dead primary's replica group becomes {promoted
        (rid 1), backup (rid 2)} in place, so every slot pointing at it follows."""
        if not self.session.is_primary:
            raise NotPrimaryError("not the switch's primary controller: the group is not rewritten")
        backup_port = None if backup is None else self.cfg.nf(backup).port
        await self.session.set_group(self.groups[dead], self.cfg.nf(promoted).port, backup_port)

    async def hand_over(self, dead: int, promoted: int, backup: int | None) -> None:
        """After a fail-over: `promoted` owns the dead primary's slots and group, with `backup`
        (slot epochs unchanged), persisted in etcd."""
        async with self._lock:
            entries = self.slot_map.hand_over(dead, promoted)
            self.groups[promoted] = self.groups.pop(dead)
            self.pairs.pop(dead, None)
            self.pairs[promoted] = backup
            if self.store is not None:
                await self.store.save_entries(entries)
                await self.store.save_pairs(self.pairs)
                await self.store.save_groups(self.groups)
            self.metrics.update_slot_counts(self.slot_map.counts())

    def _group_for(self, primary: int) -> int:
        """`primary`'s replica group id: its own, or for a new primary whose id a promoted NF
        already uses as its group, the next free one."""
        if primary in self.groups:
            return self.groups[primary]
        used = set(self.groups.values())
        group = primary if primary not in used else max(used | set(self.pairs)) + 1
        self.groups[primary] = group
        return group

    async def retire_primary(self, nf: int) -> None:
        """A drained primary (no slot left) is a primary no more: its pair and replica group go
        (from the switch too), persisted."""
        if self.slot_map.slots_of(nf):
            raise ValueError(f"NF {nf} still owns slots")
        async with self._lock:
            self.pairs.pop(nf, None)
            group = self.groups.pop(nf, None)
            if self.store is not None:
                await self.store.save_pairs(self.pairs)
                await self.store.save_groups(self.groups)
            if group is not None and self.session.is_primary:
                await self.session.delete_group(group)

    async def set_pair(self, primary: int, backup: int | None) -> None:
        """Make `primary` a primary with `backup`; writes its replica group."""
        async with self._lock:
            insert = primary not in self.pairs
            self.pairs[primary] = backup
            group = self._group_for(primary)
            if self.store is not None:
                await self.store.save_pairs(self.pairs)
                await self.store.save_groups(self.groups)
            if self.session.is_primary:
                backup_port = None if backup is None else self.cfg.nf(backup).port
                await self.session.set_group(group, self.cfg.nf(primary).port, backup_port,
                                             insert=insert)

    # -- periodic work ----------------------------------------------------------------------------
    async def _counter_loop(self) -> None:
        while True:
            if self.session.is_primary:
                try:
                    self.slot_counters = await self.session.read_counter("slot_traffic")
                    self.metrics.update_slot_traffic(self.slot_counters)
                    self.switch_drops = await self.read_switch_drops()
                    self.metrics.update_switch_drops(self.switch_drops)
                except Exception as exc:
                    LOG.debug("counter read failed: %s", exc)
            else:
                self.metrics.is_primary.set(0)
            if self.cfg.switch.stats is not None:
                await self.read_switch_ports(self.cfg.switch.stats)
            self.metrics.update_nfs(self.registry.summaries())
            await asyncio.sleep(self.counter_interval)

    async def read_switch_ports(self, address: str) -> None:
        """The switch's port losses from p4sim's counter endpoint (controlplane/switch_stats)."""
        try:
            doc = await switch_stats.read_status(address)
        except (OSError, aiohttp.ClientError, TimeoutError, ValueError) as exc:
            if self.switch_stats_error is None:
                LOG.warning("cannot read the switch's counters at %s: %s", address, exc)
            self.switch_stats_error = f"{address}: {exc or type(exc).__name__}"
            return
        self.switch_stats_error = None
        self.switch_ports = switch_stats.port_losses(doc)
        self.metrics.update_switch_ports(self.switch_ports)

    async def read_switch_drops(self) -> dict[str, int]:
        """What the switch dropped and counted: NF output the dedup dropped, edge packets
        dropped before a slot (orphan fragments), non-IPv4 edge packets not punted (each by
        reason), edge packets of unowned slots, anything unroutable from NF ports (one wildcard
        read per counter; reasons as in p4src/shared/define.p4)."""
        out: dict[str, int] = {}
        for name, reasons in SWITCH_DROP_REASONS.items():
            cells = await self.session.read_counter(name)
            for index, reason in enumerate(reasons):
                out[f"{name}/{reason}"] = cells.get(index, (0, 0))[0]
        for name in ("unowned_drops", "nf_port_drops", "no_route_drops"):
            out[f"{name}/all"] = sum(p for p, _ in (await self.session.read_counter(name)).values())
        return out

    async def run(self) -> None:
        """Run until cancelled: switch session, NF configuration, heartbeats, load, counters."""
        await self.load_slot_map()
        tasks = [
            asyncio.create_task(self.session.run(), name="switch"),
            asyncio.create_task(self.configure_nfs(), name="configure"),
            asyncio.create_task(self.registry.heartbeat_loop(), name="heartbeats"),
            asyncio.create_task(self.registry.watch_loop(), name="watch"),
            asyncio.create_task(self.registry.load_loop(self.load_interval), name="load"),
            asyncio.create_task(self._counter_loop(), name="counters"),
        ]
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

    async def close(self) -> None:
        await self.registry.close()
        if self.store is not None:
            await self.store.close()

    # -- northbound views -------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
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
            "nf_drops": {str(r["id"]): r["drops"] for r in self.registry.summaries() if r["drops"]},
            "moves": {"total": len(self.moves), "ok": sum(m.ok for m in self.moves),
                      "undone": sum(m.undone for m in self.moves)},
            "failovers": [f.to_json() for f in self.failovers],
            "orphans": sorted(self.orphans),  # primaries thought dead with no live backup
            "uptime_s": round(time.time() - self.started, 1),
        }

    def leadership_view(self) -> dict[str, Any]:
        lead = self.leadership
        if lead is None:
            return {"elected": False, "leader": None, "term": None}
        return {"elected": lead.term is not None, "name": lead.name, "leader": lead.leader,
                "term": lead.term}

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
        return (await update_nf(self, nf, params)).to_json()

    def move_rows(self) -> list[dict[str, Any]]:
        return [m.to_json() for m in self.moves]

    def flow_rows(self) -> list[dict[str, Any]]:
        return [r.to_json(self.slot_map.owner(r.flow.slot)) for r in self.flows.records()]
