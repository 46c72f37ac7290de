"""Typing of calls: parsers, controls, actions, functions and extern methods and constructors.

Arguments are bound to parameters as p4c does: the count (a parameter with a default value or
``@optional`` may be left out), the type of each argument, and its direction (an ``out`` or
``inout`` argument must be a writable l-value). Overloads are chosen by argument count.
"""

from __future__ import annotations

from typing import Any

from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.architecture import check_package_args
from p4sim.frontend.diagnostics import Loc
from p4sim.frontend.symbols import ActionSym, ExternFunc, FunctionSym, Scope, Var
from p4sim.frontend.typecheck import HEADER_METHODS, ExprChecker, err, required_count


class CallChecker(ExprChecker):
    """The call typing of ``Checker``."""

    def block_ctor_args(self, bt: T.Block, args: list[A.Expr], loc: Loc, scope: Scope) -> None:
        """Constructor arguments of a parser/control instantiation: compile-time constants."""
        params = getattr(bt.decl, "ctor_params", [])
        if bt.kind == "package":
            for a in args:
                self.expr(a, scope)
            check_package_args(self, bt, args, loc)
            return
        self.bind_args(params, args, scope, loc, f"{bt.kind} {bt.decl.name}", {})
        for a in args:
            if a.const is None and not isinstance(a.ty, T.Block):  # (or a parser/control instance)
                raise err(a.loc, f"constructor arguments of {bt.decl.name} must be compile-time constants")

    def ctor_args(self, decl: A.ExternDecl, targs: tuple[T.Type, ...], args: list[A.Expr], loc: Loc, scope: Scope) -> None:
        tv = dict(zip(decl.type_params, targs, strict=True))
        ctors = [m for m in decl.methods if m.is_ctor and len(m.params) == len(args)]
        if not ctors:
            raise err(loc, f"{decl.name}: no constructor takes {len(args)} arguments")
        for p, a in zip(ctors[0].params, args, strict=True):
            pt = self.resolve(p.type, self.glob, tv)
            self.expr(a, scope, pt)
            self.check_assignable(pt, a, a.loc)

    def call(self, e: A.Call, scope: Scope) -> T.Type:
        f = e.func
        if isinstance(f, A.Name):
            sym = scope.lookup(f.name)
            f.ref = sym
            if isinstance(sym, ExternFunc):
                if sym.name == "verify" and not self.in_parser:
                    raise err(e.loc, "verify: may only be invoked in parsers")
                return self.extern_call(e, sym.name, sym.overloads, {}, scope, ("func", sym.name))
            if isinstance(sym, FunctionSym):
                if self.in_function is not None and sym is self.in_function:
                    raise err(e.loc, "recursive function call")
                self.bind_args(sym.decl.proto.params, e.args, scope, e.loc, f"function {f.name}", {})
                e.ref = ("function", sym)
                return sym.ret
            if isinstance(sym, ActionSym):
                if self.in_parser:
                    raise err(e.loc, "actions cannot be called from a parser")
                if self.in_action is not None and sym.decl is self.in_action:
                    raise err(e.loc, "recursive action call")
                self.bind_args(sym.decl.params, e.args, scope, e.loc, f"action {f.name}", {})
                e.ref = ("action", sym)
                return T.VOID
            if sym is None:
                raise err(f.loc, f"{f.name}: undeclared name")
            raise err(f.loc, f"{f.name} is not callable")
        if not isinstance(f, A.Member):
            raise err(e.loc, "expression is not callable")
        bt = self.expr(f.expr, scope)
        m = f.name
        if isinstance(bt, T.StructLike) and bt.kind == "header_union" and m == "isValid":
            if e.args:
                raise err(e.loc, "isValid() takes no arguments")
            e.ref = ("union", m)
            return T.BOOL
        if isinstance(bt, T.StructLike) and bt.kind == "header" and m in ("minSizeInBits", "minSizeInBytes"):
            if e.args:
                raise err(e.loc, f"{m}() takes no arguments")
            bits = T.width_of(bt)
            e.const = bits if m == "minSizeInBits" else (bits + 7) // 8
            e.ref = ("size", m)
            return T.INT
        if isinstance(bt, T.StructLike) and bt.kind == "header" and m in HEADER_METHODS:
            if e.args:
                raise err(e.loc, f"{m}() takes no arguments")
            if m != "isValid":
                self.check_writable(f.expr, f"call {m}() on")
            e.ref = ("header", m)
            return T.BOOL if m == "isValid" else T.VOID
        if isinstance(bt, T.Stack) and m in ("push_front", "pop_front"):
            if len(e.args) != 1:
                raise err(e.loc, f"{m} takes one argument")
            self.expr(e.args[0], scope)
            if e.args[0].const is None:
                raise err(e.args[0].loc, f"{m} needs a constant count")
            if int(e.args[0].const) < 0:
                raise err(e.args[0].loc, f"{m}: the count must not be negative")
            self.check_writable(f.expr, f"call {m}() on")
            e.ref = ("stack", m)
            return T.VOID
        if isinstance(bt, T.TableT):
            if m != "apply":
                raise err(f.loc, f"table has no method {m}")
            if self.in_action is not None or self.in_function is not None:
                raise err(e.loc, "tables cannot be applied inside actions or functions")
            e.ref = ("table", f.expr.ref)
            return T.ApplyResult(bt.decl)
        if isinstance(bt, T.Block):
            if m != "apply":
                raise err(f.loc, f"{bt} has no method {m}")
            decl = bt.decl
            by_param = isinstance(f.expr, A.Name) and isinstance(f.expr.ref, Var) and f.expr.ref.kind == "ctor_param"
            if not isinstance(decl, (A.ControlDecl, A.ParserDecl)) and not (
                    by_param and isinstance(decl, (A.ControlTypeDecl, A.ParserTypeDecl))):
                raise err(e.loc, f"{bt} cannot be applied")
            kind = "parser" if isinstance(decl, (A.ParserDecl, A.ParserTypeDecl)) else "control"
            if (kind == "parser") != self.in_parser:
                raise err(e.loc, f"a {kind} can only be applied from a {kind}")
            if self.in_action is not None or self.in_function is not None:
                raise err(e.loc, "controls cannot be applied inside actions or functions")
            sc = Scope(self.glob)
            self.bind_args(decl.params, e.args, scope, e.loc, f"{kind} {decl.name}", {}, sc)
            e.ref = ("control", f.expr.ref)
            return T.VOID
        if isinstance(bt, T.Extern):
            decl = bt.decl
            tv: dict[str, T.Type] = dict(zip(decl.type_params, bt.args, strict=False))
            over = [A.ExternFunction(p.loc, p.name, p.annotations, p) for p in decl.methods if p.name == m and not p.is_ctor]
            if not over:
                raise err(f.loc, f"{decl.name} has no method {m}")
            if decl.name == "packet_in" and not self.in_parser:
                raise err(e.loc, "packet_in methods may only be called in a parser")
            return self.extern_call(e, f"{decl.name}.{m}", over, tv, scope, ("method", decl.name, m, f.expr))
        raise err(f.loc, f"{m}: no such method of {bt}")

    def extern_call(self, e: A.Call, name: str, overloads: list[A.ExternFunction], tv: dict[str, T.Type],
                    scope: Scope, ref: tuple[Any, ...]) -> T.Type:
        cands = [o for o in overloads if self.arity_ok(o.proto, len(e.args))]
        if not cands:
            raise err(e.loc, f"{name}: no overload takes {len(e.args)} arguments")
        proto = cands[0].proto
        tv = dict(tv)
        if e.type_args:
            if len(e.type_args) != len(proto.type_params):
                raise err(e.loc, f"{name} expects {len(proto.type_params)} type arguments")
            for n, ta in zip(proto.type_params, e.type_args, strict=True):
                tv[n] = self.resolve(ta, scope)
        else:
            for n in proto.type_params:
                tv.setdefault(n, T.TypeVar(n))
        self.bind_args(proto.params, e.args, scope, e.loc, name, tv)
        e.ref = (*ref, proto, {k: v for k, v in tv.items()})
        ret = self.resolve(proto.ret, self.glob, tv)
        if isinstance(ret, T.TypeVar):
            raise err(e.loc, f"{name}: cannot infer the return type; give type arguments")
        return ret

    @staticmethod
    def arity_ok(p: A.FunctionProto, n: int) -> bool:
        return required_count(p.params) <= n <= len(p.params)

    def bind_args(self, params: list[A.Param], args: list[A.Expr], scope: Scope, loc: Loc, what: str,
                  tv: dict[str, T.Type], pscope: Scope | None = None) -> None:
        if len(args) > len(params):
            raise err(loc, f"{what}: too many arguments ({len(args)} given, {len(params)} expected)")
        if len(args) < required_count(params):
            raise err(loc, f"{what}: too few arguments ({len(args)} given, {len(params)} expected)")
        for p, a in zip(params, args, strict=False):
            pt = self.resolve(p.type, self.glob, tv)
            if isinstance(a, A.DontCare):
                if p.direction != "out":
                    raise err(a.loc, f"{what}: _ can only be passed to an out parameter")
                a.ty = pt
                continue
            at = self.expr(a, scope, None if isinstance(pt, T.TypeVar) else pt)
            if isinstance(pt, T.TypeVar):
                bound = tv.get(pt.name)
                if isinstance(bound, T.TypeVar) or bound is None:
                    tv[pt.name] = at
                    pt = at
                else:
                    pt = bound
            if p.direction in ("out", "inout"):
                if not self.is_lvalue(a):
                    raise err(a.loc, f"{what}: argument for {p.direction} parameter {p.name} must be an l-value")
                self.check_writable(a, f"pass as {p.direction} argument")
                if not (at == pt or isinstance(pt, T.TypeVar)):
                    raise err(a.loc, f"{what}: parameter {p.name} has type {pt}, argument has type {at}")
            elif not self.compatible(pt, a):
                raise err(a.loc, f"{what}: cannot implicitly convert {at} to {pt} for parameter {p.name}")
