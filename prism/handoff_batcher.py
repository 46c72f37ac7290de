"""Batching of hand-off steps into P4Runtime Writes, for whichever controller holds the switch
session (prism.controller's own, or nfcluster's through controlplane.handoff_api).

Steps that arrive while a Write is in flight wait and go together in the next one (one Write for
every request that came meanwhile), so a busy frontend's hand-offs cost one switch round trip per
batch, not per step. Steps of one connection are never in one batch (each waits for its own
answer before the next), and no step depends on an order among the updates of a Write. A Write
the switch refuses fails every request it carried; the failure is counted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from finsy import P4TableEntry

from prism.switch_entries import HandOffEntries, HandOffStep

Write = Callable[[list[P4TableEntry]], Awaitable[None]]


class HandOffBatcher:
    """Applies batches of steps through `write` once `ready(entries)` has been called."""

    def __init__(self, write: Write) -> None:
        self.write = write
        self.entries: HandOffEntries | None = None
        self.ready = asyncio.Event()
        self.writes = self.steps = self.failures = 0
        self._pending: list[tuple[list[P4TableEntry], int, asyncio.Future[float]]] = []
        self._writer: asyncio.Task[None] | None = None

    def set_entries(self, entries: HandOffEntries) -> None:
        """The switch's names are known (a primary session): steps may be written."""
        self.entries = entries
        self.ready.set()

    def status(self) -> dict[str, object]:
        return {"writes": self.writes, "steps": self.steps, "failures": self.failures,
                "ready": self.ready.is_set()}

    async def apply(self, steps: list[HandOffStep]) -> float:
        """Write the steps' updates; the duration of the Write that carried them, in ms.
        ValueError for an address that is no Prism host; the switch's error if it refused."""
        await self.ready.wait()
        assert self.entries is not None
        updates = [u for s in steps for u in self.entries.updates(s)]
        done: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self._pending.append((updates, len(steps), done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._drain())
        return await done

    async def _drain(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            start = time.perf_counter()
            try:
                await self.write([u for updates, _, _ in batch for u in updates])
            except Exception as exc:  # the switch's refusal goes to every request it carried
                self.failures += 1
                for _, _, done in batch:
                    done.set_exception(exc)
                continue
            ms = (time.perf_counter() - start) * 1000.0
            self.writes += 1
            for _, n, done in batch:
                self.steps += n
                done.set_result(ms)
