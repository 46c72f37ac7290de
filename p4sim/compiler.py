"""Compiles a checked v1model program into Python source, executed once into fast functions.

Per-packet state is one flat list ``s``: every scalar (header field, metadata field, validity bit,
local variable) has a fixed slot, so a field access is ``s[12]``. Each parser state, control,
action and table becomes one generated Python function; nothing walks the syntax tree at packet
time. Controls applied from other controls, and actions with directional parameters, are compiled
per call site with their parameters bound to the caller's slots (copy-in/copy-out by aliasing).
"""

from __future__ import annotations

import ast
from typing import Any

from p4sim import ast as A
from p4sim import types as T
from p4sim.checker import Checker
from p4sim.codegen import (
    Binding,
    Ctx,
    PacketParam,
    Py,
    Slot,
    Writer,
    expr_text,
    field_offset,
    lit,
    scalar_width,
    size_of,
)
from p4sim.codegen_externs import ExternCompiler
from p4sim.diagnostics import CompileError, Loc, Unsupported, Warning_
from p4sim.meters import MeterArray
from p4sim.model import (
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
    Program,
    RegisterInfo,
    TableInfo,
)
from p4sim.symbols import ActionSym, FunctionSym, InstanceSym, TableSym, Var
from p4sim.tables import BoundAction, Profile, Table


class Compiler(ExternCompiler):
    """Compiles the blocks of a checked v1model program."""

    # ------------------------------------------------------------------ top level
    def compile(self) -> Program:
        ck = self.ck
        main = ck.main
        assert main is not None
        pkg = main.type
        if not (isinstance(pkg, T.Block) and pkg.decl.name == "V1Switch"):
            raise Unsupported(main.loc, f"package {pkg} (only v1model's V1Switch)")
        blocks = []
        ctor_env: dict[Var, Binding] = {}
        for a in main.args:
            if not isinstance(a, A.Ctor) or a.type_name not in ck.blocks:
                raise CompileError(a.loc, "V1Switch arguments must be parser or control instantiations")
            blk = ck.blocks[a.type_name]
            if blk in blocks:
                raise Unsupported(a.loc, f"{blk.name} instantiated twice in V1Switch")
            ctor_env.update(self.ctor_bindings(blk, a.args))
            blocks.append(blk)
        if len(blocks) != 6:
            raise CompileError(main.loc, "V1Switch takes 6 blocks")
        prs, vck, ing, egr, cck, dep = blocks
        if not isinstance(prs, A.ParserDecl):
            raise CompileError(prs.loc, "the first V1Switch argument must be a parser")
        for b in (vck, ing, egr, cck, dep):
            if not isinstance(b, A.ControlDecl):
                raise CompileError(b.loc, "V1Switch arguments 2-6 must be controls")
        pvars = [p.sym for p in prs.params]  # type: ignore[attr-defined]
        if len(pvars) != 4:
            raise CompileError(prs.loc, "the v1model parser takes 4 parameters")
        h_t, m_t, sm_t = pvars[1].type, pvars[2].type, pvars[3].type
        h_base, m_base, sm_base = self.alloc(h_t), self.alloc(m_t), self.alloc(sm_t)
        assert isinstance(sm_t, T.StructLike)
        self.sm_base, self.sm_type = sm_base, sm_t
        sm = {n: sm_base + field_offset(sm_t, n) for n, _ in sm_t.fields}
        self.pktlen = sm["packet_length"]
        self.sm = sm

        def bind(decl: A.ParserDecl | A.ControlDecl, kinds: list[str]) -> dict[Var, Binding]:
            env: dict[Var, Binding] = dict(ctor_env)
            params = decl.params
            if len(params) != len(kinds):
                raise CompileError(decl.loc, f"{decl.name} must take {len(kinds)} parameters for its V1Switch role")
            for p, k in zip(params, kinds, strict=True):
                v: Var = p.sym  # type: ignore[attr-defined]
                want = {"H": h_t, "M": m_t, "SM": sm_t}.get(k)
                if k in ("in", "out"):
                    if not (isinstance(v.type, T.Extern) and v.type.decl.name == ("packet_in" if k == "in" else "packet_out")):
                        raise CompileError(p.loc, f"{decl.name}.{p.name} must be a packet_{k}")
                    env[v] = PacketParam(k)
                else:
                    if v.type != want and v.type is not want:
                        raise CompileError(p.loc, f"{decl.name}.{p.name} has type {v.type}, expected {want}")
                    env[v] = Slot({"H": h_base, "M": m_base, "SM": sm_base}[k])
            return env

        fns = {
            "parser": self.parser(prs, bind(prs, ["in", "H", "M", "SM"])),
            "verify": self.control(vck, bind(vck, ["H", "M"]), vck.name),  # type: ignore[arg-type]
            "ingress": self.control(ing, bind(ing, ["H", "M", "SM"]), ing.name),  # type: ignore[arg-type]
            "egress": self.control(egr, bind(egr, ["H", "M", "SM"]), egr.name),  # type: ignore[arg-type]
            "compute": self.control(cck, bind(cck, ["H", "M"]), cck.name),  # type: ignore[arg-type]
            "deparser": self.control(dep, bind(dep, ["out", "H"]), dep.name, deparser=True),  # type: ignore[arg-type]
        }
        source = "\n".join(self.funcs + self.tail) + "\n"
        ns = self.ns
        exec(compile(source, "<p4sim-generated>", "exec"), ns)
        for ti in self.tables.values():
            tbl = ti.table
            for ar in ti.actions:
                ai = self.actions[ar.fqname]
                tbl.actions[ar.fqname] = BoundAction(ar.fqname, ns[ar.fn_name], [p.width for p in ai.params], ar.scope)
            tbl.set_default(tbl.actions[ti.default_action], ti.default_args)
        field_lists = self.field_lists(m_t, m_base)
        cheaders = self.controller_headers()
        return Program(
            source=source, namespace=ns, template=self.template, errors=list(self.ck.errors), sm=sm,
            hidden=self.hidden, parser=ns[fns["parser"]], verify=ns[fns["verify"]],
            ingress=ns[fns["ingress"]], egress=ns[fns["egress"]], compute=ns[fns["compute"]],
            deparser=ns[fns["deparser"]], tables=self.tables, actions=self.actions,
            counters=self.counters, direct_counters=self.direct_counters, registers=self.registers,
            meters=self.meters,
            profiles=self.profiles, digests=self.digests, controller_headers=cheaders,
            field_lists=field_lists, ctx=self.ctx_obj, warnings=self.warnings,
            metadata_slots=(range(m_base, m_base + size_of(m_t)), range(sm_base, sm_base + size_of(sm_t))),
            ser_enums={sym.name: (sym.underlying.width, dict(sym.values)) for sym in self.ck.glob.names.values()
                       if isinstance(sym, T.Enum) and sym.underlying is not None},
        )

    def field_lists(self, m_t: T.Type, base: int) -> dict[int, list[int]]:
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

    # ------------------------------------------------------------------ parser
    def parser(self, d: A.ParserDecl, env: dict[Var, Binding], path: str = "") -> str:
        top = not path
        ctx = Ctx(path or d.name, dict(env), {}, "parser")
        pre = Writer()
        for loc in d.locals:
            self.local(loc, ctx, pre)
        names = {s.name: self.uid(f"ps_{s.name}_") for s in d.states}
        for st in d.states:
            w = Writer()
            for x in st.stmts:
                self.stmt(x, ctx, w)
            self.transition(st.transition, ctx, w, names)
            self.funcs.append(f"def {names[st.name]}(s, pk):")
            self.funcs.append(f"    if _T is not None: _T({'parser state ' + st.name!r})")
            self.funcs.extend(w.lines or ["    return None"])
        run = self.uid("parser_")
        self.funcs.append(f"def {run}(s, pk):")
        self.funcs.extend(pre.lines)
        self.funcs.append(f"    f = {names['start']}")
        self.funcs.append("    while f is not None:")
        self.funcs.append("        f = f(s, pk)")
        if top:
            self.funcs.append("def _reject(s, pk):")
            self.funcs.append("    raise _PErr(0)")
            self.funcs.append(f"def _nomatch(s, pk):\n    raise _PErr({self.errcode('NoMatch')})")
        return run

    def state_ref(self, name: str, names: dict[str, str]) -> str:
        if name == "accept":
            return "None"
        if name == "reject":
            return "_reject"
        return names[name]

    def transition(self, tr: A.Transition, ctx: Ctx, w: Writer, names: dict[str, str]) -> None:
        if tr.target is not None:
            w(f"return {self.state_ref(tr.target, names)}")
            return
        assert tr.select is not None
        keys = [self.ex(k, ctx) for k in tr.select]
        ktypes = [k.ty for k in tr.select]
        for i, k in enumerate(keys):
            w(f"k{i} = {k}")
        simple = len(keys) == 1 and all(
            isinstance(c.keyset, (A.Default, A.DontCare)) or (
                not isinstance(c.keyset, (A.Mask, A.Range, A.TupleKeyset)) and c.keyset.const is not None)
            for c in tr.cases)
        if simple:
            table: dict[Any, str] = {}
            default = "_nomatch"
            for c in tr.cases:
                tgt = self.state_ref(c.state, names)
                if isinstance(c.keyset, (A.Default, A.DontCare)):
                    default = tgt
                    break
                v = self.const_as(c.keyset, ktypes[0])
                table.setdefault(v, tgt)
            sel = self.uid("_SEL")
            self.tail.append(f"{sel} = {{{', '.join(f'{lit(k)}: {v}' for k, v in table.items())}}}")
            w(f"return {sel}.get(k0, {default})")
            return
        for c in tr.cases:
            tgt = self.state_ref(c.state, names)
            cond = self.keyset_cond(c.keyset, ktypes)
            w(f"if {cond}:")
            with w.block():
                w(f"return {tgt}")
        w("return _nomatch")

    def keyset_cond(self, ks: A.Expr, ktypes: list[T.Type]) -> str:
        if isinstance(ks, (A.Default, A.DontCare)):
            return "True"
        items = ks.items if isinstance(ks, A.TupleKeyset) else [ks]
        conds = []
        for i, (it, kt) in enumerate(zip(items, ktypes, strict=True)):
            if isinstance(it, (A.Default, A.DontCare)):
                continue
            if isinstance(it, A.Mask):
                m = self.const_as(it.mask, kt)
                conds.append(f"(k{i} & {m}) == {self.const_as(it.value, kt) & m}")
            elif isinstance(it, A.Range):
                conds.append(f"{lit(self.const_as(it.low, kt))} <= k{i} <= {lit(self.const_as(it.high, kt))}")
            else:
                conds.append(f"k{i} == {lit(self.const_as(it, kt))}")
        return " and ".join(conds) or "True"

    # ------------------------------------------------------------------ controls
    def control(self, d: A.ControlDecl, env: dict[Var, Binding], path: str, deparser: bool = False) -> str:
        ctx = Ctx(path, dict(env), {}, "control")
        pre = Writer()
        for loc in d.locals:
            self.local(loc, ctx, pre)
        w = Writer()
        for x in d.body.stmts:
            self.stmt(x, ctx, w)
        name = self.uid(f"ctl_{d.name}_")
        self.funcs.append(f"def {name}(s{', ob' if deparser else ''}):")
        body = pre.lines + w.lines
        self.funcs.extend(body or ["    pass"])
        return name

    def local(self, d: A.Decl, ctx: Ctx, w: Writer) -> None:
        if isinstance(d, A.ConstDecl):
            return
        if isinstance(d, A.VarDecl):
            self.var_decl(d, ctx, w)
        elif isinstance(d, A.Instantiation):
            self.instance(d.sym, ctx)  # type: ignore[attr-defined]
        elif isinstance(d, (A.ActionDecl, A.FunctionDecl)):
            return  # compiled where used; only table actions are in P4Info (as in p4c)
        elif isinstance(d, A.TableDecl):
            self.table(d.sym, ctx)  # type: ignore[attr-defined]

    def var_decl(self, d: A.VarDecl, ctx: Ctx, w: Writer) -> None:
        v: Var = d.sym  # type: ignore[attr-defined]
        base = self.alloc(v.type)
        ctx.env[v] = Slot(base)
        if d.init is not None:
            self.assign_to(base, v.type, d.init, ctx, w)
        elif isinstance(v.type, T.StructLike) and v.type.kind == "header":
            w(f"s[{base}] = False")

    def instance(self, inst: InstanceSym, ctx: Ctx) -> None:
        t = inst.type
        fq = self.fq(ctx.path, inst.name, inst.annotations)
        if isinstance(t, T.Block):
            ctx.objs[inst] = fq  # compiled when applied
            return
        assert isinstance(t, T.Extern)
        kind = t.decl.name
        args = [a.const for a in inst.args]
        if kind == "counter":
            size = int(args[0])
            unit = self.counter_unit(inst.args[1])
            ci = CounterInfo(fq, size, unit, [0] * size, [0] * size, inst.annotations)
            self.counters[fq] = ci
            n = self.uid("C")
            self.ns[n + "p"], self.ns[n + "b"] = ci.packets, ci.bytes
            ctx.objs[inst] = n
        elif kind == "direct_counter":
            unit = self.counter_unit(inst.args[0])
            self.direct_counters[fq] = DirectCounterInfo(fq, "", unit, inst.annotations)
            ctx.objs[inst] = fq
        elif kind == "register":
            size = int(args[0])
            width = scalar_width(t.args[0])
            ri = RegisterInfo(fq, size, width, [0] * size, inst.annotations)
            self.registers[fq] = ri
            n = self.uid("RG")
            self.ns[n] = ri.values
            ctx.objs[inst] = n
        elif kind == "meter":
            size = int(args[0])
            en = inst.args[1].ty
            assert isinstance(en, T.Enum)
            unit = {"packets": "PACKETS", "bytes": "BYTES"}[en.members[int(inst.args[1].const)]]
            mi = MeterInfo(fq, size, unit, MeterArray(size, unit), inst.annotations)
            self.meters[fq] = mi
            n = self.uid("M")
            self.ns[n] = mi.meters
            ctx.objs[inst] = n
        elif kind in ("action_profile", "action_selector"):
            sel = kind == "action_selector"
            size = int(args[1] if sel else args[0])
            prof = Profile(fq, size, sel)
            self.profiles[fq] = ProfileInfo(fq, [], size, sel, prof, inst.annotations)
            ctx.objs[inst] = fq
        elif kind == "Checksum16":
            ctx.objs[inst] = fq
        else:
            raise Unsupported(inst.loc, f"extern {kind}")

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

    def action_variant(self, sym: ActionSym, dir_args: list[A.Expr], ctx: Ctx, w: Writer | None) -> tuple[str, list[str]]:
        """Compile (once per binding) the action with directional parameters bound to ``dir_args``.

        Returns the function name and the extra Python arguments to pass for ``in`` parameters.
        """
        d = sym.decl
        if w is None:  # bound by a table: a control-plane visible action
            self.action_info(d, self.action_fq(sym, ctx))
        env = dict(ctx.env)
        binds: list[Any] = []
        pyargs: list[str] = []
        params: list[str] = []
        for p, a in zip(d.params, dir_args, strict=False):
            v: Var = p.sym  # type: ignore[attr-defined]
            if p.direction in ("out", "inout") or isinstance(v.type, (T.StructLike, T.Stack)):
                if self.is_place(a, ctx):
                    b = self.place(a, ctx)
                else:
                    if w is None:
                        raise Unsupported(a.loc, "non-l-value composite action argument in an actions list")
                    b = self.alloc(v.type)
                    self.assign_to(b, v.type, a, ctx, w)
                env[v] = Slot(b)
                binds.append(b)
            else:
                pn = f"i_{p.name}"
                env[v] = Py(pn)
                params.append(pn)
                pyargs.append(self.ex_as(a, v.type, ctx))
                binds.append(None)
        for p in d.params[len(dir_args):]:
            v = p.sym  # type: ignore[attr-defined]
            pn = f"d_{p.name}"
            env[v] = Py(pn)
            params.append(pn)
        key = (ctx.path, id(sym), tuple(binds))
        if key in self.variants:
            return self.variants[key], pyargs
        name = self.uid(f"act_{d.name}_")
        self.variants[key] = name
        actx = Ctx(ctx.path, env, ctx.objs, "action")
        aw = Writer()
        for x in d.body.stmts:
            self.stmt(x, actx, aw)
        self.funcs.append(f"def {name}(s{''.join(', ' + p for p in params)}):")
        self.funcs.extend(aw.lines or ["    pass"])
        return name, pyargs

    # ------------------------------------------------------------------ tables
    def table(self, sym: TableSym, ctx: Ctx) -> None:
        d = sym.decl
        fq = self.fq(ctx.path, d.name, d.annotations)
        keys: list[KeyInfo] = []
        key_exprs: list[str] = []
        sel_exprs: list[str] = []
        for k in d.keys or []:
            kt = T.strip(k.expr.ty)
            width = scalar_width(kt)
            a = A.find_annotation(k.annotations, "name")
            name = a.args[0].value if a and a.args and isinstance(a.args[0], A.StringLit) else expr_text(k.expr)
            code = self.ex(k.expr, ctx)
            if kt is T.BOOL:
                code = f"int({code})"
            elif isinstance(kt, T.Bits) and kt.signed:
                code = f"({code} & {kt.mask})"
            if k.match_kind == "selector":
                sel_exprs.append(code)
                continue
            if k.match_kind not in ("exact", "lpm", "ternary", "range", "optional"):
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
            fn, pyargs = self.action_variant(asym, ref.args or [], ctx, None)
            if pyargs:
                raise Unsupported(ref.loc, f"'in' arguments bound in the actions list of table {d.name}")
            refs.append(ActionRefInfo(self.action_fq(asym, ctx), scope, ref.annotations, fn))
        assert sym.default is not None
        dsym, dargs = sym.default
        dfq = self.action_fq(dsym, ctx)
        dvals = tuple(self.data_value(a, ctx) for a in dargs)
        ti = TableInfo(fq, keys, refs, dfq, dvals, sym.default_const, sym.size, d.annotations, tbl)
        if dfq not in {r.fqname for r in refs}:
            raise CompileError(d.loc, f"default action {dfq} not in the actions of {fq}")
        if sym.implementation is not None:
            pfq = ctx.objs.get(sym.implementation)
            if pfq is None:
                # anonymous implementation: declared by the table property itself
                inst = sym.implementation
                inst.annotations = []
                ctx_name = self.fq(ctx.path, d.name, d.annotations)
                inst.name = ctx_name.rsplit(".", 1)[-1]
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
            tbl.const_entries = d.entries_const
        self.tables[fq] = ti
        tn = self.uid("T")
        self.ns[tn] = tbl
        fname = self.uid(f"tbl_{d.name}_")
        ctx.objs[sym] = fname
        keytuple = "(" + "".join(f"{k}, " for k in key_exprs) + ")"
        lines = [f"def {fname}(s):"]
        if key_exprs:
            lines.append(f"    e = {tn}.lookup({keytuple})")
        else:
            lines.append("    e = None")
        lines.append("    if e is None:")
        lines.append(f"        fn, args = {tn}.default")
        lines.append(f"        if _T is not None: _T({'table ' + fq + ': miss, default action '!r} + {tn}.default_name)")
        lines.append("        fn(s, *args)")
        lines.append(f"        return {tn}.default_res")
        lines.append(f"    if _T is not None: _T({'table ' + fq + ': hit, action '!r} + e.action)")
        if ti.direct_counter is not None:
            lines.append("    e.packets += 1")
            lines.append(f"    e.bytes += s[{self.pktlen}]")
        if tbl.profile is not None:
            sel = "(" + "".join(f"{k}, " for k in sel_exprs) + ")"
            lines.append(f"    fn, args, res = {tn}.resolve(e, {sel})")
            lines.append("    if fn is not None:")
            lines.append("        fn(s, *args)")
            lines.append("    return res")
        else:
            lines.append("    e.fn(s, *e.args)")
            lines.append("    return e.res")
        self.funcs.extend(lines)

    def data_value(self, e: A.Expr, ctx: Ctx) -> int:
        v = e.const
        if v is None and isinstance(e, A.Name):  # a constructor parameter: a literal of the instance
            b = ctx.env.get(e.ref)
            if isinstance(b, Py):
                v = ast.literal_eval(b.name)
        t = T.strip(e.ty) if e.ty is not T.INT else None
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
                    plen = bin(m).count("1")
                    specs.append(("lpm", v & m, plen))
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
        return ConstEntry(specs, prio, self.action_fq(act, ctx), tuple(self.data_value(a, ctx) for a in e.args))

    # ------------------------------------------------------------------ statements
    def stmt(self, s: A.Stmt, ctx: Ctx, w: Writer) -> None:
        if isinstance(s, A.Block):
            for x in s.stmts:
                self.stmt(x, ctx, w)
        elif isinstance(s, A.Assign):
            self.assign(s.target, s.value, ctx, w)
        elif isinstance(s, A.CallStmt):
            assert isinstance(s.call, A.Call)
            self.call_stmt(s.call, ctx, w)
        elif isinstance(s, A.If):
            w(f"if {self.ex(s.cond, ctx)}:")
            self.sub(s.then, ctx, w)
            if s.other is not None:
                w("else:")
                self.sub(s.other, ctx, w)
        elif isinstance(s, A.Exit):
            w("raise _Exit")
        elif isinstance(s, A.Return):
            if s.value is not None and ctx.ret is not None:
                w(f"return {self.ex_as(s.value, ctx.ret, ctx)}")
            else:
                w("return")
        elif isinstance(s, A.Switch):
            self.switch(s, ctx, w)
        elif isinstance(s, A.VarDecl):
            self.var_decl(s, ctx, w)
        elif isinstance(s, (A.ConstDecl, A.Empty)):
            pass
        else:
            raise Unsupported(s.loc, type(s).__name__)

    def sub(self, s: A.Stmt, ctx: Ctx, w: Writer) -> None:
        n = len(w.lines)
        with w.block():
            self.stmt(s, ctx, w)
            if len(w.lines) == n:
                w("pass")

    def value_switch(self, s: A.Switch, ctx: Ctx, w: Writer) -> None:
        r = self.uid("_r")
        w(f"{r} = {self.ex(s.expr, ctx)}")
        pending: list[str] = []
        first = True
        for c in s.cases:
            if c.value is None:
                if c.body is not None:
                    w("else:" if not first else "if True:")
                    self.sub(c.body, ctx, w)
                break
            pending.append(lit(self.const_as(c.value, s.expr.ty)))
            if c.body is None:
                continue
            cond = " or ".join(f"{r} == {p}" for p in pending)
            w(f"{'if' if first else 'elif'} {cond}:")
            first = False
            pending = []
            self.sub(c.body, ctx, w)

    def switch(self, s: A.Switch, ctx: Ctx, w: Writer) -> None:
        if not isinstance(s.expr.ty, T.ActionEnum):
            self.value_switch(s, ctx, w)
            return
        r = self.uid("_r")
        call = s.expr
        assert isinstance(call, A.Member)
        w(f"{r} = {self.ex(call.expr, ctx)}[1]")
        tsym = call.expr.ref[1] if isinstance(call.expr, A.Call) else None
        assert isinstance(tsym, TableSym)
        pending: list[str] = []
        first = True
        for c in s.cases:
            if c.label is None:
                if c.body is not None:
                    w("else:" if not first else "if True:")
                    self.sub(c.body, ctx, w)
                break
            act = next(a for a, _ in tsym.actions if a.decl.name == c.label)
            pending.append(repr(self.action_fq(act, ctx)))
            if c.body is None:
                continue
            cond = " or ".join(f"{r} == {p}" for p in pending)
            w(f"{'if' if first else 'elif'} {cond}:")
            first = False
            pending = []
            self.sub(c.body, ctx, w)

    # ------------------------------------------------------------------ calls
    def call_expr(self, e: A.Call, ctx: Ctx) -> str:
        ref = e.ref
        kind = ref[0]
        if kind == "header":
            assert isinstance(e.func, A.Member)
            if ref[1] != "isValid":
                raise CompileError(e.loc, f"{ref[1]}() has no value")
            return self.load(e.func.expr, ctx)
        if kind == "union":
            assert isinstance(e.func, A.Member)
            u = e.func.expr.ty
            base = self.place(e.func.expr, ctx)
            return "(" + " or ".join(f"s[{base + field_offset(u, n)}]" for n, _ in u.fields) + ")"
        if kind == "table":
            return f"{self.table_fn(ref[1], ctx, e.loc)}(s)"
        if kind == "function":
            return self.function_call(e, ref[1], ctx)
        if kind == "method":
            _, ext, m, _obj, _proto, tv = ref
            if ext == "packet_in" and m == "lookahead":
                t = tv["T"]
                st = T.strip(t)
                if not isinstance(st, T.Bits):
                    raise Unsupported(e.loc, f"lookahead of {t} used as a whole value")
                return f"_peek(pk, {st.width})"
            if ext == "packet_in" and m == "length":
                return "pk.n"
            if ext == "Checksum16" and m == "get":
                buf, _ = self.field_list_bytes(e.args[0], ctx)
                return f"_csum16({buf})"
        raise Unsupported(e.loc, f"call of {self.call_name(e)} as an expression")

    def function_call(self, e: A.Call, sym: FunctionSym, ctx: Ctx) -> str:
        """Code calling the function, compiled once per binding of its out/inout parameters."""
        d = sym.decl
        env = dict(ctx.env)
        binds: list[Any] = []
        params: list[str] = []
        pyargs: list[str] = []
        for p, a in zip(d.proto.params, e.args, strict=True):
            v: Var = p.sym  # type: ignore[attr-defined]
            if p.direction in ("out", "inout") or isinstance(v.type, (T.StructLike, T.Stack)):
                if not self.is_place(a, ctx):
                    raise Unsupported(a.loc, f"argument of function {d.name} that is not a variable or field")
                b = self.place(a, ctx)
                env[v] = Slot(b)
                binds.append(b)
            else:
                pn = f"f_{p.name}"
                env[v] = Py(pn)
                params.append(pn)
                pyargs.append(self.ex_as(a, v.type, ctx))
                binds.append(None)
        key = (ctx.path, id(sym), tuple(binds))
        name = self.variants.get(key)
        if name is None:
            name = self.uid(f"fn_{d.name}_")
            self.variants[key] = name
            fctx = Ctx(ctx.path, env, ctx.objs, "function", sym.ret)
            fw = Writer()
            for x in d.body.stmts:
                self.stmt(x, fctx, fw)
            self.funcs.append(f"def {name}(s{''.join(', ' + p for p in params)}):")
            self.funcs.extend(fw.lines or ["    pass"])
        return f"{name}(s{''.join(', ' + x for x in pyargs)})"

    def call_name(self, e: A.Call) -> str:
        f = e.func
        if isinstance(f, A.Name):
            return f.name
        if isinstance(f, A.Member):
            return f.name
        return "?"

    def table_fn(self, tsym: TableSym, ctx: Ctx, loc: Loc) -> str:
        name = ctx.objs.get(tsym)
        if name is None:
            raise CompileError(loc, f"table {tsym.decl.name} is not instantiated here")
        sites = self.apply_sites.setdefault(name, [])
        sites.append(loc)
        if len(sites) == 2:
            self.warnings.append(Warning_(loc, (
                f"table {tsym.decl.name} is applied more than once (first at line {sites[0].line}); "
                "p4c's BMv2 back end rejects this: apply it once or duplicate the table")))
        return name

    def call_stmt(self, e: A.Call, ctx: Ctx, w: Writer) -> None:
        ref = e.ref
        kind = ref[0]
        if kind == "header":
            assert isinstance(e.func, A.Member)
            m = ref[1]
            if m != "isValid":
                self.store(e.func.expr, str(m == "setValid"), ctx, w)
                if m == "setValid":
                    self.invalidate_siblings(e.func.expr, ctx, w)
            return
        if kind == "union":
            return
        if kind == "stack":
            assert isinstance(e.func, A.Member)
            self.stack_op(e.func.expr, ref[1], int(e.args[0].const), ctx, w)
            return
        if kind == "table":
            w(f"{self.table_fn(ref[1], ctx, e.loc)}(s)")
            return
        if kind == "action":
            sym: ActionSym = ref[1]
            ndir = len([p for p in sym.decl.params if p.direction])
            fn, pyargs = self.action_variant(sym, e.args[:ndir], ctx, w)
            data = []
            for p, a in zip(sym.decl.params[ndir:], e.args[ndir:], strict=True):
                data.append(self.ex_as(a, p.sym.type, ctx))  # type: ignore[attr-defined]
            w(f"{fn}(s{''.join(', ' + x for x in pyargs + data)})")
            return
        if kind == "control":
            self.apply_control(e, ref[1], ctx, w)
            return
        if kind == "function":
            w(self.function_call(e, ref[1], ctx))
            return
        if kind == "func":
            self.extern_func(e, ref[1], ref[3], ctx, w)
            return
        if kind == "method":
            self.extern_method(e, ctx, w)
            return
        raise Unsupported(e.loc, f"call of {self.call_name(e)}")

    def ctor_bindings(self, decl: A.ParserDecl | A.ControlDecl, args: list[A.Expr]) -> dict[Var, Binding]:
        """Constructor parameters are constants of the instance: bound to their literal values."""
        env: dict[Var, Binding] = {}
        for p, a in zip(decl.ctor_params, args, strict=True):
            v: Var = p.sym  # type: ignore[attr-defined]
            env[v] = Py(lit(self.const_as(a, v.type)))
        return env

    def apply_control(self, e: A.Call, inst: InstanceSym, ctx: Ctx, w: Writer) -> None:
        key = (ctx.path, id(inst))
        if key in self.applied:
            raise Unsupported(e.loc, f"applying control instance {inst.name} more than once")
        self.applied.add(key)
        t = inst.type
        assert isinstance(t, T.Block) and isinstance(t.decl, (A.ControlDecl, A.ParserDecl))
        decl = t.decl
        env: dict[Var, Binding] = self.ctor_bindings(decl, inst.args)
        for p, a in zip(decl.params, e.args, strict=True):
            v: Var = p.sym  # type: ignore[attr-defined]
            if isinstance(v.type, T.Extern):
                b = ctx.env.get(a.ref) if isinstance(a, A.Name) else None
                if not isinstance(b, PacketParam):
                    raise Unsupported(a.loc, "extern argument other than the packet to a control or parser")
                env[v] = b
            elif self.is_place(a, ctx):
                env[v] = Slot(self.place(a, ctx))
            else:
                base = self.alloc(v.type)
                self.assign_to(base, v.type, a, ctx, w)
                env[v] = Slot(base)
        path = ctx.objs[inst]
        if isinstance(decl, A.ParserDecl):
            w(f"{self.parser(decl, env, path)}(s, pk)")  # a reject in the sub-parser rejects the packet
            return
        fn = self.control(decl, env, path, deparser=False)
        w(f"{fn}(s)")

def compile_program(ck: Checker) -> Program:
    return Compiler(ck).compile()

