"""Virtual time for the simulation: an asyncio event loop whose clock only moves when nothing is
ready to run, and the process clock (`time.monotonic`, `time.time`) made to follow it.

The loop is the stock selector loop with a selector that never waits: where the stock loop would
block in `select(timeout)` until the next timer, this one advances the virtual clock by `timeout`
and returns at once. So a run takes as long as its computation, not as long as its timers, and
two runs of the same program with the same seed take the same steps in the same order: asyncio's
ready queue is FIFO and its timers are ordered by (deadline, insertion).

The code under test reads the clock through the `time` module (the NF runtime's batch timers, the
controller's timeouts and heartbeats): `virtual_time` replaces `time.monotonic`, `time.time` and
`time.perf_counter` for the duration of a run. Nothing in a simulated run sleeps for real.
"""

from __future__ import annotations

import asyncio
import contextlib
import selectors
import time
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

EPOCH = 1_800_000_000.0
"""The wall-clock time at virtual time 0 (any fixed value: runs must not depend on the date)."""


class Deadlock(RuntimeError):
    """Nothing is ready and no timer is pending, but the run has not finished."""


class VirtualClock:
    """Seconds since the start of the run; moved only by the loop."""

    def __init__(self) -> None:
        self.now = 0.0

    def advance(self, seconds: float) -> None:
        if seconds > 0:
            self.now += seconds


class _NoWaitSelector(selectors.BaseSelector):
    """A selector with no file descriptors that turns every wait into a jump of the clock."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self._map: dict[Any, selectors.SelectorKey] = {}

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key = selectors.SelectorKey(fileobj, 0, events, data)
        self._map[fileobj] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._map.pop(fileobj)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            raise Deadlock("the simulation has nothing to run and no timer pending")
        self.clock.advance(timeout)
        return []

    def get_map(self) -> Any:
        return self._map

    def close(self) -> None:
        self._map.clear()


class SimLoop(asyncio.SelectorEventLoop):
    """The event loop of one simulated run (see the module docstring)."""

    def __init__(self, clock: VirtualClock | None = None) -> None:
        self.clock = clock or VirtualClock()
        super().__init__(_NoWaitSelector(self.clock))

    def time(self) -> float:
        return self.clock.now


@contextlib.contextmanager
def virtual_time(clock: VirtualClock) -> Iterator[None]:
    """`time.monotonic`, `time.perf_counter` and `time.time` read `clock` inside the block."""
    saved = time.monotonic, time.perf_counter, time.time
    time.monotonic = lambda: clock.now
    time.perf_counter = lambda: clock.now
    time.time = lambda: EPOCH + clock.now
    try:
        yield
    finally:
        time.monotonic, time.perf_counter, time.time = saved


def run(coro: Coroutine[Any, Any, T], clock: VirtualClock | None = None) -> T:
    """Run `coro` to completion on a fresh `SimLoop` in virtual time; the loop is closed after."""
    loop = SimLoop(clock)
    with virtual_time(loop.clock):
        try:
            return loop.run_until_complete(coro)
        finally:
            with contextlib.suppress(Exception):
                _cancel_all(loop)
            loop.close()


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in tasks:
        t.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
