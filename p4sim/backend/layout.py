"""The packet-state layout both engines share, and the compile-time bindings and context.

Per-packet state is one flat array ``s``: every scalar (header field, metadata field, validity
bit, header stack's next index, local variable) has a fixed slot; a scalar wider than 64 bits
(``bit<N>``/``int<N>``, 64 < N <= 128) has two consecutive slots (`WIDE`: the native engine keeps
its low and high 64 bits in them, the Python engine the whole int in the first and 0 in the
second); a header is its valid bit then
its fields, a struct its fields, a stack its next index then its elements. This module sizes and
offsets that layout (``size_of``, ``field_offset``, ``leaf_bits`` ...), gives scalar widths, names
the hidden slots the v1model pipeline reads, and holds what a compile context binds names to.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from p4sim.frontend import types as T
from p4sim.frontend.diagnostics import CompileError, Unsupported
from p4sim.frontend.symbols import Var

HIDDEN = ["clone_type", "clone_session", "clone_fl", "resubmit", "resubmit_fl", "recirculate",
          "recirculate_fl", "truncate"]
DROP_PORT = 511
WIDE = 64  # scalars wider than this take two slots


def is_wide(t: T.Type) -> bool:
    """A ``bit<N>``/``int<N>`` with N > 64: two slots."""
    st = T.strip(t)
    return isinstance(st, T.Bits) and st.width > WIDE


@dataclass(frozen=True)
class Slot:
    base: int


@dataclass(frozen=True)
class Py:
    name: str


@dataclass(frozen=True)
class PacketParam:
    kind: str  # "in" or "out"


@dataclass(frozen=True)
class InstanceArg:
    """A constructor parameter of control or parser type: the instance given for it, its
    control-plane path and the path of the block that declared it (where it is applied from)."""

    inst: Any
    path: str
    owner: str


Binding = Slot | Py | PacketParam | InstanceArg


class Ctx:
    """Compile context of one block instance (parser, control or action)."""

    def __init__(self, path: str, env: dict[Var, Binding], objs: dict[Any, str], kind: str,
                 ret: T.Type | None = None) -> None:
        self.path = path
        self.env = env
        self.objs = objs
        self.kind = kind
        self.ret = ret  # return type inside a function
        # an action or function with copied parameters: writes their copy-out (before every return)
        self.epilogue: Callable[[Writer], None] | None = None
        self.ret_slot: int | None = None  # a function returning a header or struct: its value's storage


class Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.ind = 1

    def __call__(self, line: str) -> None:
        self.lines.append("    " * self.ind + line)

    def block(self) -> _Indent:
        return _Indent(self)


class _Indent:
    def __init__(self, w: Writer) -> None:
        self.w = w

    def __enter__(self) -> None:
        self.w.ind += 1

    def __exit__(self, *a: object) -> None:
        self.w.ind -= 1


def size_of(t: T.Type) -> int:
    if isinstance(t, T.StructLike):
        n = sum(size_of(ft) for _, ft in t.fields)
        return n + 1 if t.kind == "header" else n
    if isinstance(t, T.Stack):
        return 1 + t.size * size_of(t.elem)
    if isinstance(t, T.Tuple):  # its items, one after the other
        return sum(size_of(x) for x in t.items)
    return 2 if is_wide(t) or isinstance(t, T.Varbit) else 1  # a varbit: its value, its length in bits


def field_offset(t: T.StructLike, name: str) -> int:
    off = 1 if t.kind == "header" else 0
    for n, ft in t.fields:
        if n == name:
            return off
        off += size_of(ft)
    raise KeyError(name)


def defaults(t: T.Type) -> list[Any]:
    if isinstance(t, T.StructLike):
        out: list[Any] = [False] if t.kind == "header" else []
        for _, ft in t.fields:
            out += defaults(ft)
        return out
    if isinstance(t, T.Stack):
        return [0] + defaults(t.elem) * t.size
    if isinstance(t, T.Tuple):
        return [d for x in t.items for d in defaults(x)]
    if t is T.BOOL:
        return [False]
    return [0, 0] if is_wide(t) or isinstance(t, T.Varbit) else [0]


def leaf_bits(t: T.StructLike) -> list[tuple[int, int, int, T.Type]]:
    """Per scalar field of a header in wire order: (storage slot after the valid bit, counting
    from 1; bit offset from the header's first bit; width; type)."""
    out: list[tuple[int, int, int, T.Type]] = []
    off, i = 0, 1
    for ft in leaf_types(t):
        fw = scalar_width(ft)
        out.append((i, off, fw, ft))
        off += fw
        i += size_of(ft)
    return out


def leaf_types(t: T.StructLike) -> list[T.Type]:
    """The scalar fields of a header in wire order, structs inside it flattened (their storage
    slots follow the header's valid bit in this order)."""
    out: list[T.Type] = []
    for _, ft in t.fields:
        if isinstance(ft, T.StructLike):
            out.extend(leaf_types(ft))
        else:
            out.append(ft)
    return out


def scalar_width(t: T.Type) -> int:
    st = T.strip(t)
    if isinstance(st, T.Bits):
        return st.width
    if st is T.BOOL:
        return 1
    if isinstance(st, T.Enum) and st.underlying is not None:
        return st.underlying.width
    if st is T.ERROR:
        return 8
    if isinstance(st, T.Enum):
        return 32
    if isinstance(st, T.Varbit):
        raise Unsupported(None, f"this use of a header with a {t} field")
    raise CompileError(None, f"type {t} has no bit width")
