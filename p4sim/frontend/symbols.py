"""What names resolve to: variables, constants, actions, tables, instances, extern functions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.diagnostics import Loc


@dataclass(eq=False)
class Var:
    """A parameter, local variable or constant."""

    name: str
    type: T.Type
    direction: str  # "in", "out", "inout", "" (directionless) or "local"/"const"
    kind: str  # "param", "action_param", "local", "const"
    loc: Loc
    value: Any = None  # compile-time value for constants

    @property
    def writable(self) -> bool:
        return self.kind == "local" or self.direction in ("out", "inout")


@dataclass(eq=False)
class ExternFunc:
    name: str
    overloads: list[A.ExternFunction]


@dataclass(eq=False)
class ActionSym:
    decl: A.ActionDecl
    owner: str  # "" for top level, else the control name
    fqname: str


@dataclass(eq=False)
class FunctionSym:
    decl: A.FunctionDecl
    ret: T.Type


@dataclass(eq=False)
class TableSym:
    decl: A.TableDecl
    owner: str
    fqname: str
    actions: list[tuple[ActionSym, A.ActionRef]] = field(default_factory=list)
    default: tuple[ActionSym, list[A.Expr]] | None = None
    default_const: bool = False
    implementation: InstanceSym | None = None
    direct_counter: InstanceSym | None = None
    size: int = 1024


@dataclass(eq=False)
class InstanceSym:
    """An instantiated extern, parser or control."""

    name: str
    type: T.Type
    args: list[A.Expr]
    loc: Loc
    owner: str
    fqname: str
    annotations: list[A.Annotation] = field(default_factory=list)


@dataclass(eq=False)
class StateSym:
    name: str


class Scope:
    def __init__(self, parent: Scope | None = None) -> None:
        self.parent = parent
        self.names: dict[str, Any] = {}

    def lookup(self, name: str) -> Any:
        s: Scope | None = self
        while s is not None:
            if name in s.names:
                return s.names[name]
            s = s.parent
        return None

    def root(self) -> Scope:
        s = self
        while s.parent is not None:
            s = s.parent
        return s
