"""Per-slot NF state with versions and dirty tracking: what replication ships and moves carry.

The owner of a slot keeps a `SlotState`: the per-flow state of every flow hashed to the slot, the
last sequence number processed, and a version. `process` runs against a flow's state and the
runtime marks the flow dirty; when a batch closes, `SlotState.seal` bumps the slot's version,
stamps the dirty flows with it and returns them: that list is the batch's delta. Because each
flow remembers the version that last changed it, `since(v)` yields exactly the flows a peer
holding version `v` lacks (an intra-cluster move), and `everything()` the full state (an
inter-cluster move, or a brand-new backup).

A receiver (backup or cluster peer) keeps a `Replica` per slot and applies deltas to it in the
order the owner sealed them. On the wire a flow key is 13 bytes (`!IIHHB`: src, dst, sport,
dport, proto) or nil for packets without a flow, and a state is plain msgpack data. A replica keeps
the keys in wire form (applying a delta is then one `dict.update`) and decodes and validates them
only when the replica becomes an owned slot (promotion, adoption).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from contract.replication import WireEntry
from contract.seq import seq_after
from nf_host.nf_api import FlowKey, FlowState

FlowId = tuple[int, int, int, int, int] | None
"""The canonical flow of a packet as (src, dst, sport, dport, proto), or None for packets without
an IPv4 flow. A plain tuple, not a `FlowKey`: it is hashed several times per packet, and tuples
hash and compare in C."""

WireKey = bytes | None

_KEY = struct.Struct("!IIHHB")
TOMBSTONES = 4096
"""Deletions a slot remembers for delta transfers (beyond: a move ships the whole slot)."""


def flow_id(key: FlowKey | None) -> FlowId:
    if key is None:
        return None
    return (key.src, key.dst, key.sport, key.dport, key.proto)


def key_to_wire(key: FlowId) -> WireKey:
    return None if key is None else _KEY.pack(*key)


def key_from_wire(raw: object) -> FlowId:
    """Decode a flow key from the wire; raises ValueError on anything but nil or 13 bytes."""
    if raw is None:
        return None
    if not isinstance(raw, bytes) or len(raw) != _KEY.size:
        raise ValueError(f"bad flow key on the wire: {raw!r}")
    a, b, c, d, e = _KEY.unpack(raw)
    return (a, b, c, d, e)


def entries_from_wire(raw: object) -> list[tuple[FlowId, FlowState]]:
    """Decode and validate [[key, state], ...]; raises ValueError on a malformed list."""
    if not isinstance(raw, list):
        raise ValueError("flow entries must be a list")
    out: list[tuple[FlowId, FlowState]] = []
    for item in raw:
        if not isinstance(item, list | tuple) or len(item) != 2 or not isinstance(item[1], dict):
            raise ValueError(f"bad flow entry on the wire: {item!r}")
        out.append((key_from_wire(item[0]), item[1]))
    return out


@dataclass
class SlotState:
    """The owner's state of one slot."""

    slot: int
    flows: dict[FlowId, FlowState] = field(default_factory=dict)
    flow_versions: dict[FlowId, int] = field(default_factory=dict)
    wire_keys: dict[FlowId, WireKey] = field(default_factory=dict)
    dirty: set[FlowId] = field(default_factory=set)
    deleted: set[FlowId] = field(default_factory=set)  # evicted since the last seal
    # deletions by the version that sealed them (for `deleted_since`), oldest first; those at
    # or below `tomb_floor` were forgotten (a delta transfer from before it ships everything)
    tombstones: dict[FlowId, int] = field(default_factory=dict)
    tomb_floor: int = 0
    version: int = 0
    last_seq: int | None = None  # the last seq processed; None before the first (0 is a number)
    gen: int = 0  # owner generation within the epoch: +1 each time a backup is promoted

    def _wire(self, key: FlowId) -> WireKey:
        wk = self.wire_keys.get(key)
        if wk is None and key is not None:
            wk = self.wire_keys[key] = _KEY.pack(*key)
        return wk

    def delete(self, key: FlowId) -> None:
        """Forget flow `key` (evicted): replicated as a deletion with the next seal."""
        self.flows.pop(key, None)
        self.flow_versions.pop(key, None)
        self.wire_keys.pop(key, None)
        self.dirty.discard(key)
        self.deleted.add(key)

    def seal_deletions(self, floor: int | None = None) -> list[WireKey]:
        """The deletions of the batch `seal` has just closed (call it after `seal`), as wire
        keys; each is remembered as a tombstone of the new version, for delta transfers
        (`deleted_since`). Tombstones of `floor` or older are forgotten: every NF a delta
        transfer could start from holds that version already."""
        if not self.deleted:
            return []
        v, tombs = self.version, self.tombstones
        out: list[WireKey] = []
        for key in self.deleted:
            if key in self.flows:  # created again after its deletion, in the same batch
                out.append(key_to_wire(key))  # (receivers delete, then apply the entries)
                continue
            tombs.pop(key, None)
            tombs[key] = v
            out.append(key_to_wire(key))
        self.deleted.clear()
        if floor is not None and floor > self.tomb_floor:
            self.tomb_floor = floor
            for key, tv in list(tombs.items()):
                if tv > floor:
                    break
                del tombs[key]
        if len(tombs) > TOMBSTONES:
            for key in list(tombs)[: len(tombs) - TOMBSTONES // 2]:
                self.tomb_floor = max(self.tomb_floor, tombs.pop(key))
        return out

    def deleted_since(self, version: int) -> list[WireKey] | None:
        """Flows deleted after `version`; None if some of them may have been forgotten."""
        if version < self.tomb_floor:
            return None
        return [key_to_wire(k) for k, v in self.tombstones.items()
                if v > version and k not in self.flows]

    def seal(self) -> list[WireEntry]:
        """Close the slot's part of a batch: bump the version, return the dirty flows as a delta."""
        self.version += 1
        v = self.version
        fv, flows, wire = self.flow_versions, self.flows, self._wire
        entries: list[WireEntry] = []
        for key in self.dirty:
            fv[key] = v
            entries.append([wire(key), flows[key]])
        self.dirty.clear()
        return entries

    def since(self, version: int) -> list[WireEntry]:
        """Flows changed after `version` (a peer holding `version` needs only these)."""
        fv = self.flow_versions
        return [[self._wire(k), s] for k, s in self.flows.items() if fv.get(k, 0) > version]

    def everything(self) -> list[WireEntry]:
        return [[self._wire(k), s] for k, s in self.flows.items()]

    def load(self, entries: Iterable[tuple[FlowId, FlowState]], version: int) -> None:
        """Install received flows (all stamped with `version`)."""
        for key, state in entries:
            self.flows[key] = state
            self.flow_versions[key] = version


@dataclass
class Replica:
    """A receiver's copy of one slot owned elsewhere, at the version of the last delta applied.

    `flows` is keyed by wire keys; `to_slot_state` decodes them."""

    slot: int
    flows: dict[WireKey, FlowState] = field(default_factory=dict)
    version: int = 0
    last_seq: int | None = None  # the last committed seq; None until one is known (0 is a number)
    epoch: int = 0
    gen: int = 0  # the owner generation of the last delta applied (see ReplicaReceiver._check_owner)

    def apply(self, raw_entries: object, version: int, last_seq: int | None,
              deleted: object = None) -> None:
        """Apply a delta as received ([[wire key, state], ...], then the wire keys the owner
        deleted before them); TypeError/ValueError if malformed."""
        if not isinstance(raw_entries, list):
            raise ValueError("flow entries must be a list")
        if deleted:
            if not isinstance(deleted, list):
                raise ValueError("deleted flows must be a list")
            pop = self.flows.pop
            for wk in deleted:
                pop(wk, None)
        self.flows.update(raw_entries)
        if version > self.version:
            self.version = version
        if last_seq is not None and (self.last_seq is None or seq_after(last_seq, self.last_seq)):
            self.last_seq = last_seq

    def to_slot_state(self) -> tuple[SlotState, int]:
        """Become the owner's state (promotion or adoption), every flow at the replica's version.

        Returns the state and the number of entries dropped because their key or state was
        malformed (counted by the caller, never fatal)."""
        st = SlotState(self.slot, version=self.version, last_seq=self.last_seq)
        bad = 0
        for wk, state in self.flows.items():
            try:
                key = key_from_wire(wk)
            except ValueError:
                bad += 1
                continue
            if not isinstance(state, dict):
                bad += 1
                continue
            st.flows[key] = state
            st.flow_versions[key] = self.version
        return st, bad
