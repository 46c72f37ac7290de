"""Semantic checks of a P4_16 program: name resolution, types and widths, directions, constants.

The checker annotates every expression with its type (``e.ty``), what it refers to (``e.ref``)
and, for compile-time constants, its value (``e.const``). It is strict where p4c is strict: no
implicit width changes, no writes to ``in`` parameters, out/inout arguments must be l-values.
"""

from __future__ import annotations

from typing import Any

from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.architecture import check_initializer
from p4sim.frontend.calls import CallChecker
from p4sim.frontend.diagnostics import Loc, Unsupported
from p4sim.frontend.direct_calls import instantiate_direct_calls
from p4sim.frontend.symbols import (
    ActionSym,
    ExternFunc,
    FunctionSym,
    InstanceSym,
    Scope,
    StateSym,
    TableSym,
    Var,
)
from p4sim.frontend.typecheck import UNSUPPORTED_EXTERNS, err


class Checker(CallChecker):
    """Checks declarations, blocks, tables and statements of a program."""

    def run(self) -> Checker:
        for d in self.prog.decls:
            self.top(d)
        main = self.glob.names.get("main")
        if not isinstance(main, InstanceSym):
            raise err(Loc("<program>", 0, 0), "the program has no 'main' package instance")
        self.main = main
        return self

    def top(self, d: A.Decl) -> None:
        g = self.glob
        if isinstance(d, A.HeaderDecl):
            st = T.StructLike(d.kind, d.name, [], d.annotations)
            seen: set[str] = set()
            varbits = 0
            for f in d.fields:
                if f.name in seen:
                    raise err(f.loc, f"{f.name}: duplicate field in {d.name}")
                seen.add(f.name)
                ft = self.resolve(f.type, g)
                self.storable(ft, f.loc, f"field {d.name}.{f.name}")
                if d.kind == "header_union" and not (isinstance(ft, T.StructLike) and ft.kind == "header"):
                    raise err(f.loc, f"{d.name}.{f.name}: header union members must be headers, not {ft}")
                if d.kind == "header":
                    varbits += isinstance(ft, T.Varbit)
                    if varbits > 1:
                        raise err(f.loc, f"{d.name}.{f.name}: a header has at most one varbit field")
                    if not (isinstance(ft, T.Varbit) or self.header_field_type(ft)):
                        raise err(f.loc, f"{d.name}.{f.name}: header fields must be bit<>, int<>, bool, serializable "
                                         f"enums or structs of these, not {ft}")
                st.fields.append((f.name, ft))
                st.field_annotations[f.name] = f.annotations
            if d.kind == "header" and T.width_of(st) % 8:
                raise err(d.loc, f"header {d.name} is {T.width_of(st)} bits wide; p4sim (like BMv2) needs a multiple of 8")
            self.declare(g, d.name, st, d.loc)
        elif isinstance(d, A.EnumDecl):
            if d.underlying is None:
                en = T.Enum(d.name, d.members, None, {m: i for i, m in enumerate(d.members)})
            else:
                ut = self.resolve(d.underlying, g)
                if not isinstance(ut, T.Bits):
                    raise err(d.loc, f"enum {d.name}: underlying type must be bit<> or int<>")
                vals = {}
                for m, v in zip(d.members, d.values, strict=True):
                    self.expr(v, g)
                    if v.const is None:
                        raise err(v.loc, f"{d.name}.{m}: value must be a compile-time constant")
                    vals[m] = v.const & ut.mask
                en = T.Enum(d.name, d.members, ut, vals)
            self.declare(g, d.name, en, d.loc)
        elif isinstance(d, A.TypedefDecl):
            base = self.resolve(d.type, g)
            self.declare(g, d.name, T.NewType(d.name, base) if d.new_type else base, d.loc)
        elif isinstance(d, A.ErrorDecl):
            for m in d.members:
                if m in self.errors:
                    raise err(d.loc, f"error.{m}: duplicate declaration")
                self.errors.append(m)
        elif isinstance(d, A.MatchKindDecl):
            self.match_kinds.update(d.members)
        elif isinstance(d, A.ExternDecl):
            self.declare(g, d.name, T.Extern(d), d.loc)
        elif isinstance(d, A.ExternFunction):
            self.declare(g, d.name, ExternFunc(d.name, [d]), d.loc)
        elif isinstance(d, (A.ParserTypeDecl, A.ControlTypeDecl)):
            kind = "parser" if isinstance(d, A.ParserTypeDecl) else "control"
            self.declare(g, d.name, T.Block(kind, d), d.loc)
        elif isinstance(d, A.PackageDecl):
            self.declare(g, d.name, T.Block("package", d), d.loc)
        elif isinstance(d, A.ParserDecl):
            self.declare(g, d.name, T.Block("parser", d), d.loc)
            self.blocks[d.name] = d
            self.parser(d)
        elif isinstance(d, A.ControlDecl):
            self.declare(g, d.name, T.Block("control", d), d.loc)
            self.blocks[d.name] = d
            self.control(d)
        elif isinstance(d, A.ActionDecl):
            sym = ActionSym(d, "", d.name)
            d.sym = sym  # type: ignore[attr-defined]
            self.declare(g, d.name, sym, d.loc)
            self.actions.append(sym)
            self.action(d, g)
        elif isinstance(d, A.ConstDecl):
            self.const_decl(d, g)
        elif isinstance(d, A.Instantiation):
            self.instantiation(d, g)
        elif isinstance(d, A.FunctionDecl):
            self.function(d, g)
        else:  # pragma: no cover
            raise Unsupported(d.loc, type(d).__name__)

    def const_decl(self, d: A.ConstDecl, scope: Scope) -> None:
        ty = self.resolve(d.type, scope)
        self.expr(d.value, scope, ty)
        self.check_assignable(ty, d.value, d.value.loc)
        if d.value.const is None:
            raise err(d.value.loc, f"{d.name}: initializer is not a compile-time constant")
        v = self.convert_const(d.value.const, d.value.ty, ty)
        cv = Var(d.name, ty, "", "const", d.loc, v)
        d.sym = cv  # type: ignore[attr-defined]
        self.declare(scope, d.name, cv, d.loc)

    def params(self, params: list[A.Param], scope: Scope, kind: str, tvars: dict[str, T.Type] | None = None) -> list[Var]:
        out = []
        for p in params:
            ty = self.resolve(p.type, scope, tvars)
            v = Var(p.name, ty, p.direction, kind, p.loc)
            p.sym = v  # type: ignore[attr-defined]
            self.declare(scope, p.name, v, p.loc)
            out.append(v)
        return out

    def direct_type(self, name: str) -> bool:
        """A control or parser type that ``name.apply(...)`` may invoke directly."""
        t = self.glob.names.get(name)
        return (isinstance(t, T.Block) and isinstance(t.decl, (A.ControlDecl, A.ParserDecl))
                and not t.decl.ctor_params)

    def parser(self, d: A.ParserDecl) -> None:
        if d.type_params:
            raise Unsupported(d.loc, f"generic parser {d.name}")
        instantiate_direct_calls(d, self.direct_type)
        scope = Scope(self.glob)
        self.params(d.params, scope, "param")
        self.params(d.ctor_params, scope, "ctor_param")
        self.owner = d.name
        self.in_parser = True
        for loc in d.locals:
            self.local_decl(loc, scope)
        states = {s.name for s in d.states}
        if "start" not in states:
            raise err(d.loc, f"parser {d.name} has no start state")
        for s in d.states:
            if s.name in ("accept", "reject"):
                raise err(s.loc, f"state {s.name} is built in and cannot be declared")
            if s.name in scope.names:
                raise err(s.loc, f"{s.name}: duplicate declaration")
            scope.names[s.name] = StateSym(s.name)
        for s in d.states:
            sc = Scope(scope)
            for st in s.stmts:
                self.stmt(st, sc)
            tr = s.transition
            targets = [tr.target] if tr.target else [c.state for c in tr.cases]
            for tgt in targets:
                if tgt not in states and tgt not in ("accept", "reject"):
                    raise err(tr.loc, f"{tgt}: no such parser state")
            if tr.select is not None:
                ktypes = []
                for k in tr.select:
                    self.expr(k, sc)
                    ktypes.append(k.ty)
                for c in tr.cases:
                    self.keyset(c.keyset, ktypes, sc)
        self.in_parser = False
        self.owner = ""

    def keyset(self, ks: A.Expr, ktypes: list[T.Type], scope: Scope) -> None:
        items = ks.items if isinstance(ks, A.TupleKeyset) else [ks]
        if isinstance(ks, (A.Default, A.DontCare)):
            return
        if len(items) != len(ktypes):
            raise err(ks.loc, f"keyset has {len(items)} elements, the select has {len(ktypes)}")
        for it, kt in zip(items, ktypes, strict=True):
            parts = []
            if isinstance(it, A.Mask):
                parts = [it.value, it.mask]
            elif isinstance(it, A.Range):
                parts = [it.low, it.high]
            elif isinstance(it, (A.Default, A.DontCare)):
                continue
            else:
                parts = [it]
            for p in parts:
                pt = kt
                if isinstance(it, A.Mask) and p is it.mask and isinstance(kt, T.Enum) and kt.underlying is not None:
                    pt = kt.underlying  # a serializable enum's mask is a value of its underlying type
                self.expr(p, scope, pt)
                self.check_assignable(pt, p, p.loc)
                if p.const is None:
                    raise err(p.loc, "keyset values must be compile-time constants")

    def control(self, d: A.ControlDecl) -> None:
        if d.type_params:
            raise Unsupported(d.loc, f"generic control {d.name}")
        instantiate_direct_calls(d, self.direct_type)
        scope = Scope(self.glob)
        self.params(d.params, scope, "param")
        self.params(d.ctor_params, scope, "ctor_param")
        self.owner = d.name
        for loc in d.locals:
            self.local_decl(loc, scope)
        self.block(d.body, Scope(scope))
        self.owner = ""

    def local_decl(self, d: A.Decl, scope: Scope) -> None:
        if isinstance(d, A.ConstDecl):
            self.const_decl(d, scope)
        elif isinstance(d, A.VarDecl):
            self.var_decl(d, scope)
        elif isinstance(d, A.Instantiation):
            self.instantiation(d, scope)
        elif isinstance(d, A.ActionDecl):
            sym = ActionSym(d, self.owner, self.fq(d.name, d.annotations))
            d.sym = sym  # type: ignore[attr-defined]
            self.declare(scope, d.name, sym, d.loc)
            self.actions.append(sym)
            self.action(d, scope)
        elif isinstance(d, A.TableDecl):
            self.table(d, scope)
        elif isinstance(d, A.FunctionDecl):
            self.function(d, scope)
        else:
            raise Unsupported(d.loc, type(d).__name__)

    def fq(self, name: str, anns: list[A.Annotation]) -> str:
        return A.qualified_name(self.owner, name, anns)

    def action(self, d: A.ActionDecl, scope: Scope) -> None:
        sc = Scope(scope)
        seen_dirless = False
        for p in d.params:
            if p.direction == "":
                seen_dirless = True
            elif seen_dirless:
                raise err(p.loc, f"action {d.name}: directional parameters must come before action data parameters")
        self.params(d.params, sc, "action_param")
        self.in_action = d
        self.block(d.body, sc)
        self.in_action = None

    def function(self, d: A.FunctionDecl, scope: Scope, declare: bool = True) -> None:
        """A function; ``declare=False`` for an extern instance's abstract method implementation."""
        proto = d.proto
        if proto.type_params:
            raise Unsupported(d.loc, f"generic function {d.name}")
        ret = self.resolve(proto.ret, scope)
        sym = FunctionSym(d, ret)
        if declare:
            self.declare(scope, d.name, sym, d.loc)
        d.sym = sym  # type: ignore[attr-defined]
        sc = Scope(scope)
        self.params(proto.params, sc, "param")
        saved = (self.in_function, self.in_parser)
        self.in_function, self.in_parser = sym, False
        self.block(d.body, sc)
        self.in_function, self.in_parser = saved
        if ret is not T.VOID and not self.always_returns(d.body):
            raise err(d.loc, f"function {d.name} does not return a value on every path")

    def always_returns(self, s: A.Stmt) -> bool:
        if isinstance(s, (A.Return, A.Exit)):
            return True
        if isinstance(s, A.Block):
            return any(self.always_returns(x) for x in s.stmts)
        if isinstance(s, A.If):
            return s.other is not None and self.always_returns(s.then) and self.always_returns(s.other)
        return False

    def instantiation(self, d: A.Instantiation, scope: Scope) -> None:
        sym_t = scope.lookup(d.type_name)
        if d.type_name in UNSUPPORTED_EXTERNS:
            raise Unsupported(d.loc, UNSUPPORTED_EXTERNS[d.type_name])
        if d.type_name == "value_set":
            raise Unsupported(d.loc, "parser value_set")
        if not isinstance(sym_t, (T.Extern, T.Block)):
            raise err(d.loc, f"{d.type_name}: not an extern, parser, control or package type")
        targs = tuple(self.resolve(a, scope) for a in d.type_args)
        ty: T.Type
        if isinstance(sym_t, T.Extern):
            if len(targs) != len(sym_t.decl.type_params):
                raise err(d.loc, f"{d.type_name} expects {len(sym_t.decl.type_params)} type arguments")
            ty = T.Extern(sym_t.decl, targs)
            self.ctor_args(sym_t.decl, targs, d.args, d.loc, scope)
            if d.initializer is not None or any(m.abstract for m in sym_t.decl.methods):
                check_initializer(self, d, ty, scope)
        else:
            ty = T.Block(sym_t.kind, sym_t.decl, targs)
            self.block_ctor_args(sym_t, d.args, d.loc, scope)
        inst = InstanceSym(d.name, ty, d.args, d.loc, self.owner, self.fq(d.name, d.annotations), d.annotations)
        d.sym = inst  # type: ignore[attr-defined]
        self.declare(scope, d.name, inst, d.loc)
        self.instances.append(inst)

    def table(self, d: A.TableDecl, scope: Scope) -> None:
        sym = TableSym(d, self.owner, self.fq(d.name, d.annotations))
        if d.keys is not None:
            lpm_keys = 0
            for k in d.keys:
                self.expr(k.expr, scope)
                if k.match_kind not in self.match_kinds:
                    raise err(k.loc, f"{k.match_kind}: unknown match kind")
                lpm_keys += k.match_kind == "lpm"
                if lpm_keys > 1:  # p4c's BMv2 back end refuses these tables
                    raise err(k.loc, f"table {d.name}: more than one lpm key (BMv2 allows one per table)")
                kt = T.strip(k.expr.ty)
                if not (isinstance(kt, T.Bits) or kt is T.BOOL or isinstance(kt, T.Enum) or kt is T.ERROR):
                    raise err(k.loc, f"table {d.name}: key of type {k.expr.ty} cannot be matched")
        if d.actions is None:
            raise err(d.loc, f"table {d.name} has no actions property")
        for ref in d.actions:
            a = scope.lookup(ref.name)
            if not isinstance(a, ActionSym):
                raise err(ref.loc, f"{ref.name}: not an action")
            dparams = [p for p in a.decl.params if p.direction]
            args = ref.args or []
            if len(args) != len(dparams):
                raise err(ref.loc, f"action {ref.name}: {len(dparams)} directional arguments expected in the actions list, got {len(args)}")
            self.bind_args(a.decl.params[: len(args)], args, scope, ref.loc, f"action {ref.name}", {})
            sym.actions.append((a, ref))
        names = {a.decl.name: a for a, _ in sym.actions}
        for pname, (val, const, loc) in d.props.items():
            if pname == "default_action":
                call_name, cargs = self.action_call(val, loc)
                if call_name not in names:
                    raise err(loc, f"default action {call_name} is not in the actions of table {d.name}")
                act = names[call_name]
                cargs = self.action_data(act, cargs, scope, loc, self.bound_args(sym, act))
                sym.default = (act, cargs)
                sym.default_const = const
            elif pname == "size":
                self.expr(val, scope)
                if val.const is None:
                    raise err(loc, "table size must be a compile-time constant")
                sym.size = int(val.const)
            elif pname == "implementation":
                sym.implementation = self.table_instance(val, scope, ("action_profile", "action_selector"), d.name, "implementation")
            elif pname == "counters":
                sym.direct_counter = self.table_instance(val, scope, ("direct_counter", "DirectCounter"), d.name, "counters")
            elif pname == "meters":
                raise Unsupported(loc, f"table {d.name}: meters (direct_meter)")
            elif pname == "support_timeout":
                raise Unsupported(loc, f"table {d.name}: support_timeout (idle timeout)")
            else:
                raise Unsupported(loc, f"table property {pname}")
        if sym.default is None:
            if "NoAction" not in names:
                # no default_action: the table does nothing on a miss (an implicit @defaultonly NoAction)
                na = self.glob.lookup("NoAction")
                if not isinstance(na, ActionSym):
                    raise err(d.loc, f"table {d.name}: no default action and NoAction is not declared")
                ann = A.Annotation("defaultonly", [], d.loc)
                sym.actions.append((na, A.ActionRef(d.loc, "NoAction", None, [ann])))
                sym.default = (na, [])
            else:
                sym.default = (names["NoAction"], [])
        if d.entries is not None:
            ktypes = [k.expr.ty for k in (d.keys or [])]
            for e in d.entries:
                self.keyset(e.keyset, ktypes, scope)
                if e.priority is not None:
                    self.expr(e.priority, scope)
                if e.action not in names:
                    raise err(e.loc, f"entry action {e.action} is not in the actions of table {d.name}")
                e.args = self.action_data(names[e.action], e.args, scope, e.loc,
                                          self.bound_args(sym, names[e.action]))
        d.sym = sym  # type: ignore[attr-defined]
        self.declare(scope, d.name, sym, d.loc)
        self.tables.append(sym)

    def action_call(self, val: A.Expr, loc: Loc) -> tuple[str, list[A.Expr]]:
        if isinstance(val, A.Call) and isinstance(val.func, A.Name):
            return val.func.name, val.args
        if isinstance(val, A.Name):
            return val.name, []
        raise err(loc, "expected an action call")

    @staticmethod
    def bound_args(sym: TableSym, act: ActionSym) -> list[A.Expr]:
        """The directional arguments the table's actions list gives ``act``."""
        return next((ref.args or [] for a, ref in sym.actions if a is act), [])

    def action_data(self, act: ActionSym, args: list[A.Expr], scope: Scope, loc: Loc,
                    bound: list[A.Expr]) -> list[A.Expr]:
        """Check the action data of a default action or entry; returns them. The call may also
        repeat the directional arguments of the actions list first (``my_drop(sm)``), as p4c takes."""
        data = [p for p in act.decl.params if not p.direction]
        ndir = len(act.decl.params) - len(data)
        if ndir and len(args) == len(act.decl.params):
            for a, b in zip(args[:ndir], bound, strict=False):
                if A.expr_text(a) != A.expr_text(b):
                    raise err(a.loc, f"argument {A.expr_text(a)} of action {act.decl.name} is not the one of the "
                                     f"actions list ({A.expr_text(b)})")
            args = args[ndir:]
        if len(args) != len(data):
            raise err(loc, f"action {act.decl.name} takes {len(data)} action data arguments, got {len(args)}")
        sc = Scope(self.glob)
        for p, a in zip(data, args, strict=True):
            pt = self.resolve(p.type, sc)
            self.expr(a, scope, pt)
            self.check_assignable(pt, a, a.loc)
            ctor_param = isinstance(a, A.Name) and isinstance(a.ref, Var) and a.ref.kind == "ctor_param"
            if a.const is None and not ctor_param:
                raise err(a.loc, f"argument {p.name} of action {act.decl.name} must be a compile-time constant")
        return args

    def table_instance(self, val: A.Expr, scope: Scope, kinds: tuple[str, ...], tname: str, prop: str) -> InstanceSym:
        if isinstance(val, A.Ctor):
            if val.type_name not in kinds:
                raise err(val.loc, f"table {tname}: {prop} must be one of {', '.join(kinds)}")
            et = scope.lookup(val.type_name)
            assert isinstance(et, T.Extern)
            self.ctor_args(et.decl, (), val.args, val.loc, scope)
            inst = InstanceSym(tname, T.Extern(et.decl), val.args, val.loc, self.owner,
                               self.fq(tname, []), [])
            val.ref = inst
            self.instances.append(inst)
            return inst
        self.expr(val, scope)
        if not (isinstance(val.ref, InstanceSym) and isinstance(val.ref.type, T.Extern) and val.ref.type.decl.name in kinds):
            raise err(val.loc, f"table {tname}: {prop} must name an instance of {' or '.join(kinds)}")
        return val.ref

    def block(self, b: A.Block, scope: Scope) -> None:
        for s in b.stmts:
            self.stmt(s, scope)

    @classmethod
    def header_field_type(cls, ft: T.Type) -> bool:
        """Types a header field may have: bit<>, int<>, bool, serializable enums, and (P4_16 1.2.2)
        structs whose fields all have such types."""
        if isinstance(ft, T.StructLike):
            return ft.kind == "struct" and all(cls.header_field_type(t) for _, t in ft.fields)
        return (isinstance(T.strip(ft), T.Bits) or ft is T.BOOL
                or (isinstance(ft, T.Enum) and ft.underlying is not None))

    def storable(self, ty: T.Type, loc: Loc, what: str) -> None:
        """Types a variable or struct field may have."""
        if ty is T.INT:
            raise err(loc, f"{what} cannot have type int (infinite precision): give it a width")
        if ty in (T.STRING, T.VOID, T.MATCH_KIND, T.DONTCARE):
            raise err(loc, f"{what} cannot have type {ty}")
        if isinstance(ty, T.Tuple):
            for it in ty.items:
                self.storable(it, loc, what)
        if isinstance(ty, (T.Extern, T.Block)):
            raise err(loc, f"{what} cannot have type {ty}: instantiate it instead")

    def var_decl(self, d: A.VarDecl, scope: Scope) -> None:
        ty = self.resolve(d.type, scope)
        self.storable(ty, d.loc, f"variable {d.name}")
        if d.init is not None:
            self.expr(d.init, scope, ty)
            self.check_assignable(ty, d.init, d.init.loc)
        v = Var(d.name, ty, "", "local", d.loc)
        d.sym = v  # type: ignore[attr-defined]
        self.declare(scope, d.name, v, d.loc)

    def stmt(self, s: A.Stmt, scope: Scope) -> None:
        if isinstance(s, A.Block):
            self.block(s, Scope(scope))
        elif isinstance(s, A.Assign):
            self.expr(s.target, scope)
            self.check_writable(s.target, "assign to")
            self.expr(s.value, scope, s.target.ty)
            self.check_assignable(s.target.ty, s.value, s.loc)
        elif isinstance(s, A.CallStmt):
            if not isinstance(s.call, A.Call):
                raise err(s.loc, "expression is not a statement (a call was expected)")
            self.expr(s.call, scope)
        elif isinstance(s, A.If):
            self.expr(s.cond, scope, T.BOOL)
            if s.cond.ty is not T.BOOL:
                raise err(s.cond.loc, f"if condition must be bool, not {s.cond.ty}")
            self.stmt(s.then, Scope(scope))
            if s.other is not None:
                self.stmt(s.other, Scope(scope))
        elif isinstance(s, (A.Exit, A.Empty)):
            if isinstance(s, A.Exit) and self.in_parser:
                raise err(s.loc, "exit is not allowed in a parser")
        elif isinstance(s, A.Return):
            if self.in_parser:
                raise err(s.loc, "return is not allowed in a parser")
            fn = self.in_function
            if fn is None or self.in_action is not None:
                if s.value is not None:
                    raise err(s.loc, "return with a value outside a function")
            elif fn.ret is T.VOID:
                if s.value is not None:
                    raise err(s.loc, f"function {fn.decl.name} returns void")
            else:
                if s.value is None:
                    raise err(s.loc, f"function {fn.decl.name} must return a {fn.ret}")
                self.expr(s.value, scope, fn.ret)
                self.check_assignable(fn.ret, s.value, s.value.loc)
        elif isinstance(s, A.Switch):
            self.expr(s.expr, scope)
            if not isinstance(s.expr.ty, T.ActionEnum):
                self.value_switch(s, scope)
                return
            tsym = s.expr.ty.table
            names = {r.name for r in (tsym.actions or [])}
            seen: set[str | None] = set()
            for c in s.cases:
                if c.label is None and c.value is not None:
                    raise err(c.loc, "switch on action_run: labels must be action names")
                if c.label is not None and c.label not in names:
                    raise err(c.loc, f"{c.label} is not an action of table {tsym.name}")
                if c.label in seen:
                    raise err(c.loc, f"duplicate switch label {c.label or 'default'}")
                seen.add(c.label)
                if c.body is not None:
                    self.block(c.body, Scope(scope))
        elif isinstance(s, A.VarDecl):
            self.var_decl(s, scope)
        elif isinstance(s, A.ConstDecl):
            self.const_decl(s, scope)
        elif isinstance(s, A.Instantiation):
            raise err(s.loc, "instantiations are not allowed inside a block")
        else:  # pragma: no cover
            raise Unsupported(s.loc, type(s).__name__)

    def value_switch(self, s: A.Switch, scope: Scope) -> None:
        kt = s.expr.ty
        st = T.strip(kt)
        if not (isinstance(st, T.Bits) or isinstance(kt, T.Enum) or kt is T.ERROR):
            raise err(s.expr.loc, f"cannot switch on a value of type {kt}")
        seen: set[Any] = set()
        for c in s.cases:
            if c.value is None and c.label is None:
                if None in seen:
                    raise err(c.loc, "duplicate default label")
                seen.add(None)
            elif c.value is not None:
                self.expr(c.value, scope, kt)
                self.check_assignable(kt, c.value, c.value.loc)
                if c.value.const is None:
                    raise err(c.value.loc, "switch labels must be compile-time constants")
                v = self.convert_const(c.value.const, c.value.ty, kt)
                if v in seen:
                    raise err(c.loc, f"duplicate switch label {v}")
                seen.add(v)
            if c.body is not None:
                self.block(c.body, Scope(scope))

def check(prog: A.Program) -> Checker:
    return Checker(prog).run()

