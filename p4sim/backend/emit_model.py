"""The control-plane model that the program walk builds, the same for both engines.

`ModelWalk` holds what the walk (`p4sim.backend.emit_walk.EmitWalk`) records besides code: extern
instances (counters, direct counters, registers, meters, action profiles and selectors), the
actions tables can run, tables (keys and their match kinds, action references and scopes, default
actions and their data, implementations, direct counters, const entries), constructor parameter
values, ``@field_list`` slots and ``@controller_header`` headers. The hooks it calls give each
engine's text: the name and storage of an extern object, the scalar checks of the native engine,
a table key's value and the generated table function.
"""

from __future__ import annotations

import ast

from p4sim.backend.codegen_externs import ExternCompiler
from p4sim.backend.layout import Binding, Ctx, InstanceArg, Py, Writer, scalar_width, size_of
from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.diagnostics import CompileError, Loc, Unsupported
from p4sim.frontend.symbols import ActionSym, InstanceSym, TableSym, Var
from p4sim.runtime.meters import MeterArray
from p4sim.runtime.model import (
    ActionInfo,
    ActionRefInfo,
    ConstEntry,
    ControllerHeaderInfo,
    CounterInfo,
    DirectCounterInfo,
    KeyInfo,
    MeterInfo,
    ParamInfo,
    ProfileInfo,
    RegisterInfo,
    TableInfo,
)
from p4sim.runtime.tables import Profile, Table

MATCH_KINDS = ("exact", "lpm", "ternary", "range", "optional")


class ModelWalk(ExternCompiler):
    """Extern instances, actions and tables: their model, and the hooks for their code."""

    # ------------------------------------------------------------------ hooks (per back end)
    def bind_extern(self, name: str, info: CounterInfo | RegisterInfo | MeterInfo) -> None:
        """A counter, register or meter instance got its generated name."""
        raise NotImplementedError

    def check_param(self, t: T.Type, loc: Loc | None) -> None:
        """Refuse a scalar type as a key, parameter or argument (the native engine's limits)."""

    def table_function(self, d: A.TableDecl, ti: TableInfo, key_exprs: list[str], sel_exprs: list[str]) -> str:
        """The generated function applying a table; returns its name."""
        raise NotImplementedError

    def action_variant(self, sym: ActionSym, dir_args: list[A.Expr], ctx: Ctx, w: Writer | None) -> tuple[str, list[str]]:
        raise NotImplementedError  # the walk's

    # ------------------------------------------------------------------ extern instances
    def instance(self, inst: InstanceSym, ctx: Ctx) -> None:
        t = inst.type
        fq = self.fq(ctx.path, inst.name, inst.annotations)
        if isinstance(t, T.Block):
            ctx.objs[inst] = fq  # compiled when applied
            return
        assert isinstance(t, T.Extern)
        kind = t.decl.name
        args = [a.const for a in inst.args]
        info: CounterInfo | RegisterInfo | MeterInfo
        if kind == "counter":
            size = int(args[0])
            info = self.counters[fq] = CounterInfo(fq, size, self.counter_unit(inst.args[1]), [0] * size, [0] * size,
                                                   inst.annotations)
            prefix = "C"
        elif kind == "direct_counter":
            self.direct_counters[fq] = DirectCounterInfo(fq, "", self.counter_unit(inst.args[0]), inst.annotations)
            ctx.objs[inst] = fq
            return
        elif kind == "register":
            size = int(args[0])
            info = self.registers[fq] = RegisterInfo(fq, size, scalar_width(t.args[0]), [0] * size, inst.annotations)
            prefix = "RG"
        elif kind == "meter":
            size = int(args[0])
            en = inst.args[1].ty
            assert isinstance(en, T.Enum)
            unit = {"packets": "PACKETS", "bytes": "BYTES"}[en.members[int(inst.args[1].const)]]
            info = self.meters[fq] = MeterInfo(fq, size, unit, MeterArray(size, unit), inst.annotations)
            prefix = "M"
        elif kind in ("action_profile", "action_selector"):
            sel = kind == "action_selector"
            size = int(args[1] if sel else args[0])
            self.profiles[fq] = ProfileInfo(fq, [], size, sel, Profile(fq, size, sel), inst.annotations)
            ctx.objs[inst] = fq
            return
        elif kind == "Checksum16":
            ctx.objs[inst] = fq
            return
        else:
            raise Unsupported(inst.loc, f"extern {kind}")
        n = self.uid(prefix)
        self.extern_fq[n] = fq
        self.bind_extern(n, info)
        ctx.objs[inst] = n

    def counter_unit(self, e: A.Expr) -> str:
        en = e.ty
        assert isinstance(en, T.Enum)
        name = en.members[int(e.const)]
        return {"packets": "PACKETS", "bytes": "BYTES", "packets_and_bytes": "BOTH"}[name]

    # ------------------------------------------------------------------ actions
    def action_info(self, d: A.ActionDecl, fq: str) -> ActionInfo:
        if fq in self.actions:
            return self.actions[fq]
        params = []
        for p in d.params:
            if not p.direction:
                v: Var = p.sym  # type: ignore[attr-defined]
                params.append(ParamInfo(p.name, scalar_width(v.type), p.annotations))
        ai = ActionInfo(fq, params, d.annotations)
        self.actions[fq] = ai
        return ai

    def action_fq(self, sym: ActionSym, ctx: Ctx) -> str:
        path = ctx.path if sym.owner else ""
        return self.fq(path, sym.decl.name, sym.decl.annotations)

    # ------------------------------------------------------------------ tables
    def table(self, sym: TableSym, ctx: Ctx) -> None:
        d = sym.decl
        fq = self.fq(ctx.path, d.name, d.annotations)
        keys: list[KeyInfo] = []
        key_exprs: list[str] = []
        sel_exprs: list[str] = []
        for k in d.keys or []:
            kt = T.strip(k.expr.ty)
            self.check_param(kt, k.loc)
            width = scalar_width(kt)
            a = A.find_annotation(k.annotations, "name")
            name = a.args[0].value if a and a.args and isinstance(a.args[0], A.StringLit) else A.expr_text(k.expr)
            code = self.unsigned(self.ex(k.expr, ctx), kt)
            if k.match_kind == "selector":
                sel_exprs.append(code)
                continue
            if k.match_kind not in MATCH_KINDS:
                raise Unsupported(k.loc, f"match kind {k.match_kind}")
            keys.append(KeyInfo(name, k.match_kind, width, k.annotations))
            key_exprs.append(code)
        tbl = Table(fq, [k.kind for k in keys], [k.width for k in keys], sym.size)
        refs: list[ActionRefInfo] = []
        for asym, ref in sym.actions:
            scope = "TABLE_AND_DEFAULT"
            if A.find_annotation(ref.annotations, "tableonly"):
                scope = "TABLE_ONLY"
            elif A.find_annotation(ref.annotations, "defaultonly"):
                scope = "DEFAULT_ONLY"
            fn, args = self.action_variant(asym, ref.args or [], ctx, None)
            if args:
                raise Unsupported(ref.loc, f"'in' arguments bound in the actions list of table {d.name}")
            refs.append(ActionRefInfo(self.action_fq(asym, ctx), scope, ref.annotations, fn))
        assert sym.default is not None
        dsym, dargs = sym.default
        dfq = self.action_fq(dsym, ctx)
        dvals = self.data_values(dsym, dargs, ctx)
        ti = TableInfo(fq, keys, refs, dfq, dvals, sym.default_const, sym.size, d.annotations, tbl)
        if dfq not in {r.fqname for r in refs}:
            raise CompileError(d.loc, f"default action {dfq} not in the actions of {fq}")
        if sym.implementation is not None:
            pfq = ctx.objs.get(sym.implementation)
            if pfq is None:
                # anonymous implementation: declared by the table property itself
                inst = sym.implementation
                inst.annotations = []
                inst.name = fq.rsplit(".", 1)[-1]
                self.instance(inst, Ctx(ctx.path, ctx.env, ctx.objs, ctx.kind))
                pfq = ctx.objs[inst]
            pi = self.profiles[pfq]
            pi.tables.append(fq)
            tbl.profile = pi.profile
            ti.implementation = pfq
            if pi.selector and not sel_exprs:
                raise CompileError(d.loc, f"table {fq} uses an action selector but has no selector key")
        elif sel_exprs:
            raise CompileError(d.loc, f"table {fq} has selector keys but no action selector")
        if sym.direct_counter is not None:
            dc_fq = ctx.objs[sym.direct_counter]
            dci = self.direct_counters[dc_fq]
            if dci.table:
                raise CompileError(d.loc, f"direct counter {dc_fq} is already used by table {dci.table}")
            dci.table = fq
            ti.direct_counter = dc_fq
        if d.entries is not None:
            ti.const_entries = [self.const_entry(e, keys, sym, ctx) for e in d.entries]
            if any(k.kind in ("ternary", "range", "optional") for k in keys):
                self.bmv2_priorities(d.entries, ti.const_entries)
            tbl.const_entries = d.entries_const
        ctx.objs[sym] = self.table_function(d, ti, key_exprs, sel_exprs)
        self.tables[fq] = ti

    @staticmethod
    def bmv2_priorities(entries: list[A.Entry], consts: list[ConstEntry]) -> None:
        """BMv2's ``@priority(n)`` on const entries (p4c writes n, else the entry's position from
        1, into BMv2's JSON, where the smallest number wins): the same order as p4sim priorities,
        where the largest wins."""
        anns = [A.find_annotation(e.annotations, "priority") for e in entries]
        if not any(anns):
            return
        bm = []
        for i, (e, a) in enumerate(zip(entries, anns, strict=True)):
            if a is None:
                bm.append(i + 1)
            elif len(a.args) == 1 and isinstance(a.args[0], A.Number):
                bm.append(a.args[0].value)
            else:
                raise CompileError(e.loc, "@priority needs one integer constant")
        top = max(bm) + 1
        for c, b in zip(consts, bm, strict=True):
            c.priority = top - b

    def data_values(self, sym: ActionSym, args: list[A.Expr], ctx: Ctx) -> tuple[int, ...]:
        """Action data of a default action or a const entry, as the control plane writes them."""
        data = [p for p in sym.decl.params if not p.direction]
        types: list[T.Type] = [p.sym.type for p in data[len(data) - len(args):]]  # type: ignore[attr-defined]
        return tuple(self.data_value(a, ctx, t) for a, t in zip(args, types, strict=True))

    def data_value(self, e: A.Expr, ctx: Ctx, param_t: T.Type | None = None) -> int:
        v = e.const
        if v is None and isinstance(e, A.Name):  # a constructor parameter: a literal of the instance
            b = ctx.env.get(e.ref)
            if isinstance(b, Py):
                v = ast.literal_eval(b.name)
        t = T.strip(param_t) if param_t is not None else T.strip(e.ty) if e.ty is not T.INT else None
        if isinstance(v, bool):
            return int(v)
        if isinstance(t, T.Bits) and t.signed:
            return int(v) & t.mask
        return int(v)

    def const_entry(self, e: A.Entry, keys: list[KeyInfo], sym: TableSym, ctx: Ctx) -> ConstEntry:
        items = e.keyset.items if isinstance(e.keyset, A.TupleKeyset) else [e.keyset]
        if isinstance(e.keyset, (A.Default, A.DontCare)) and len(keys) != 1:
            items = [e.keyset] * len(keys)
        if len(items) != len(keys):
            raise CompileError(e.loc, f"entry has {len(items)} key values, the table has {len(keys)} keys")
        specs: list[tuple[str, int, int | None]] = []
        for it, k in zip(items, keys, strict=True):
            full = (1 << k.width) - 1
            if isinstance(it, (A.Default, A.DontCare)):
                specs.append({"exact": ("exact", 0, None), "lpm": ("lpm", 0, 0), "ternary": ("ternary", 0, 0),
                              "range": ("range", 0, full), "optional": ("optional", 0, 0)}[k.kind])
                if k.kind == "exact":
                    raise CompileError(it.loc, f"key {k.name} is exact: a value is required")
            elif isinstance(it, A.Mask):
                v, m = int(it.value.const) & full, int(it.mask.const) & full
                if k.kind == "lpm":
                    specs.append(("lpm", v & m, bin(m).count("1")))
                elif k.kind == "ternary":
                    specs.append(("ternary", v & m, m))
                else:
                    raise CompileError(it.loc, f"a mask is not allowed for {k.kind} key {k.name}")
            elif isinstance(it, A.Range):
                if k.kind != "range":
                    raise CompileError(it.loc, f"a range is not allowed for {k.kind} key {k.name}")
                specs.append(("range", int(it.low.const) & full, int(it.high.const) & full))
            else:
                v = int(it.const) & full
                specs.append({"exact": ("exact", v, None), "lpm": ("lpm", v, k.width),
                              "ternary": ("ternary", v, full), "range": ("range", v, v),
                              "optional": ("optional", v, 1)}[k.kind])
        prio = int(e.priority.const) if e.priority is not None else 0
        act = next(a for a, _ in sym.actions if a.decl.name == e.action)
        return ConstEntry(specs, prio, self.action_fq(act, ctx), self.data_values(act, e.args, ctx))

    # ------------------------------------------------------------------ constants
    def ctor_bindings(self, decl: A.ParserDecl | A.ControlDecl, args: list[A.Expr],
                      ctx: Ctx | None = None) -> dict[Var, Binding]:
        """Constructor parameters are constants of the instance: bound to their literal values;
        one of control or parser type to the instance given (declared in ``ctx``)."""
        env: dict[Var, Binding] = {}
        for p, a in zip(decl.ctor_params, args, strict=True):
            v: Var = p.sym  # type: ignore[attr-defined]
            if isinstance(v.type, T.Block):
                b = ctx.env.get(a.ref) if ctx is not None and isinstance(a, A.Name) else None
                if isinstance(b, InstanceArg):  # passed on from the enclosing block's own parameter
                    env[v] = b
                elif ctx is not None and isinstance(a, A.Name) and a.ref in ctx.objs:
                    env[v] = InstanceArg(a.ref, ctx.objs[a.ref], ctx.path)
                else:
                    raise Unsupported(a.loc, f"this argument for {decl.name}'s {v.type} parameter {p.name}")
                continue
            env[v] = Py(repr(self.const_as(a, v.type)))
        return env

    # ------------------------------------------------------------------ metadata
    def field_lists(self, m_t: T.Type, base: int) -> dict[int, list[int]]:
        """The slots of each ``@field_list`` number's metadata fields."""
        out: dict[int, list[int]] = {}

        def walk(t: T.Type, b: int) -> None:
            if not isinstance(t, T.StructLike):
                return
            off = 1 if t.kind == "header" else 0
            for n, ft in t.fields:
                for a in t.field_annotations.get(n, []):
                    if a.name == "field_list":
                        for arg in a.args:
                            if arg.const is None:
                                self.ck.expr(arg, self.ck.glob)
                            out.setdefault(int(arg.const), []).extend(range(b + off, b + off + size_of(ft)))
                walk(ft, b + off)
                off += size_of(ft)

        walk(m_t, base)
        return out

    def controller_headers(self) -> dict[str, ControllerHeaderInfo]:
        out: dict[str, ControllerHeaderInfo] = {}
        for sym in self.ck.glob.names.values():
            if isinstance(sym, T.StructLike) and sym.kind == "header":
                a = A.find_annotation(sym.annotations, "controller_header")
                if a and a.args and isinstance(a.args[0], A.StringLit):
                    fields = [ParamInfo(n, scalar_width(ft), sym.field_annotations.get(n, [])) for n, ft in sym.fields]
                    out[a.args[0].value] = ControllerHeaderInfo(a.args[0].value, sym.name, fields)
        return out
