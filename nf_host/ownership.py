"""The commands that change who owns a slot by a move (docs/protocols.md §5): its two sides,
`adopt` (and the fence, `cancel_adopt`) on the new owner and `release` (and `take_back`) on the old
one, and a slot taken over by ourselves that `Promote` leaves out (`give_up_taken`, §4.3). The
promotion itself is `nf_host.promotion`'s. A part of the worker (`nf_host.worker`), given a narrow
view of it (`OwnershipHost`) when it is built."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from contract.replication import Forward, Released, Transfer
from contract.results import FenceResult, ReleaseResult
from contract.roles import Role, SlotRole
from contract.seq import older_owner
from contract.shim import SLOT_BITS, Kind, Shim, with_kind
from contract.timing import GIVE_BACK_WAIT
from nf_host.backup import InputBuffer
from nf_host.backup_slots import BackupSlots
from nf_host.commit import OutputCommit
from nf_host.flow_bounds import FlowBounds
from nf_host.links import Links
from nf_host.move_marker import MarkerWait, marker_frame
from nf_host.promote_wait import PrimarySync
from nf_host.replication import Link, worker_address
from nf_host.state_store import Replica
from nf_host.transfers import Transfers
from nf_host.worker_types import (
    CommandError,
    PartHost,
    ReleaseRecord,
    SlotRuntime,
    WorkerConfig,
)

log = logging.getLogger("nf_host.worker")


class OwnershipHost(PartHost, Protocol):
    """What `Ownership` sees of the worker: its NF role, configuration and counters, the slot
    tables (owned, held for others), the move markers, the links and what peers acknowledged,
    the output commit (a release waits for its output to leave), the transfers under way, the
    flow bounds, and the data path's entries to start a slot and offer it a packet."""

    role: Role

    @property
    def cfg(self) -> WorkerConfig: ...
    @property
    def backups(self) -> BackupSlots: ...
    @property
    def markers(self) -> MarkerWait: ...
    @property
    def linkset(self) -> Links: ...
    @property
    def links(self) -> dict[int, Link]: ...
    @property
    def acked_versions(self) -> dict[int, dict[int, int]]: ...
    @property
    def commit(self) -> OutputCommit: ...
    @property
    def transfers(self) -> Transfers: ...
    @property
    def bounds(self) -> FlowBounds: ...
    @property
    def tx(self) -> Callable[[bytes | bytearray], None]: ...
    @property
    def inbuf(self) -> InputBuffer: ...
    @property
    def primary_sync(self) -> PrimarySync: ...
    @property
    def gave_back(self) -> dict[int, tuple[Link, ...]]: ...
    def follow_given_back(self, slot: int, frame: bytes) -> bool: ...
    def close_batch(self) -> None: ...
    def held_upto(self, batch_id: int) -> bool: ...
    async def released_upto(self, batch_id: int, timeout: float) -> None: ...
    def new_slot(self, slot: int, epoch: int, role: SlotRole) -> SlotRuntime: ...
    def offer(self, rt: SlotRuntime, shim: Shim, frame: bytes, now: float) -> None: ...


class Ownership:
    """Moves (see the module docstring)."""

    def __init__(self, host: OwnershipHost) -> None:
        self._w = host
        # releases under way: slot -> (adopter, the release's task)
        self._releasing: dict[int, tuple[int, asyncio.Future[ReleaseResult]]] = {}
        self._giving_back: set[int] = set()  # M14 give-backs waiting for their links

    def adopt(self, slot: int, epoch: int) -> None:
        self._w.gave_back.pop(slot, None)  # (its packets are ours again)
        rt = self._w.slots.get(slot)
        if rt is not None and rt.role == SlotRole.PRIMARY:
            if rt.adopted_from is not None and (rt.epoch == epoch
                                                or older_owner((epoch, 0), (rt.epoch, 0))):
                return  # adopted and started already: the same move told again (a new leader)
            raise CommandError(f"slot {slot} is already owned here")
        self._w.role = Role.PRIMARY  # it owns the slot once the transfer (and marker) arrive
        if rt is not None and rt.role == SlotRole.ADOPTING:
            # the same move told again (a new leader finishing it): the adoption, its buffered
            # packets and a transfer it accepted stay
            if rt.epoch != epoch and not older_owner((epoch, 0), (rt.epoch, 0)):
                rt.epoch = epoch
            return
        self._w.slots[slot] = self._w.new_slot(slot, epoch, SlotRole.ADOPTING)
        self._w.backups.adopting(slot)
        self._w.markers.forget(slot)

    def cancel_adopt(self, slot: int, epoch: int, from_nf: int = 0, from_address: str = "",
                     copy_nf: int = 0, copy_address: str = ""
                     ) -> FenceResult | Awaitable[FenceResult]:
        """The fence that decides a move whose `Release` did not answer (docs/protocols.md §5),
        at a packet boundary of this worker: `started` if this NF accepted the old owner's
        transfer (the slot is owned here at `epoch` or later, or waits only for its marker):
        the move is complete and nothing changes. Otherwise the adoption of `slot` at `epoch`
        (if any) is cancelled, and a transfer arriving later is refused, so the old owner keeps
        the slot: `started` is False. What the adoption buffered is given back to the old owner
        (`from_nf` at `from_address`), and what still arrives at its epoch is forwarded there
        until the switch points at the old owner again (M11); without an old owner to give it
        to, it is dropped, counted in `cancelled`. Asked again, it answers the same (`held`:
        this NF had the adoption). Asked of the adopter's backup while the adopter is down or
        restarted (M14): `started` if it holds the state the adopter sent it on starting the
        slot; otherwise it gives its copies of the slot's packets to the old owner
        (`give_copies_back`). With `copy_nf` (the old owner's backup, named while the old owner
        is suspected down), what goes back goes there too (M16)."""
        w = self._w
        copy = (w.linkset.link(copy_nf, copy_address)
                if copy_nf and copy_address and copy_nf not in (w.cfg.nf_id, from_nf) else None)
        rt = w.slots.get(slot)
        if rt is None:
            if slot in w.backups.adoptions or slot in w.gave_back:
                return self.give_copies_back(slot, from_nf, from_address, copy)  # (M14)
            rep = w.backups.replicas.get(slot)
            if slot in w.backups.backed_up and rep is not None and epoch and rep.epoch == epoch:
                return FenceResult(started=True)  # our primary started it: we hold its adopted state
            return FenceResult(started=False)  # nothing here: a transfer would be refused
        later = bool(epoch) and rt.epoch != epoch and older_owner((epoch, 0), (rt.epoch, 0))
        if rt.given_back:
            return FenceResult(started=False, held=True)  # cancelled already (asked again)
        if rt.role == SlotRole.ADOPTING:
            if rt.adopted_from is not None:
                return FenceResult(started=True)  # the transfer is in, the marker not yet
            if later:
                return FenceResult(started=False, held=True)  # a later adoption: not this one
            self._w.markers.forget(slot)
            self._unprotect(slot, epoch or rt.epoch)
            if not from_nf or not from_address:
                self._w.c.cancelled += len(rt.pending)
                del self._w.slots[slot]
                return FenceResult(started=False, held=True)
            rt.become(SlotRole.RELEASED)
            rt.given_back = True  # arriving packets wait in pending
            link = self._w.linkset.link(from_nf, from_address)
            asyncio.get_running_loop().create_task(self._give_back(rt, link, copy))
            return FenceResult(started=False, held=True)
        if epoch and rt.epoch != epoch and not later:
            raise CommandError(f"slot {slot} is owned here at epoch {rt.epoch}, before the "
                               f"adoption's epoch {epoch}: not that move")
        return FenceResult(started=True)

    async def give_copies_back(self, slot: int, from_nf: int, from_address: str,
                               copy: Link | None = None) -> FenceResult:
        """M14: our primary (the adopter) died before it started `slot`, which the old owner
        `from_nf` still holds: the copies we kept of its packets since the switch write go
        there, in order and as input, then what still arrives until the switch points at the
        old owner again (`DataPath.follow_given_back`). Answered once sent (or, the old owner
        unreachable within `GIVE_BACK_WAIT`, dropped and counted in `cancelled`), so the
        controller's switch write that gives the slot back follows them."""
        w = self._w
        if slot in w.gave_back or slot in self._giving_back:
            return FenceResult(started=False)  # given back already, or being (asked again)
        reached: tuple[Link, ...] = ()
        link: Link | None = None
        if from_nf and from_address:
            # the slot stays backed up while the links come up: a copy arriving meanwhile is
            # kept with the others (simulation, adopter kills, seed 106: one that came in that
            # wait was neither kept nor followed, and the old owner skipped it as a gap)
            self._giving_back.add(slot)
            try:
                link = w.linkset.link(from_nf, from_address)
                reached = await _reached(link, copy, GIVE_BACK_WAIT)
            finally:
                self._giving_back.discard(slot)
        w.backups.given_back(slot)
        w.primary_sync.forget([slot])
        held = w.inbuf.take_beyond(slot, None)
        if not from_nf or not from_address:
            w.c.cancelled += len(held)
            return FenceResult(started=False)
        if not reached:
            log.warning("slot %d: the old owner NF %d is unreachable at %s: %d copies of an "
                        "adoption never started dropped", slot, from_nf, from_address, len(held))
            w.c.cancelled += len(held)
            return FenceResult(started=False)
        w.gave_back[slot] = reached
        for _seq, frame in held:
            w.follow_given_back(slot, frame)
        log.warning("slot %d: our primary died before it started the slot: %d copies given to "
                    "its old owner NF %d", slot, len(held), from_nf)
        if link is not None and link not in reached:
            # only the old owner's backup was reached (M16): the old owner, suspected down but
            # maybe only slow, gets them too once its link is up (simulation `stalls`, seed
            # 163: it went on, the undo gave it the slot, and it skipped them as a gap)
            asyncio.get_running_loop().create_task(
                self._give_late(slot, link, [frame for _seq, frame in held]))
        return FenceResult(started=False)

    async def _give_late(self, slot: int, link: Link, frames: list[bytes]) -> None:
        """`give_copies_back`'s copies, to an old owner whose link came up after the wait: sent
        as input, then what still arrives follows them there too."""
        if not await _connected(link, self._w.cfg.transfer_timeout):
            return
        links = self._w.gave_back.get(slot)
        if links is None or link in links:
            return  # (assigned here again meanwhile, or reached already)
        for frame in frames:
            link.send(Forward(with_kind(frame, Kind.PRIMARY)))
        self._w.gave_back[slot] = (*links, link)

    async def _give_back(self, rt: SlotRuntime, link: Link, copy: Link | None = None) -> None:
        """Send a cancelled adoption's packets to the old owner (and to `copy`, M16) once the
        link to it is up, then forward there what still arrives; if neither can be reached,
        they are counted in `cancelled` (the old owner is down: its fail-over replays the
        switch's copies)."""
        wait = self._w.cfg.transfer_timeout
        if copy is None:
            reached = await self._give_to(rt, link, wait, copy=False)
        else:  # each as soon as it is up: the old owner may be dead, its backup promoted soon
            got = await asyncio.gather(self._give_to(rt, link, wait, copy=False),
                                       self._give_to(rt, copy, wait, copy=True))
            reached = any(got)
            if reached and not got[0] and self._w.slots.get(rt.slot) is rt:
                rt.forward, rt.forward_copy, rt.pending = copy, None, []  # (all went there)
        if self._w.slots.get(rt.slot) is not rt or not rt.given_back or reached:
            return  # adopted again, or assigned, meanwhile; or given back
        log.warning("slot %d: the old owner is unreachable at %s: %d packets of the cancelled "
                    "adoption dropped", rt.slot, link.address, len(rt.pending))
        self._w.c.cancelled += len(rt.pending)
        del self._w.slots[rt.slot]

    async def _give_to(self, rt: SlotRuntime, to: Link, wait: float, copy: bool) -> bool:
        """Once `to` is up (within `wait`): what `rt`'s cancelled adoption holds goes there,
        and what still arrives follows (`copy`: a copy of it, the old owner's own link may come
        later and takes what waits). False if `to` could not be reached or `rt` was replaced."""
        if not await _connected(to, wait):
            return False
        if self._w.slots.get(rt.slot) is not rt or not rt.given_back:
            return False
        if copy:
            held, rt.forward_copy = list(rt.pending), to
        else:
            held, rt.pending, rt.forward = rt.pending, [], to
            self._w.c.forwarded += len(held)
        for _shim, frame in held:
            to.send(Forward(bytes(frame)))
        return True

    def _unprotect(self, slot: int, epoch: int) -> None:
        """Our backup was told to back up `slot` for a move that did not happen: it stops (the
        release notice), or it would promote the slot with nothing when we die and feed our
        cluster peers a second owner's deltas (found by the simulation, seed 9). With the
        move's `epoch`: the empty replica its assignment made at that epoch goes too, or it
        refused the old owner's deltas of the slot (an older epoch) as a stale sender's,
        closing the link that carried another slot's transfer (seed 18, all replies lost)."""
        backup = self._w.links.get(self._w.backup_id) if self._w.backup_id else None
        if backup is not None:
            backup.send(Released(slot, epoch))

    def give_up_taken(self, slot: int, dead: int) -> None:
        """`slot`, taken over from `dead` by ourselves (§4.3), is not in the controller's
        `Promote` for `dead`: the slot map gives it to another NF (`dead` was releasing it), so
        owning it here makes two owners (simulation, leader kills, seed 28: both processed it,
        and our deltas of it, refused as a stale owner's, closed the links another slot's
        transfer was on). It goes back to being a replica, with the state it has (if the move
        is undone, the slot comes back here by `AssignSlots`, which promotes the replica), and
        our backup drops the replica our deltas made (the release notice)."""
        rt = self._w.slots.get(slot)
        if rt is None or rt.role != SlotRole.PRIMARY:
            self._w.backups.given_up(slot, None)
            return
        log.warning("slot %d, taken over from NF %d, is not in its Promote (NF %d was releasing "
                    "it): kept as a replica only", slot, dead, dead)
        # at the generation it had before it took the slot over (its promotion's +1 undone): at
        # ours, it outranked the slot's real owner, whose deltas it then refused as a stale
        # sender's, closing the link its moves' transfers ride on (simulation, adopter kills,
        # seed 61: the transfers went unanswered and the moves undecided)
        rep = Replica(slot, epoch=rt.epoch, gen=max(rt.state.gen - 1, 0))
        rep.apply(rt.state.everything(), rt.state.version, rt.state.last_seq)
        self._w.backups.given_up(slot, rep)
        self._w.backups.holes.discard(slot)  # (our whole state of it)
        del self._w.slots[slot]
        self._unprotect(slot, rt.epoch)
        # and every replica our deltas of it made at our cluster peers (our backup's went with
        # the release notice just sent, at the same epoch)
        gone = Released(slot, rt.epoch, rt.state.gen)
        for nf, link in self._w.links.items():
            if nf != self._w.backup_id:
                link.send(gone)

    async def release(self, slot: int, to_nf: int, to_address: str, same_cluster: bool,
                      copy_nf: int = 0, copy_address: str = "") -> ReleaseResult:
        """Give `slot` to `to_nf` (docs/protocols.md §5); what arrives here of our epoch once the
        transfer is accepted (the tail) is forwarded to it, and a copy to `copy_nf` at
        `copy_address`, the adopter's backup (M18). A `Release` of a slot whose release is
        still running (a new leader's, while its predecessor's runs) waits for that one and
        answers the same."""
        running = self._releasing.get(slot)
        if running is not None:
            if running[0] != to_nf:
                raise CommandError(f"slot {slot} is being released to NF {running[0]}")
            return await asyncio.shield(running[1])
        copy = ((copy_nf, copy_address)
                if copy_nf and copy_address and copy_nf not in (to_nf, self._w.cfg.nf_id) else None)
        task = asyncio.ensure_future(self._release_slot(slot, to_nf, to_address, same_cluster,
                                                        copy))
        self._releasing[slot] = (to_nf, task)
        task.add_done_callback(lambda _t: self._releasing.pop(slot, None))
        return await asyncio.shield(task)

    async def _release_slot(self, slot: int, to_nf: int, to_address: str, same_cluster: bool,
                            copy: tuple[int, str] | None = None) -> ReleaseResult:
        parked = self._w.markers.parked.get(slot)
        if parked is not None:  # adopted here just now, its marker not in yet: it starts first
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(parked.started.wait(), self._w.cfg.marker_wait * 2)
        rt = self._w.slots.get(slot)
        if rt is not None and rt.role == SlotRole.RELEASED and rt.release is not None \
                and rt.release.to_nf == to_nf:
            return await self._release_again(rt, rt.release)
        if rt is None:
            raise CommandError(f"slot {slot} is not held here (never owned, or given away and "
                               "dropped since): nothing to release")
        if rt.role != SlotRole.PRIMARY:
            raise CommandError(f"slot {slot} is not owned here as primary ({rt.role.name})")
        link = self._w.links.get(to_nf)
        if link is None or link.address != worker_address(to_address, self._w.cfg.index):
            link = self._w.linkset.link(to_nf, to_address)
        # (connecting while the adopter's link comes up and the transfer is answered)
        copy_link = self._w.linkset.link(*copy) if copy is not None else None
        try:
            await asyncio.wait_for(link.connected.wait(), self._w.cfg.transfer_timeout)
        except TimeoutError:
            raise CommandError(f"cannot reach NF {to_nf} at {link.address}; the slot stays "
                               "owned here") from None
        # from here to RELEASED nothing yields: this is a packet boundary. The slot's state is
        # sealed with a version (after the wait above, during which packets were processed:
        # a change left in the open batch would be missing from a delta transfer)
        self._w.close_batch()
        last_batch = self._w.commit.last_id  # holds the output of every packet of s processed here
        st = rt.state
        base = self._w.acked_versions.get(to_nf, {}).get(slot) if same_cluster else None
        deleted = st.deleted_since(base) if base is not None else None
        if deleted is None:  # a full transfer (or deletions forgotten since the base: full too)
            base = None
        entries = st.since(base) if base is not None else st.everything()
        # stopped: until the adopter answers, arriving packets wait here (rt.pending)
        rt.become(SlotRole.RELEASED)
        rt.forward = rt.forward_copy = None
        # our output of s leaves before the adopter can start: its output (seq L + 1 on, of the
        # next epoch) must not overtake ours (seq <= L), which waits for our backup's ack; the
        # switch accepts both epochs, so their order at the sink is the order they reach it
        await self._w.released_upto(last_batch, self._w.cfg.transfer_timeout)
        if self._w.held_upto(last_batch):
            # our backup holds that output past the timeout (hung, not yet replaced): the adopter
            # must not start ahead of it, so nothing was sent and the slot is owned here again
            # (the controller's fence cancels the adoption and undoes the move; chaos finding 1)
            self.take_back(rt, rt.epoch)
            raise CommandError(f"the output of slot {slot} is still held (its backup has not "
                               f"acknowledged within {self._w.cfg.transfer_timeout:.1f} s): nothing "
                               "was sent, the slot stays owned here")
        # then the marker, on the same port after that output: the adopter starts on the slot
        # once the switch has passed it, so after everything we sent (nf_host/move_marker.py)
        self._w.tx(marker_frame(self._w.cfg.nf_id, slot, slot >> SLOT_BITS, rt.epoch, st.last_seq or 0))
        xid, fut = self._w.transfers.open(slot)
        transfer = Transfer(xid, slot, rt.epoch, st.last_seq, st.version,
                            -1 if base is None else base, entries, list(deleted or []),
                            sender=self._w.cfg.nf_id)
        nbytes = link.send(transfer)
        self._w.c.transfer_bytes += nbytes
        rt.release = ReleaseRecord(to_nf, link, xid, transfer, fut, ReleaseResult(
            bytes_shipped=nbytes, last_seq=st.last_seq or 0, flows_shipped=len(entries),
            delta=base is not None), copy_link)
        return await self._await_answer(rt, rt.release)

    async def _await_answer(self, rt: SlotRuntime, rec: ReleaseRecord) -> ReleaseResult:
        """`Release`'s answer once the adopter answered the transfer (`Transfers.answered` has
        decided the slot). Without an answer within the transfer timeout the slot stays
        RELEASED, its packets waiting here: the adopter may have accepted (its answer delayed
        or lost), so taking the slot back would make two owners. A late answer decides it, and
        so does the controller through the adopter's fence (docs/protocols.md §5)."""
        try:
            reply = await asyncio.wait_for(asyncio.shield(rec.answer), self._w.cfg.transfer_timeout)
        except TimeoutError:
            raise CommandError(
                f"NF {rec.to_nf} did not answer the transfer of slot {rt.slot}: undecided, the "
                "slot waits here, released, for its answer or the controller's decision"
            ) from None
        if not reply.ok:
            raise CommandError(f"NF {rec.to_nf} refused slot {rt.slot}: {reply.err}; the "
                               "slot stays owned here")
        return rec.result

    async def _release_again(self, rt: SlotRuntime, rec: ReleaseRecord) -> ReleaseResult:
        """`Release` of a slot already released to the same NF: the same result if its transfer
        was accepted; if still unanswered, the transfer is sent again (the adopter answers a
        transfer it accepted already the same way: it never refuses it) and awaited."""
        if rt.forward is not None:
            return rec.result
        link = self._w.links.get(rec.to_nf) or rec.link
        try:
            await asyncio.wait_for(link.connected.wait(), self._w.cfg.transfer_timeout)
        except TimeoutError:
            raise CommandError(f"cannot reach NF {rec.to_nf} at {link.address}: slot {rt.slot} "
                               "stays released here, undecided") from None
        if rt.release is not rec or rt.role != SlotRole.RELEASED:  # decided while we waited
            if rt.forward is not None:
                return rec.result
            raise CommandError(f"slot {rt.slot} was taken back meanwhile")
        if rt.forward is None and rec.transfer is not None:
            rec.link = link
            link.send(rec.transfer)
        return await self._await_answer(rt, rec)

    def take_back(self, rt: SlotRuntime, epoch: int) -> None:
        """The controller gives back a slot released here whose transfer is unanswered (the
        adopter's fence cancelled the adoption): owned again at `epoch`, with its state and
        numbering, and the packets that waited here processed."""
        rec, rt.release = rt.release, None
        if rec is not None:
            self._w.transfers.withdraw(rec.xid)
        rt.become(SlotRole.PRIMARY)
        rt.epoch = epoch
        self._w.bounds.track(rt)
        held, rt.pending = rt.pending, []
        now = rt.taken_back_at = time.monotonic()
        for shim, frame in held:
            self._w.offer(rt, shim, frame, now)


async def _reached(link: Link, copy: Link | None, wait: float) -> tuple[Link, ...]:
    """Of `link` (to the old owner) and `copy` (to its backup, M16), those connected within
    `wait` seconds, waited for side by side: either holds what is given back."""
    if copy is None:
        return (link,) if await _connected(link, wait) else ()
    up = await asyncio.gather(_connected(link, wait), _connected(copy, wait))
    return tuple(to for to, ok in zip((link, copy), up, strict=True) if ok)


async def _connected(link: Link, wait: float) -> bool:
    """Whether `link` is connected, waiting up to `wait` seconds for it (the two ways an
    adoption's packets go back to the old owner, M11 and M14, wait so before sending them)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(link.connected.wait(), wait)
    return link.connected.is_set()
