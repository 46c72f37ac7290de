"""The replication channel's messages (NF worker <-> NF worker) and their one codec.

Every message is a frozen dataclass; `encode` makes its frame (4-byte big-endian length, then a
msgpack map whose "t" names the type), `decode` makes a message of a frame's body again, and
refuses, with `ProtocolError` (the one error a receiver counts), whatever is not one: a body that
does not decode, an unknown type, a missing field or a field of the wrong type. Flow entries and
logged outputs are checked as far as their shape (lists, byte strings); the flow states inside
are the NF's own data, checked where they are applied (`nf_host.state_store`).

    t    message        fields (wire keys)
    h    Hello          nf, w: worker index, workers, watch   (first on every connection)
    d    Delta          b: batch id, s: [SlotRow, ...], full, n: sender,
                        o: [[batch id, [frame, ...]], ...] and rel: released batch (to the backup)
    a    Ack            b: batch id (cumulative)
    x    Transfer       id, n, slot, epoch, seq, version, base (-1: full state), flows, del
    xa   TransferAck    id, ok, err
    xs   SlotState      id, slot, epoch, version, seq, flows  (an adopter's state, to its backup)
    xsa  SlotStateAck   id
    f    Forward        f: frame with shim
    c    InputCopy      f: frame with shim, kind BACKUP
    r    Released       slot, e: epoch of a cancelled move's replica (or nil), g: with it, only
                        the replica at exactly that owner generation (a given-up self-takeover's)
    bye  Bye            (the sender closes the connection on purpose)
    k    Fragment       p: bytes, m: more follow  (`nf_host.chunked`)

A slot row of a delta is positional on the wire, `[slot, epoch, version, last_seq, entries,
replace, gen(, deleted)]`, which `SlotRow` names. The channel's behaviour (connections, limits,
fragments) is `nf_host.replication`'s and `nf_host.chunked`'s.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, TypeVar, cast, get_args

import msgpack

from contract.dispatch import DispatchTable

LEN = struct.Struct("!I")
"""A frame's length prefix."""

WireEntry = list[object]
"""A flow entry as it travels: [13-byte flow key or nil, the flow's state (a map)]."""
LoggedBatch = tuple[int, list[bytes | bytearray]]
"""A batch's output that the backup logs: (batch id, frames)."""


class ProtocolError(ValueError):
    """A frame that is too large or does not decode into a message."""


@dataclass(frozen=True, slots=True)
class Hello:
    T: ClassVar[str] = "h"
    nf: int
    worker: int
    workers: int
    watch: bool = False


@dataclass(slots=True)
class SlotRow:
    """One slot of a delta: its owner's epoch and generation, the version and last sequence number
    the entries bring the replica to, and the entries (with `replace`: the whole slot)."""

    slot: int
    epoch: int
    version: int
    last_seq: int | None
    entries: list[WireEntry]
    replace: bool = False
    gen: int = 0
    deleted: list[object] | None = None  # wire keys the owner deleted before these entries


@dataclass(frozen=True, slots=True)
class Delta:
    T: ClassVar[str] = "d"
    batch: int
    rows: list[SlotRow]
    full: bool = False
    sender: int = 0
    outputs: list[LoggedBatch] | None = None  # to the backup only: the batch's output to log
    released: int | None = None  # to the backup only: every batch <= released has left


@dataclass(frozen=True, slots=True)
class Ack:
    T: ClassVar[str] = "a"
    batch: int


@dataclass(frozen=True, slots=True)
class Transfer:
    T: ClassVar[str] = "x"
    id: int
    slot: int
    epoch: int
    seq: int | None
    version: int
    base: int  # -1: the whole state; else a delta against this version of the adopter's replica
    flows: list[WireEntry]
    deleted: list[object] = field(default_factory=list)
    sender: int | None = None


@dataclass(frozen=True, slots=True)
class TransferAck:
    T: ClassVar[str] = "xa"
    id: int
    ok: bool
    err: str = ""


@dataclass(frozen=True, slots=True)
class SlotState:
    T: ClassVar[str] = "xs"
    id: int
    slot: int
    epoch: int
    version: int
    seq: int | None
    flows: list[WireEntry]


@dataclass(frozen=True, slots=True)
class SlotStateAck:
    T: ClassVar[str] = "xsa"
    id: int


@dataclass(frozen=True, slots=True)
class Forward:
    T: ClassVar[str] = "f"
    frame: bytes


@dataclass(frozen=True, slots=True)
class InputCopy:
    T: ClassVar[str] = "c"
    frame: bytes


@dataclass(frozen=True, slots=True)
class Released:
    T: ClassVar[str] = "r"
    slot: int
    epoch: int | None = None
    # with `gen`: only a replica at exactly (epoch, gen) goes, whatever backs the slot here (the
    # replicas a self-takeover's deltas made, when it gives the slot up: §4.3)
    gen: int | None = None


@dataclass(frozen=True, slots=True)
class SwitchRestart:
    """To the backup, in order with the deltas: the switch restarted, and `sender` had released
    the output of every batch up to `released` before it learnt so (P10, docs/protocols.md §9)."""
    T: ClassVar[str] = "sw"
    sender: int
    released: int


@dataclass(frozen=True, slots=True)
class Bye:
    T: ClassVar[str] = "bye"


@dataclass(frozen=True, slots=True)
class Fragment:
    T: ClassVar[str] = "k"
    part: bytes
    more: bool


Message = (Hello | Delta | Ack | Transfer | TransferAck | SlotState | SlotStateAck | Forward
           | InputCopy | Released | SwitchRestart | Bye | Fragment)


# ---------------------------------------------------------------------------------- encoding
def _row(r: SlotRow) -> list[object]:
    out: list[object] = [r.slot, r.epoch, r.version, r.last_seq, r.entries, r.replace, r.gen]
    if r.deleted is not None:
        out.append(r.deleted)
    return out


def to_wire(msg: Message) -> dict[str, object]:
    """The msgpack map of `msg`."""
    match msg:
        case Hello():
            m: dict[str, object] = {"nf": msg.nf, "w": msg.worker, "workers": msg.workers}
            if msg.watch:
                m["watch"] = True
        case Delta():
            m = {"b": msg.batch, "s": [_row(r) for r in msg.rows], "full": msg.full,
                 "n": msg.sender}
            if msg.outputs is not None:
                m["o"] = [[b, f] for b, f in msg.outputs]
                m["rel"] = msg.released
        case Ack():
            m = {"b": msg.batch}
        case Transfer():
            m = {"id": msg.id, "slot": msg.slot, "epoch": msg.epoch, "seq": msg.seq,
                 "version": msg.version, "base": msg.base, "flows": msg.flows, "del": msg.deleted}
            if msg.sender is not None:
                m["n"] = msg.sender
        case TransferAck():
            m = {"id": msg.id, "ok": msg.ok, "err": msg.err}
        case SlotState():
            m = {"id": msg.id, "slot": msg.slot, "epoch": msg.epoch, "version": msg.version,
                 "seq": msg.seq, "flows": msg.flows}
        case SlotStateAck():
            m = {"id": msg.id}
        case Forward() | InputCopy():
            m = {"f": msg.frame}
        case Released():
            m = {"slot": msg.slot}
            if msg.epoch is not None:
                m["e"] = msg.epoch
            if msg.gen is not None:
                m["g"] = msg.gen
        case SwitchRestart():
            m = {"n": msg.sender, "rel": msg.released}
        case Bye():
            m = {}
        case Fragment():
            m = {"m": msg.more, "p": msg.part}
    return {"t": msg.T, **m}


def encode(msg: Message) -> bytes:
    """`msg`'s frame: length prefix, then the msgpack map."""
    body: bytes = msgpack.packb(to_wire(msg), use_bin_type=True)
    return LEN.pack(len(body)) + body


# ---------------------------------------------------------------------------------- decoding
def _int(m: Mapping[str, object], key: str) -> int:
    v = m.get(key)
    if not isinstance(v, int) or isinstance(v, bool):
        raise ProtocolError(f"{m.get('t')!r}: field {key!r} is not an integer: {v!r}")
    return v


def _opt_int(m: Mapping[str, object], key: str) -> int | None:
    return None if m.get(key) is None else _int(m, key)


def _bytes(m: Mapping[str, object], key: str) -> bytes:
    v = m.get(key)
    if not isinstance(v, bytes):
        raise ProtocolError(f"{m.get('t')!r}: field {key!r} is not bytes")
    return v


def _list(m: Mapping[str, object], key: str, default: list[object] | None = None) -> list[object]:
    v = m.get(key, default)
    if not isinstance(v, list):
        raise ProtocolError(f"{m.get('t')!r}: field {key!r} is not a list")
    return v


def _entries(m: Mapping[str, object], key: str) -> list[WireEntry]:
    """A list of flow entries; each entry is checked where it is used (`Replica.apply`, whose
    errors the receiver counts, and `entries_from_wire`), not here: a malformed entry fails its
    slot, not the frame."""
    return cast(list[WireEntry], _list(m, key))


def _row_from(item: object) -> SlotRow:
    if not isinstance(item, list) or not 5 <= len(item) <= 8:
        raise ProtocolError(f"a delta's slot row is not [slot, epoch, version, last_seq, "
                            f"entries, ...]: {item!r:.80}")
    w = dict(zip(("slot", "epoch", "version", "last_seq", "entries", "replace", "gen", "del"),
                 item, strict=False))
    w["t"] = "d"
    return SlotRow(_int(w, "slot"), _int(w, "epoch"), _int(w, "version"), _opt_int(w, "last_seq"),
                   _entries(w, "entries"), bool(w.get("replace")), _opt_int(w, "gen") or 0,
                   None if w.get("del") is None else _list(w, "del"))


def _outputs(m: Mapping[str, object]) -> list[LoggedBatch] | None:
    if "o" not in m:
        return None
    out: list[LoggedBatch] = []
    for item in _list(m, "o", []) if m["o"] is not None else []:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], int)
                and isinstance(item[1], list) and all(isinstance(f, bytes) for f in item[1])):
            raise ProtocolError("logged output is not [[batch id, [frame, ...]], ...]")
        out.append((item[0], item[1]))
    return out


_DECODE: dict[str, Callable[[Mapping[str, object]], Message]] = {
    "h": lambda m: Hello(_int(m, "nf"), _int(m, "w"), _int(m, "workers"), bool(m.get("watch"))),
    "d": lambda m: Delta(_int(m, "b"), [_row_from(i) for i in _list(m, "s")], bool(m.get("full")),
                         _opt_int(m, "n") or 0, _outputs(m), _opt_int(m, "rel")),
    "a": lambda m: Ack(_int(m, "b")),
    "x": lambda m: Transfer(_int(m, "id"), _int(m, "slot"), _int(m, "epoch"), _opt_int(m, "seq"),
                            _int(m, "version"), _int(m, "base"), _entries(m, "flows"),
                            _list(m, "del", []) if m.get("del") is not None else [],
                            _opt_int(m, "n")),
    "xa": lambda m: TransferAck(_int(m, "id"), bool(m.get("ok")), str(m.get("err") or "")),
    "xs": lambda m: SlotState(_int(m, "id"), _int(m, "slot"), _int(m, "epoch"),
                              _int(m, "version"), _opt_int(m, "seq"), _entries(m, "flows")),
    "xsa": lambda m: SlotStateAck(_int(m, "id")),
    "f": lambda m: Forward(_bytes(m, "f")),
    "c": lambda m: InputCopy(_bytes(m, "f")),
    "r": lambda m: Released(_int(m, "slot"), _opt_int(m, "e"), _opt_int(m, "g")),
    "sw": lambda m: SwitchRestart(_int(m, "n"), _int(m, "rel")),
    "bye": lambda m: Bye(),
    "k": lambda m: Fragment(_bytes(m, "p"), bool(m.get("m"))),
}


def from_wire(obj: object) -> Message:
    """The message a decoded msgpack value is; ProtocolError if it is none."""
    if not isinstance(obj, dict):
        raise ProtocolError("frame is not a map")
    t = obj.get("t")
    make = _DECODE.get(t) if isinstance(t, str) else None
    if make is None:
        raise ProtocolError(f"unknown message type {t!r}")
    return make(obj)


def decode(body: bytes) -> Message:
    """The message of a frame's body (without its length prefix); ProtocolError if none."""
    try:
        obj = msgpack.unpackb(body, raw=False, strict_map_key=False)
    except Exception as exc:
        raise ProtocolError(f"undecodable frame: {exc}") from exc
    return from_wire(obj)


# ---------------------------------------------------------------------------------- dispatch
R = TypeVar("R")


class Dispatch(DispatchTable[Message, R]):
    """A receiver's table: message type -> its handler, each registered with its own type
    (`contract.dispatch`); a message without a handler raises ProtocolError (counted, the
    connection closed)."""

    KINDS = get_args(Message)
    ERROR = ProtocolError

    def describe(self, item: Message) -> str:
        return f"a {item.T!r} message"
