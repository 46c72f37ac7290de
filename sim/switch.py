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
import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from contract.seq import SEQ_MASK
from contract.shim import ETH_HDR_LEN, FLAG_FIRST_OF_EPOCH, Kind, Shim, decap, encap
from controlplane.slot_map import SlotEntry
from nf_host.harness import OutputDedup, read_checker


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
    # arbitration: the connected sessions (by election id the primary) and whether it is up
    up: bool = True
    primary: Any = None
    sessions: dict[Any, None] = field(default_factory=dict)
    step: Callable[[str, str], None] = lambda node, what: None  # the run's hook: each write
    generation: int = 0  # restarts so far: a frame queued before one is lost inside the switch
    restart_lost: list[tuple[int, int]] = field(default_factory=list)  # (flow, no): evidence
    restarts: list[tuple[float, float]] = field(default_factory=list)  # (down at, up at)

    # -- arbitration and restarts -------------------------------------------------------------
    def connect(self, session: Any) -> None:
        self.sessions[session] = None
        self._arbitrate()

    def disconnect(self, session: Any) -> None:
        self.sessions.pop(session, None)
        if self.primary is session:
            self.primary = None
            self._arbitrate()
            if self.primary is not None:
                self.primary.wake()  # (the next highest is told it is primary now)

    def _arbitrate(self) -> None:
        live = [s for s in self.sessions if s.alive()]
        if live:
            self.primary = max(live, key=lambda s: s.switch.election_id)

    def restart(self, downtime: float) -> None:
        """The switch process restarts: every table, group, register and counter is lost, and
        so is every frame inside it (counted, by flow and packet: `restart_lost`); the sessions
        reconnect `downtime` later and the primary reconciles."""
        loop = asyncio.get_running_loop()
        self.up = False
        self.generation += 1
        self.owners, self.groups, self.counts, self.last_epoch = {}, {}, {}, {}
        self.dedup = OutputDedup()
        sessions, self.sessions, self.primary = list(self.sessions), {}, None
        self.restarts.append((loop.time(), loop.time() + downtime))

        def back() -> None:
            self.up = True
            for s in sessions:
                s.wake()

        loop.call_at(loop.time() + downtime, back)

    def _alive_frame(self, frame: bytes, fn: Callable[[], None]) -> Callable[[], None]:
        gen = self.generation

        def out() -> None:
            if self.generation == gen:
                fn()
            else:
                self._lost(frame)

        return out

    def _lost(self, frame: bytes) -> None:
        try:
            _shim, inner = decap(frame)
        except Exception:
            return
        rec = read_checker(bytes(inner))
        if rec is not None:
            self.restart_lost.append((rec[0], rec[1]))

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
        if not self.up or own is None or own.group not in self.groups:
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
        return self._alive_frame(frame, lambda: self.deliver_to_nf(port, frame))

    # -- from an NF port --------------------------------------------------------------------------
    def from_port(self, port: int, frame: bytes | bytearray) -> None:
        data = bytes(frame)
        self._queue(self.from_nf, port).put(
            self._alive_frame(data, lambda: self._pipeline(port, data)))

    def _pipeline(self, port: int, frame: bytes) -> None:
        if not self.up:
            self._lost(frame)
            return
        try:
            shim = Shim.unpack(frame, ETH_HDR_LEN)
        except Exception:
            return
        if shim.kind == Kind.MARKER:
            own = self.owners.get(shim.slot)
            if own is not None and own.group in self.groups:
                to = self.groups[own.group][0]
                self._queue(self.to_nf, to).put(
                    self._alive_frame(frame, lambda: self.deliver_to_nf(to, frame)))
            return
        if shim.kind != Kind.OUTPUT:
            return
        if self.dedup.offer(frame):
            _shim, inner = decap(frame)
            self.edge.append(Delivered(shim.slot, shim.epoch, shim.seq, bytes(inner)))


class NotPrimary(Exception):
    """A write from a controller that is not the switch's primary (P4Runtime's
    PERMISSION_DENIED), or to a switch that is down."""


class _Desired:
    """What `SimBuilder.desired` gives: every replica group and every slot's entry."""

    def __init__(self, groups: dict[int, tuple[int, int | None]],
                 owners: dict[int, Owner]) -> None:
        self.groups, self.owners = groups, owners


class _Diff:
    def __init__(self, changed: int) -> None:
        self.changed = changed

    def __bool__(self) -> bool:
        return bool(self.changed)

    def counts(self) -> dict[str, int]:
        return {"insert": 0, "modify": self.changed, "delete": 0}


class SimBuilder:
    """`SwitchSession.builder` as the reconcile uses it: the state the controller wants, from
    the same arguments `pipeline_state.EntityBuilder.desired` takes (replica groups and
    `slot_owner` entries: what the model holds; the static tables are not modelled)."""

    def __init__(self, port_of: Callable[[int], int]) -> None:
        self.port_of = port_of

    def desired(self, cfg: Any, pairs: Mapping[int, int | None], slot_map: Any,
                groups: Mapping[int, int] | None = None,
                seq_bases: Mapping[int, int] | None = None) -> _Desired:
        groups, seq_bases = groups or {}, seq_bases or {}
        return _Desired(
            {groups.get(p, p): (self.port_of(p), None if b is None else self.port_of(b))
             for p, b in sorted(pairs.items())},
            {e.slot: Owner(groups.get(e.owner, e.owner), e.epoch, e.owner,
                           seq_bases.get(e.slot, 0)) for e in slot_map.entries()})


class SimSession:
    """One controller's session to the switch model (see the module docstring): arbitration by
    election id (the highest connected one is primary; writes from any other are refused), and
    `run` calls `on_primary` (the controller's reconcile) each time it becomes the primary,
    including after a switch restart."""

    def __init__(self, model: SwitchModel, port_of: Callable[[int], int],
                 alive: Callable[[], bool] = lambda: True, election_id: int = 10,
                 node: str = "",
                 on_primary: Callable[[Any], Awaitable[None]] | None = None) -> None:
        self.model = model
        self.node = node  # the controller process that holds this session
        self.port_of = port_of
        self.alive = alive  # (a dead process's writes never reach the switch)
        self.switch = SimpleNamespace(election_id=election_id)
        self.builder = SimBuilder(port_of)
        self.on_primary = on_primary
        self.seq_bases: dict[int, int] = {}
        self.writes = 0
        self._wake = asyncio.Event()

    def set_election_id(self, election_id: int) -> None:
        self.switch.election_id = election_id

    @property
    def is_primary(self) -> bool:
        return self.model.up and self.model.primary is self and self.alive()

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        """Connect, arbitrate, reconcile when primary; again after each switch restart."""
        model = self.model
        try:
            while True:
                self._wake.clear()
                if model.up:
                    model.connect(self)
                    if self.is_primary and self.on_primary is not None:
                        # (demoted, or the switch restarted, meanwhile: the next wake-up
                        # connects again, as finsy reconnects)
                        with contextlib.suppress(NotPrimary):
                            await self.on_primary(self)
                await self._wake.wait()
        finally:
            model.disconnect(self)

    def _check(self) -> None:
        if not self.is_primary:
            raise NotPrimary("PERMISSION_DENIED: not the primary (or the switch is down)")
        self.writes += 1

    async def write_slot(self, entry: SlotEntry, group: int | None = None) -> None:
        self._check()
        self._write(entry, entry.owner if group is None else group)

    async def write_slots(self, entries: Iterable[SlotEntry], insert: bool = False,
                          groups: Any = None) -> None:
        self._check()
        for e in entries:
            self._write(e, (groups or {}).get(e.owner, e.owner))

    def _write(self, entry: SlotEntry, group: int) -> None:
        self.model.step(self.node, "switch write")
        self._check()  # (the step may have killed the writer)
        self.model.owners[entry.slot] = Owner(group, entry.epoch, entry.owner,
                                              self.seq_bases.get(entry.slot, 0))

    async def set_group(self, primary: int, port: int, backup_port: int | None,
                        insert: bool = False) -> None:
        self._check()
        self.model.groups[primary] = (port, backup_port)

    async def delete_group(self, group: int) -> None:
        self._check()
        self.model.groups.pop(group, None)

    async def reconcile(self, desired: _Desired) -> _Diff:
        self._check()
        model = self.model
        changed = sum(model.groups.get(g) != v for g, v in desired.groups.items())
        changed += len(set(model.groups) - set(desired.groups))
        changed += sum(model.owners.get(s) != o for s, o in desired.owners.items())
        model.groups = dict(desired.groups)
        model.owners = dict(desired.owners)
        return _Diff(changed)

    async def read_numbering(self) -> tuple[dict[int, int], dict[int, int]]:
        self._check()
        model = self.model
        return ({s: o.seq_base for s, o in model.owners.items() if o.seq_base},
                dict(model.counts))

    async def enable_new_flow_digest(self) -> None:
        return None

    async def new_flows(self) -> AsyncIterator[list[Any]]:
        await asyncio.get_running_loop().create_future()  # (no digests in the simulation)
        yield []

    async def read_stamped(self) -> dict[int, int]:
        self._check()
        return dict(self.model.counts)

    async def read_counter(self, short: str) -> dict[int, tuple[int, int]]:
        self._check()
        if short == "slot_traffic":
            return {s: (c, 0) for s, c in self.model.counts.items()}
        return {}
