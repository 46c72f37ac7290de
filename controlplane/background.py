"""`BackgroundTasks`: the controller's work started from an event and left to run on its own
(fail-overs, backup replacements, reconfigurations, journalled moves finished), named, listed
for the API and cancelled together when the controller stops."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class BackgroundTasks:
    """The tasks `spawn` started and that have not ended yet (each keeps a reference here, so
    none is collected while it runs)."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro, name=getattr(coro, "__qualname__", "task"))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def names(self) -> list[str]:
        """Names of the tasks still running."""
        return sorted(t.get_name() for t in self._tasks if not t.done())

    def cancel(self) -> None:
        """Cancel every task still running."""
        for task in list(self._tasks):
            task.cancel()
