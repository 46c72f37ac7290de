"""The NF API: what an NF author writes, separated from what the runtime does (after NFactor).

An NF declares its per-flow state as plain data (`FlowState`: dicts, lists, ints, bytes, strings;
anything msgpack serialises) through `initial_state()`, and its logic as
`process(packet, flow_state, context) -> Verdict`. The runtime owns the state: it creates it, keys it
by the canonical flow, marks it dirty when `process` runs, ships the dirty part as a delta to the
backup and the cluster peers, and moves it between instances. An NF never serialises or sends state
itself. Global state (shared by many flows, e.g. a NAT's port pool) is reached through
`context.global_state`, a linearizable store (etcd in production).
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar, Protocol, TypeVar

from contract.shim import Shim

FlowState = dict[str, Any]
"""Per-flow state: plain, msgpack-serialisable data."""


@dataclass(frozen=True, slots=True)
class FlowKey:
    """An IPv4 5-tuple. Addresses are 32-bit integers; ports are 0 for protocols without ports."""

    src: int
    dst: int
    sport: int
    dport: int
    proto: int

    def reversed(self) -> FlowKey:
        return FlowKey(self.dst, self.src, self.dport, self.sport, self.proto)

    def canonical(self) -> tuple[FlowKey, bool]:
        """The direction-independent key of the connection, and whether this key is its reverse."""
        if (self.src, self.sport) <= (self.dst, self.dport):
            return self, False
        return self.reversed(), True


class Verdict(IntEnum):
    FORWARD = 0
    DROP = 1
    DROP_FORGET = 2
    """Drop the packet and keep no state for its flow: a flow this packet created is not kept,
    one that existed is deleted (replicated as a deletion, counted as an eviction "nf"). For
    packets an NF refuses (a scan, a firewall's denied flow): they cost the table nothing."""


@dataclass(slots=True)
class Packet:
    """One packet handed to an NF: the Ethernet frame without the shim, and what the runtime parsed.

    `frame` may be modified in place (a NAT rewrites addresses); the runtime sends the frame as it is
    after `process` returns `Verdict.FORWARD`. Offsets are -1 where the header is absent.
    """

    frame: bytearray
    shim: Shim
    flow: FlowKey | None
    l3_offset: int = 14
    l4_offset: int = -1
    payload_offset: int = -1

    @property
    def payload(self) -> memoryview:
        start = self.payload_offset if self.payload_offset >= 0 else len(self.frame)
        return memoryview(self.frame)[start:]


class GlobalStoreError(RuntimeError):
    """The store could not complete an operation (unreachable etcd, no quorum, timeout,
    contention). The runtime counts it (`global_store_errors`) and drops the packet."""


class GlobalStore(Protocol):
    """Strongly consistent key-value store for global NF state (etcd; in memory for unit tests)."""

    def get(self, key: str) -> bytes | None: ...

    def put(self, key: str, value: bytes) -> None: ...

    def delete(self, key: str) -> bool: ...

    def compare_and_swap(self, key: str, expected: bytes | None, value: bytes) -> bool:
        """Set `key` to `value` only if it currently holds `expected` (None: absent)."""
        ...

    def increment(self, key: str, delta: int = 1) -> int:
        """Atomically add `delta` to the integer at `key` (absent counts as 0); return the new value."""
        ...


@dataclass(slots=True)
class Context:
    """What `process` may know besides the packet and its flow's state."""

    slot: int
    seq: int
    nf_id: int
    flow_key: FlowKey | None
    reverse: bool
    global_state: GlobalStore
    now: float


class NetworkFunction(ABC):
    """Base class of every NF. Subclasses set `name` and register with `@register_nf`."""

    name: ClassVar[str] = ""
    # Flow state bounds (nf_host/flow_table.py): a flow unused for `idle_timeout` seconds is
    # evicted (its deletion replicated like any change); at most `max_flows` flows per worker
    # (0: no bound), the one to make room chosen by `eviction` ("lru": oldest idle first;
    # "expiry": closest to its own timeout). Each may be overridden by the NF's params of the
    # same names.
    idle_timeout: ClassVar[float] = 300.0
    max_flows: ClassVar[int] = 1_000_000
    eviction: ClassVar[str] = "lru"

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        self.params: dict[str, Any] = dict(params or {})

    @abstractmethod
    def initial_state(self) -> FlowState:
        """The state of a flow the NF has not seen before."""

    @abstractmethod
    def process(self, packet: Packet, state: FlowState, context: Context) -> Verdict:
        """Process one packet of a flow, in stamp order; update `state` in place."""

    def flow_timeout(self, state: FlowState, flow: FlowKey | None) -> tuple[str, float]:
        """The idle class of a flow after a packet: (name, seconds unused before it is evicted).
        Called after every `process`; evictions are counted by the name. The default: ("idle",
        `idle_timeout`). A protocol-aware NF returns a shorter class for a connection it saw
        end (see `tcp_timeout`)."""
        return self._idle_class

    @functools.cached_property
    def _idle_class(self) -> tuple[str, float]:
        return "idle", self.limit("idle_timeout")

    def limit(self, name: str) -> float:
        """A flow bound (`idle_timeout`, `max_flows`, ...): the NF's param of that name, else the
        class's default."""
        value = self.params.get(name)
        return float(getattr(type(self), name) if value is None else value)


CLOSED_TIMEOUT = 10.0
"""How long a TCP connection is kept after its FIN or RST (conntrack keeps TIME_WAIT 120 s and
CLOSE 10 s; the NFs here need no state for segments after the close beyond late retransmits)."""


def tcp_timeout(nf: NetworkFunction, state: FlowState, closed: bool) -> tuple[str, float]:
    """The idle class of a TCP-aware NF's flow: ("closed", `closed_timeout`) once `closed`, else
    the NF's default."""
    if closed:
        value = nf.params.get("closed_timeout")
        return "closed", CLOSED_TIMEOUT if value is None else float(value)
    return "idle", nf.limit("idle_timeout")


NF_TYPES: dict[str, type[NetworkFunction]] = {}

_N = TypeVar("_N", bound=type[NetworkFunction])


def register_nf(cls: _N) -> _N:
    """Class decorator: make an NF available by its `name` (e.g. to `nf-host run --nf NAME`)."""
    if not cls.name:
        raise ValueError(f"{cls.__qualname__} has no name")
    if cls.name in NF_TYPES and NF_TYPES[cls.name] is not cls:
        raise ValueError(f"two NFs are named {cls.name!r}")
    NF_TYPES[cls.name] = cls
    return cls


StateFactory = Callable[[], FlowState]
