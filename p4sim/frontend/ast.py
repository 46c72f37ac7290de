"""Syntax tree of a P4_16 program: the dataclasses the parser builds and the checker annotates."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from p4sim.frontend.diagnostics import Loc


@dataclass
class Annotation:
    name: str
    args: list[Expr]
    loc: Loc


def find_annotation(anns: list[Annotation], name: str) -> Annotation | None:
    for a in anns:
        if a.name == name:
            return a
    return None


def qualified_name(prefix: str, name: str, anns: list[Annotation]) -> str:
    """The control-plane name of `name` declared under `prefix`, as p4c forms it: `@name("x")`
    renames the last part, `@name(".x")` makes it absolute."""
    a = find_annotation(anns, "name")
    if a and a.args and isinstance(a.args[0], StringLit):
        n = a.args[0].value
        if n.startswith("."):
            return n[1:]
        name = n
    return f"{prefix}.{name}" if prefix else name


# ---------------------------------------------------------------- type references


@dataclass
class TypeRef:
    loc: Loc


@dataclass
class TBase(TypeRef):
    name: str  # bool error string void match_kind int dontcare


@dataclass
class TBits(TypeRef):
    width: Expr
    signed: bool
    varbit: bool = False


@dataclass
class TNamed(TypeRef):
    name: str
    args: list[TypeRef] = field(default_factory=list)


@dataclass
class TStack(TypeRef):
    elem: TypeRef
    size: Expr


@dataclass
class TTuple(TypeRef):
    items: list[TypeRef]


# ---------------------------------------------------------------- expressions


@dataclass(eq=False)
class Expr:
    loc: Loc

    def __post_init__(self) -> None:
        self.ty: Any = None  # filled by the checker (a p4sim.frontend.types.Type)
        self.ref: Any = None  # what a name resolves to (checker)
        self.const: Any = None  # compile-time value if constant (checker)


@dataclass(eq=False)
class Number(Expr):
    value: int
    width: int | None
    signed: bool


@dataclass(eq=False)
class BoolLit(Expr):
    value: bool


@dataclass(eq=False)
class StringLit(Expr):
    value: str


@dataclass(eq=False)
class Name(Expr):
    name: str
    top: bool = False


@dataclass(eq=False)
class TypeMember(Expr):
    type_name: str  # enum type name, or "error"
    member: str


@dataclass(eq=False)
class Member(Expr):
    expr: Expr
    name: str


@dataclass(eq=False)
class Index(Expr):
    expr: Expr
    index: Expr


@dataclass(eq=False)
class Slice(Expr):
    expr: Expr
    hi: Expr
    lo: Expr


@dataclass(eq=False)
class Call(Expr):
    func: Expr
    type_args: list[TypeRef]
    args: list[Expr]
    arg_names: list[str | None]


@dataclass(eq=False)
class Ctor(Expr):
    type_name: str
    type_args: list[TypeRef]
    args: list[Expr]


@dataclass(eq=False)
class Unary(Expr):
    op: str
    expr: Expr


@dataclass(eq=False)
class Binary(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass(eq=False)
class Cond(Expr):
    cond: Expr
    then: Expr
    other: Expr


@dataclass(eq=False)
class Cast(Expr):
    type: TypeRef
    expr: Expr


@dataclass(eq=False)
class ListExpr(Expr):
    items: list[Expr]


@dataclass(eq=False)
class StructExpr(Expr):
    fields: list[tuple[str, Expr]]


@dataclass(eq=False)
class DontCare(Expr):
    pass


@dataclass(eq=False)
class Default(Expr):
    pass


@dataclass(eq=False)
class Mask(Expr):
    value: Expr
    mask: Expr


@dataclass(eq=False)
class Range(Expr):
    low: Expr
    high: Expr


@dataclass(eq=False)
class TupleKeyset(Expr):
    items: list[Expr]


# ---------------------------------------------------------------- statements


@dataclass(eq=False)
class Stmt:
    loc: Loc


@dataclass(eq=False)
class Block(Stmt):
    stmts: list[Stmt]


@dataclass(eq=False)
class Assign(Stmt):
    target: Expr
    value: Expr


@dataclass(eq=False)
class CallStmt(Stmt):
    call: Expr


@dataclass(eq=False)
class If(Stmt):
    cond: Expr
    then: Stmt
    other: Stmt | None


@dataclass(eq=False)
class Exit(Stmt):
    pass


@dataclass(eq=False)
class Return(Stmt):
    value: Expr | None


@dataclass(eq=False)
class SwitchCase:
    label: str | None  # action (or constant) name; None for default or a literal value
    body: Block | None
    loc: Loc
    value: Expr | None = None  # the label as an expression when switching on a value


@dataclass(eq=False)
class Switch(Stmt):
    expr: Expr
    cases: list[SwitchCase]


@dataclass(eq=False)
class Empty(Stmt):
    pass


# ---------------------------------------------------------------- declarations


@dataclass(eq=False)
class Decl:
    loc: Loc
    name: str
    annotations: list[Annotation]


@dataclass(eq=False)
class VarDecl(Decl, Stmt):
    type: TypeRef
    init: Expr | None


@dataclass(eq=False)
class ConstDecl(Decl, Stmt):
    type: TypeRef
    value: Expr


@dataclass(eq=False)
class FieldDecl(Decl):
    type: TypeRef


@dataclass(eq=False)
class HeaderDecl(Decl):
    kind: str  # header, struct, header_union
    fields: list[FieldDecl]


@dataclass(eq=False)
class EnumDecl(Decl):
    members: list[str]
    underlying: TypeRef | None
    values: list[Expr]


@dataclass(eq=False)
class TypedefDecl(Decl):
    type: TypeRef
    new_type: bool


@dataclass(eq=False)
class ErrorDecl(Decl):
    members: list[str]


@dataclass(eq=False)
class MatchKindDecl(Decl):
    members: list[str]


@dataclass(eq=False)
class Param:
    loc: Loc
    name: str
    direction: str  # "in", "out", "inout" or "" (directionless)
    type: TypeRef
    default: Expr | None
    annotations: list[Annotation]


@dataclass(eq=False)
class FunctionProto(Decl):
    ret: TypeRef
    type_params: list[str]
    params: list[Param]
    is_ctor: bool = False
    abstract: bool = False


@dataclass(eq=False)
class ExternDecl(Decl):
    type_params: list[str]
    methods: list[FunctionProto]


@dataclass(eq=False)
class ExternFunction(Decl):
    proto: FunctionProto


@dataclass(eq=False)
class FunctionDecl(Decl):
    proto: FunctionProto
    body: Block


@dataclass(eq=False)
class PackageDecl(Decl):
    type_params: list[str]
    params: list[Param]


@dataclass(eq=False)
class Instantiation(Decl, Stmt):
    type_name: str
    type_args: list[TypeRef]
    args: list[Expr]
    initializer: list[FunctionDecl] | None = None  # abstract method implementations


@dataclass(eq=False)
class SelectCase:
    keyset: Expr
    state: str
    loc: Loc


@dataclass(eq=False)
class Transition:
    loc: Loc
    target: str | None  # direct transition
    select: list[Expr] | None
    cases: list[SelectCase]


@dataclass(eq=False)
class ParserState(Decl):
    stmts: list[Stmt]
    transition: Transition


@dataclass(eq=False)
class ParserDecl(Decl):
    type_params: list[str]
    params: list[Param]
    ctor_params: list[Param]
    locals: list[Decl]
    states: list[ParserState]


@dataclass(eq=False)
class ParserTypeDecl(Decl):
    type_params: list[str]
    params: list[Param]


@dataclass(eq=False)
class ActionDecl(Decl):
    params: list[Param]
    body: Block


@dataclass(eq=False)
class KeyElement:
    loc: Loc
    expr: Expr
    match_kind: str
    annotations: list[Annotation]


@dataclass(eq=False)
class ActionRef:
    loc: Loc
    name: str
    args: list[Expr] | None
    annotations: list[Annotation]


@dataclass(eq=False)
class Entry:
    loc: Loc
    priority: Expr | None
    keyset: Expr
    action: str
    args: list[Expr]
    annotations: list[Annotation]


@dataclass(eq=False)
class TableDecl(Decl):
    keys: list[KeyElement] | None
    actions: list[ActionRef] | None
    entries: list[Entry] | None
    entries_const: bool
    props: dict[str, tuple[Expr, bool, Loc]]  # name -> (value, const, loc)


@dataclass(eq=False)
class ControlDecl(Decl):
    type_params: list[str]
    params: list[Param]
    ctor_params: list[Param]
    locals: list[Decl]
    body: Block


@dataclass(eq=False)
class ControlTypeDecl(Decl):
    type_params: list[str]
    params: list[Param]


@dataclass(eq=False)
class Program:
    decls: list[Decl]


def expr_text(e: Expr) -> str:
    """The source-like text p4c uses to name a key field."""
    if isinstance(e, Name):
        return e.name
    if isinstance(e, Member):
        return f"{expr_text(e.expr)}.{e.name}"
    if isinstance(e, Index):
        return f"{expr_text(e.expr)}[{e.index.const}]"
    if isinstance(e, Slice):
        return f"{expr_text(e.expr)}[{e.hi.const}:{e.lo.const}]"
    if isinstance(e, Call) and isinstance(e.func, Member) and e.func.name == "isValid":
        return f"{expr_text(e.func.expr)}.$valid$"
    return "key"
