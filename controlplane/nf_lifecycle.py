"""What the controller does when an NF fails or comes back: fail-over of a dead primary, a new
backup for a dead backup's primary, orphans retried when their backup answers again, and the
reconfiguration of an NF that returns (as a spare, after a false alarm, or restarted); and the
NFs' first configuration once the switch is ready.

`NfLifecycle` is the registry's listener (it adds itself when it is built): every `NfEvent` of
the failure detector comes to `on_nf_event`. It acts through a `LifecycleHost` (the controller's
core: the cluster state, the locks, the switch writes) and runs the protocols of
controlplane/failover.py on it; journalled moves its NFs waited for are finished by `SlotMoves`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Protocol

from contract.proto import nf_control_pb2 as pb
from controlplane import failover_journal
from controlplane.background import BackgroundTasks
from controlplane.cluster_state import ClusterState, NfPhase
from controlplane.config import ControllerConfig
from controlplane.failover import (
    FailoverHost,
    FailoverResult,
    fail_over,
    protect,
    replace_backup,
    state_lost,
)
from controlplane.failover_journal import JournalHost
from controlplane.metrics import ControllerMetrics
from controlplane.nf_registry import NfControlError, NfRegistry
from controlplane.nf_state import NfEvent
from controlplane.run_history import RunHistory
from controlplane.slot_map import SlotMap
from controlplane.slot_moves import SlotMoves
from controlplane.slot_store import MoveIntent

LOG = logging.getLogger("controlplane.controller")  # one logger for the controller's parts

# an NF that answers heartbeats but refuses its configuration is tried again after 50 ms, then
# twice as long each time, until the wait would exceed a few seconds
RECONFIGURE_RETRY = 0.05
RECONFIGURE_PATIENCE = 3.0
# how long a restarted primary waits for its backup, declared down on silence alone (it may only
# be stalled, and holds the state), before that state is taken for lost (`_wait_for_backup`)
ORPHAN_PATIENCE = 10.0


class _Session(Protocol):
    @property
    def is_primary(self) -> bool: ...


class LifecycleHost(FailoverHost, JournalHost, Protocol):
    """What the NF lifecycle acts through (`ControllerCore` is one): what a fail-over runs on,
    whether this controller is the switch's primary and the switch ready, the locks that order
    fail-overs with moves, the switch's next sequence numbers and the move journal."""

    @property
    def session(self) -> _Session: ...
    @property
    def switch_ready(self) -> asyncio.Event: ...
    @property
    def move_lock(self) -> asyncio.Lock: ...
    @property
    def resumed(self) -> bool: ...
    @property
    def open_moves(self) -> dict[int, MoveIntent]: ...
    def urgent_lock(self) -> contextlib.AbstractAsyncContextManager[None]: ...
    async def next_seqs(self) -> dict[int, int] | None: ...


class NfLifecycle:
    """NF events, acted on through the controller's core (see the module docstring)."""

    def __init__(self, host: LifecycleHost, moves: SlotMoves, history: RunHistory,
                 tasks: BackgroundTasks, metrics: ControllerMetrics) -> None:
        self.host = host
        self.moves = moves
        self.history = history
        self.tasks = tasks
        self.metrics = metrics
        self._nf_locks: dict[int, asyncio.Lock] = {}  # one reconfiguration of an NF at a time
        # restarted primaries waiting for their silent backup: NF -> until when (monotonic)
        self._restarted_orphans: dict[int, float] = {}
        host.registry.add_listener(self.on_nf_event)

    # what is read through the host (the configuration may be replaced, in tests)
    @property
    def cfg(self) -> ControllerConfig:
        return self.host.cfg

    @property
    def registry(self) -> NfRegistry:
        return self.host.registry

    @property
    def state(self) -> ClusterState:
        return self.host.state

    @property
    def pairs(self) -> dict[int, int | None]:
        return self.host.state.pairs

    @property
    def slot_map(self) -> SlotMap:
        return self.host.slot_map

    @property
    def session(self) -> _Session:
        return self.host.session

    @property
    def switch_ready(self) -> asyncio.Event:
        return self.host.switch_ready

    @property
    def confirm_timeout(self) -> float:
        return self.host.confirm_timeout

    async def configure_nfs(self, retry: float = 1.0) -> None:
        """Once primary, configure every NF, retrying the unreachable ones until all are configured."""
        nfs = self.state.nfs
        told: set[int] = set()  # primaries found restarted (`_restart_unseen`), acted on once
        while not all(nfs.configured(n) for n in self.registry.nfs):
            await self.switch_ready.wait()  # next_seqs come from the switch's counter and bases
            next_seqs = await self.host.next_seqs()
            # an orphan or an NF acted on is configured by its own return (`on_nf_event`)
            for nf_id in sorted(n for n in self.registry.nfs
                                if nfs[n] in (NfPhase.NEW, NfPhase.UNSETTLED)):
                try:
                    dead = await self._restart_unseen(nf_id) if self.host.resumed else None
                    if dead is not None:  # failed over first; `nf_id` configured after that
                        if dead not in told:
                            told.add(dead)
                            await self.on_nf_event(NfEvent("restarted", dead))
                        continue
                    await self.registry.configure_nf(nf_id, self.pairs, self.slot_map, next_seqs,
                                                     self.host.open_moves, first=True)
                    nfs.to(nf_id, NfPhase.CONFIGURED)
                    LOG.info("NF %d configured", nf_id)
                except NfControlError as exc:
                    LOG.debug("NF %d not configured yet: %s", nf_id, exc)
            self.moves.finish_open_moves()
            if not all(nfs.configured(n) for n in self.registry.nfs):
                await asyncio.sleep(retry)
        await self.protect_pool()

    async def act_on_missed_downs(self) -> None:
        """Act on the NFs declared down while this controller was not the switch's primary:
        run after the reconcile each time it becomes the primary (`Controller._on_primary`)."""
        # NFs declared down while we were not primary (a standby watching, or nobody leading):
        # their "down" was not acted on then; it is now
        for nf_id, state in sorted(self.registry.nfs.items()):
            if state.declared_down and self.state.nfs.ever_configured(nf_id):
                await self.on_nf_event(NfEvent("down", nf_id, state.misses))
        # fail-overs journalled and not persisted (a previous leader's, or ours that failed
        # half-way: its Promote done, its group write refused by a restarting switch) are
        # finished now, as a restart this controller saw (§8, L3; failover_journal.py)
        for dead in failover_journal.pending(self.host):
            await self.on_nf_event(NfEvent("restarted", dead))
        await self.protect_pool()  # (a primary again: its NFs are configured already)

    async def on_nf_event(self, event: NfEvent) -> None:
        """Act on an NF's event (down, up, restarted): the registry's listener."""
        self.metrics.nf_events.labels(kind=event.kind).inc()
        if not self.session.is_primary:
            return  # a standby watches but does not act
        nfs = self.state.nfs
        if event.nf_id in self._restarted_orphans and nfs[event.nf_id] is NfPhase.ORPHAN:
            # a new process holding nothing, waiting for its silent backup (`_wait_for_backup`):
            # neither its "up" (taken for a false alarm's, it was marked configured, and its
            # slots wedged: simulation seed 98 of adopter kills with stalls) nor its "down"
            # changes that; its backup's answer or the bound does
            return
        if event.kind in ("up", "restarted"):
            restarted = event.kind == "restarted" or event.restarted
            if restarted:
                nfs.new_process(event.nf_id)
            if not restarted and nfs[event.nf_id] not in (NfPhase.NEW, NfPhase.ACTED_ON):
                lock = self._nf_locks.get(event.nf_id)
                if lock is not None and lock.locked():
                    # its reconfiguration is under way (it restarted, and waits for its
                    # fail-over behind a move): that decides its phase, not this false alarm.
                    # Settled here, a restarted primary holding nothing was CONFIGURED again
                    # (and moves could take it) each time a backup's stale `took_over_from`
                    # declared it down and its next heartbeat up (simulation ADOPTER_KILLS 11)
                    return
                # a suspicion that came to nothing (late heartbeats): the NF kept its role and
                # slots, and configuring it again would only load a loaded machine more
                self.tasks.spawn(self._back_after_false_alarm(event.nf_id))
                return
            # an NF that comes back has lost its configuration (a new process), or was failed
            # over or replaced meanwhile: give it its role and slots again
            nfs.unsettle(event.nf_id)
            self.tasks.spawn(self._reconfigure(event.nf_id, restarted))
        elif event.kind == "down" and nfs.ever_configured(event.nf_id):
            # an NF never configured (not started yet) holds no state: nothing to fail over
            nfs.unsettle(event.nf_id)
            if event.nf_id in self.pairs:
                self.tasks.spawn(self._fail_over(event.nf_id, event.confirmed, event.since,
                                                 time.time()))
            elif event.nf_id in self.pairs.values():
                self.tasks.spawn(self._replace_backup(event.nf_id, event.confirmed, event.since))

    async def _restart_unseen(self, nf_id: int) -> int | None:
        """A primary of the resumed map whose process ended while no controller watched (the
        previous leader died), found at this leader's first configuration of `nf_id`: `nf_id`
        itself if it is a primary that holds none of its slots while its backup holds some (a
        new process: configured as the primary it would own them with empty state), or the primary whose slots `nf_id`,
        its backup, took over by itself (§4.3: its link closed without a goodbye; configured
        as the backup it would drop them). None if neither (docs/protocols.md §8, L1-L2).
        This controller's registry has no earlier uptime of the NF to see the restart by.
        First, a fail-over a previous leader journalled and did not persist, of `nf_id` or of
        the primary it was promoted for, is finished (L3, controlplane/failover_journal.py)."""
        journalled = failover_journal.unfinished(self.host, nf_id)
        if journalled is not None:
            LOG.warning("NF %d: the fail-over of NF %d was journalled, not persisted: "
                        "finishing it", nf_id, journalled)
            return journalled
        reply = await self.registry.call(nf_id, "Status", pb.StatusRequest(), timeout=1.0)
        mine = set(self.slot_map.slots_of(nf_id)) if nf_id in self.pairs else set()
        held = {st.slot for st in reply.slots
                if st.role in (pb.SLOT_PRIMARY, pb.SLOT_ADOPTING, pb.SLOT_RELEASED)}
        if mine and not mine & held and await self._backup_holds(nf_id, mine):
            LOG.warning("primary NF %d holds none of its %d slots, its backup does: it restarted "
                        "while no controller led", nf_id, len(mine))
            return nf_id
        for primary in reply.took_over_from:
            if self.pairs.get(primary) == nf_id:
                LOG.warning("NF %d took over from its primary NF %d while no controller led",
                            nf_id, primary)
                return int(primary)
        return None

    async def _backup_holds(self, primary: int, slots: set[int]) -> bool:
        """Whether `primary`'s backup holds any of `slots` (a copy to fail over to). When no NF
        holds them (the whole cluster started afresh over a map left in etcd), there is no state
        to save, and the primary is configured as it is."""
        backup = self.pairs.get(primary)
        if backup is None:
            return False
        try:
            reply = await self.registry.call(backup, "Status", pb.StatusRequest(), timeout=1.0)
        except NfControlError:
            return False
        return any(st.slot in slots for st in reply.slots)

    async def _really_down(self, nf_id: int, confirmed: bool = False, since: float = 0.0) -> bool:
        """Confirm a "down" before acting on it: still declared down, and a last probe fails
        (unless the registry's probe already failed: `confirmed`). A loaded machine can delay a
        few heartbeats of a live NF; failing over a live primary would leave two NFs processing
        its slots' state. The NF must have been silent for `confirm_timeout` in all: the probe's
        deadline is what remains of it after the first missed heartbeat (`since`), and at least
        a heartbeat's deadline. In an NF's start-up grace that is `startup_confirm_timeout`."""
        if not self.registry.nfs[nf_id].declared_down:
            return False
        if confirmed:
            return True
        silent = time.time() - since if since else 0.0
        deadline = max(self.confirm_timeout_of(nf_id) - silent,
                       self.cfg.heartbeat.timeout_ms / 1000)
        if await self.registry.detector.probe_hang(nf_id, deadline):
            LOG.warning("NF %d missed heartbeats but answers: not failed over", nf_id)
            return False
        state = self.registry.nfs[nf_id]
        if since and state.answered_at > since:
            # it answered a heartbeat sent after its silence began: it was slow, then missed
            # again (a new run of misses, which is judged on its own), never silent for the
            # whole `confirm_timeout`
            LOG.warning("NF %d answered since it was suspected: not failed over", nf_id)
            return False
        return state.declared_down

    def confirm_timeout_of(self, nf_id: int) -> float:
        """How long `nf_id` must be silent before it is failed over (s): `confirm_timeout`, or
        `startup_confirm_timeout_ms` when longer for `startup_grace_ms` after the first
        configuration of its process (its workers' first moments can stall on a loaded machine:
        TLS handshakes, links set up; ~260 ms seen in CI, over the 200 ms `confirm_timeout_ms`)."""
        hb = self.cfg.heartbeat
        age = self.state.nfs.since_first_configured(nf_id)
        if age is not None and age < hb.startup_grace_ms / 1000:
            return max(self.confirm_timeout, hb.startup_confirm_timeout_ms / 1000)
        return self.confirm_timeout

    async def _fail_over(self, dead: int, confirmed: bool = False, since: float = 0.0,
                         emitted: float = 0.0) -> None:
        if not self.switch_ready.is_set():
            # at start-up, before the switch has its pipeline, a group cannot be rewritten: the
            # fail-over would fail half-done (seen when live NFs were thought dead at start-up)
            LOG.warning("NF %d down before the switch is ready: its fail-over waits for it", dead)
            await self.switch_ready.wait()
        async with self.host.urgent_lock():
            if dead in self.pairs and await self._really_down(dead, confirmed, since):
                # acted on now: an earlier suspicion's task may have settled it (CONFIGURED)
                # after this "down" unsettled it (two runs of misses, CI of 2026-11-28)
                self.state.nfs.unsettle(dead)
                result = await fail_over(self.host, dead, since, time.time() if not confirmed else emitted)
                if result.ok:
                    self._acted_on(dead)
                    self.moves.finish_open_moves()  # (a move left to this fail-over is over)
                if result.ok or result.promoted is not None:
                    self.history.record_failover(result)
                    self._new_backup_down(result)
                else:
                    # no live backup: its slots stay with it (status "orphans"), tried again when
                    # its backup answers again; recorded once resolved (failed over, or its state
                    # lost); an orphan that answers again itself was a false alarm: nothing to record
                    if self.registry.nfs[dead].declared_down:
                        self.state.nfs.to(dead, NfPhase.ORPHAN)
                    else:
                        # it answered while the fail-over looked for a backup, and its "up" was
                        # handled meanwhile (a false alarm: configured as it was; a restart:
                        # its reconfiguration fails it over): it is no orphan
                        LOG.warning("NF %d answered again while its fail-over found no live "
                                    "backup: it keeps its slots", dead)
                        self.state.nfs.settle(dead)
            else:
                self.state.nfs.settle(dead)
                self.moves.finish_open_moves()  # (a move left to its fail-over: its fence decides)

    async def _orphan_back(self, nf_id: int) -> bool:
        """Orphaned primary `nf_id` (it died without a live backup) came back as a new process:
        its backup takes over now if it answers; otherwise its state is gone (a double fault),
        which is recorded, and it owns its slots again from empty state. True if it was failed
        over (it is a spare now)."""
        async with self.host.move_lock:
            if self.state.nfs[nf_id] is not NfPhase.ORPHAN or nf_id not in self.pairs:
                return False
            self.state.nfs.to(nf_id, NfPhase.UNSETTLED)
            result = await fail_over(self.host, nf_id)
            if not result.ok and result.promoted is None and self._wait_for_backup(nf_id):
                return False
            self._restarted_orphans.pop(nf_id, None)
            self.history.record_failover(result if result.ok else state_lost(self.host, nf_id))
            self._new_backup_down(result)
            if result.ok:
                self._acted_on(nf_id)
            return result.ok

    def _new_backup_down(self, result: FailoverResult) -> None:
        """The new backup a fail-over (or a replacement, or `protect`) gave its primary was
        declared down while that ran: its "down" came while it was nobody's backup yet, so it
        started no replacement, and the primary, whose output waits for that backup's acks,
        would hold it until the backup answers again (a hung spare taken as the new backup:
        40 s in a chaos run with overlapping faults, docs/chaos.md). It is replaced now."""
        nb = result.new_backup
        if result.ok and nb is not None and result.promoted is not None \
                and self.pairs.get(result.promoted) == nb and self.registry.nfs[nb].declared_down:
            LOG.warning("NF %d, the new backup of NF %d, went down while it was being given: "
                        "replacing it", nb, result.promoted)
            self.tasks.spawn(self._replace_backup(nb))

    async def _restarted_primary(self, nf_id: int) -> None:
        """`_reconfigure_now`'s case of a primary restarted before it was failed over."""
        async with self.host.urgent_lock():
            if nf_id not in self.pairs:  # (failed over meanwhile)
                return
            LOG.warning("primary NF %d restarted before its fail-over: failing it over now", nf_id)
            result = await fail_over(self.host, nf_id)
            if result.ok:
                self._acted_on(nf_id)
                self.history.record_failover(result)
                self._new_backup_down(result)
            elif result.promoted is None and not self._wait_for_backup(nf_id):
                # no live backup: its slots' state is gone
                self.history.record_failover(state_lost(self.host, nf_id))

    def _wait_for_backup(self, primary: int) -> bool:
        """Restarted `primary` found no live backup to fail over to: True if it waits for it
        (an orphan, not configured, until the backup answers or `ORPHAN_PATIENCE` passed),
        because that backup was declared down on silence alone: only stalled, it holds the
        state, and its copies of what the switch sends meanwhile. Its state taken for lost at
        once, the new process owned the slots from nothing while the backup, stalled for 0.64 s,
        held them (simulation, adopter kills with stalls under the peer policy, seed 213)."""
        backup = self.pairs.get(primary)
        state = self.registry.nfs[backup] if backup is not None else None
        if state is None or not (state.declared_down and state.silent):
            self._restarted_orphans.pop(primary, None)
            return False
        now = time.monotonic()
        until = self._restarted_orphans.get(primary)
        if until is None:
            until = self._restarted_orphans[primary] = now + ORPHAN_PATIENCE
            self.tasks.spawn(self._orphan_patience(primary, ORPHAN_PATIENCE))
        if now >= until:
            del self._restarted_orphans[primary]
            return False
        if self.state.nfs[primary] is NfPhase.CONFIGURED:  # (settled by a "down" found false)
            self.state.nfs.unsettle(primary)
        self.state.nfs.to(primary, NfPhase.ORPHAN)
        LOG.warning("NF %d restarted and its backup NF %d is silent: its state waits for that "
                    "backup (up to %.0f s more) before it is taken for lost", primary, backup,
                    until - now)
        return True

    async def _orphan_patience(self, primary: int, patience: float) -> None:
        """`_wait_for_backup`'s bound: the restarted orphan is configured after `patience` s
        if its backup has not answered by then (its state is then recorded as lost)."""
        await asyncio.sleep(patience)  # (a protocol bound, not a synchronisation)
        if primary in self._restarted_orphans and self.state.nfs[primary] is NfPhase.ORPHAN:
            await self._reconfigure(primary, restarted=True)

    def _acted_on(self, nf_id: int) -> None:
        """`nf_id` was failed over or replaced: it holds a role it must lose. If it answered
        again while that was under way (a false alarm whose "up" came first), nothing else will
        tell it: it is configured anew now (a spare: its runtime drops the slots it owned)."""
        self.state.nfs.to(nf_id, NfPhase.ACTED_ON)
        if not self.registry.nfs[nf_id].declared_down:
            self.tasks.spawn(self._reconfigure(nf_id))

    async def _back_after_false_alarm(self, nf_id: int) -> None:
        """`nf_id` answers again, the same process, and nothing was done about it meanwhile: it
        is configured as it was. Only the cluster views sent while it was thought down (which
        left it out) are sent again, and the primaries it backs up that died meanwhile are
        failed over now."""
        if self.state.nfs[nf_id] is not NfPhase.ACTED_ON:  # (else its reconfiguration is under way)
            self.state.nfs.to(nf_id, NfPhase.CONFIGURED)
        if self.registry.left_out.pop(nf_id, None) is not None:
            await self.registry.refresh_peers(self.cfg.nf(nf_id).cluster)
        await self._retry_orphans(nf_id)
        # an adoption its backup cancelled while it was thought down is told now (the "down"'s
        # own pass, when its probe answered, found it still declared down): else it held the
        # slot ADOPTING for good while the switch sent it to the old owner (simulation, stalls
        # with moves under the peer policy, seed 201)
        self.moves.finish_open_moves()

    async def _retry_orphans(self, backup: int) -> None:
        """`backup` answers again without having restarted (a false alarm: it kept its state):
        fail over the orphaned primaries it backs up."""
        for dead in sorted(self.state.nfs.in_phase(NfPhase.ORPHAN)):
            if self.pairs.get(dead) != backup:
                continue
            if dead in self._restarted_orphans:  # restarted, waiting for this backup
                await self._reconfigure(dead, restarted=True)
            elif self.registry.nfs[dead].declared_down:
                await self._fail_over(dead, confirmed=True)

    async def _replace_backup(self, dead: int, confirmed: bool = False, since: float = 0.0) -> None:
        async with self.host.urgent_lock():
            if not await self._really_down(dead, confirmed, since):
                self.state.nfs.settle(dead)
                return
            result = await replace_backup(self.host, dead)
            if result is not None:
                self.history.record_failover(result)
                if result.ok:
                    self._acted_on(dead)
                    self._new_backup_down(result)
                # else its primary did not answer (it hangs, or died too): the pair is as it
                # was, and `dead` still the NF holding that primary's state. Acted on, its
                # next answer configured it anew before the orphan's fail-over promoted it:
                # the promotion lacked the primary's snapshot and took older state (the busy
                # bench's kill run of 2026-11-27: 4,579 lost, 100,913 counts repeated)
        await self.registry.refresh_peers(self.cfg.nf(dead).cluster)

    async def _reconfigure(self, nf_id: int, restarted: bool = False) -> None:
        """Configure `nf_id` again from the current state. One at a time per NF: two racing
        ones configured an NF from two states (a spare given slots to back up by the first's
        `protect`, then made idle by the second, dropping them: its primary then died with a
        backup that held nothing)."""
        lock = self._nf_locks.setdefault(nf_id, asyncio.Lock())
        async with lock:
            await self._reconfigure_now(nf_id, restarted)

    async def _reconfigure_now(self, nf_id: int, restarted: bool) -> None:
        phase = self.state.nfs[nf_id]
        if restarted and nf_id in self.pairs and phase not in (NfPhase.NEW, NfPhase.ORPHAN):
            # a primary that died and came back before its fail-over ran (it waited behind a
            # move): the new process holds nothing, its backup holds the state (and may have
            # taken over by itself already). Fail over now; configuring it as the primary
            # again would give its slots to empty state (found by the simulation, seed 5)
            await self._restarted_primary(nf_id)
            if self.state.nfs[nf_id] is NfPhase.ORPHAN:
                return  # it waits for its silent backup (`_wait_for_backup`)
        if self.state.nfs[nf_id] is NfPhase.ORPHAN:
            if restarted:  # a new process: it holds nothing of its slots
                await self._orphan_back(nf_id)
                if self.state.nfs[nf_id] is NfPhase.ORPHAN:
                    return  # (as above)
            else:  # alive all along (it was slow or hung, then went on): it keeps its slots
                self.state.nfs.to(nf_id, NfPhase.UNSETTLED)
        wait = RECONFIGURE_RETRY
        while True:
            try:
                seqs = await self.host.next_seqs()
                async with self.host.role_lock(nf_id):  # decided and sent with no fail-over between
                    await self.registry.configure_nf(nf_id, self.pairs, self.slot_map, seqs,
                                                     self.host.open_moves)
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
        self.state.nfs.to(nf_id, NfPhase.CONFIGURED)
        self.moves.finish_open_moves()  # a journalled move may have waited for this NF
        self.state.disarm(nf_id)  # (a new process, or a new role: armed anew if a backup)
        self.registry.left_out.pop(nf_id, None)
        LOG.info("NF %d reconfigured", nf_id)
        await self.registry.refresh_peers(self.cfg.nf(nf_id).cluster)  # a member again
        if not restarted:
            await self._retry_orphans(nf_id)
        if self.registry.nfs[nf_id].role == "spare":  # the pool grew: protect who needs it
            await self.protect_pool()

    async def protect_pool(self) -> None:
        """Give every live primary without a backup one from the pool, if one qualifies
        (`failover.protect`): when an NF joins the pool, and when a leader has configured every
        NF (a primary its predecessor left unprotected, with a spare idle beside it, stayed so
        until the next NF joined: the soak of 2026-11-27 ended its settle tail that way)."""
        if not self.session.is_primary:
            return
        async with self.host.move_lock:
            for given in await protect(self.host):
                self.history.record_failover(given)
                self._new_backup_down(given)
