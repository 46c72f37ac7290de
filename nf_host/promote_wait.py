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
crash's takeover does not wait). Meanwhile the worker stays A's backup: it applies and
acknowledges A's deltas and keeps the packets the rewritten switch sends it as copies. A wait
that ends at the bound with a hole left promotes anyway (the hole is skipped as a gap, counted)
and is counted in `promote_wait_timeouts`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable


class PrimarySync:
    """What this worker holds of the primaries it backs up, and the wait of a promotion."""

    def __init__(self) -> None:
        self.backing: set[int] = set()   # primaries this worker was assigned to back up
        self.synced: set[int] = set()    # primaries whose backup snapshot was applied here
        self.lost: set[int] = set()      # primaries whose connection ended without a goodbye
        self.waits = 0                   # promotions that waited for the dead primary's state
        self.timeouts = 0                # ... and ended at the bound with something missing
        self.waited_ms = 0.0             # the longest such wait
        self.waiting = 0                 # promotions waiting now (a copy's arrival tells them)
        self._snapshots = 0
        self._changed: asyncio.Event | None = None

    def assigned(self, primary: int) -> None:
        """This worker backs up slots of `primary` (AssignSlots as backup)."""
        self.backing.add(primary)
        self.lost.discard(primary)

    def snapshot(self, sender: int) -> None:
        """`sender`'s full snapshot for its backup was applied here."""
        self.synced.add(sender)
        self._snapshots += 1  # (the replicas were replaced: every slot is checked again)
        self.changed()

    def peer_lost(self, sender: int) -> None:
        """`sender`'s newest connection ended without a goodbye: it is dead."""
        self.lost.add(sender)
        self.changed()

    def changed(self) -> None:
        """Something a waiting promotion checks may have changed (a delta applied)."""
        if self._changed is not None:
            self._changed.set()

    def forget(self, primary: int | None = None) -> None:
        """No longer a backup of `primary` (None: of anyone)."""
        for s in (self.backing, self.synced, self.lost):
            if primary is None:
                s.clear()
            else:
                s.discard(primary)

    def missing_snapshot(self, primary: int) -> bool:
        return primary in self.backing and primary not in self.synced

    async def wait(self, primary: int, holes: Callable[[Iterable[int] | None], list[int]],
                   timeout: float) -> str:
        """Until this worker holds `primary`'s snapshot and `holes()` finds no slot with a hole,
        `primary` is lost, or `timeout` s passed. Returns "" if it did not wait, else how the wait
        ended and how long it took, for the log. Once found, only the slots with a hole are
        checked again (a hole only closes), all of them again after a snapshot."""
        pending: list[int] | None = None
        seen = -1

        def ready() -> bool:
            nonlocal pending, seen
            if primary in self.lost:
                return True
            if self.missing_snapshot(primary):
                return False
            if seen != self._snapshots:
                pending, seen = None, self._snapshots
            pending = holes(pending)
            return not pending

        if timeout <= 0 or ready():
            return ""
        missing = "its snapshot" if self.missing_snapshot(primary) else "a hole in the copies"
        self.waits += 1
        loop = asyncio.get_running_loop()  # (its clock: a simulation's may be virtual)
        started = loop.time()
        deadline = started + timeout
        event = self._changed = self._changed or asyncio.Event()
        end = "complete"
        self.waiting += 1
        try:
            while not ready():
                left = deadline - loop.time()
                if left <= 0:
                    self.timeouts += 1
                    end = "the bound (promoted with what it held: a hole left is skipped as a gap)"
                    break
                event.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), left)
            if primary in self.lost and end == "complete":
                end = "its connection lost (dead)"
        finally:
            self.waiting -= 1
            took = (loop.time() - started) * 1000
            self.waited_ms = max(self.waited_ms, took)
        return f"lacked {missing}; waited {took:.0f} ms, until {end}"
