"""The values of p4sim's in-process API (`p4sim.runtime.switch.Switch`): table entries, matches,
action calls, packed packet outputs, and the error a refused request raises."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from p4sim.runtime.model import TableInfo
from p4sim.runtime.tables import Table


class P4simError(Exception):
    """A request the switch refuses; ``code`` is a gRPC status code name."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Match:
    kind: str  # "exact" | "lpm" | "ternary" | "range" | "optional"
    value: int
    mask: int | None = None
    prefix_len: int | None = None
    high: int | None = None


@dataclass(frozen=True)
class ActionCall:
    action_id: int
    params: dict[int, int]


@dataclass
class TableEntry:
    table_id: int
    match: dict[int, Match]
    action: ActionCall | None = None
    member_id: int | None = None
    group_id: int | None = None
    priority: int = 0
    packets: int = 0
    bytes: int = 0


@dataclass
class TableRef:
    info: TableInfo
    table: Table
    id: int
    name: str
    field_ids: list[int]
    action_ids: dict[int, str] = field(default_factory=dict)  # action id -> fq name
    api: dict[object, TableEntry] = field(default_factory=dict)  # entry key -> API entry


@dataclass
class PackedOutputs:
    """The outputs of a batch of packets in two flat buffers (what `Switch.process_packed`
    returns): ``data`` holds every output packet back to back, ``meta`` four numbers per output:
    the index of the input packet it came from, the output port, its offset and its length."""

    data: bytes
    meta: array[int]

    def __len__(self) -> int:
        return len(self.meta) // 4

    def items(self) -> list[tuple[int, int, bytes]]:
        """(input index, port, bytes) of every output, in order."""
        m, d = self.meta, self.data
        return [(m[i], m[i + 1], d[m[i + 2]:m[i + 2] + m[i + 3]]) for i in range(0, len(m), 4)]


def bad(msg: str) -> P4simError:
    return P4simError("INVALID_ARGUMENT", msg)


def check_value(what: str, v: int, width: int) -> None:
    """Refuse a value that is not an unsigned int of at most `width` bits."""
    if not isinstance(v, int) or v < 0:
        raise bad(f"{what}: value must be a non-negative int")
    if v >> width:
        raise P4simError("OUT_OF_RANGE", f"{what}: value {v:#x} does not fit in {width} bits")

