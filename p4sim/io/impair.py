"""Wire impairment of a p4sim port: what `tc netem` on the switch's side of a link would do to the
frames p4sim sends on it, done by p4sim itself (for kernels without `sch_netem`).

`Impairment` is what a port is asked to do (and its validation, for the status server's
`POST /ports/{port}/impair`); `Impairer` is the logic, pure and seeded, with an injectable
clock; `PortImpairer` is one port's `Impairer` behind a lock, handing the frames it lets go to
the port's transmit function (p4sim/io/ports.py).

Per frame offered for sending, three draws of `random.Random(seed)`, always three, so the
decisions for the n-th frame depend only on the seed and n:

* **loss** and **duplicate**, as netem's `netem_enqueue`: the frame makes `1 + duplicated -
  lost` copies: none (dropped, `impair_dropped`), one (both or neither happened) or two (sent
  twice, back to back, `impair_duplicated`). So the receiver gets exactly
  `sent - impair_dropped + impair_duplicated` frames.
* **delay_ms** and **reorder**: with a delay, every frame is held `delay_ms` (`impair_delayed`,
  counted per copy) and leaves in due order, except the `reorder` fraction, which is sent at once,
  ahead of the frames still held (netem's `reorder` with its default gap of 1; counted in
  `impair_reordered` when it did overtake a held frame). Without a delay nothing is held and
  `reorder` means nothing: it is refused, as `tc` refuses it.

Held frames are sent when they fall due (`due`, called by the port loop, which sleeps no
longer than until `next_due`), all at once, in order, when the impairment is removed
(`release`), and counted as dropped when p4sim closes the port (`discard`).
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

KEYS = ("loss", "duplicate", "reorder", "delay_ms", "seed")
COUNTERS = ("impair_dropped", "impair_duplicated", "impair_reordered", "impair_delayed")
PROBABILITIES = ("loss", "duplicate", "reorder")
MAX_DELAY_MS = 1000.0


class ImpairmentError(ValueError):
    """A refused impairment; the message names what is wrong."""


@dataclass(frozen=True)
class Impairment:
    """What one port does to the frames p4sim sends on it (probabilities in [0, 1])."""

    loss: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0
    delay_ms: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in PROBABILITIES:
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ImpairmentError(f"{name} must be a probability in [0, 1], got {value}")
        if not 0.0 <= self.delay_ms <= MAX_DELAY_MS:
            raise ImpairmentError(
                f"delay_ms must be in [0, {MAX_DELAY_MS:g}] ms, got {self.delay_ms}")
        if self.reorder > 0 and self.delay_ms == 0:
            raise ImpairmentError("reorder needs a delay (delay_ms > 0): it sends that fraction "
                                  "of frames ahead of the delayed ones, as netem's reorder does")

    @classmethod
    def from_json(cls, doc: Any) -> Impairment:
        """An impairment from a JSON object such as `{"loss": 0.01, "delay_ms": 1, "seed": 7}`
        (missing keys are 0), or ImpairmentError naming what is wrong."""
        if not isinstance(doc, dict):
            raise ImpairmentError(
                f"the body must be a JSON object with keys among {', '.join(KEYS)}, "
                f"got {type(doc).__name__}")
        unknown = sorted(set(doc) - set(KEYS))
        if unknown:
            raise ImpairmentError(f"unknown key{'s' if len(unknown) > 1 else ''} "
                                  f"{', '.join(map(repr, unknown))} (known: {', '.join(KEYS)})")
        values: dict[str, Any] = {}
        for name in KEYS:
            if name not in doc:
                continue
            v = doc[name]
            if name == "seed":
                if isinstance(v, bool) or not isinstance(v, int):
                    raise ImpairmentError(f"seed must be an integer, got {v!r}")
                values[name] = v
                continue
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise ImpairmentError(f"{name} must be a number, got {v!r}")
            values[name] = float(v)
        return cls(**values)

    def to_json(self) -> dict[str, float | int]:
        return {"loss": self.loss, "duplicate": self.duplicate, "reorder": self.reorder,
                "delay_ms": self.delay_ms, "seed": self.seed}

    def describe(self) -> str:
        """netem's words: "delay 1ms loss 1% duplicate 1% reorder 10% (seed 7)"."""
        parts = [f"delay {self.delay_ms:g}ms"] if self.delay_ms else []
        parts += [f"{name} {getattr(self, name) * 100:g}%" for name in PROBABILITIES
                  if getattr(self, name)]
        return f"{' '.join(parts) or 'nothing'} (seed {self.seed})"


class ImpairCounts(Protocol):
    """Where an `Impairer` counts (a port's `PortStats` has these fields)."""

    impair_dropped: int
    impair_duplicated: int
    impair_reordered: int
    impair_delayed: int


@dataclass
class ImpairStats:
    """The counters of an `Impairer` that counts on its own."""

    impair_dropped: int = 0  # frames dropped (lost); frames still held at close, too
    impair_duplicated: int = 0  # extra copies sent
    impair_reordered: int = 0  # frames sent at once, ahead of at least one held frame
    impair_delayed: int = 0  # frames (copies) held for delay_ms


class Impairer:
    """The impairment logic for one port (not thread-safe: see `PortImpairer`)."""

    def __init__(self, impairment: Impairment, counts: ImpairCounts | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.impairment = impairment
        self.counts: ImpairCounts = counts if counts is not None else ImpairStats()
        self.clock = clock
        self._rng = random.Random(impairment.seed)
        self._held: list[tuple[float, int, bytes]] = []  # (due, order, frame): a heap
        self._order = itertools.count()

    @property
    def held(self) -> int:
        """Frames held for their delay."""
        return len(self._held)

    def next_due(self) -> float | None:
        """When the first held frame falls due (the clock's time), None when none is held."""
        return self._held[0][0] if self._held else None

    def due(self) -> list[bytes]:
        """The held frames due by now, in due order (taken out)."""
        now, out = self.clock(), []
        while self._held and self._held[0][0] <= now:
            out.append(heapq.heappop(self._held)[2])
        return out

    def offer(self, frame: bytes) -> list[bytes]:
        """A frame to send: the frames to send now, in order (first the held ones already due,
        then this frame's copies unless they are held or dropped)."""
        imp, c = self.impairment, self.counts
        lose = self._rng.random() < imp.loss
        dup = self._rng.random() < imp.duplicate
        jump = self._rng.random() < imp.reorder
        out = self.due()
        copies = 1 + dup - lose
        if copies == 0:
            c.impair_dropped += 1
            return out
        if copies == 2:
            c.impair_duplicated += 1
        if imp.delay_ms == 0 or jump:
            if imp.delay_ms and self._held:
                c.impair_reordered += 1
            out += [frame] * copies
            return out
        due = self.clock() + imp.delay_ms / 1000.0
        for _ in range(copies):
            heapq.heappush(self._held, (due, next(self._order), frame))
        c.impair_delayed += copies
        return out

    def release(self) -> list[bytes]:
        """Every held frame, in due order, now (the impairment is removed: they are sent)."""
        out = [f for _, _, f in sorted(self._held)]
        self._held.clear()
        return out

    def discard(self) -> int:
        """Drop every held frame, counted in `impair_dropped` (the port closes); how many."""
        n = len(self._held)
        self._held.clear()
        self.counts.impair_dropped += n
        return n


class PortImpairer:
    """One port's `Impairer` under a lock; what it lets go goes to `transmit` (the port's own
    send, called under this lock so that frames leave in the order decided here)."""

    def __init__(self, impairment: Impairment, counts: ImpairCounts,
                 transmit: Callable[[bytes], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.impairer = Impairer(impairment, counts, clock)
        self.transmit = transmit
        self.lock = threading.Lock()
        self.done = False  # released or discarded: frames pass straight through
        self._start = {name: getattr(counts, name) for name in COUNTERS}

    @property
    def impairment(self) -> Impairment:
        return self.impairer.impairment

    def counted(self) -> dict[str, int]:
        """What this impairment counted so far (the port's counters since it was set)."""
        c = self.impairer.counts
        return {name: getattr(c, name) - self._start[name] for name in COUNTERS}

    def send(self, frame: bytes) -> None:
        with self.lock:
            for f in [frame] if self.done else self.impairer.offer(frame):
                self.transmit(f)

    def service(self) -> None:
        """Send the held frames that are due."""
        if self.impairer.held:
            with self.lock:
                for f in self.impairer.due():
                    self.transmit(f)

    def next_due(self) -> float | None:
        with self.lock:
            return self.impairer.next_due()

    def release(self) -> int:
        """End the impairment: every held frame is sent now, in order; how many."""
        with self.lock:
            self.done = True
            frames = self.impairer.release()
            for f in frames:
                self.transmit(f)
        return len(frames)

    def discard(self) -> int:
        """End the impairment at close: the held frames are counted as dropped; how many."""
        with self.lock:
            self.done = True
            return self.impairer.discard()
