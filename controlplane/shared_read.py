"""`SharedRead`: one switch read shared by every caller that can use it.

The controller reads the switch's `slot_traffic` counter (one wildcard read of 4,096 entries or
more) for two users: the load balancer (controlplane/balancer_loop.py, while some NF is over its
high mark) and the counter loop (controlplane/switch_counters.py: the metrics, the status). Each
read costs the controller milliseconds of CPU, and the controller runs at a higher priority than
the NFs, so that CPU comes out of theirs. A `SharedRead` wraps the read so that

* a caller content with a read at most `max_age` seconds old gets the last one without a new read;
* a caller that arrives while a read is in flight awaits that read: two reads never run at once;
* otherwise the caller starts a read, which every later caller joins until it ends.

A read that fails fails every caller awaiting it and leaves the last good value in place (with its
age, so the next caller reads again). A caller cancelled while waiting does not cancel the read the
others wait for. `seq` counts the reads done, so a user can tell a read it has not seen yet.

Not for reads whose freshness is part of a correctness argument (the numbering a new owner resumes
from, `SwitchSession.read_stamped`): those read the switch themselves.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class ReadValue(Generic[T]):
    """One completed read: what it returned, when it returned (the clock's seconds), its number."""

    value: T
    at: float
    seq: int


def _monotonic() -> float:
    """`time.monotonic()` looked up at each call (the simulation replaces it: sim/loop.py)."""
    return time.monotonic()


def _consume(fut: asyncio.Future[ReadValue[T]]) -> None:
    if not fut.cancelled():
        fut.exception()


class SharedRead(Generic[T]):
    """One read at a time, shared by its callers, reused while young enough (module docstring)."""

    def __init__(self, read: Callable[[], Awaitable[T]],
                 clock: Callable[[], float] | None = None) -> None:
        self._read = read
        self.clock = clock if clock is not None else _monotonic
        self.last: ReadValue[T] | None = None
        self.reads = 0     # reads started (the switch's work)
        self.served = 0    # calls answered (from a read of their own, a joined one or the cache)
        self._flight: asyncio.Future[ReadValue[T]] | None = None
        self._seq = 0      # reads completed; never goes back (a `forget` keeps it)

    @property
    def seq(self) -> int:
        """The number of the last completed read (0: none yet)."""
        return self._seq

    @property
    def in_flight(self) -> bool:
        return self._flight is not None

    def fresh(self, max_age: float) -> ReadValue[T] | None:
        """The last read if it is at most `max_age` seconds old, else None (no read)."""
        last = self.last
        if last is not None and self.clock() - last.at <= max_age:
            return last
        return None

    async def get(self, max_age: float) -> ReadValue[T]:
        """A read at most `max_age` seconds old: the last one, the one in flight, or a new one."""
        self.served += 1
        if self._flight is None:
            cached = self.fresh(max_age)
            if cached is not None:
                return cached
            self._flight = asyncio.ensure_future(self._run())
            # its failure is its callers'; if they were all cancelled, nobody is left to see it
            self._flight.add_done_callback(_consume)
        # shielded: a caller cancelled while waiting leaves the read to the others
        return await asyncio.shield(self._flight)

    async def _run(self) -> ReadValue[T]:
        self.reads += 1
        try:
            value = await self._read()
            self._seq += 1
            self.last = ReadValue(value, self.clock(), self._seq)
            return self.last
        finally:
            self._flight = None

    async def value(self, max_age: float) -> T:
        """`get(max_age).value`."""
        return (await self.get(max_age)).value

    def forget(self) -> None:
        """Drop the last value (the switch restarted, or another controller became primary):
        the next caller reads."""
        self.last = None
