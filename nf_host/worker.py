"""One worker of an NF instance: in-order processing, output commit, replication, backup and moves.

A worker owns a disjoint set of slots (slot % workers == index) and everything about them: the
sequencers, the slot states, the open batch and the batches waiting for the backup's ack, the input
copies it holds as a backup, the replicas it holds as a cluster peer, and its replication links.
It runs on one asyncio loop: frames come from `on_frame` (the data socket, or packets forwarded by
a releasing NF), replication messages from `on_replication`, commands from `command`. Between two
calls nothing else runs, so every control action happens at a packet boundary.

The worker never touches a socket for data itself: it hands output frames to `tx`, which lets the
same code run behind an AF_PACKET socket (`nf_host.port`) and in-process in unit tests.

The worker is made of parts (docs/nf_host.md, "The worker, made of parts"): `worker_core.WorkerCore`
(the data path) builds them in its constructor, each given the worker as the narrow Protocol it
uses, and calls them explicitly: `commit_pipeline.CommitPipeline` (batches, deltas, output held
for the backup's ack), `flow_bounds.FlowBounds` (evictions),
`receiving.ReplicaReceiver` (the receiving side of replication), `links.Links` (replication links,
the snapshot on (re)connection, acks), `transfers.Transfers` (our transfers awaiting an answer),
`ownership.Ownership` (moves), `promotion.Promotion` (a backup's promotion) and
`backup_slots.BackupSlots` (the slots held for other NFs). Here `Worker` adds the lifecycle and
the control surface (roles, backup, peers, NF update, status, the command dispatcher), with thin
delegates to the parts for the commands callers use (`adopt`, `release`, `promote`, ...).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Awaitable, Iterable, Mapping
from typing import TypeVar

from contract import commands
from contract.results import (
    FenceResult,
    PromoteResult,
    ReleaseResult,
    ReplBytes,
    SlotFlows,
    SlotStatus,
    WorkerStatus,
)
from contract.roles import Role, SlotRole
from contract.seq import SEQ_MASK, older_owner, seq_after
from nf_host.backup import InputBuffer
from nf_host.commit import OutputLog
from nf_host.nf_api import NetworkFunction
from nf_host.promotion import PROMOTE_CHUNK
from nf_host.replication import ReplicationServer, worker_address
from nf_host.state_store import Replica
from nf_host.worker_core import WorkerCore
from nf_host.worker_types import CommandError, Counters, SlotRuntime, WorkerConfig

__all__ = ["CommandError", "Counters", "SlotRuntime", "Worker", "WorkerConfig"]

Result = WorkerStatus | SlotFlows | FenceResult | ReleaseResult | PromoteResult | None
"""What a command answers (`contract.results`; None: nothing)."""
CommandResult = Awaitable[Result] | Result
"""What a command's handler returns: its answer, now or to await."""
R = TypeVar("R")

log = logging.getLogger(__name__)


class Worker(WorkerCore):
    """The per-worker engine (see the module docstring): the core (`worker_core`), moves and
    promotion (`ownership`), and here the rest of the control surface and the status."""

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Serve replication (a connection that ends without its goodbye: `on_peer_lost`) and
        start the timers (gaps, idle flows, move markers)."""
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
            if old != nf_id and new.connected.is_set():
                # a cluster peer's link, connected already: no (re)connection snapshot will come.
                # Its replicas were built from peer deltas, without our output; the batches still
                # waiting for the old backup's ack would be released by this one's next ack and,
                # if we died then, be neither replayed (the state is there) nor logged. The
                # snapshot logs their output there and replaces its replicas
                self.linkset.on_connected(new)
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

    def highest_seen(self, slot: int) -> int | None:
        """The highest sequence number of `slot` this worker received: processed, buffered,
        waiting for an adoption, or held as a backup's input copy (serial order; None: none).
        After a switch restart the controller resumes the switch's numbering beyond it."""
        seen: list[int] = []
        rt = self.slots.get(slot)
        if rt is not None:
            if rt.seq.next_expected is not None:
                seen.append((rt.seq.next_expected - 1) & SEQ_MASK)
            seen += list(rt.seq.buffer)
            seen += [shim.seq for shim, _ in rt.pending]
        seen += list(self.inbuf.slots.get(slot, {}))
        if not seen:
            return None
        top = seen[0]
        for s in seen[1:]:
            if seq_after(s, top):
                top = s
        return top

    def status(self) -> WorkerStatus:
        slots = []
        for slot, rt in self.slots.items():
            top = self.highest_seen(slot)
            slots.append(SlotStatus(
                slot=slot, epoch=rt.epoch, role=rt.role, packets=rt.packets,
                committed_seq=rt.committed_seq, next_expected=rt.seq.next_expected or 0,
                version=rt.state.version, flows=len(rt.state.flows),
                peer_versions={
                    nf: vers[slot] for nf, vers in self.acked_versions.items() if slot in vers
                },
                highest_seen=top or 0, has_seen=top is not None,
            ))
        for slot in self.backups.held():
            role = self.backups.role(slot)
            if slot in self.slots or role is None:
                continue
            rep = self.replicas.get(slot) or Replica(slot)
            top = self.highest_seen(slot)
            slots.append(SlotStatus(
                slot=slot, epoch=rep.epoch, role=role,
                packets=self.inbuf.count(slot), committed_seq=rep.last_seq or 0,
                next_expected=0, version=rep.version, flows=len(rep.flows),
                highest_seen=top or 0, has_seen=top is not None, peer_versions={},
            ))
        c = self.c
        if self.drop_probe is not None:
            dropped = self.drop_probe()
            if dropped:  # read on every Status call (the controller's load poll): not flooded
                self.kernel_drops += dropped
                log.warning("the kernel dropped %d frames before this worker read them (full "
                            "socket buffer; %d since start)", dropped, self.kernel_drops)
        gaps = sum(rt.seq.gaps for rt in self.slots.values())
        queue = sum(rt.seq.depth + len(rt.pending) for rt in self.slots.values())
        queue += self.commit.held_outputs
        return WorkerStatus(
            slots=slots, packets=c.packets, gaps=gaps, queue_depth=queue,
            malformed=c.malformed, foreign=c.foreign, duplicates=c.duplicates,
            drops=c.malformed + c.unowned + c.duplicates + c.overflows + self.inbuf.overflows
            + self.kernel_drops + c.cancelled,
            kernel_drops=self.kernel_drops, input_paused=self.input_paused,
            unowned=c.unowned, overflows=c.overflows, input_overflows=self.inbuf.overflows,
            nf_errors=c.nf_errors,
            flows=sum(len(rt.state.flows) for rt in self.slots.values()
                      if rt.role == SlotRole.PRIMARY),
            evictions=dict(self.flow_table.evicted),
            flows_over_bound=self.flow_table.over_bound,
            global_store_errors=c.global_store_errors,
            forwarded=c.forwarded, outputs=c.outputs, replayed=c.replayed,
            reemitted=c.reemitted, watermarks=c.watermarks, logged_outputs=self.out_log.frames,
            log_evicted=self.out_log.evicted,
            cancelled=c.cancelled, markers=self.markers.markers,
            marker_timeouts=self.markers.timeouts,
            self_promotions=c.self_promotions, took_over_from=sorted(self.took_over_from),
            promote_waits=self.primary_sync.waits,
            promote_wait_timeouts=self.primary_sync.timeouts,
            promote_waited_ms=round(self.primary_sync.waited_ms, 1),
            held_outputs=self.commit.held_outputs, transfer_bytes=c.transfer_bytes,
            backup_bytes=self.inbuf.bytes_held, backup_copies=self.inbuf.count(),
            repl_errors=c.repl_errors + (self.server.errors if self.server else 0),
            repl_refused=self.policy.refused_total, repl_refusals=dict(self.policy.refused),
            repl=self.repl_bytes(),
        )

    def repl_bytes(self) -> ReplBytes:
        """Replication traffic in bytes on the wire since start: sent by destination NF, received
        by sending NF (every message: deltas, snapshots, transfers, forwarded packets, acks), and
        the slot transfers of moves alone, each way."""
        rx: dict[int, int] = {}
        xfer_in = 0
        for (sender, kind), n in (self.server.bytes_in if self.server else {}).items():
            rx[sender] = rx.get(sender, 0) + n
            if kind == "x":
                xfer_in += n
        return ReplBytes(repl_tx_bytes=dict(self.linkset.bytes_to), repl_rx_bytes=rx,
                         transfer_tx_bytes=self.c.transfer_bytes, transfer_rx_bytes=xfer_in,
                         batches=self.commit.last_id)

    def flows(self, slot: int) -> SlotFlows:
        """The state of one slot (owned or replicated), for tests and debugging."""
        rt = self.slots.get(slot)
        if rt is not None:
            flows, version, last = rt.state.flows, rt.state.version, rt.state.last_seq
        elif slot in self.replicas:
            state, _bad = self.replicas[slot].to_slot_state()
            flows, version, last = state.flows, state.version, state.last_seq
        else:
            raise CommandError(f"no state for slot {slot} here")
        return SlotFlows(version=version, last_seq=last or 0,
                         flows=[(None if k is None else list(k), v) for k, v in flows.items()])

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
            how = await self.primary_sync.wait(c.dead, mine, self.holes, self.cfg.promote_wait)
            if how:
                log.warning("promotion for NF %d: %s", c.dead, how)
        if c.backup:  # in the same step: no output leaves unprotected
            self.set_backup(c.backup, c.address)
        # (after the wait: raised before, a live primary's deltas would be refused as older)
        self.backups.told_epochs(c.epochs)
        return await self.promote_soon(c.slots, c.dead)

