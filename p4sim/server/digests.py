"""Digest batching as P4Runtime defines it: per-digest config, list building, ack and suppression.

A digest produces nothing until the controller has written a `DigestEntry` for it. Data items are
collected into a list that is sent when it holds `max_list_size` items or when
its first item is `max_timeout_ns` old (0: at once; `max_list_size` 0: no size limit). Items already sent in a list that is not yet acknowledged
(and whose `ack_timeout_ns` has not passed) are suppressed, as are duplicates within a list.
"""

from __future__ import annotations

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
    first_ns: int
    items: list[Item] = field(default_factory=list)


# Bound on buffered items per digest, so a flood of new data cannot grow memory without limit.
MAX_BUFFERED = 65536


class DigestBatcher:
    """Builds DigestList messages; not thread-safe (the device calls it under its lock)."""

    def __init__(self, struct_digest_ids: set[int]) -> None:
        self.configs: dict[int, DigestConfig] = {}
        self._struct_ids = struct_digest_ids
        self._buffers: dict[int, _Buffer] = {}
        self._pending: dict[tuple[int, int], tuple[set[Item], int]] = {}
        self._next_list_id: dict[int, int] = {}
        self.dropped = 0

    def configure(self, digest_id: int, config: DigestConfig | None) -> None:
        """Set (or with None remove) a digest's config; removing drops its buffer and pending lists."""
        if config is None:
            self.configs.pop(digest_id, None)
            self._buffers.pop(digest_id, None)
            for key in [k for k in self._pending if k[0] == digest_id]:
                del self._pending[key]
        else:
            self.configs[digest_id] = config

    def add(self, digest_id: int, members: list[bytes], now_ns: int) -> list[p4r.DigestList]:
        config = self.configs.get(digest_id)
        if config is None:
            return []
        item: Item = tuple(members)
        if self._suppressed(digest_id, item, now_ns):
            return []
        buf = self._buffers.get(digest_id)
        if buf is None:
            buf = self._buffers[digest_id] = _Buffer(now_ns)
        if item in buf.items:
            return []
        if len(buf.items) >= MAX_BUFFERED:
            self.dropped += 1
            return []
        buf.items.append(item)
        limit = config.max_list_size
        if config.max_timeout_ns == 0 or (limit > 0 and len(buf.items) >= limit):
            return [self._flush(digest_id, now_ns)]
        return []

    def poll(self, now_ns: int) -> list[p4r.DigestList]:
        """Lists whose timeout has come; also forgets pending lists whose ack timeout passed."""
        for key, (_, deadline) in list(self._pending.items()):
            if deadline <= now_ns:
                del self._pending[key]
        out = []
        for digest_id, buf in list(self._buffers.items()):
            config = self.configs[digest_id]
            if buf.items and now_ns - buf.first_ns >= config.max_timeout_ns:
                out.append(self._flush(digest_id, now_ns))
        return out

    def next_deadline_ns(self) -> int | None:
        deadlines = [
            buf.first_ns + self.configs[d].max_timeout_ns
            for d, buf in self._buffers.items()
            if buf.items
        ]
        deadlines.extend(deadline for _, deadline in self._pending.values())
        return min(deadlines) if deadlines else None

    def ack(self, digest_id: int, list_id: int) -> None:
        self._pending.pop((digest_id, list_id), None)

    def _suppressed(self, digest_id: int, item: Item, now_ns: int) -> bool:
        for (d, _), (items, deadline) in self._pending.items():
            if d == digest_id and deadline > now_ns and item in items:
                return True
        return False

    def _flush(self, digest_id: int, now_ns: int) -> p4r.DigestList:
        buf = self._buffers.pop(digest_id)
        list_id = self._next_list_id.get(digest_id, 1)
        self._next_list_id[digest_id] = list_id + 1
        config = self.configs[digest_id]
        if config.ack_timeout_ns > 0:
            self._pending[(digest_id, list_id)] = (
                set(buf.items),
                now_ns + config.ack_timeout_ns,
            )
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
