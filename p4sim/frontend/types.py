"""P4 types as the checker sees them: bit strings, booleans, headers, structs, enums, externs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from p4sim.frontend import ast as A


class Type:
    def __str__(self) -> str:  # pragma: no cover - overridden
        return type(self).__name__


@dataclass(frozen=True)
class Bits(Type):
    width: int
    signed: bool = False

    def __str__(self) -> str:
        return f"{'int' if self.signed else 'bit'}<{self.width}>"

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1


@dataclass(frozen=True)
class Varbit(Type):
    width: int

    def __str__(self) -> str:
        return f"varbit<{self.width}>"


@dataclass(frozen=True)
class Base(Type):
    name: str  # int (infinite precision), bool, error, string, void, match_kind, dontcare, state

    def __str__(self) -> str:
        return self.name


INT = Base("int")
BOOL = Base("bool")
ERROR = Base("error")
STRING = Base("string")
VOID = Base("void")
MATCH_KIND = Base("match_kind")
DONTCARE = Base("_")


@dataclass(eq=False)
class StructLike(Type):
    kind: str  # header, struct, header_union
    name: str
    fields: list[tuple[str, Type]]
    annotations: list[A.Annotation] = field(default_factory=list)
    field_annotations: dict[str, list[A.Annotation]] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.name

    def field_type(self, name: str) -> Type | None:
        for n, t in self.fields:
            if n == name:
                return t
        return None

    @property
    def is_header(self) -> bool:
        return self.kind == "header"


@dataclass(frozen=True, eq=False)
class Stack(Type):
    elem: StructLike
    size: int

    def __str__(self) -> str:
        return f"{self.elem.name}[{self.size}]"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stack) and other.elem is self.elem and other.size == self.size

    def __hash__(self) -> int:
        return hash((id(self.elem), self.size))


@dataclass(eq=False)
class Enum(Type):
    name: str
    members: list[str]
    underlying: Bits | None
    values: dict[str, int]

    def __str__(self) -> str:
        return self.name


@dataclass(eq=False)
class NewType(Type):
    name: str
    base: Type

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Tuple(Type):
    items: tuple[Type, ...]

    def __str__(self) -> str:
        return "tuple<" + ", ".join(str(t) for t in self.items) + ">"


@dataclass(frozen=True)
class ListT(Type):
    """Type of a ``{a, b}`` list expression before it is coerced to a struct, header or tuple."""

    items: tuple[Type, ...]

    def __str__(self) -> str:
        return "{" + ", ".join(str(t) for t in self.items) + "}"


@dataclass(frozen=True)
class StructExprT(Type):
    fields: tuple[tuple[str, Type], ...]

    def __str__(self) -> str:
        return "{" + ", ".join(f"{n} = {t}" for n, t in self.fields) + "}"


@dataclass(frozen=True)
class TypeVar(Type):
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(eq=False)
class Extern(Type):
    decl: A.ExternDecl
    args: tuple[Type, ...] = ()

    def __str__(self) -> str:
        return self.decl.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Extern) and other.decl is self.decl and other.args == self.args

    def __hash__(self) -> int:
        return hash(id(self.decl))


@dataclass(eq=False)
class Block(Type):
    """A parser, control or package type (declaration or prototype)."""

    kind: str  # parser, control, package
    decl: Any
    args: tuple[Type, ...] = ()

    def __str__(self) -> str:
        return str(self.decl.name)


@dataclass(eq=False)
class TableT(Type):
    decl: A.TableDecl

    def __str__(self) -> str:
        return f"table {self.decl.name}"


@dataclass(eq=False)
class ApplyResult(Type):
    table: A.TableDecl

    def __str__(self) -> str:
        return "apply_result"


@dataclass(eq=False)
class ActionEnum(Type):
    table: A.TableDecl

    def __str__(self) -> str:
        return "action_list"


def width_of(t: Type) -> int:
    """Width in bits of a serializable type (0 if not serializable)."""
    if isinstance(t, Bits):
        return t.width
    if t is BOOL:
        return 1
    if isinstance(t, Enum) and t.underlying is not None:
        return t.underlying.width
    if isinstance(t, NewType):
        return width_of(t.base)
    if isinstance(t, StructLike):
        return sum(width_of(ft) for _, ft in t.fields)
    if isinstance(t, Stack):
        return width_of(t.elem) * t.size
    return 0


def strip(t: Type) -> Type:
    """The representation type (new types behave like their base at run time)."""
    while isinstance(t, NewType):
        t = t.base
    return t
