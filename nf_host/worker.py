"""One worker of an NF instance: in-order processing, output commit, replication, backup and moves.

A worker owns a disjoint set of slots (slot % workers == index) and everything about them: the
sequencers, the slot states, the open batch and the batches waiting for the backup's ack, the input
copies it holds as a backup, the replicas it holds as a cluster peer, and its replication links.
It runs on one asyncio loop: frames come from `on_frame` (the data socket, or packets forwarded by
a releasing NF), replication messages from `on_replication`, commands from `command`. Between two
calls nothing else runs, so every control action happens at a packet boundary.

The worker never touches a socket for data itself: it hands output frames to `tx`, which lets the
same code run behind an AF_PACKET socket (`nf_host.port`) and in-process in unit tests.

The worker is made of parts (docs/nf_host.md, "The worker, made of parts"), held by composition:
`Worker` holds the state they share (configuration, the NF, the owned slots, the counters, the
backup and peers, the takeover's clock and window) and builds them in its constructor, each given
the worker as the narrow Protocol it uses, and calls them explicitly: `data_path.DataPath` (frames
in, in-order processing, the NF's verdicts, a slot that starts here), `commit_pipeline.
CommitPipeline` (batches, deltas, output held for the backup's ack), `flow_bounds.FlowBounds`
(evictions), `receiving.ReplicaReceiver` (the receiving side of replication), `links.Links`
(replication links, the snapshot on (re)connection, acks), `transfers.Transfers` (our transfers
awaiting an answer), `ownership.Ownership` (moves), `promotion.Promotion` (a backup's promotion),
`backup_slots.BackupSlots` (the slots held for other NFs) and `worker_status.StatusReport` (the
status). `Worker` itself is the lifecycle and the control surface (roles, backup, peers, NF
update, the command dispatcher), with thin delegates to the parts for what callers and the
other parts use (`on_frame`, `offer`, `close_batch`, `adopt`, `release`, `promote`, ...).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Set
from typing import TypeVar

from contract import commands
from contract.replication import Delta, LoggedBatch, Message
from contract.results import (
    FenceResult,
    PromoteResult,
    ReleaseResult,
    ReplBytes,
    SlotFlows,
    WorkerStatus,
)
from contract.roles import Role, SlotRole
from contract.seq import SEQ_MASK, older_owner
from contract.shim import Shim
from nf_host.adopt_commit import AdoptCommit
from nf_host.backup import InputBuffer
from nf_host.backup_slots import BackupSlots
from nf_host.commit import Batch, OutputCommit, OutputLog
from nf_host.commit_pipeline import CommitPipeline
from nf_host.data_path import DataPath
from nf_host.flow_bounds import FlowBounds, eviction_policy
from nf_host.flow_table import FlowTable
from nf_host.links import Links
from nf_host.move_marker import MarkerWait, Parked
from nf_host.nf_api import GlobalStore, NetworkFunction
from nf_host.ownership import Ownership
from nf_host.peer_policy import PeerPolicy
from nf_host.promote_wait import PrimarySync
from nf_host.promotion import PROMOTE_CHUNK, Promotion
from nf_host.quiet_window import QuietWindow
from nf_host.receiving import ReplicaReceiver
from nf_host.replication import Link, ReplicationServer, Reply, worker_address
from nf_host.state_store import Replica, SlotState
from nf_host.transfers import Transfers
from nf_host.worker_status import StatusReport
from nf_host.worker_types import (
    CommandError,
    Counters,
    SlotRuntime,
    TakeoverClock,
    WorkerConfig,
)

__all__ = ["CommandError", "Counters", "SlotRuntime", "Worker", "WorkerConfig"]

Result = WorkerStatus | SlotFlows | FenceResult | ReleaseResult | PromoteResult | None
"""What a command answers (`contract.results`; None: nothing)."""
CommandResult = Awaitable[Result] | Result
"""What a command's handler returns: its answer, now or to await."""
R = TypeVar("R")

log = logging.getLogger(__name__)


class Worker:
    """The per-worker engine (see the module docstring): the state its parts share, the parts,
    the lifecycle and the control surface."""

    def __init__(
        self,
        cfg: WorkerConfig,
        nf: NetworkFunction,
        store: GlobalStore,
        tx: Callable[[bytes | bytearray], None],
        *,
        on_pause: Callable[[bool], None] | None = None,
        drop_probe: Callable[[], int] | None = None,
        on_backup: Callable[[int, str], None] | None = None,
    ) -> None:
        """`tx` sends an output frame; `on_pause(True/False)` stops and resumes reading the data
        socket (backpressure); `drop_probe()` counts the frames the kernel dropped since it was
        last called; `on_backup(nf, address)` is told whenever the backup changes (the heartbeat
        responder's watch on it, nf_host/death_watch.py)."""
        self.cfg, self.nf, self.store, self.tx = cfg, nf, store, tx
        self.role = Role.PRIMARY
        self.slots: dict[int, SlotRuntime] = {}
        self.backups = BackupSlots()  # what we hold of slots owned elsewhere (backup_slots.py)
        # slots whose copies went to their old owner (an adoption our dead primary never
        # started, M14: Ownership.give_copies_back), and to the old owner's backup too while
        # the old owner is suspected (M16): what still arrives follows them
        self.gave_back: dict[int, tuple[Link, ...]] = {}
        self.primary_sync = PrimarySync()  # what we hold of our primaries (promote_wait.py)
        self.inbuf = InputBuffer(cfg.backup_buffer_bytes)
        self.backup_id = 0
        self.peer_ids: set[int] = set()
        self.c = Counters()
        # every owned flow's last use and idle class: the bounds (nf_host/flow_table.py)
        self.flow_table = FlowTable(int(nf.limit("max_flows")), eviction_policy(nf))
        self.bounds = FlowBounds(self.flow_table, self)  # evictions (nf_host/flow_bounds.py)
        self.server: ReplicationServer | None = None
        self.policy = PeerPolicy(cfg.nf_id, cfg.index, cfg.workers, cfg.limits)
        # adopted transfers waiting for our backup to hold their state (nf_host/adopt_commit.py)
        self.adopt_commit = AdoptCommit(cfg.transfer_timeout / 2)
        self._tick_task: asyncio.Task[None] | None = None
        self.gapped: set[int] = set()  # slots whose sequencer holds early packets
        self.on_backup = on_backup
        self.watched_backup: tuple[int, str] = (0, "")  # what `on_backup` was last told
        self.started = time.monotonic()
        self.out_log = OutputLog(retain=self.cfg.output_retain)  # as a backup: outputs its primary may not have released
        # the last promotion's clock until its first output is released
        self.takeover_clock: TakeoverClock | None = None
        # until then, peers and idle slots wait (nf_host/quiet_window.py); the watch on the new
        # backup it defers (backup, address), opened when the window ends
        self.quiet = QuietWindow(self._quiet_over)
        self.deferred_watch: tuple[int, str] | None = None
        self.markers = MarkerWait(cfg.marker_wait)  # adoptions waiting for their move marker
        # as an armed backup: (primary, successor, its address) to take over with when the
        # primary's replication link closes without its goodbye (Worker.on_peer_lost)
        self.takeover_plan: tuple[int, int, str] | None = None
        self.took_over_from: set[int] = set()  # until the controller's Promote for them
        self.took_over_slots: dict[int, set[int]] = {}  # primary -> the slots taken from it
        self._tasks: set[asyncio.Task[object]] = set()
        self.data = DataPath(self)  # frames in, in-order processing (data_path.py)
        self.receiver = ReplicaReceiver(self)  # the receiving side of replication (receiving.py)
        self.promotion = Promotion(self)  # a backup's promotion (promotion.py)
        self.transfers = Transfers(self)  # our transfers awaiting an answer (transfers.py)
        self.linkset = Links(self)  # our replication links and what they acknowledged (links.py)
        self.pipeline = CommitPipeline(self, on_pause)  # batches and held output (commit_pipeline.py)
        self.moves = Ownership(self)  # a move's two sides (ownership.py)
        self.report = StatusReport(self, drop_probe)  # the status (worker_status.py)

    # ------------------------------------------------------------------ lifecycle
    async def _tick(self) -> None:
        period = max(0.001, self.cfg.gap_timeout / 4)
        while True:
            await asyncio.sleep(period)
            self.data.tick(time.monotonic())

    async def start(self) -> None:
        """Serve replication (a connection that ends without its goodbye: `on_peer_lost`) and
        start the timers (gaps, idle flows, move markers)."""
        self.policy.on_rows_dropped = self.backups.not_whole  # (the policy in force now)
        self.server = ReplicationServer(
            self.cfg.repl_host, self.cfg.repl_port, self.on_replication, self.policy,
            on_lost=self.on_peer_lost,
        )
        await self.server.start()
        self._tick_task = asyncio.get_running_loop().create_task(self._tick())

    async def stop(self) -> None:
        if self._tick_task is not None:
            self._tick_task.cancel()
        for link in list(self.links.values()):
            await link.close()
        if self.server is not None:
            await self.server.close()

    # ------------------------------------------------------------------ data path (data_path.py)
    def on_frame(self, frame: bytes) -> None:
        """A frame from the switch (or forwarded by a releasing NF): `DataPath.on_frame`."""
        self.data.on_frame(frame)

    def backup_copy(self, slot: int, seq: int, frame: bytes) -> None:
        self.data.backup_copy(slot, seq, frame)

    def follow_given_back(self, slot: int, frame: bytes) -> bool:
        return self.data.follow_given_back(slot, frame)

    def offer(self, rt: SlotRuntime, shim: Shim, frame: bytes, now: float) -> None:
        self.data.offer(rt, shim, frame, now)

    def expire_gaps(self, now: float) -> None:
        self.data.expire_gaps(now)

    def start_adopted(self, rt: SlotRuntime, parked: Parked) -> None:
        self.data.start_adopted(rt, parked)

    def become_primary(self, rt: SlotRuntime, state: SlotState, next_seq: int | None) -> None:
        self.data.become_primary(rt, state, next_seq)

    def new_slot(self, slot: int, epoch: int, role: SlotRole) -> SlotRuntime:
        return self.data.new_slot(slot, epoch, role)

    # ------------------------------------------------------------------ output commit (commit_pipeline.py)
    @property
    def commit(self) -> OutputCommit:
        return self.pipeline.commit

    @property
    def batch(self) -> Batch | None:
        return self.pipeline.batch

    @property
    def released_id(self) -> int:
        return self.pipeline.released_id

    @property
    def input_paused(self) -> bool:
        return self.pipeline.input_paused

    def open_batch(self, now: float) -> Batch:
        return self.pipeline.open_batch(now)

    def close_batch(self) -> None:
        """Seal the open batch (`CommitPipeline.close_batch`)."""
        self.pipeline.close_batch()

    def release_batch(self, batch: Batch) -> None:
        self.pipeline.release_batch(batch)

    def maybe_resume(self) -> None:
        self.pipeline.maybe_resume()

    def for_backup(self, msg: Delta, logged: list[LoggedBatch]) -> Delta:
        return self.pipeline.for_backup(msg, logged)

    def held_upto(self, batch_id: int) -> bool:
        return self.pipeline.held_upto(batch_id)

    async def released_upto(self, batch_id: int, timeout: float) -> None:
        await self.pipeline.released_upto(batch_id, timeout)

    # ------------------------------------------------------------------ takeover window, backup watch
    def _quiet_over(self) -> None:
        """The takeover's quiet window ended: what peers were not sent leaves, and the watch on
        the new backup opens."""
        for link in self.links.values():
            link.uncork()
        watch, self.deferred_watch = self.deferred_watch, None
        if watch is not None:
            self.watch_backup(watch)

    def watch_backup(self, watch: tuple[int, str]) -> None:
        """Tell `on_backup` the backup to watch, (NF, its worker's address), if it changed."""
        if self.on_backup is not None and watch != self.watched_backup:
            self.watched_backup = watch
            self.on_backup(*watch)

    # ------------------------------------------------------------------ receiving side
    def resync_backup(self) -> None:
        """Our backup, if connected, gets a full snapshot now (`Links.on_connected`)."""
        link = self.links.get(self.backup_id) if self.backup_id else None
        if link is not None and link.connected.is_set():
            self.linkset.on_connected(link)

    def copy_to_backup(self, frame: bytes) -> None:
        """An input copy of `frame` to our backup (`ReplicaReceiver.copy_to_backup`)."""
        self.receiver.copy_to_backup(frame)

    def on_replication(self, msg: Message) -> Reply:
        """A replication message from another NF (`nf_host.receiving.ReplicaReceiver`)."""
        return self.receiver.on_replication(msg)

    # ------------------------------------------------------------------ read views of the parts' state
    @property
    def links(self) -> dict[int, Link]:
        """Our replication links, by NF (`linkset`)."""
        return self.linkset.links

    @property
    def acked_versions(self) -> dict[int, dict[int, int]]:
        """The version of each slot each NF acknowledged (`linkset`): nf -> slot -> version."""
        return self.linkset.acked_versions

    @property
    def pending_versions(self) -> dict[int, dict[int, dict[int, int]]]:
        """The versions sent each NF, unacknowledged (`linkset`): nf -> batch -> slot -> version."""
        return self.linkset.pending_versions

    @property
    def replicas(self) -> dict[int, Replica]:
        """The replica of each slot held here (`backups`: backed up, or a peer's)."""
        return self.backups.replicas

    @property
    def backed_up(self) -> Set[int]:
        """The slots backed up here (`backups`), to read."""
        return self.backups.backed_up

    def owns(self, slot: int) -> bool:
        return slot % self.cfg.workers == self.cfg.index

    # ------------------------------------------------------------------ moves (ownership.py)
    def adopt(self, slot: int, epoch: int) -> None:
        """Adopt `slot` at `epoch`: it starts here with the old owner's transfer and marker."""
        self.moves.adopt(slot, epoch)

    async def release(self, slot: int, to_nf: int, to_address: str, same_cluster: bool,
                      copy_nf: int = 0, copy_address: str = "") -> ReleaseResult:
        """Give `slot` to `to_nf` (`Ownership.release`); a copy of the tail it forwards goes to
        `copy_nf`, the adopter's backup (M18)."""
        return await self.moves.release(slot, to_nf, to_address, same_cluster,
                                        copy_nf, copy_address)

    # ------------------------------------------------------------------ promotion (promotion.py)
    def promote(self, slots: list[int], dead: int = 0) -> PromoteResult:
        """Own `slots` (all backed-up slots if empty) as the backup of dead NF `dead`, in one
        step (`Promotion.promote`)."""
        return self.promotion.promote(slots, dead)

    async def promote_soon(self, slots: list[int], dead: int = 0,
                           chunk: int = PROMOTE_CHUNK) -> PromoteResult:
        """Busy slots at once, idle ones `chunk` per turn of the loop (`Promotion.promote_soon`)."""
        return await self.promotion.promote_soon(slots, dead, chunk)

    def holes(self, among: Iterable[int] | None = None) -> list[int]:
        """The backed-up slots whose copies do not follow their replica (`Promotion.holes`)."""
        return self.promotion.holes(among)

    # ------------------------------------------------------------------ commands
    def assign(self, slots: list[tuple[int, int, int | None]], as_backup: bool,
               primary: int = 0, adoption: bool = False) -> None:
        if as_backup and primary and slots:  # its snapshot will come (promote_wait.py)
            self.primary_sync.assigned(primary, [s for s, _e, _n in slots if s not in self.replicas])
        if as_backup and self.role == Role.IDLE and slots:
            self.role = Role.BACKUP  # a spare taken from the pool (as the control server records)
        elif not as_backup and slots:
            self.role = Role.PRIMARY
        for slot, epoch, next_seq in slots:
            self.gave_back.pop(slot, None)  # (assigned: its packets are for here again)
            if as_backup:  # (`adoption`: never promoted until our primary has started it, M14)
                self.backups.assign(slot, epoch, next_seq, adoption)
                continue
            rt = self.slots.get(slot)
            if rt is not None and rt.given_back:  # an adoption given back: not held here
                del self.slots[slot]
                rt = None
            if rt is not None:
                self._assign_held(rt, epoch)
                continue
            if not self.backups.promotable(slot):  # (its state is the old owner's: M14)
                log.warning("slot %d assigned here as primary while our dead primary's adoption "
                            "of it is undecided: not owned", slot)
                continue
            if self.backups.holds(slot):
                # owning a slot we hold a copy of: that is a promotion (state kept, copies replayed)
                self.promote([slot])
                self.slots[slot].epoch = epoch
                continue
            rt = self.slots[slot] = self.new_slot(slot, epoch, SlotRole.PRIMARY)
            rt.seq.next_expected = next_seq
            if next_seq is not None:
                rt.state.last_seq = (next_seq - 1) & SEQ_MASK

    def _assign_held(self, rt: SlotRuntime, epoch: int) -> None:
        """`AssignSlots` (as primary) of a slot this worker holds: its state, numbering and
        waiting packets are kept whatever the assignment says (it may come from a new leader
        that knows less, or without `next_seq`); only its epoch follows, never backwards."""
        newer = rt.epoch != epoch and not older_owner((epoch, 0), (rt.epoch, 0))
        if rt.role == SlotRole.RELEASED and rt.forward is None:
            # released, its transfer unanswered: the controller decided the move did not happen
            # (the adopter's fence cancelled it), so the slot is owned here again
            self.moves.take_back(rt, epoch if newer else rt.epoch)
            return
        if rt.role == SlotRole.RELEASED:
            log.warning("slot %d is assigned here but was released to NF %s (its transfer "
                        "accepted): it stays there, its packets forwarded", rt.slot,
                        rt.release.to_nf if rt.release else "?")
            return
        if newer:  # PRIMARY, or ADOPTING (its transfer completes it: next_seq is not needed)
            rt.epoch = epoch
            rt.taken_back_at = time.monotonic()  # (an undo: what the adopter had comes back)

    def set_role(self, role: Role) -> None:
        """The whole instance's role. Becoming a backup or idle (a spare) from another role drops
        every slot this worker owns, with the output it still holds: an NF the controller failed over (it hung,
        then came back) must never process or release anything of slots that are someone
        else's now; its promoted backup re-creates that output. Replicas and copies go too:
        a backup's come from `AssignSlots` and its primary's snapshot."""
        old, self.role = self.role, role
        if role != old:
            self.takeover_plan = None
            self.took_over_from.clear()
            self.took_over_slots.clear()
        if role == Role.PRIMARY or role == old:
            return  # (a reconfiguration in the same role, e.g. after a false alarm, keeps all)
        dropped = list(self.slots)  # (every slot in `slots` is owned: SLOT_TRANSITIONS)
        if dropped:
            log.warning("now %s: dropping %d owned slots and %d held outputs", role.name,
                        len(dropped), self.commit.held_outputs)
        self.slots.clear()
        self.gapped.clear()
        self.backups.clear()
        self.gave_back.clear()
        self.primary_sync.forget()
        self.inbuf = InputBuffer(self.cfg.backup_buffer_bytes)
        self.out_log = OutputLog(retain=self.cfg.output_retain, evicted=self.out_log.evicted)
        self.pipeline.reset()
        if self.backup_id:
            self.set_backup(0, "")

    def replace_nf(self, nf: NetworkFunction, *, dry_run: bool = False) -> None:
        """Live update: process with `nf` from the next packet on. Refused while this worker
        owns or adopts a slot (its packets would meet two versions of the NF mid-flow); the
        copies and replicas it holds keep their flow state, which `nf` takes over as it is."""
        busy = sorted(s for s, rt in self.slots.items()
                      if rt.role in (SlotRole.PRIMARY, SlotRole.ADOPTING))
        if busy:
            more = f" and {len(busy) - 8} more" if len(busy) > 8 else ""
            raise CommandError(f"NF update refused: slots {busy[:8]}{more} are still owned here "
                               "(move them away first)")
        if not dry_run:
            self.nf = nf
            self.bounds.bound(nf)

    def set_backup(self, nf_id: int, address: str) -> None:
        old = self.backup_id
        if nf_id == 0:
            self.backup_id = 0
            for batch in self.commit.release_all():
                self.release_batch(batch)
            self.maybe_resume()
        else:
            self.backup_id = nf_id
            # output waits for this link: if it is backing off after refusals (the NF was not
            # told of us yet, e.g. a spare just restarted), try again now; and a peer's link
            # held by a takeover's quiet window (nf_host/quiet_window.py) is held no longer
            new = self.linkset.link(nf_id, address)
            new.uncork()
            new.kick()
            # Connected already (a cluster peer's link), no (re)connection snapshot will come:
            # its replicas were built from peer deltas, without our output; the batches still
            # waiting for the old backup's ack would be released by this one's next ack and, if
            # we died then, be neither replayed (the state is there) nor logged. The snapshot
            # logs their output there and replaces its replicas. Told again of the backup it
            # has, it sends one too: the controller tells it so when it gives that NF again,
            # which may have been made a spare meanwhile (dropping what it held) over the same
            # connection; without one, that backup lacked our snapshot for good, and a promotion
            # of it took older state (the busy bench's hang run of 2026-11-28: a `SetBackup`
            # answered late, then the same backup given again). Not connected: its connection
            # brings the snapshot (`Links.on_connected`).
            self.resync_backup()
        if old and old != nf_id and old not in self.peer_ids:
            link = self.links.pop(old, None)
            if link is not None:
                asyncio.get_running_loop().create_task(link.close())
        watch = (nf_id, worker_address(address, self.cfg.index) if nf_id else "")
        if self.quiet.active:  # a takeover's new backup: watched once its first output left
            self.deferred_watch = watch
        else:
            self.watch_backup(watch)

    def arm_takeover(self, primary: int, successor: int, address: str) -> None:
        """Take over `primary`'s slots by ourselves, with `successor` as our backup (0: none, as
        no NF qualifies), if its replication link closes without its goodbye; `primary` 0
        disarms (docs/protocols.md §4.3)."""
        self.takeover_plan = (primary, successor, address) if primary else None

    def on_peer_lost(self, sender: int) -> None:
        """NF `sender`'s replication connection ended without its goodbye: its process died (or
        its socket was torn down). If we are armed to back it up, promote ourselves at once for
        every slot we back up, with the pre-chosen successor as our backup, so the first output
        waits only for the successor's ack, not for the controller's detection and `Promote`.
        Safe even if `sender` is alive after all: its output waits for our acks, which stop (we
        refuse its deltas for slots we own), so it cannot release anything more; and the
        controller, which sees `took_over_from` in our status, fails it over."""
        self.primary_sync.peer_lost(sender)  # a promotion waiting for its state waits no more
        plan = self.takeover_plan
        if plan is None or plan[0] != sender or not self.backed_up:
            log.info("the replication link of NF %d closed without a goodbye (armed for %s, %d "
                     "slots backed up): no takeover", sender, plan and plan[0], len(self.backed_up))
            return
        self.takeover_plan = None
        primary, successor, address = plan
        slots = sorted(self.backed_up - self.backups.adoptions)  # (never an adoption not started: M14)
        log.warning("the replication link of primary NF %d closed without a goodbye: taking over "
                    "its %d slots, with %s as backup", primary, len(slots),
                    f"NF {successor}" if successor else "no NF (none qualifies)")
        self.c.self_promotions += 1
        self.took_over_from.add(primary)
        self.took_over_slots[primary] = set(slots)
        self.quiet.begin()  # (before the backup changes: its watch waits for the first output)
        if successor:
            self.set_backup(successor, address)  # in the same step: no output leaves unprotected
        # the busy slots in this very step (their first output waits only for the successor's
        # ack), the idle ones a few per turn of the loop after
        res, idle = self.promotion.promote_busy(slots, dead=primary)
        task = asyncio.get_running_loop().create_task(
            self.promotion.promote_idle(res, idle, primary))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def set_peers(self, peers: list[tuple[int, str]]) -> None:
        new = {nf for nf, _ in peers if nf != self.cfg.nf_id}
        for nf_id, address in peers:
            if nf_id != self.cfg.nf_id:
                # a peer now (again): it may have refused us while it did not know us
                self.linkset.link(nf_id, address).kick()
        for gone in self.peer_ids - new:
            if gone != self.backup_id:
                link = self.links.pop(gone, None)
                if link is not None:
                    asyncio.get_running_loop().create_task(link.close())
        self.peer_ids = new

    # ------------------------------------------------------------------ status (worker_status.py)
    def highest_seen(self, slot: int) -> int | None:
        """The highest sequence number of `slot` received here (`StatusReport.highest_seen`)."""
        return self.report.highest_seen(slot)

    def status(self) -> WorkerStatus:
        return self.report.status()

    def repl_bytes(self) -> ReplBytes:
        """Replication traffic in bytes since start (`StatusReport.repl_bytes`)."""
        return self.report.repl_bytes()

    def flows(self, slot: int) -> SlotFlows:
        """The state of one slot (owned or replicated), for tests and debugging."""
        return self.report.flows(slot)

    async def command(self, name: str, args: Mapping[str, object] | None = None) -> Result:
        """Run one control command given by name and arguments (`contract.commands.decode`:
        CommandError if it is no command)."""
        try:
            cmd = commands.decode(name, args)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        return await self.run(cmd)

    async def run(self, cmd: commands.Command) -> Result:
        """Run one control command (from `nf_host.control` through the worker's pipe)."""
        self.policy.learn(cmd)  # who may use the replication server (peer_policy)
        result = self._commands(cmd)
        if inspect.isawaitable(result):
            return await result
        return result

    async def ask(self, cmd: commands.Returns[R]) -> R:
        """`run`, typed by the command: its answer (`contract.results`), checked."""
        return commands.answer(cmd, await self.run(commands.as_command(cmd)))

    @functools.cached_property
    def _commands(self) -> commands.Dispatch[CommandResult]:
        """The worker's commands, by type (what each returns: its answer, or None)."""
        t = commands.Dispatch[CommandResult]()
        t.on(commands.Ping, lambda c: None)
        t.on(commands.Status, lambda c: self.status())
        t.on(commands.Flows, lambda c: self.flows(c.slot))
        t.on(commands.SetRole, lambda c: self.set_role(c.role))
        t.on(commands.SetBackup, lambda c: self.set_backup(c.nf_id, c.address))
        t.on(commands.SetPeers, lambda c: self.set_peers(c.peers))
        t.on(commands.Assign,
             lambda c: self.assign(c.slots, c.as_backup, c.primary, c.adoption))
        t.on(commands.CancelAdopt,
             lambda c: self.moves.cancel_adopt(c.slot, c.epoch, c.from_nf, c.from_address,
                                               c.copy_nf, c.copy_address))
        t.on(commands.Adopt, lambda c: self.adopt(c.slot, c.epoch))
        t.on(commands.Release,
             lambda c: self.release(c.slot, c.to_nf, c.to_address, c.same_cluster,
                                    c.adopter_backup, c.adopter_backup_address))
        t.on(commands.ArmTakeover, lambda c: self.arm_takeover(c.primary, c.successor, c.address))
        t.on(commands.SwitchRestarted, lambda c: self.pipeline.switch_restarted())
        t.on(commands.ExpectGiveBack, lambda c: None)  # (the peer policy learns it: `learn`)
        t.on(commands.Promote, self._on_promote)
        return t

    async def _on_promote(self, c: commands.Promote) -> PromoteResult:
        self.takeover_plan = None  # the controller promotes us: nothing left to arm for
        self.took_over_from.discard(c.dead)  # (it knows: it acts on the dead primary)
        listed = set(c.slots)  # a slot taken over by itself that the Promote leaves out goes back
        for slot in sorted(self.took_over_slots.pop(c.dead, set()) - listed if listed else ()):
            self.moves.give_up_taken(slot, c.dead)
        if c.dead:  # a false alarm's primary is alive: first what we lack of it, if anything
            mine = [s for s in (c.slots or sorted(self.backed_up))
                    if self.owns(s) and s in self.backed_up]
            how = await self.primary_sync.wait(c.dead, mine, self.holes, self.cfg.promote_wait,
                                              self.cfg.promote_wait_max, c.may_live)
            if how:
                log.warning("promotion for NF %d: %s", c.dead, how)
        if c.backup:  # in the same step: no output leaves unprotected
            self.set_backup(c.backup, c.address)
        # (after the wait: raised before, a live primary's deltas would be refused as older)
        self.backups.told_epochs(c.epochs)
        return await self.promote_soon(c.slots, c.dead)

