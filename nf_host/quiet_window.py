"""A takeover's quiet window: from a promotion until its first output leaves (at most
`QUIET_MAX_S`), the promoted worker does only what that output waits for.

A SIGKILLed primary's takeover shares two cores with the victim's teardown (its processes' memory
freed by the kernel: several ms of CPU), the controller's reaction and the normal load. The first
output waits for one round trip to the new backup, and measured with `perf sched` (a 2-core host,
2,000 packets/s), that round trip waited mostly for a CPU: the new backup's worker, woken by the
delta, sat runnable for ~6 ms while the promoted worker went on promoting its idle slots (~5 ms of
CPU for 1,000 slots) and every cluster peer woke to apply those slots' deltas. So, until the first
output of the promoted slots leaves:

* the idle slots wait (`Promotion.promote_idle`); a packet for one still promotes it at once;
* what goes to cluster peers is held (`Link.cork`, in order; peers are replicated asynchronously
  and nothing waits for their acks) and leaves in one write at the end;
* the heartbeat responder's watch on the new backup is opened at the end (`Worker.set_backup`).

The backup link is never held: the output commit is unchanged. The window ends at the first
output (`CommitPipeline.release_batch`) or after `QUIET_MAX_S` (a takeover without traffic), whichever is
first. `NFC_QUIET_TAKEOVER=0` in the NF runtimes' environment turns it off, to compare
(`NFC_QUIET_TAKEOVER=0 .venv/bin/python -m bench.failover ...`: the runtimes inherit it).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

QUIET_MAX_S = 0.05


def enabled() -> bool:
    """Whether takeovers keep a quiet window (`NFC_QUIET_TAKEOVER`, on unless "0")."""
    return os.environ.get("NFC_QUIET_TAKEOVER", "1") != "0"


class QuietWindow:
    """The window's state; `on_end` runs once when it ends (uncork, open the watch)."""

    def __init__(self, on_end: Callable[[], None], max_s: float = QUIET_MAX_S,
                 on: bool | None = None) -> None:
        self.on_end, self.max_s = on_end, max_s
        self.on = enabled() if on is None else on
        self.active = False
        self._over = asyncio.Event()
        self._over.set()
        self._timer: asyncio.TimerHandle | None = None

    def begin(self) -> None:
        """Start (or extend) the window: a promotion has begun."""
        if not self.on:
            return
        self.active = True
        self._over.clear()
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(self.max_s, self.end)

    def end(self) -> None:
        """End the window (its first output left, or its time is up); no-op if not active."""
        if not self.active:
            return
        self.active = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._over.set()
        self.on_end()

    async def over(self) -> None:
        """Until the window has ended (at once if none is active)."""
        await self._over.wait()
