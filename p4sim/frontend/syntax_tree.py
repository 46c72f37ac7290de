"""The lark parse tree of a P4_16 program turned into p4sim's syntax tree (`p4sim.frontend.ast`).

`TreeBuilder` has one method per grammar rule (p4sim/frontend/grammar.lark); `parse_int` reads a
P4 integer literal. The token pass and the parser itself are `p4sim.frontend.parser`.
"""

from __future__ import annotations

import copy
from typing import Any

from lark import Token, Transformer, v_args

from p4sim.frontend import ast as A
from p4sim.frontend.diagnostics import CompileError, LineMap, Loc


def parse_int(text: str) -> tuple[int, int | None, bool]:
    """Parse a P4 integer literal: (value, width or None, signed)."""
    width: int | None = None
    signed = False
    s = text.replace("_", "")
    for sep in ("w", "s"):
        if sep in s and s.split(sep, 1)[0].isdigit() and not s.lower().startswith("0x"):
            w, s = s.split(sep, 1)
            width, signed = int(w), sep == "s"
            break
    low = s.lower()
    if low.startswith("0x"):
        v = int(s[2:], 16)
    elif low.startswith("0b"):
        v = int(s[2:], 2)
    elif low.startswith("0o"):
        v = int(s[2:], 8)
    elif low.startswith("0d"):
        v = int(s[2:], 10)
    else:
        v = int(s, 10)
    return v, width, signed


def _split_anns(items: list[Any]) -> tuple[list[A.Annotation], list[Any]]:
    anns = [x for x in items if isinstance(x, A.Annotation)]
    rest = [x for x in items if not isinstance(x, A.Annotation)]
    return anns, rest


def _s(t: Any) -> str:
    return str(t)


@v_args(meta=True)
class TreeBuilder(Transformer[Token, Any]):
    def __init__(self, lines: LineMap) -> None:
        super().__init__()
        self.lines = lines

    def _loc(self, meta: Any) -> Loc:
        if getattr(meta, "empty", True):
            return Loc("<input>", 0, 0)
        return self.lines.loc(meta.line, meta.column)

    def _tloc(self, tok: Token) -> Loc:
        return self.lines.loc(tok.line or 0, tok.column or 0)

    # ------------------------------------------------ top level
    def start(self, meta: Any, items: list[Any]) -> A.Program:
        return A.Program([d for d in items if d is not None])

    def empty_decl(self, meta: Any, items: list[Any]) -> None:
        return None

    def annotation(self, meta: Any, items: list[Any]) -> A.Annotation:
        name = items[0]
        args = items[1] if len(items) > 1 and items[1] is not None else []
        return A.Annotation(_s(name), list(args), self._loc(meta))

    def ann_args(self, meta: Any, items: list[Any]) -> list[Any]:
        return [x for x in items if x is not None]

    def hk_union(self, meta: Any, items: list[Any]) -> str:
        return "header_union"

    def hk_header(self, meta: Any, items: list[Any]) -> str:
        return "header"

    def hk_struct(self, meta: Any, items: list[Any]) -> str:
        return "struct"

    def d_in(self, meta: Any, items: list[Any]) -> str:
        return "in"

    def d_out(self, meta: Any, items: list[Any]) -> str:
        return "out"

    def d_inout(self, meta: Any, items: list[Any]) -> str:
        return "inout"

    def const_kw(self, meta: Any, items: list[Any]) -> str:
        return "const"

    def abstract_kw(self, meta: Any, items: list[Any]) -> str:
        return "abstract"

    def kw_type(self, meta: Any, items: list[Any]) -> str:
        return "type"

    def kw_key(self, meta: Any, items: list[Any]) -> str:
        return "key"

    def kw_actions(self, meta: Any, items: list[Any]) -> str:
        return "actions"

    def kw_entries(self, meta: Any, items: list[Any]) -> str:
        return "entries"

    def kw_state(self, meta: Any, items: list[Any]) -> str:
        return "state"

    def kw_apply(self, meta: Any, items: list[Any]) -> str:
        return "apply"

    # ------------------------------------------------ types
    def t_bool(self, meta: Any, items: list[Any]) -> A.TypeRef:
        return A.TBase(self._loc(meta), "bool")

    def t_error(self, meta: Any, items: list[Any]) -> A.TypeRef:
        return A.TBase(self._loc(meta), "error")

    def t_string(self, meta: Any, items: list[Any]) -> A.TypeRef:
        return A.TBase(self._loc(meta), "string")

    def t_void(self, meta: Any, items: list[Any]) -> A.TypeRef:
        return A.TBase(self._loc(meta), "void")

    def t_match_kind(self, meta: Any, items: list[Any]) -> A.TypeRef:
        return A.TBase(self._loc(meta), "match_kind")

    def t_int(self, meta: Any, items: list[Any]) -> A.TypeRef:
        return A.TBase(self._loc(meta), "int")

    def t_dontcare(self, meta: Any, items: list[Any]) -> A.TypeRef:
        return A.TBase(self._loc(meta), "dontcare")

    def _width(self, meta: Any, w: Any) -> A.Expr:
        if isinstance(w, Token):
            v, _, _ = parse_int(str(w))
            return A.Number(self._tloc(w), v, None, False)
        return w  # type: ignore[no-any-return]

    def t_bit1(self, meta: Any, items: list[Any]) -> A.TypeRef:
        return A.TBits(self._loc(meta), A.Number(self._loc(meta), 1, None, False), False)

    def t_bit(self, meta: Any, items: list[Any]) -> A.TypeRef:
        return A.TBits(self._loc(meta), self._width(meta, items[0]), False)

    def t_sint(self, meta: Any, items: list[Any]) -> A.TypeRef:
        return A.TBits(self._loc(meta), self._width(meta, items[0]), True)

    def t_varbit(self, meta: Any, items: list[Any]) -> A.TypeRef:
        return A.TBits(self._loc(meta), self._width(meta, items[0]), False, varbit=True)

    def t_tuple(self, meta: Any, items: list[Any]) -> A.TypeRef:
        return A.TTuple(self._loc(meta), items[0])

    def t_named(self, meta: Any, items: list[Any]) -> A.TypeRef:
        return A.TNamed(self._loc(meta), _s(items[0]))

    def t_specialized(self, meta: Any, items: list[Any]) -> A.TypeRef:
        return A.TNamed(self._loc(meta), _s(items[0]), items[2])

    def t_stack(self, meta: Any, items: list[Any]) -> A.TypeRef:
        return A.TStack(self._loc(meta), items[0], items[1])

    def type_list(self, meta: Any, items: list[Any]) -> list[Any]:
        return list(items)

    def type_params(self, meta: Any, items: list[Any]) -> list[str]:
        return [_s(x) for x in items if isinstance(x, Token) and x.type == "TYPE_NAME"]

    # ------------------------------------------------ declarations
    def const_decl(self, meta: Any, items: list[Any]) -> A.ConstDecl:
        anns, (ty, name, value) = _split_anns(items)
        return A.ConstDecl(self._loc(meta), _s(name), anns, ty, value)

    def var_decl(self, meta: Any, items: list[Any]) -> A.VarDecl:
        anns, (ty, name, init) = _split_anns(items)
        return A.VarDecl(self._loc(meta), _s(name), anns, ty, init)

    def header_decl(self, meta: Any, items: list[Any]) -> A.HeaderDecl:
        anns, rest = _split_anns(items)
        kind, name, *fields = rest
        return A.HeaderDecl(self._loc(meta), _s(name), anns, _s(kind), fields)

    def field_decl(self, meta: Any, items: list[Any]) -> A.FieldDecl:
        anns, (ty, name) = _split_anns(items)
        return A.FieldDecl(self._loc(meta), _s(name), anns, ty)

    def enum_plain(self, meta: Any, items: list[Any]) -> A.EnumDecl:
        anns, rest = _split_anns(items)
        name, *members = [x for x in rest if x is not None]
        return A.EnumDecl(self._loc(meta), _s(name), anns, [_s(m) for m in members], None, [])

    def enum_member(self, meta: Any, items: list[Any]) -> str:
        return _s(items[0])

    def enum_value(self, meta: Any, items: list[Any]) -> tuple[str, A.Expr]:
        return _s(items[0]), items[1]

    def enum_serializable(self, meta: Any, items: list[Any]) -> A.EnumDecl:
        anns, rest = _split_anns(items)
        ty, name, *members = [x for x in rest if x is not None]
        return A.EnumDecl(
            self._loc(meta), _s(name), anns, [m[0] for m in members], ty, [m[1] for m in members]
        )

    def typedef_decl(self, meta: Any, items: list[Any]) -> A.TypedefDecl:
        anns, (ty, name) = _split_anns(items)
        return A.TypedefDecl(self._loc(meta), _s(name), anns, ty, False)

    def newtype_decl(self, meta: Any, items: list[Any]) -> A.TypedefDecl:
        anns, (ty, name) = _split_anns(items)
        return A.TypedefDecl(self._loc(meta), _s(name), anns, ty, True)

    def error_decl(self, meta: Any, items: list[Any]) -> A.ErrorDecl:
        return A.ErrorDecl(self._loc(meta), "error", [], [_s(x) for x in items if x is not None])

    def match_kind_decl(self, meta: Any, items: list[Any]) -> A.MatchKindDecl:
        return A.MatchKindDecl(self._loc(meta), "match_kind", [], [_s(x) for x in items if x is not None])

    def extern_object(self, meta: Any, items: list[Any]) -> A.ExternDecl:
        anns, rest = _split_anns(items)
        name, tps, *methods = rest
        return A.ExternDecl(self._loc(meta), _s(name), anns, tps or [], methods)

    def extern_function(self, meta: Any, items: list[Any]) -> A.ExternFunction:
        anns, (proto,) = _split_anns(items)
        proto.annotations = anns
        return A.ExternFunction(self._loc(meta), proto.name, anns, proto)

    def ctor_proto(self, meta: Any, items: list[Any]) -> A.FunctionProto:
        anns, (name, params) = _split_anns(items)
        return A.FunctionProto(
            self._loc(meta), _s(name), anns, A.TBase(self._loc(meta), "void"), [], params, is_ctor=True
        )

    def method_proto(self, meta: Any, items: list[Any]) -> A.FunctionProto:
        anns, rest = _split_anns(items)
        proto: A.FunctionProto = rest[-1]
        proto.annotations = anns
        proto.abstract = len(rest) > 1 and rest[0] is not None
        return proto

    def function_proto(self, meta: Any, items: list[Any]) -> A.FunctionProto:
        ret, name, tps, params = items
        return A.FunctionProto(self._loc(meta), _s(name), [], ret, tps or [], params)

    def function_decl(self, meta: Any, items: list[Any]) -> A.FunctionDecl:
        anns, (proto, body) = _split_anns(items)
        return A.FunctionDecl(self._loc(meta), proto.name, anns, proto, body)

    def params(self, meta: Any, items: list[Any]) -> list[A.Param]:
        return [p for p in items if p is not None]

    def param(self, meta: Any, items: list[Any]) -> A.Param:
        anns, (direction, ty, name, default) = _split_anns(items)
        return A.Param(self._loc(meta), _s(name), _s(direction) if direction else "", ty, default, anns)

    def package_decl(self, meta: Any, items: list[Any]) -> A.PackageDecl:
        anns, (name, tps, params) = _split_anns(items)
        return A.PackageDecl(self._loc(meta), _s(name), anns, tps or [], params)

    def instantiation(self, meta: Any, items: list[Any]) -> A.Instantiation:
        anns, rest = _split_anns(items)
        tname, _lt, targs, args, name, init = rest
        return A.Instantiation(self._loc(meta), _s(name), anns, _s(tname), targs or [], args, init)

    def initializer(self, meta: Any, items: list[Any]) -> list[A.FunctionDecl]:
        return [f for f in items if f is not None]

    def parser_decl(self, meta: Any, items: list[Any]) -> A.ParserDecl:
        anns, rest = _split_anns(items)
        name, tps, params, ctor_params, *body = rest
        locs = [x for x in body if not isinstance(x, A.ParserState)]
        states = [x for x in body if isinstance(x, A.ParserState)]
        return A.ParserDecl(self._loc(meta), _s(name), anns, tps or [], params, ctor_params or [], locs, states)

    def parser_type_decl(self, meta: Any, items: list[Any]) -> A.ParserTypeDecl:
        anns, (name, tps, params) = _split_anns(items)
        return A.ParserTypeDecl(self._loc(meta), _s(name), anns, tps or [], params)

    def parser_state(self, meta: Any, items: list[Any]) -> A.ParserState:
        anns, rest = _split_anns(items)
        name, *stmts, trans = rest
        if trans is None:  # no transition statement: the state goes to reject, as the P4_16 spec says
            trans = A.Transition(self._loc(meta), "reject", None, [])
        return A.ParserState(self._loc(meta), _s(name), anns, stmts, trans)

    def transition_direct(self, meta: Any, items: list[Any]) -> A.Transition:
        return A.Transition(self._loc(meta), _s(items[0]), None, [])

    def transition_select(self, meta: Any, items: list[Any]) -> A.Transition:
        exprs, *cases = items
        return A.Transition(self._loc(meta), None, exprs, cases)

    def select_case(self, meta: Any, items: list[Any]) -> A.SelectCase:
        return A.SelectCase(items[0], _s(items[1]), self._loc(meta))

    def tuple_keyset(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.TupleKeyset(self._loc(meta), list(items))

    def ks_mask(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.Mask(self._loc(meta), items[0], items[1])

    def ks_range(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.Range(self._loc(meta), items[0], items[1])

    def ks_default(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.Default(self._loc(meta))

    def ks_dontcare(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.DontCare(self._loc(meta))

    def control_decl(self, meta: Any, items: list[Any]) -> A.ControlDecl:
        anns, rest = _split_anns(items)
        name, tps, params, ctor_params, *body = rest
        return A.ControlDecl(
            self._loc(meta), _s(name), anns, tps or [], params, ctor_params or [], body[:-1], body[-1]
        )

    def control_type_decl(self, meta: Any, items: list[Any]) -> A.ControlTypeDecl:
        anns, (name, tps, params) = _split_anns(items)
        return A.ControlTypeDecl(self._loc(meta), _s(name), anns, tps or [], params)

    def action_decl(self, meta: Any, items: list[Any]) -> A.ActionDecl:
        anns, (name, params, body) = _split_anns(items)
        return A.ActionDecl(self._loc(meta), _s(name), anns, params, body)

    def table_decl(self, meta: Any, items: list[Any]) -> A.TableDecl:
        anns, rest = _split_anns(items)
        name, *props = rest
        t = A.TableDecl(self._loc(meta), _s(name), anns, None, None, None, False, {})
        for kind, loc, val in props:
            if kind == "key":
                t.keys = val
            elif kind == "actions":
                t.actions = val
            elif kind == "entries":
                t.entries, t.entries_const = val
            else:
                if kind in t.props:
                    raise CompileError(loc, f"duplicate table property {kind}")
                t.props[kind] = (val[0], val[1], loc)
        return t

    def tp_key(self, meta: Any, items: list[Any]) -> tuple[str, Loc, Any]:
        return ("key", self._loc(meta), list(items))

    def tp_actions(self, meta: Any, items: list[Any]) -> tuple[str, Loc, Any]:
        return ("actions", self._loc(meta), list(items))

    def tp_entries(self, meta: Any, items: list[Any]) -> tuple[str, Loc, Any]:
        _anns, rest = _split_anns(items)
        const, *entries = rest
        return ("entries", self._loc(meta), (entries, const is not None))

    def tp_prop(self, meta: Any, items: list[Any]) -> tuple[str, Loc, Any]:
        _anns, (const, name, value) = _split_anns(items)
        return (_s(name), self._loc(meta), (value, const is not None))

    def key_elem(self, meta: Any, items: list[Any]) -> A.KeyElement:
        expr, kind, *anns = items
        return A.KeyElement(self._loc(meta), expr, _s(kind), anns)

    def action_ref(self, meta: Any, items: list[Any]) -> A.ActionRef:
        anns, (name, args) = _split_anns(items)
        return A.ActionRef(self._loc(meta), _s(name), args, anns)

    def entry(self, meta: Any, items: list[Any]) -> A.Entry:
        anns, (prio, keyset, action, args) = _split_anns(items)
        return A.Entry(self._loc(meta), prio, keyset, _s(action), args or [], anns)

    def entry_priority(self, meta: Any, items: list[Any]) -> A.Expr:
        if _s(items[0]) != "priority":
            raise CompileError(self._tloc(items[0]), f"unexpected {items[0]!s} in table entry")
        return items[1]  # type: ignore[no-any-return]

    # ------------------------------------------------ statements
    def block(self, meta: Any, items: list[Any]) -> A.Block:
        # block annotations (@atomic) carry no meaning for a single-threaded target
        return A.Block(self._loc(meta), [s for s in items if s is not None and not isinstance(s, A.Annotation)])

    def assign(self, meta: Any, items: list[Any]) -> A.Stmt:
        return A.Assign(self._loc(meta), items[0], items[1])

    def compound_assign(self, meta: Any, items: list[Any]) -> A.Stmt:
        """``x op= e`` is ``x = x op e`` (P4_16 1.2.4); the target is copied, it has no side effects."""
        target, op, value = items
        loc = self._loc(meta)
        return A.Assign(loc, target, A.Binary(loc, str(op)[:-1], copy.deepcopy(target), value))

    def call_stmt(self, meta: Any, items: list[Any]) -> A.Stmt:
        return A.CallStmt(self._loc(meta), items[0])

    def if_stmt(self, meta: Any, items: list[Any]) -> A.Stmt:
        return A.If(self._loc(meta), items[0], items[1], items[2])

    def exit_stmt(self, meta: Any, items: list[Any]) -> A.Stmt:
        return A.Exit(self._loc(meta))

    def return_stmt(self, meta: Any, items: list[Any]) -> A.Stmt:
        return A.Return(self._loc(meta), items[0])

    def empty_stmt(self, meta: Any, items: list[Any]) -> A.Stmt:
        return A.Empty(self._loc(meta))

    def switch_stmt(self, meta: Any, items: list[Any]) -> A.Stmt:
        expr, *cases = items
        return A.Switch(self._loc(meta), expr, cases)

    def switch_case(self, meta: Any, items: list[Any]) -> A.SwitchCase:
        label, body = items
        if isinstance(label, A.Default):
            return A.SwitchCase(None, body, self._loc(meta))
        if isinstance(label, Token):
            return A.SwitchCase(_s(label), body, self._loc(meta), A.Name(self._tloc(label), _s(label)))
        return A.SwitchCase(None, body, self._loc(meta), label)

    def label_number(self, meta: Any, items: list[Any]) -> A.Expr:
        v, w, s = parse_int(_s(items[0]))
        return A.Number(self._loc(meta), v, w, s)

    def label_member(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.TypeMember(self._loc(meta), _s(items[0]), _s(items[1]))

    # ------------------------------------------------ expressions
    def expr_list(self, meta: Any, items: list[Any]) -> list[Any]:
        return list(items)

    def args(self, meta: Any, items: list[Any]) -> list[Any]:
        return [a for a in items if a is not None]

    def named_arg(self, meta: Any, items: list[Any]) -> A.Expr:
        e: A.Expr = items[1]
        e.arg_name = _s(items[0])  # type: ignore[attr-defined]
        return e

    def dontcare_arg(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.DontCare(self._loc(meta))

    def _bin(self, meta: Any, op: str, items: list[Any]) -> A.Expr:
        return A.Binary(self._loc(meta), op, items[0], items[-1])

    def e_cond(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.Cond(self._loc(meta), items[0], items[1], items[2])

    def e_lor(self, meta: Any, items: list[Any]) -> A.Expr:
        return self._bin(meta, "||", items)

    def e_land(self, meta: Any, items: list[Any]) -> A.Expr:
        return self._bin(meta, "&&", items)

    def e_bor(self, meta: Any, items: list[Any]) -> A.Expr:
        return self._bin(meta, "|", items)

    def e_bxor(self, meta: Any, items: list[Any]) -> A.Expr:
        return self._bin(meta, "^", items)

    def e_band(self, meta: Any, items: list[Any]) -> A.Expr:
        return self._bin(meta, "&", items)

    def e_eq(self, meta: Any, items: list[Any]) -> A.Expr:
        return self._bin(meta, _s(items[1]), items)

    def e_rel(self, meta: Any, items: list[Any]) -> A.Expr:
        return self._bin(meta, _s(items[1]), items)

    def e_gt(self, meta: Any, items: list[Any]) -> A.Expr:
        return self._bin(meta, ">", items)

    def e_lt(self, meta: Any, items: list[Any]) -> A.Expr:
        return self._bin(meta, "<", items)

    def e_shl(self, meta: Any, items: list[Any]) -> A.Expr:
        return self._bin(meta, "<<", items)

    def e_shr(self, meta: Any, items: list[Any]) -> A.Expr:
        return self._bin(meta, ">>", items)

    def e_concat(self, meta: Any, items: list[Any]) -> A.Expr:
        return self._bin(meta, "++", items)

    def e_plus(self, meta: Any, items: list[Any]) -> A.Expr:
        return self._bin(meta, "+", items)

    def e_minus(self, meta: Any, items: list[Any]) -> A.Expr:
        return self._bin(meta, "-", items)

    def e_addsat(self, meta: Any, items: list[Any]) -> A.Expr:
        return self._bin(meta, "|+|", items)

    def e_subsat(self, meta: Any, items: list[Any]) -> A.Expr:
        return self._bin(meta, "|-|", items)

    def e_times(self, meta: Any, items: list[Any]) -> A.Expr:
        return self._bin(meta, "*", items)

    def e_div(self, meta: Any, items: list[Any]) -> A.Expr:
        return self._bin(meta, "/", items)

    def e_mod(self, meta: Any, items: list[Any]) -> A.Expr:
        return self._bin(meta, "%", items)

    def e_not(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.Unary(self._loc(meta), "!", items[0])

    def e_bnot(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.Unary(self._loc(meta), "~", items[0])

    def e_neg(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.Unary(self._loc(meta), "-", items[0])

    def e_pos(self, meta: Any, items: list[Any]) -> A.Expr:
        return items[0]  # type: ignore[no-any-return]

    def e_cast(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.Cast(self._loc(meta), items[0], items[1])

    def e_member(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.Member(self._loc(meta), items[0], _s(items[1]))

    def e_index(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.Index(self._loc(meta), items[0], items[1])

    def e_slice(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.Slice(self._loc(meta), items[0], items[1], items[2])

    def _call(self, meta: Any, func: A.Expr, targs: list[Any], args: list[Any]) -> A.Expr:
        names = [getattr(a, "arg_name", None) for a in args]
        return A.Call(self._loc(meta), func, targs, args, names)

    def e_call(self, meta: Any, items: list[Any]) -> A.Expr:
        return self._call(meta, items[0], [], items[1])

    def e_generic_call(self, meta: Any, items: list[Any]) -> A.Expr:
        return self._call(meta, items[0], items[2], items[3])

    def e_number(self, meta: Any, items: list[Any]) -> A.Expr:
        v, w, s = parse_int(_s(items[0]))
        return A.Number(self._loc(meta), v, w, s)

    def e_string(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.StringLit(self._loc(meta), _s(items[0])[1:-1])

    def e_true(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.BoolLit(self._loc(meta), True)

    def e_false(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.BoolLit(self._loc(meta), False)

    def e_name(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.Name(self._loc(meta), _s(items[0]))

    def e_type_member(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.TypeMember(self._loc(meta), _s(items[0]), _s(items[1]))

    def e_error_member(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.TypeMember(self._loc(meta), "error", _s(items[0]))

    def e_ctor(self, meta: Any, items: list[Any]) -> A.Expr:
        tname, _lt, targs, args = items
        return A.Ctor(self._loc(meta), _s(tname), targs or [], args)

    def e_list(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.ListExpr(self._loc(meta), [x for x in items if x is not None])

    def e_struct(self, meta: Any, items: list[Any]) -> A.Expr:
        return A.StructExpr(self._loc(meta), [x for x in items if x is not None])

    def kv(self, meta: Any, items: list[Any]) -> tuple[str, A.Expr]:
        return _s(items[0]), items[1]

    def e_this(self, meta: Any, items: list[Any]) -> A.Expr:
        raise CompileError(self._loc(meta), "'this' is not supported by p4sim")

