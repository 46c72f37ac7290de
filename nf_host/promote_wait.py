"""A promoted backup's wait for the dead primary's state it lacks (docs/protocols.md §4,
"A promotion waits for a primary that may be alive").

`Promote(dead=A)` comes from the controller's detection, which on a loaded host can be a false
alarm: A alive, only starved of CPU. A backup that holds everything of A (its snapshot, then a
copy of every packet after A's last delta) loses nothing either way. But a backup given to A a
moment before can lack part of it: A's snapshot (its state, and the output it still holds)
may not have reached it yet, and the switch's copies start at the group rewrite, while A may
still be processing packets stamped before it. Promoted then, the backup skips those numbers as
a gap and A's held output is never released; if A is alive, it had all of it, and it is then
made a spare and drops it: a false alarm that lost packets (`make bench-failover`'s loop-echo
hang run on a busy host: a primary failed over 100 ms after it was given a new backup).

So a promotion first waits, at most `promote_wait`, until the worker holds A's snapshot and,
for every slot it backs up, copies that start right after its replica's last number (no
hole). The wait ends at once when A's replication connection ends without a goodbye (A is dead:
nothing more will come) and never happens for a backup that is complete (the common case, so a
crash's takeover does not wait). While the backup lacks only copies (a hole) and A's deltas
keep coming (A is alive, only slow: a busy host's queues hold seconds of packets, and its
deltas fill the hole as it works through them), the wait goes on, `promote_wait` past the last
one, up to `promote_wait_max` in all: with a bound of `promote_wait` alone, a backup given to A a
moment before, promoted when A was suspected on a busy host, skipped the numbers A was still
working through as a gap (`make bench-failover --busy 2`'s hang run: 759 packets of 6 flows). Meanwhile the worker stays A's backup: it applies and
acknowledges A's deltas and keeps the packets the rewritten switch sends it as copies. A wait
that ends at the bound with a hole left promotes anyway (the hole is skipped as a gap, counted)
and is counted in `promote_wait_timeouts`.

Two cases wait past `promote_wait` while the controller says A may be alive (declared down on
silence alone, `PromoteRequest.primary_may_live`): A's snapshot, which a stalled A sends once
it runs again, with nothing heard of it meanwhile (up to `promote_wait_max`); and a backup
given to A less than the switch queue bound ago (`fresh`), whose copies began then: what A
processed before shows in no copy, only in A's deltas, so it waits until they stop
(`promote_wait` after the last) or `promote_wait_max`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable

from contract.timing import SWITCH_QUEUE_BOUND

UNNAMED = -1  # the whole state came from a message that names no sender (an adoption's "xs")


class PrimarySync:
    """Whose whole state of each slot this worker holds, and the wait of a promotion."""

    def __init__(self) -> None:
        # slot -> the NF whose whole state of it (a snapshot's, or a promotion's or adoption's
        # "replace" entry) this worker holds, with that NF's deltas since
        self.holder: dict[int, int] = {}
        self.backing: set[int] = set()   # primaries this worker was assigned to back up
        self.synced: set[int] = set()    # ... whose snapshot for their backup (with the
                                         # output they hold) was applied here
        self.lost: set[int] = set()      # primaries whose connection ended without a goodbye
        self.waits = 0                   # promotions that waited for the dead primary's state
        self.timeouts = 0                # ... and ended at the bound with something missing
        self.waited_ms = 0.0             # the longest such wait
        self.waiting = 0                 # promotions waiting now (a copy's arrival tells them)
        self.heard: dict[int, float] = {}  # primary -> when its last delta or state was applied
        self.assigned_at: dict[int, float] = {}  # primary -> when this worker began to back it up
        self._running: dict[int, asyncio.Task[str]] = {}  # primary -> its promotion's wait
        self._changed: asyncio.Event | None = None

    def assigned(self, primary: int, fresh: Iterable[int] = ()) -> None:
        """This worker backs up slots of `primary` (AssignSlots as backup): alive again.
        `fresh` are those it held nothing of: their empty replica is `primary`'s whole state
        until its snapshot says otherwise (a slot given to it fresh is shipped only with its
        first packet)."""
        if primary not in self.backing:
            with contextlib.suppress(RuntimeError):  # (outside a loop: tests of the bookkeeping)
                self.assigned_at[primary] = asyncio.get_running_loop().time()
        self.backing.add(primary)
        self.lost.discard(primary)
        for slot in fresh:
            self.holder[slot] = primary

    def snapshot(self, sender: int) -> None:
        """`sender`'s snapshot for its backup was applied here (its held output logged)."""
        self.synced.add(sender)
        self.changed()

    def whole(self, slot: int, sender: int) -> None:
        """The replica of `slot` became `sender`'s whole state."""
        self.holder[slot] = sender
        self._heard(sender)
        self.changed()

    def delta(self, slot: int, sender: int) -> None:
        """A delta of `slot` from `sender` was applied: on another NF's whole state, the
        replica is a mix of two owners' (it waits for `sender`'s whole state)."""
        held = self.holder.get(slot)
        if held == UNNAMED:
            self.holder[slot] = sender
        elif held is not None and held != sender:
            del self.holder[slot]
        self._heard(sender)
        self.changed()

    def _heard(self, sender: int) -> None:
        if self.waiting:  # (only a waiting promotion reads it: no clock read per delta else)
            self.heard[sender] = asyncio.get_running_loop().time()

    def peer_lost(self, sender: int) -> None:
        """`sender`'s newest connection ended without a goodbye: it is dead."""
        self.lost.add(sender)
        self.changed()

    def changed(self) -> None:
        """Something a waiting promotion checks may have changed."""
        if self._changed is not None:
            self._changed.set()

    def forget(self, slots: Iterable[int] | None = None, primary: int = 0) -> None:
        """`slots` (None: every slot, and every primary) are no longer backed up here, nor
        `primary`'s slots at all (0: none)."""
        if slots is None:
            for held in (self.holder, self.backing, self.synced, self.lost, self.assigned_at):
                held.clear()
            return
        for slot in slots:
            self.holder.pop(slot, None)
        self.backing.discard(primary)
        self.synced.discard(primary)
        self.assigned_at.pop(primary, None)

    def fresh(self, primary: int, may_live: bool) -> bool:
        """This worker began to back `primary` up less than `SWITCH_QUEUE_BOUND` ago, and
        `primary` may be alive: the switch's copies began then, so a packet stamped before
        reached `primary` alone, and only its deltas tell of it. No copy after it shows a hole
        yet (on a saturated host, none had come 60 ms after the group write): `make
        bench-failover --busy 2`'s loop-echo hang run skipped 56 such packets as a gap."""
        at = self.assigned_at.get(primary)
        return may_live and at is not None \
            and asyncio.get_running_loop().time() - at < SWITCH_QUEUE_BOUND

    def lacking(self, primary: int, slots: Iterable[int]) -> list[int]:
        """The slots of `slots` whose whole state from `primary` this worker does not hold
        (all of them while its snapshot for its backup has not come)."""
        if primary in self.backing and primary not in self.synced:
            return list(slots)
        return [s for s in slots if self.holder.get(s) not in (primary, UNNAMED)]

    async def wait(self, primary: int, slots: list[int],
                   holes: Callable[[Iterable[int]], list[int]], timeout: float,
                   longest: float = 0.0, may_live: bool = False) -> str:
        """Until this worker holds `primary`'s whole state of every slot of `slots` and
        `holes()` finds none of them with a hole, `primary` is lost, or `timeout` s passed
        without anything of `primary` applied here (at most `longest` s in all, if greater).
        State lacked (not a hole) is waited for `timeout` s, or `longest` if `may_live`: the
        controller declared `primary` down on silence alone, and it told `primary` of us.
        Returns "" if it did not wait, else how the wait ended and how long it took, for the
        log. Once found, only the slots still lacking something are checked again. A
        `Promote` asked again while the first one's wait runs (its reply was late) joins it."""
        running = self._running.get(primary)
        if running is not None:
            await asyncio.shield(running)
            return ""
        if timeout <= 0 or primary in self.lost or not (self.lacking(primary, slots)
                                                        or holes(slots)
                                                        or self.fresh(primary, may_live)):
            return ""  # (the common case: no task, no turn of the loop before the promotion)
        task = asyncio.get_running_loop().create_task(
            self._wait(primary, slots, holes, timeout, longest, may_live))
        self._running[primary] = task
        try:
            return await asyncio.shield(task)
        finally:
            if task.done() and self._running.get(primary) is task:
                del self._running[primary]

    async def _wait(self, primary: int, slots: list[int],
                    holes: Callable[[Iterable[int]], list[int]], timeout: float,
                    longest: float, may_live: bool) -> str:
        pending = list(slots)
        # (a fresh backup waits as for a hole it cannot see: until A's deltas stop)
        fresh = self.fresh(primary, may_live)

        def ready() -> bool:
            nonlocal pending
            if primary in self.lost:
                return True
            pending = sorted(set(self.lacking(primary, pending)) | set(holes(pending)))
            return not pending and not fresh

        if timeout <= 0 or ready():
            return ""
        lacked = self.lacking(primary, pending)
        missing = (("its snapshot" if primary not in self.synced else
                    f"the state of {len(lacked)} slots") if lacked
                   else f"copies of {len(pending)} slots (a hole)" if pending
                   else "what it processed before this backup's copies began (a new backup)")
        self.waits += 1
        loop = asyncio.get_running_loop()  # (its clock: a simulation's may be virtual)
        started = loop.time()
        last_call = started + max(timeout, longest)
        event = self._changed = self._changed or asyncio.Event()
        end = "complete"
        self.waiting += 1
        try:
            while not ready():
                # extended for holes, which A's deltas fill as A works through its queue; for
                # lacked state only while A may live (only silent: a stalled A sends its
                # snapshot once it runs again, with nothing heard of it meanwhile)
                holes_only = not self.lacking(primary, pending)
                heard = max(started, self.heard.get(primary, started)) if holes_only else started
                left = (last_call if may_live and not holes_only
                        else min(heard + timeout, last_call)) - loop.time()
                if left <= 0 and fresh and not pending and loop.time() < last_call:
                    end = "its deltas stopped"  # (it has sent what it processed)
                    break
                if left <= 0:
                    self.timeouts += 1
                    end = (f"the bound, {len(pending)} slots still lacking (promoted with what "
                           "it held: a hole left is skipped as a gap)" if pending else
                           "the bound, its deltas still coming (a hole that shows later is "
                           "skipped as a gap)")
                    break
                event.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), left)
            if primary in self.lost and end == "complete":
                end = "its connection was lost (dead)"
        finally:
            self.waiting -= 1
            if not self.waiting:
                self.heard.clear()
            took = (loop.time() - started) * 1000
            self.waited_ms = max(self.waited_ms, took)
        return f"lacked {missing}; waited {took:.0f} ms, until {end}"
