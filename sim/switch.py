"""The switch of the simulation: what the P4 program does to a packet, and the controller's
session to it.

`SwitchModel` follows `p4src/v1model/nfcluster.p4` (docs/dataplane.md) in what the protocols
depend on:

* **stamping**: `slot_owner[slot]` gives (group, epoch, primary, seq_base); the number is
  seq_base + the slot's count; the first packet of a new epoch is flagged; a slot without an
  owner is dropped and counted;
* **replica groups**: group -> (primary port, backup port); the primary copy (kind PRIMARY) and
  the backup copy (kind BACKUP) leave on their ports, each addressed to the NF behind the port;
* **output dedup** (`nf_host.harness.OutputDedup`, the model the unit tests share): each input's
  output is forwarded once; the rest is dropped and counted;
* **markers** go, unstamped, to the port of the slot's current primary;
* **one FIFO queue per port** in each direction, with seeded delays: to an NF, and from an NF
  into the pipeline. A port's queue is what lets a dead NF's last output reach the switch after
  its successor's first, which is the case the output log exists for.

`SimSession` is the controller's `SwitchSession` as far as the controller's protocols use it:
its writes change the model at once (a P4Runtime write is atomic).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from contract.seq import SEQ_MASK
from contract.shim import ETH_HDR_LEN, FLAG_FIRST_OF_EPOCH, Kind, Shim, decap, encap
from controlplane.slot_map import SlotEntry
from nf_host.harness import OutputDedup


@dataclass
class Owner:
    group: int
    epoch: int
    primary: int
    seq_base: int = 0


@dataclass
class PortQueue:
    """One direction of one port: frames leave in order, each after a seeded delay."""

    rng: random.Random
    delay: tuple[float, float]
    last: float = 0.0
    queued: int = 0

    def put(self, fn: Callable[[], None]) -> None:
        loop = asyncio.get_running_loop()
        lo, hi = self.delay
        # strictly after the frame before: asyncio's timer heap does not keep the order of equal
        # deadlines
        at = max(self.last + 1e-9, loop.time() + self.rng.uniform(lo, hi))
        self.last = at
        self.queued += 1

        def out() -> None:
            self.queued -= 1
            fn()

        loop.call_at(at, out)


@dataclass
class Delivered:
    """What reached the edge: (slot, epoch, seq of the input, frame without the shim)."""

    slot: int
    epoch: int
    seq: int
    frame: bytes


@dataclass
class SwitchModel:
    rng: random.Random
    deliver_to_nf: Callable[[int, bytes], None]  # (NF id, frame): the NF's data port
    port_delay: tuple[float, float] = (0.0001, 0.001)
    owners: dict[int, Owner] = field(default_factory=dict)
    groups: dict[int, tuple[int, int | None]] = field(default_factory=dict)
    counts: dict[int, int] = field(default_factory=dict)     # slot_traffic (packets stamped)
    last_epoch: dict[int, int] = field(default_factory=dict)
    dedup: OutputDedup = field(default_factory=OutputDedup)
    edge: list[Delivered] = field(default_factory=list)
    unowned: int = 0
    to_nf: dict[int, PortQueue] = field(default_factory=dict)
    from_nf: dict[int, PortQueue] = field(default_factory=dict)
    slow_ports: dict[int, tuple[float, float]] = field(default_factory=dict)
    stamped: dict[tuple[int, int], int] = field(default_factory=dict)  # (slot, seq) -> epoch

    # -- ports ------------------------------------------------------------------------------------
    def _queue(self, table: dict[int, PortQueue], port: int) -> PortQueue:
        q = table.get(port)
        if q is None:
            q = table[port] = PortQueue(self.rng, self.port_delay)
        q.delay = self.slow_ports.get(port, self.port_delay)
        return q

    # -- the edge ---------------------------------------------------------------------------------
    def ingress(self, slot: int, inner: bytes) -> int | None:
        """A packet of `slot` from an edge port: stamped and sent to the group; its seq, or None
        if the slot has no owner (dropped, counted)."""
        own = self.owners.get(slot)
        if own is None or own.group not in self.groups:
            self.unowned += 1
            return None
        count = self.counts.get(slot, 0) + 1
        self.counts[slot] = count
        seq = (own.seq_base + count) & SEQ_MASK
        flags = FLAG_FIRST_OF_EPOCH if self.last_epoch.get(slot) != own.epoch else 0
        self.last_epoch[slot] = own.epoch
        self.stamped[(slot, seq)] = own.epoch
        etype = int.from_bytes(inner[12:14], "big")
        primary, backup = self.groups[own.group]
        for kind, port in ((Kind.PRIMARY, primary), (Kind.BACKUP, backup)):
            if port is None:
                continue
            frame = encap(Shim(kind, flags, slot, own.epoch, port, seq, etype), inner)
            self._queue(self.to_nf, port).put(self._sender(port, frame))
        return seq

    def _sender(self, port: int, frame: bytes) -> Callable[[], None]:
        return lambda: self.deliver_to_nf(port, frame)

    # -- from an NF port --------------------------------------------------------------------------
    def from_port(self, port: int, frame: bytes | bytearray) -> None:
        data = bytes(frame)
        self._queue(self.from_nf, port).put(lambda: self._pipeline(port, data))

    def _pipeline(self, port: int, frame: bytes) -> None:
        try:
            shim = Shim.unpack(frame, ETH_HDR_LEN)
        except Exception:
            return
        if shim.kind == Kind.MARKER:
            own = self.owners.get(shim.slot)
            if own is not None and own.group in self.groups:
                to = self.groups[own.group][0]
                self._queue(self.to_nf, to).put(lambda: self.deliver_to_nf(to, frame))
            return
        if shim.kind != Kind.OUTPUT:
            return
        if self.dedup.offer(frame):
            _shim, inner = decap(frame)
            self.edge.append(Delivered(shim.slot, shim.epoch, shim.seq, bytes(inner)))


class SimSession:
    """The controller's switch session, writing `SwitchModel` (see the module docstring)."""

    is_primary = True

    def __init__(self, model: SwitchModel, port_of: Callable[[int], int]) -> None:
        self.model = model
        self.port_of = port_of
        self.switch = SimpleNamespace(election_id=10)
        self.seq_bases: dict[int, int] = {}
        self.writes = 0

    async def write_slot(self, entry: SlotEntry, group: int | None = None) -> None:
        self._write(entry, entry.owner if group is None else group)

    async def write_slots(self, entries: Iterable[SlotEntry], insert: bool = False,
                          groups: Any = None) -> None:
        for e in entries:
            self._write(e, (groups or {}).get(e.owner, e.owner))

    def _write(self, entry: SlotEntry, group: int) -> None:
        self.writes += 1
        self.model.owners[entry.slot] = Owner(group, entry.epoch, entry.owner,
                                              self.seq_bases.get(entry.slot, 0))

    async def set_group(self, primary: int, port: int, backup_port: int | None,
                        insert: bool = False) -> None:
        self.writes += 1
        self.model.groups[primary] = (port, backup_port)

    async def delete_group(self, group: int) -> None:
        self.writes += 1
        self.model.groups.pop(group, None)

    async def read_stamped(self) -> dict[int, int]:
        return dict(self.model.counts)

    async def read_counter(self, short: str) -> dict[int, tuple[int, int]]:
        return {s: (c, 0) for s, c in self.model.counts.items()}
