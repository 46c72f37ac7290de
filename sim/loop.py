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
import heapq
import selectors
import time
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

EPOCH = 1_800_000_000.0
"""The wall-clock time at virtual time 0 (any fixed value: runs must not depend on the date)."""


# the stock loop's constants (asyncio.base_events), which `SimLoop._run_once` keeps
_MIN_SCHEDULED = 100
_CANCELLED_FRACTION = 0.5
_MAX_WAIT = 24 * 3600.0


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
        self._heap: list[tuple[float, Any]] = []  # (deadline, TimerHandle): see `call_at`
        super().__init__(_NoWaitSelector(self.clock))

    def time(self) -> float:
        return self.clock.now

    # -- the scheduler, leaner than the stock one (the simulation's own cost) -------------------
    # The stock loop keeps its timers in a heap of `TimerHandle`s, each comparison a call of
    # their Python `__lt__` (a third of the loop's own time in a profile of a run). Here the
    # heap holds (deadline, handle) pairs, compared in C: for different deadlines the result is
    # the same, and for equal ones the pair comparison falls to the handles, whose `__lt__` says
    # False as before, so the heap takes exactly the steps the stock one took and a seed replays
    # the same run as before. `_run_once` is the stock one without the debug mode, the selector
    # call and the I/O events (there are none): the same callbacks in the same order.

    def call_at(self, when: float, callback: Any, *args: Any,  # type: ignore[override]
                context: Any = None) -> asyncio.TimerHandle:
        if when is None:
            raise TypeError("when cannot be None")
        me: Any = self
        me._check_closed()
        timer: Any = asyncio.TimerHandle(when, callback, args, self, context)
        heapq.heappush(self._heap, (when, timer))
        timer._scheduled = True
        return timer  # type: ignore[no-any-return]

    def _run_once(self) -> None:
        me: Any = self
        heap = self._heap
        count = len(heap)
        if count > _MIN_SCHEDULED and me._timer_cancelled_count / count > _CANCELLED_FRACTION:
            kept = []
            for item in heap:
                if item[1]._cancelled:
                    item[1]._scheduled = False
                else:
                    kept.append(item)
            heapq.heapify(kept)
            self._heap = heap = kept
            me._timer_cancelled_count = 0
        else:
            while heap and heap[0][1]._cancelled:
                me._timer_cancelled_count -= 1
                heapq.heappop(heap)[1]._scheduled = False
        ready = me._ready
        clock = self.clock
        if not ready and not me._stopping:
            if not heap:
                raise Deadlock("the simulation has nothing to run and no timer pending")
            clock.advance(min(max(0, heap[0][0] - clock.now), _MAX_WAIT))
        end = clock.now + me._clock_resolution
        while heap and heap[0][0] < end:
            handle = heapq.heappop(heap)[1]
            handle._scheduled = False
            ready.append(handle)
        for _ in range(len(ready)):
            handle = ready.popleft()
            if not handle._cancelled:
                handle._run()


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
