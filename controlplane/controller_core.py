"""The controller's core, its switch-facing part: the cluster's state and what writes it.

`ControllerCore` owns the cluster state (`cluster_state.ClusterState`: pairs, replica groups,
armed backups, each NF's phase), the slot map and its etcd store with the move journal, the
switch session and the NF registry it is given, and gives the building blocks: `move_slot()`
(one `slot_owner` write + one etcd write, epoch + 1), `move_slots()`, `set_pair()`,
`copies_to()` and `rewrite_group()` (a primary's multicast group), `hand_over()` and
`retire_primary()`; the switch's reconcile when this controller becomes its primary
(`on_primary`: after a switch restart, each slot's numbering resumed where its NFs are),
`next_seqs()`, the learnt flows, and the locks that order moves, fail-overs and an NF's role
commands. It knows no other part of the controller: it is the `failover.FailoverHost`, the
`migration.MoveHost` and the `takeover_plan.TakeoverHost` the protocols run on, and the
`nf_lifecycle.LifecycleHost` through which the NF lifecycle acts (controller.py wires them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from contract.proto import nf_control_pb2 as pb
from contract.seq import SEQ_MASK, seq_after
from controlplane import failover_journal
from controlplane.cluster_state import ClusterState, NfPhase
from controlplane.config import ControllerConfig
from controlplane.flow_table import FlowTable
from controlplane.metrics import ControllerMetrics
from controlplane.migration import FENCE_PATIENCE, RELEASE_TIMEOUT, NotPrimaryError
from controlplane.nf_registry import NfControlError, NfRegistry
from controlplane.pipeline_state import SLOT_COUNTER
from controlplane.restart_numbering import UNREAD_MARGIN, resumed_bases
from controlplane.shared_read import SharedRead
from controlplane.slot_map import SlotEntry, SlotMap, next_epoch
from controlplane.slot_store import MoveIntent, SlotStore, load_or_build
from controlplane.switch_session import SwitchSession

LOG = logging.getLogger("controlplane.controller")  # one logger for the controller's parts
RESTART_NOTICE_WAIT = 0.5  # s: how long the reconcile after a switch restart waits for each NF


class ControllerCore:
    """The controller's state and building blocks (see the module docstring)."""

    def __init__(
        self,
        cfg: ControllerConfig,
        *,
        registry: NfRegistry,
        session: SwitchSession,
        metrics: ControllerMetrics,
        use_etcd: bool = True,
        strict_state: bool = False,
        etcd_client: Any = None,
    ) -> None:
        self.cfg = cfg
        self.metrics = metrics
        self.flows = FlowTable()
        self.registry = registry
        # pairs, replica groups, armed backups, one phase per NF (controlplane/cluster_state.py)
        self.state = ClusterState({p.id: p.backup for p in cfg.primaries()}, strict=strict_state)
        self.slot_map = self.fresh_slot_map()
        self.resumed = False
        self.use_etcd = use_etcd
        self.etcd_client = etcd_client  # (given: the simulation's in-memory etcd, sim/etcd.py)
        self.store: SlotStore | None = None
        # (a given session: the deterministic simulation's switch model, sim/switch.py); its
        # `on_primary` is the controller's, which runs `on_primary` here first
        self.session = session
        # the one `slot_traffic` read the balancer and the counter loop share (shared_read.py)
        self.slot_traffic: SharedRead[dict[int, tuple[int, int]]] = SharedRead(
            lambda: self.session.read_counter(SLOT_COUNTER))
        self.last_reconcile: dict[str, int] | None = None
        self.reconciled_at: float | None = None  # time.time() of the last reconcile
        self._digest_task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self.move_lock = asyncio.Lock()  # one migration or fail-over at a time
        # fail-overs waiting for `move_lock`: moves queued on the lock before them give way
        # (check_move refuses while one waits), so a dead primary's slots wait for no move
        self.urgent = 0
        self.release_timeout = RELEASE_TIMEOUT
        self.fence_patience = FENCE_PATIENCE  # how long a move's fence is asked (migration.py)
        # the move journal (docs/protocols.md §5): moves between their switch write and their
        # end (complete or undone), by slot; persisted in etcd when it is used
        self.open_moves: dict[int, MoveIntent] = {}
        # slot -> time.monotonic() its last move ended (complete or undone): the next waits
        # `migration.MOVE_AGAIN_AFTER` (its old owner's marker may still be on its way)
        self.moved_at: dict[int, float] = {}
        # the fail-over journal (§8, L3): dead primary -> its promoted backup, between the
        # fail-over's first step and its persisted hand-over (controlplane/failover_journal.py)
        self.open_failovers: dict[int, int] = {}
        # slots an undone move gave back to a primary that could not be told their epoch (it
        # was dying): primary -> {slot: epoch}, told to its promoted backup (failover.py)
        self.untold_epochs: dict[int, dict[int, int]] = {}
        # adoptions a move's fence cancelled at the adopter's backup while the adopter was
        # down (M14), not told to the adopter yet: adopter -> {slot: epoch}. One only slow
        # holds the slot ADOPTING: told `CancelAdopt` once it answers (slot_moves.py)
        self.untold_cancels: dict[int, dict[int, int]] = {}
        self.confirm_timeout = cfg.heartbeat.confirm_timeout_ms / 1000  # the probe before a fail-over
        # an NF's role commands come from one decision at a time: a configuration (decided
        # from the state when it starts) and a fail-over's Promote/AssignSlots to that NF never
        # interleave (`role_lock`)
        self._role_locks: dict[int, asyncio.Lock] = {}
        self.switch_ready = asyncio.Event()  # primary, pipeline pushed, entries reconciled

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
        self.store = SlotStore(endpoints, self.cfg.etcd.prefix,
                               tls=self.cfg.security.etcd_identity(), client=self.etcd_client)
        # slots are stored by replica group: the groups first (a fail-over changed only them)
        groups = await self.store.load_groups() or self.groups
        self.slot_map, self.resumed = await load_or_build(self.store, self.fresh_slot_map(),
                                                          groups)
        # (pairs after fail-overs; a map built afresh keeps the configuration's)
        self.state.load(await self.store.load_pairs() if self.resumed else None, groups)
        if self.resumed:
            self._resumed_nfs_hold_state()
            await self._resume_moves()
            await failover_journal.resume(self)
        LOG.info("slot map %s from etcd %s", "resumed" if self.resumed else "created",
                 ",".join(endpoints))
        self.metrics.update_slot_counts(self.slot_map.counts())

    async def _resume_moves(self) -> None:
        """The moves a previous leader journalled and did not end: each one still under way
        (the slot at its old owner and epoch e, or at its adopter and e+1) is taken up, with the
        slot at the adopter at e+1, which the reconcile then writes to the switch if the
        previous leader died before (packets stamped e+1 wait at the adopter, not stranded);
        `finish_open_moves` ends it once its NFs are configured. Any other is over (complete,
        undone, or overtaken) and its entry is cleared."""
        assert self.store is not None
        self.open_moves = {}
        for slot, move in (await self.store.load_moves(self.groups)).items():
            cur = self.slot_map.entry(slot) if 0 <= slot < self.slot_map.slot_count else None
            at_dst = cur is not None and (cur.owner, cur.epoch) == (move.dst, move.epoch)
            at_src = cur is not None and move.unwritten_in(cur)
            if move.dst not in self.pairs or not (at_dst or at_src):
                LOG.info("journalled move of slot %d (%d -> %d, epoch %d) is over: cleared",
                         slot, move.src, move.dst, move.epoch)
                with contextlib.suppress(Exception):
                    await self.store.clear_move(slot)
                continue
            if at_src:  # the previous leader died between the switch write and etcd's
                entry = SlotEntry(slot, move.dst, move.epoch)
                self.slot_map.set_entry(entry)
                with contextlib.suppress(Exception):  # (written again if this leader dies too)
                    await self.store.save_entry(entry, self.groups)
            LOG.warning("journalled move of slot %d (%d -> %d, epoch %d) under way: finishing it",
                        slot, move.src, move.dst, move.epoch)
            self.open_moves[slot] = move

    async def open_move(self, move: MoveIntent) -> None:
        """Journal `move` before its switch write (etcd first: a failure leaves nothing)."""
        if self.store is not None:
            await self.store.save_move(move, self.groups)
        self.open_moves[move.slot] = move

    async def drop_unwritten_move(self, slot: int) -> bool:
        """The move of `slot` was journalled but its switch write failed (nothing written): its
        entry is cleared, True. False if etcd did not clear it: the entry stays, and so does the
        move in `open_moves`, to be finished (switch write first) by `finish_open_moves` or by a
        next leader, which takes such an entry for a move under way (`_resume_moves`)."""
        if not await self._clear_journal(slot):
            return False
        self.open_moves.pop(slot, None)
        self.moved_at[slot] = time.monotonic()
        return True

    async def close_move(self, slot: int) -> None:
        """The move of `slot` is complete or undone. An entry etcd did not delete is found
        over by the next leader (the slot's epoch has passed it, or it finishes it again:
        `Release` and `Adopt` are idempotent)."""
        self.open_moves.pop(slot, None)
        self.moved_at[slot] = time.monotonic()
        await self._clear_journal(slot)

    async def _clear_journal(self, slot: int) -> bool:
        """Delete the journal entry of `slot`'s move in etcd; False (logged) if etcd did not."""
        if self.store is not None:
            try:
                await self.store.clear_move(slot)
            except Exception as exc:
                LOG.warning("journalled move of slot %d not cleared: %s", slot, exc)
                return False
        return True

    def primary_of_group(self, group: int) -> int:
        """The primary whose replica group is `group` (after fail-overs, its promoted backup)."""
        return self.state.primary_of_group(group)

    def _resumed_nfs_hold_state(self) -> None:
        """A map resumed from etcd was running: its primaries and backups may hold state, so
        their death must be acted on even before this controller configured them (an NF that
        died while no controller led is failed over as soon as this one leads)."""
        self.state.nfs.holds_state([*self.pairs, *self.state.backups()])

    async def on_primary(self, session: SwitchSession) -> None:
        """Runs each time we become the switch's primary: make the switch equal to our state.
        (The NFs declared down meanwhile are acted on next: `NfLifecycle.act_on_missed_downs`.)"""
        async with self._lock:
            self.metrics.is_primary.set(1)
            self.slot_traffic.forget()  # (the switch may have restarted: its counts with it)
            if self.store is not None:
                # a standby taking over: the previous primary may have moved slots since we loaded
                groups = await self.store.load_groups() or self.groups
                stored = await self.store.load(self.cfg.slot_space, groups)
                if stored is not None:
                    self.slot_map = stored
                    self.state.load(await self.store.load_pairs(), groups)
                    if not self.move_lock.locked():  # (our own move under way: ours is current)
                        await self._resume_moves()
                        await failover_journal.resume(self)
            if await self._resume_numbering(session):
                await self._tell_restart()
            desired = session.builder.desired(self.cfg, self.pairs, self.slot_map, self.groups,
                                              session.seq_bases)
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

    async def _tell_restart(self) -> None:
        """The switch restarted: every NF drops from its output log what it knows released
        (P10, docs/protocols.md §9), before the reconcile lets output through again. An NF that
        does not answer within the wait is not waited for (it may send such output again)."""
        async def tell(nf_id: int) -> None:
            try:
                await self.registry.call(nf_id, "SwitchRestarted", pb.SwitchRestartedRequest(),
                                         timeout=RESTART_NOTICE_WAIT)
            except NfControlError as exc:
                LOG.warning("NF %d not told of the switch's restart: %s", nf_id, exc)

        await asyncio.gather(*(tell(n) for n, s in sorted(self.registry.nfs.items())
                               if not s.declared_down and s.alive is not False))

    async def _resume_numbering(self, session: SwitchSession) -> bool:
        """A restarted switch counts every slot's packets from 0 again, while the NFs expect the
        numbers after those they have seen: they would drop the new packets as duplicates. The
        switch stamps a slot's packets with its `slot_owner` entry's seq_base + that count, so
        before the slots get their owners back (the reconcile that follows writes the bases
        with the entries, and every later slot write keeps them), each slot whose last number
        (base + count) is behind the highest number an NF received (processed, buffered or
        held as a backup's copy) gets the base that makes its next number the one after it.
        Every other slot keeps the base its entry holds (0 without one): after a mere
        reconnect, or a standby's take-over, the switch is ahead and no base changes. True if
        some slot was behind: the switch restarted."""
        # the NFs first, the switch second: on a live switch (a reconnect) the numbers only grow,
        # so what it says then is at least what any NF saw before, and no base changes
        # (read the other way round, packets stamped in between would look like a switch behind)
        seen: dict[int, int] = {}
        unread = False  # an NF not read may hold numbers beyond `seen` (restart_numbering.py)
        for nf_id, state in sorted(self.registry.nfs.items()):
            if state.declared_down or state.alive is False:
                unread = True
                continue
            try:
                reply = await self.registry.call(nf_id, "Status", pb.StatusRequest(), timeout=1.0)
            except NfControlError:
                unread = True
                continue
            for st in reply.slots:
                if st.has_seen and (st.slot not in seen or seq_after(st.highest_seen, seen[st.slot])):
                    seen[st.slot] = st.highest_seen
        bases, counts = await session.read_numbering()
        session.seq_bases, behind = resumed_bases(bases, counts, seen, unread,
                                                  self.slot_map.slot_count)
        if behind:
            LOG.warning("the switch restarted: numbering of %d slots resumed where the NFs are%s",
                        behind, f" (+{UNREAD_MARGIN}: an NF was not read)" if unread else "")
            self.metrics.numbering_resumed.inc(behind)
        return bool(behind)

    async def _digest_loop(self) -> None:
        async for flows in self.session.new_flows():
            self.metrics.digests.inc()
            self.metrics.new_flows.inc(self.flows.add(flows))

    async def next_seqs(self) -> dict[int, int] | None:
        """Per slot, the next sequence number the switch will stamp: its seq_base + the packets
        `slot_traffic` counted in it + 1 (one wildcard counter read); None if it cannot be read."""
        try:
            counts = await self.session.read_stamped()
        except Exception as exc:  # the switch went away: NFs learn each slot's numbers from traffic
            LOG.warning("slot_traffic not read (%s): NFs learn each slot's first number from traffic",
                        exc)
            return None
        bases = self.session.seq_bases
        return {slot: (bases.get(slot, 0) + count + 1) & SEQ_MASK for slot, count in counts.items()}

    def role_lock(self, nf_id: int) -> asyncio.Lock:
        """Held while `nf_id` is configured (`NfLifecycle._reconfigure_now`) and while a fail-over
        promotes it or makes it a new backup, until the controller's state says so: a
        configuration decided before a fail-over and sent after it would undo it (a busy hang
        run: a promoted NF told `SetRole(backup)` by a configuration begun before its promotion
        dropped its slots and 123 held outputs, and its slots' input for 9 s as "unowned")."""
        return self._role_locks.setdefault(nf_id, asyncio.Lock())


    @contextlib.asynccontextmanager
    async def urgent_lock(self) -> AsyncIterator[None]:
        """`move_lock` for a fail-over: moves queued before it give way (`check_move`)."""
        self.urgent += 1
        waiting = True
        try:
            async with self.move_lock:
                self.urgent -= 1
                waiting = False
                yield
        finally:
            if waiting:  # (cancelled while waiting)
                self.urgent -= 1

    def stop_digests(self) -> None:
        """Stop reading the switch's new-flow digests (the controller stops)."""
        if self._digest_task is not None:
            self._digest_task.cancel()

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
                    await self.store.save_entry(entry, self.groups)
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
                await self.store.save_entries(entries, self.groups)
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

    async def journal_failover(self, dead: int, promoted: int) -> None:
        """Before a fail-over's first step: journalled in etcd (§8, L3; failover_journal.py)."""
        await failover_journal.journal(self, dead, promoted)

    async def hand_over(self, dead: int, promoted: int, backup: int | None) -> None:
        """After a fail-over: `promoted` owns the dead primary's slots and group, with `backup`
        (slot epochs unchanged), persisted in etcd (groups and pairs in one transaction), and
        the fail-over's journal entry cleared."""
        async with self._lock:
            self.slot_map.hand_over(dead, promoted)
            self.state.hand_over(dead, promoted, backup)
            self.metrics.update_slot_counts(self.slot_map.counts())
            if self.store is not None:
                try:
                    # slots are stored by group, and the group changed hands: no slot is written
                    await self.store.save_handover(self.groups, self.pairs)
                except Exception as exc:
                    # the switch and A' have it, and so does our state (a fail-over tried again
                    # from here found A's group gone: KeyError); the journal entry stays, for
                    # the next leader to finish it if we stop before we write the pairs again
                    LOG.error("fail-over of NF %d to NF %d not persisted (%s): journalled, "
                              "a next leader finishes it", dead, promoted, exc)
                    return
        await failover_journal.close(self, dead)

    async def retire_primary(self, nf: int) -> None:
        """A drained primary (no slot left) is a primary no more: its pair and replica group go
        (from the switch too), persisted."""
        if self.slot_map.slots_of(nf):
            raise ValueError(f"NF {nf} still owns slots")
        async with self._lock:
            group = self.state.retire(nf)
            if self.store is not None:
                await self.store.save_pairs(self.pairs)
                await self.store.save_groups(self.groups)
            if group is not None and self.session.is_primary:
                await self.session.delete_group(group)

    async def set_pair(self, primary: int, backup: int | None) -> None:
        """Make `primary` a primary with `backup`; writes its replica group."""
        async with self._lock:
            insert = primary not in self.pairs
            group = self.state.set_pair(primary, backup)
            if self.store is not None:
                await self.store.save_pairs(self.pairs)
                await self.store.save_groups(self.groups)
            if self.session.is_primary:
                await self._write_group(group, primary, backup, insert)

    async def copies_to(self, primary: int, backup: int) -> None:
        """Rewrite `primary`'s replica group to {primary, backup} on the switch without recording
        the pair (`set_pair` does that once the primary has taken `backup`): a primary given its
        first backup must not commit a batch with it whose input it never received a copy of."""
        async with self._lock:
            if primary in self.groups and self.session.is_primary:
                await self._write_group(self.groups[primary], primary, backup)

    async def _write_group(self, group: int, primary: int, backup: int | None,
                           insert: bool = False) -> None:
        """Replica group `group` on the switch: `primary`'s port, and `backup`'s if any."""
        backup_port = None if backup is None else self.cfg.nf(backup).port
        await self.session.set_group(group, self.cfg.nf(primary).port, backup_port, insert=insert)

    async def close(self) -> None:
        await self.registry.close()
        if self.store is not None:
            await self.store.close()

    # the state's parts by their old names (read them; change them through `state`)
    @property
    def pairs(self) -> dict[int, int | None]:
        return self.state.pairs

    @property
    def groups(self) -> dict[int, int]:
        return self.state.groups

    @property
    def armed(self) -> dict[int, tuple[int, int]]:
        return self.state.armed

    @property
    def nfs_configured(self) -> frozenset[int]:
        return self.state.nfs.in_phase(NfPhase.CONFIGURED)

    @property
    def orphans(self) -> frozenset[int]:
        return self.state.nfs.in_phase(NfPhase.ORPHAN)
