"""Digest batching as P4Runtime defines it, with the timing of BMv2's P4Runtime server (PI).

A digest produces nothing until the controller has written a `DigestEntry` for it. Data items are
collected into a list, modelled on PI's `DigestMgr` (p4lang/PI, proto/frontend/src/digest_mgr.cpp),
which is what `simple_switch_grpc` runs, so that p4sim shows BMv2's timing:

* `max_timeout_ns` 0: a list leaves with each new item. Otherwise a sweep runs every
  `max(max_timeout_ns, 100 ms)` (the first one a period after the config is written); a sweep that
  finds items marks the list, the next sweep sends it: an item waits between one and two periods;
* `ack_timeout_ns` > 0: items are remembered (a cache) from the moment they are buffered until
  their list is acknowledged or expires (a sweep every `max(ack_timeout_ns, 100 ms)`, two sweeps
  as above); a remembered item is suppressed, also within its own list, and a list leaves as soon
  as it holds `max_list_size` remembered items (0: no size limit). With `ack_timeout_ns` 0
  nothing is remembered: duplicates are sent, and only the timeout sends a list.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from finsy.proto import p4d, p4r

from p4sim.server import bytestrings

Item = tuple[bytes, ...]


@dataclass
class DigestConfig:
    max_timeout_ns: int = 0
    max_list_size: int = 1
    ack_timeout_ns: int = 0

    @classmethod
    def from_p4(cls, c: p4r.DigestEntry.Config) -> DigestConfig:
        return cls(c.max_timeout_ns, c.max_list_size, c.ack_timeout_ns)

    def to_p4(self) -> p4r.DigestEntry.Config:
        return p4r.DigestEntry.Config(
            max_timeout_ns=self.max_timeout_ns,
            max_list_size=self.max_list_size,
            ack_timeout_ns=self.ack_timeout_ns,
        )


@dataclass
class _Buffer:
    items: list[Item] = field(default_factory=list)
    marked: bool = False  # seen by one max-timeout sweep already: the next one sends it


@dataclass
class _Sweep:
    period_ns: int
    next_ns: int


# PI's floor for both sweeps (min_max_timeout_ns, min_ack_timeout_ns)
MIN_SWEEP_NS = 100_000_000
# Bound on buffered items per digest, so a flood of new data cannot grow memory without limit.
MAX_BUFFERED = 65536


def _sweep(period_ns: int, now_ns: int) -> _Sweep | None:
    return None if period_ns <= 0 else _Sweep(max(period_ns, MIN_SWEEP_NS),
                                              now_ns + max(period_ns, MIN_SWEEP_NS))


class DigestBatcher:
    """Builds DigestList messages; not thread-safe (the device calls it under its lock)."""

    def __init__(self, struct_digest_ids: set[int]) -> None:
        self.configs: dict[int, DigestConfig] = {}
        self._struct_ids = struct_digest_ids
        self._buffers: dict[int, _Buffer] = {}
        self._cache: dict[int, set[Item]] = {}  # remembered items (ack_timeout_ns > 0)
        self._pending: dict[tuple[int, int], tuple[set[Item], bool]] = {}  # items, marked
        self._sweeps: dict[int, tuple[_Sweep | None, _Sweep | None]] = {}  # max, ack
        self._next_list_id: dict[int, int] = {}
        self.dropped = 0

    def configure(self, digest_id: int, config: DigestConfig | None,
                  now_ns: int | None = None) -> None:
        """Set (or with None remove) a digest's config; removing drops its buffer, its cache and
        its pending lists. The sweeps restart from now."""
        if config is None:
            self.configs.pop(digest_id, None)
            self._buffers.pop(digest_id, None)
            self._cache.pop(digest_id, None)
            self._sweeps.pop(digest_id, None)
            for key in [k for k in self._pending if k[0] == digest_id]:
                del self._pending[key]
            return
        now = time.time_ns() if now_ns is None else now_ns
        self.configs[digest_id] = config
        self._sweeps[digest_id] = (_sweep(config.max_timeout_ns, now),
                                   _sweep(config.ack_timeout_ns, now))

    def add(self, digest_id: int, members: list[bytes], now_ns: int) -> list[p4r.DigestList]:
        config = self.configs.get(digest_id)
        if config is None:
            return []
        item: Item = tuple(members)
        buf = self._buffers.setdefault(digest_id, _Buffer())
        if len(buf.items) >= MAX_BUFFERED:
            self.dropped += 1
            return []
        remembered = config.ack_timeout_ns > 0
        if remembered:
            cache = self._cache.setdefault(digest_id, set())
            if item in cache:
                return []  # in this list already, or in a list not yet acknowledged
            cache.add(item)
        buf.items.append(item)
        limit = config.max_list_size
        if config.max_timeout_ns == 0 or (remembered and limit > 0 and len(buf.items) >= limit):
            return [self._flush(digest_id, now_ns)]
        return []

    def poll(self, now_ns: int) -> list[p4r.DigestList]:
        """Run the sweeps that are due: lists that have waited a marked sweep are sent, lists not
        acknowledged after two ack sweeps expire (their items are forgotten)."""
        out = []
        for digest_id, (max_sweep, ack_sweep) in list(self._sweeps.items()):
            while max_sweep is not None and max_sweep.next_ns <= now_ns:
                max_sweep.next_ns += max_sweep.period_ns
                buf = self._buffers.get(digest_id)
                if buf is None or not buf.items:
                    continue
                if not buf.marked:
                    buf.marked = True
                else:
                    out.append(self._flush(digest_id, now_ns))
            while ack_sweep is not None and ack_sweep.next_ns <= now_ns:
                ack_sweep.next_ns += ack_sweep.period_ns
                for key in [k for k in self._pending if k[0] == digest_id]:
                    items, marked = self._pending[key]
                    if marked:
                        self._forget(key)
                    else:
                        self._pending[key] = (items, True)
        return out

    def next_deadline_ns(self) -> int | None:
        deadlines = [
            sweep.next_ns for d, sweeps in self._sweeps.items() for sweep in sweeps
            if sweep is not None and (self._buffers.get(d) or any(k[0] == d for k in self._pending))
        ]
        return min(deadlines) if deadlines else None

    def ack(self, digest_id: int, list_id: int) -> None:
        self._forget((digest_id, list_id))

    def _forget(self, key: tuple[int, int]) -> None:
        entry = self._pending.pop(key, None)
        if entry is not None:
            self._cache.get(key[0], set()).difference_update(entry[0])

    def _flush(self, digest_id: int, now_ns: int) -> p4r.DigestList:
        buf = self._buffers.pop(digest_id)
        list_id = self._next_list_id.get(digest_id, 1)
        self._next_list_id[digest_id] = list_id + 1
        if self.configs[digest_id].ack_timeout_ns > 0:
            self._pending[(digest_id, list_id)] = (set(buf.items), False)
        return p4r.DigestList(
            digest_id=digest_id,
            list_id=list_id,
            data=[self._to_p4data(digest_id, item) for item in buf.items],
            timestamp=now_ns,
        )

    def _to_p4data(self, digest_id: int, item: Item) -> p4d.P4Data:
        values = [bytestrings.encode(int.from_bytes(b, "big")) for b in item]
        if digest_id in self._struct_ids or len(values) != 1:
            return p4d.P4Data(
                struct=p4d.P4StructLike(members=[p4d.P4Data(bitstring=v) for v in values])
            )
        return p4d.P4Data(bitstring=values[0])
