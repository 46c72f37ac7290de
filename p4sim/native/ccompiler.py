"""Compiles a checked v1model program into C for the native engine (p4sim/native/).

The same compiler as the Python engine's (`p4sim.compiler.Compiler`: the same walk over the
checked program, the same slot layout, the same table, action and extern model) with every
piece of emitted code in C: one C function per parser, control, action, function and table.
The fixed part (tables, externs, the v1model pipeline, the C API) is `runtime.h` and
`pipeline.c` beside this file; `CProgram.source` is one translation unit holding all of it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from p4sim import ast as A
from p4sim import types as T
from p4sim.checker import Checker
from p4sim.codegen import (
    HIDDEN,
    Binding,
    Ctx,
    PacketParam,
    Py,
    Slot,
    Writer,
    expr_text,
    scalar_width,
)
from p4sim.compiler import Compiler
from p4sim.diagnostics import CompileError, Unsupported
from p4sim.model import ActionRefInfo, KeyInfo, TableInfo
from p4sim.native.cexpr import CExterns, NativeUnsupported, cblock, clit
from p4sim.symbols import ActionSym, FunctionSym, InstanceSym, TableSym, Var
from p4sim.tables import Table

HERE = Path(__file__).parent
KINDS = {"exact": "K_EXACT", "lpm": "K_LPM", "ternary": "K_TERNARY", "range": "K_RANGE", "optional": "K_OPTIONAL"}
_INT = re.compile(r"(?<![\w.])(\d+)(?![\w.])")


def _ull(m: re.Match[str]) -> str:
    """Literals that do not fit a C int get their ULL suffix (smaller ones convert exactly)."""
    text = m.group(1)
    return text + "ULL" if int(text) >> 31 else text


@dataclass
class CProgram:
    """The C source of one program and the numbering the C API uses."""

    source: str
    tables: list[str]  # table fq names by C index
    profiles: list[str]
    counters: list[str]
    registers: list[str]
    meters: list[str]
    digests: list[str]
    actions: dict[str, int] = field(default_factory=dict)  # action fq name -> global number (>= 1)
    amax: int = 1
    dmax: int = 1


class CCompiler(CExterns, Compiler):
    """Compiles the blocks of a checked v1model program into C."""

    def __init__(self, ck: Checker) -> None:
        super().__init__(ck)
        self.cidx: dict[str, int] = {}
        self.has_exit = False
        self.protos: list[str] = []
        self.anums: dict[str, int] = {}
        self.tdesc: list[str] = []
        self.kmax = self.amax = 1

    def anum(self, fq: str) -> int:
        return self.anums.setdefault(fq, len(self.anums) + 1)

    def func(self, ret: str, name: str, params: list[str], body: list[str]) -> None:
        head = f"static {ret} {name}(p4n_ctx *c, uint64_t *s{''.join(', uint64_t ' + p for p in params)})"
        self.protos.append(head + ";")
        self.funcs.append(head + " {")
        self.funcs.extend(body)
        self.funcs.append("}")

    # ------------------------------------------------------------------ top level
    def compile_c(self) -> CProgram:
        ck = self.ck
        main = ck.main
        assert main is not None
        blocks = []
        ctor_env: dict[Var, Binding] = {}
        for a in main.args:
            if not isinstance(a, A.Ctor) or a.type_name not in ck.blocks:
                raise CompileError(a.loc, "V1Switch arguments must be parser or control instantiations")
            blk = ck.blocks[a.type_name]
            ctor_env.update(self.ctor_bindings(blk, a.args))
            blocks.append(blk)
        prs, vck, ing, egr, cck, dep = blocks
        assert isinstance(prs, A.ParserDecl)
        pvars = [p.sym for p in prs.params]  # type: ignore[attr-defined]
        h_t, m_t, sm_t = pvars[1].type, pvars[2].type, pvars[3].type
        h_base, m_base, sm_base = self.alloc(h_t), self.alloc(m_t), self.alloc(sm_t)
        assert isinstance(sm_t, T.StructLike)
        self.sm_base, self.sm_type = sm_base, sm_t
        from p4sim.codegen import field_offset, size_of
        sm = {n: sm_base + field_offset(sm_t, n) for n, _ in sm_t.fields}
        self.pktlen = sm["packet_length"]
        self.sm = sm

        def bind(decl: A.ParserDecl | A.ControlDecl, kinds: list[str]) -> dict[Var, Binding]:
            env: dict[Var, Binding] = dict(ctor_env)
            for p, k in zip(decl.params, kinds, strict=True):
                v: Var = p.sym  # type: ignore[attr-defined]
                if k in ("in", "out"):
                    env[v] = PacketParam(k)
                else:
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
        body = [_INT.sub(_ull, line) for line in self.funcs]
        used = "\n".join(body)

        def ts(name: str) -> int:
            slot = sm.get(name, -1)
            return slot if slot >= 0 and f"s[{slot}]" in used else -1

        fl = self.field_lists(m_t, m_base)
        dmax = max([len(d.members) for d in self.digests.values()] + [1])
        defs = [
            "#define True 1", "#define False 0",
            f"#define NSLOTS {len(self.template)}", f"#define NHIDDEN {len(HIDDEN)}",
            f"#define KMAX {self.kmax}", f"#define AMAX {self.amax}", f"#define DMAX {dmax}",
            f"#define NTABLES {len(self.tables)}", f"#define NPROFILES {len(self.profiles)}",
            f"#define NCOUNTERS {len(self.counters)}", f"#define NREGISTERS {len(self.registers)}",
            f"#define NMETERS {len(self.meters)}", f"#define DEPARSE_MAX {self.deparse_max + 8}",
            f"#define P4N_HAS_EXIT {int(self.has_exit)}",
            f"#define S_IGTS {ts('ingress_global_timestamp')}", f"#define S_EGTS {ts('egress_global_timestamp')}",
        ]
        for n in ("ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length", "mcast_grp",
                  "egress_rid", "parser_error"):
            defs.append(f"#define S_{n.upper()} {sm[n]}")
        for n, i in self.hidden.items():
            defs.append(f"#define H_{n.upper()} {i}")
        tail = [
            f"static const p4n_tdesc P4N_TDESC[{len(self.tables) + 1}] = {{{', '.join(self.tdesc)}}};",
            self.sizes("P4N_COUNTER_SIZE", [c.size for c in self.counters.values()]),
            self.sizes("P4N_REGISTER_SIZE", [r.size for r in self.registers.values()]),
            self.sizes("P4N_METER_SIZE", [m.size for m in self.meters.values()]),
        ]
        metas = ((m_base, m_base + size_of(m_t)), (sm_base, sm_base + size_of(sm_t)))
        tail.append(f"#define NMETA {len(metas)}")
        tail.append("static const uint32_t P4N_META[NMETA][2] = {"
                    + ", ".join(f"{{{a}, {b}}}" for a, b in metas) + "};")
        tail.append("static int p4n_field_list(int64_t fl, const int32_t **slots) {")
        for k, slots in fl.items():
            tail.append(f"    static const int32_t F{k}[] = {{{', '.join(map(str, slots))}}};")
            tail.append(f"    if (fl == {k}) {{ *slots = F{k}; return {len(slots)}; }}")
        tail.append("    (void)fl; *slots = 0; return 0;\n}")
        for role, fn in fns.items():
            tail.append(f"static void p4n_{role}(p4n_ctx *c, uint64_t *s) {{ {fn}(c, s); }}")
        source = "\n".join([
            "/* generated by p4sim (p4sim/native/ccompiler.py) */",
            *defs, (HERE / "runtime.h").read_text(), *self.protos, *body, *tail,
            (HERE / "pipeline.c").read_text(),
        ]) + "\n"
        return CProgram(source, list(self.tables), list(self.profiles), list(self.counters),
                        list(self.registers), list(self.meters), list(self.digests), dict(self.anums),
                        self.amax, dmax)

    @staticmethod
    def sizes(name: str, values: list[int]) -> str:
        return f"static const uint32_t {name}[{len(values) + 1}] = {{{', '.join(map(str, [*values, 0]))}}};"

    # ------------------------------------------------------------------ parser
    def parser(self, d: A.ParserDecl, env: dict[Var, Binding], path: str = "") -> str:
        ctx = Ctx(path or d.name, dict(env), {}, "parser")
        w = Writer()
        for loc in d.locals:
            self.local(loc, ctx, w)
        names = {s.name: self.uid(f"ps_{s.name}_") for s in d.states}
        w(f"goto {names['start']};")
        for st in d.states:
            w(f"{names[st.name]}: {{")
            with w.block():
                for x in st.stmts:
                    self.stmt(x, ctx, w)
                self.transition(st.transition, ctx, w, names)
            w("}")
        run = self.uid("parser_")
        self.func("void", run, [], w.lines)
        return run

    def state_ref(self, name: str, names: dict[str, str]) -> str:
        if name == "accept":
            return "return;"
        if name == "reject":
            return "P4N_PERR(c, 0);"
        return f"goto {names[name]};"

    def transition(self, tr: A.Transition, ctx: Ctx, w: Writer, names: dict[str, str]) -> None:
        if tr.target is not None:
            w(self.state_ref(tr.target, names))
            return
        assert tr.select is not None
        ktypes = [k.ty for k in tr.select]
        with cblock(w, ""):
            for i, k in enumerate(tr.select):
                w(f"uint64_t k{i} = {self.ex(k, ctx)};")
            for c in tr.cases:
                w(f"if ({self.keyset_cond(c.keyset, ktypes)}) {self.state_ref(c.state, names)}")
            w(f"P4N_PERR(c, {self.errcode('NoMatch')});")

    def keyset_cond(self, ks: A.Expr, ktypes: list[T.Type]) -> str:
        if isinstance(ks, (A.Default, A.DontCare)):
            return "1"
        items = ks.items if isinstance(ks, A.TupleKeyset) else [ks]
        conds = []
        for i, (it, kt) in enumerate(zip(items, ktypes, strict=True)):
            if isinstance(it, (A.Default, A.DontCare)):
                continue
            if isinstance(it, A.Mask):
                m = self.const_as(it.mask, kt)
                conds.append(f"(k{i} & {clit(m)}) == {clit(self.const_as(it.value, kt) & m)}")
            elif isinstance(it, A.Range):
                lo, hi = clit(self.const_as(it.low, kt)), clit(self.const_as(it.high, kt))
                conds.append(f"({lo} <= k{i} && k{i} <= {hi})")
            else:
                conds.append(f"k{i} == {clit(self.const_as(it, kt))}")
        return " && ".join(conds) or "1"

    # ------------------------------------------------------------------ controls
    def control(self, d: A.ControlDecl, env: dict[Var, Binding], path: str, deparser: bool = False) -> str:
        ctx = Ctx(path, dict(env), {}, "control")
        w = Writer()
        for loc in d.locals:
            self.local(loc, ctx, w)
        for x in d.body.stmts:
            self.stmt(x, ctx, w)
        name = self.uid(f"ctl_{d.name}_")
        self.func("void", name, [], w.lines)
        return name

    def var_decl(self, d: A.VarDecl, ctx: Ctx, w: Writer) -> None:
        v: Var = d.sym  # type: ignore[attr-defined]
        base = self.alloc(v.type)
        ctx.env[v] = Slot(base)
        if d.init is not None:
            self.assign_to(base, v.type, d.init, ctx, w)
        elif isinstance(v.type, T.StructLike) and v.type.kind == "header":
            w(f"s[{base}] = 0;")

    def instance(self, inst: InstanceSym, ctx: Ctx) -> None:
        super().instance(inst, ctx)
        t = inst.type
        if isinstance(t, T.Extern):
            name = ctx.objs[inst]
            kind = t.decl.name
            if kind == "counter":
                self.cidx[name] = len(self.counters) - 1
            elif kind == "register":
                self.cidx[name] = len(self.registers) - 1
            elif kind == "meter":
                self.cidx[name] = len(self.meters) - 1

    # ------------------------------------------------------------------ actions
    def action_variant(self, sym: ActionSym, dir_args: list[A.Expr], ctx: Ctx, w: Writer | None) -> tuple[str, list[str]]:
        d = sym.decl
        if w is None:
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
                check_scalar(v.type, p.loc)
                pn = f"i_{p.name}"
                env[v] = Py(pn)
                params.append(pn)
                pyargs.append(self.ex_as(a, v.type, ctx))
                binds.append(None)
        for p in d.params[len(dir_args):]:
            v = p.sym  # type: ignore[attr-defined]
            check_scalar(v.type, p.loc)
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
        self.func("void", name, params, aw.lines)
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
            check_scalar(kt, k.loc)
            width = scalar_width(kt)
            a = A.find_annotation(k.annotations, "name")
            name = a.args[0].value if a and a.args and isinstance(a.args[0], A.StringLit) else expr_text(k.expr)
            code = self.ex(k.expr, ctx)
            if k.match_kind == "selector":
                sel_exprs.append(code)
                continue
            if k.match_kind not in KINDS:
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
        prof_index = -1
        if sym.implementation is not None:
            pfq = ctx.objs.get(sym.implementation)
            if pfq is None:
                inst = sym.implementation
                inst.annotations = []
                inst.name = self.fq(ctx.path, d.name, d.annotations).rsplit(".", 1)[-1]
                self.instance(inst, Ctx(ctx.path, ctx.env, ctx.objs, ctx.kind))
                pfq = ctx.objs[inst]
            pi = self.profiles[pfq]
            pi.tables.append(fq)
            ti.implementation = pfq
            prof_index = list(self.profiles).index(pfq)
        if sym.direct_counter is not None:
            ti.direct_counter = ctx.objs[sym.direct_counter]
        if d.entries is not None:
            ti.const_entries = [self.const_entry(e, keys, sym, ctx) for e in d.entries]
        tindex = len(self.tables)
        self.tables[fq] = ti
        kinds = [k.kind for k in keys]
        lpms = kinds.count("lpm")
        if not kinds:
            mode = "M_KEYLESS"
        elif all(k == "exact" for k in kinds) or (lpms == 1 and all(k in ("exact", "lpm") for k in kinds)):
            mode = "M_LEVELS"
        else:
            mode = "M_LINEAR"
        prio = int(any(k in ("ternary", "range", "optional") for k in kinds))
        self.kmax = max(self.kmax, len(keys))
        kl = ", ".join(KINDS[k] for k in kinds) or "0"
        self.tdesc.append(f"{{{len(keys)}, {mode}, {prio}, {prof_index}, {{{kl}}}}}")
        fname = self.uid(f"tbl_{d.name}_")
        ctx.objs[sym] = fname
        w = Writer()
        w(f"p4n_table *t = &c->tables[{tindex}];")
        if key_exprs:
            w(f"uint64_t k[] = {{{', '.join(key_exprs)}}};")
            w("int32_t ei = p4n_lookup(t, k);")
        else:
            w("int32_t ei = -1;")
        w("uint32_t a;")
        w("const uint64_t *d;")
        w("uint64_t r;")
        with cblock(w, "if (ei < 0)"):
            w("a = t->def_action; d = t->def_args; r = a;")
        with cblock(w, "else"):
            w("p4n_entry *e = &t->e[ei];")
            if ti.direct_counter is not None:
                w(f"e->packets += 1; e->bytes += s[{self.pktlen}];")
            if prof_index >= 0:
                w(f"uint64_t sel[] = {{{', '.join(sel_exprs) or '0'}}};")
                w(f"const p4n_member *m = p4n_resolve(&c->profiles[{prof_index}], e, sel, {len(sel_exprs)});")
                w("if (!m) return HIT;")
                w("a = m->action; d = m->args;")
            else:
                w("a = e->action; d = e->args;")
            w("r = HIT | a;")
        with cblock(w, "switch (a)"):
            for ar in refs:
                ai = self.actions[ar.fqname]
                self.amax = max(self.amax, len(ai.params))
                args = "".join(f", d[{i}]" for i in range(len(ai.params)))
                w(f"case {self.anum(ar.fqname)}: {ar.fn_name}(c, s{args}); break;")
            w("default: break;")
        w("(void)d;")
        w("return r;")
        self.func("uint64_t", fname, [], w.lines)

    # ------------------------------------------------------------------ statements
    def stmt(self, s: A.Stmt, ctx: Ctx, w: Writer) -> None:
        if isinstance(s, A.Block):
            with cblock(w, ""):
                for x in s.stmts:
                    self.stmt(x, ctx, w)
        elif isinstance(s, A.Assign):
            self.assign(s.target, s.value, ctx, w)
        elif isinstance(s, A.CallStmt):
            assert isinstance(s.call, A.Call)
            self.call_stmt(s.call, ctx, w)
        elif isinstance(s, A.If):
            with cblock(w, f"if ({self.ex(s.cond, ctx)})"):
                self.stmt(s.then, ctx, w)
            if s.other is not None:
                with cblock(w, "else"):
                    self.stmt(s.other, ctx, w)
        elif isinstance(s, A.Exit):
            self.has_exit = True
            w("P4N_EXIT(c);")
        elif isinstance(s, A.Return):
            if s.value is not None and ctx.ret is not None:
                w(f"return {self.ex_as(s.value, ctx.ret, ctx)};")
            else:
                w("return;")
        elif isinstance(s, A.Switch):
            self.switch(s, ctx, w)
        elif isinstance(s, A.VarDecl):
            self.var_decl(s, ctx, w)
        elif isinstance(s, (A.ConstDecl, A.Empty)):
            pass
        else:
            raise Unsupported(s.loc, type(s).__name__)

    def _cases(self, r: str, labels: Sequence[tuple[str | None, A.Stmt | None]], ctx: Ctx, w: Writer) -> None:
        pending: list[str] = []
        first = True
        for label, body in labels:
            if label is None:
                if body is not None:
                    with cblock(w, "else" if not first else "if (1)"):
                        self.stmt(body, ctx, w)
                break
            pending.append(label)
            if body is None:
                continue
            cond = " || ".join(f"{r} == {p}" for p in pending)
            with cblock(w, f"{'if' if first else 'else if'} ({cond})"):
                self.stmt(body, ctx, w)
            first = False
            pending = []

    def value_switch(self, s: A.Switch, ctx: Ctx, w: Writer) -> None:
        r = self.uid("sw")
        with cblock(w, ""):
            w(f"uint64_t {r} = {self.ex(s.expr, ctx)};")
            labels = [(None if c.value is None else clit(self.const_as(c.value, s.expr.ty)), c.body) for c in s.cases]
            self._cases(r, labels, ctx, w)

    def switch(self, s: A.Switch, ctx: Ctx, w: Writer) -> None:
        if not isinstance(s.expr.ty, T.ActionEnum):
            self.value_switch(s, ctx, w)
            return
        r = self.uid("sw")
        call = s.expr
        assert isinstance(call, A.Member)
        tsym = call.expr.ref[1] if isinstance(call.expr, A.Call) else None
        assert isinstance(tsym, TableSym)
        with cblock(w, ""):
            w(f"uint64_t {r} = {self.ex(call.expr, ctx)} & 0xffffffff;")
            labels: list[tuple[str | None, A.Stmt | None]] = []
            for c in s.cases:
                if c.label is None:
                    labels.append((None, c.body))
                    continue
                act = next(a for a, _ in tsym.actions if a.decl.name == c.label)
                labels.append((str(self.anum(self.action_fq(act, ctx))), c.body))
            self._cases(r, labels, ctx, w)

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
            from p4sim.codegen import field_offset
            base = self.place(e.func.expr, ctx)
            return "(" + " || ".join(f"s[{base + field_offset(u, n)}]" for n, _ in u.fields) + ")"
        if kind == "table":
            return f"{self.table_fn(ref[1], ctx, e.loc)}(c, s)"
        if kind == "function":
            return self.function_call(e, ref[1], ctx)
        if kind == "method":
            _, ext, m, _obj, _proto, tv = ref
            if ext == "packet_in" and m == "lookahead":
                st = T.strip(tv["T"])
                if not isinstance(st, T.Bits):
                    raise NativeUnsupported(e.loc, f"lookahead of {tv['T']} used as a whole value")
                return f"p4n_peek(c, {st.width})"
            if ext == "packet_in" and m == "length":
                return "(uint64_t)c->pk_n"
            if ext == "Checksum16" and m == "get":
                return self.hash_code(e.args[0], "p4n_csum16", ctx)
        raise NativeUnsupported(e.loc, f"call of {self.call_name(e)} as an expression")

    def function_call(self, e: A.Call, sym: FunctionSym, ctx: Ctx) -> str:
        d = sym.decl
        env = dict(ctx.env)
        binds: list[Any] = []
        params: list[str] = []
        cargs: list[str] = []
        for p, a in zip(d.proto.params, e.args, strict=True):
            v: Var = p.sym  # type: ignore[attr-defined]
            if p.direction in ("out", "inout") or isinstance(v.type, (T.StructLike, T.Stack)):
                if not self.is_place(a, ctx):
                    raise Unsupported(a.loc, f"argument of function {d.name} that is not a variable or field")
                b = self.place(a, ctx)
                env[v] = Slot(b)
                binds.append(b)
            else:
                check_scalar(v.type, p.loc)
                pn = f"f_{p.name}"
                env[v] = Py(pn)
                params.append(pn)
                cargs.append(self.ex_as(a, v.type, ctx))
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
            void = sym.ret is T.VOID or sym.ret is None
            if not void:
                fw("return 0;")  # not reached: every path returns (checked)
            self.func("void" if void else "uint64_t", name, params, fw.lines)
        return f"{name}(c, s{''.join(', ' + x for x in cargs)})"

    def call_stmt(self, e: A.Call, ctx: Ctx, w: Writer) -> None:
        ref = e.ref
        kind = ref[0]
        if kind == "header":
            assert isinstance(e.func, A.Member)
            m = ref[1]
            if m != "isValid":
                self.store(e.func.expr, "1" if m == "setValid" else "0", ctx, w)
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
            w(f"{self.table_fn(ref[1], ctx, e.loc)}(c, s);")
            return
        if kind == "action":
            sym: ActionSym = ref[1]
            ndir = len([p for p in sym.decl.params if p.direction])
            fn, cargs = self.action_variant(sym, e.args[:ndir], ctx, w)
            data = [self.ex_as(a, p.sym.type, ctx)  # type: ignore[attr-defined]
                    for p, a in zip(sym.decl.params[ndir:], e.args[ndir:], strict=True)]
            w(f"{fn}(c, s{''.join(', ' + x for x in cargs + data)});")
            return
        if kind == "control":
            self.apply_control(e, ref[1], ctx, w)
            return
        if kind == "function":
            w(self.function_call(e, ref[1], ctx) + ";")
            return
        if kind == "func":
            self.extern_func(e, ref[1], ref[3], ctx, w)
            return
        if kind == "method":
            self.extern_method(e, ctx, w)
            return
        raise NativeUnsupported(e.loc, f"call of {self.call_name(e)}")

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
            w(f"{self.parser(decl, env, path)}(c, s);")
            return
        w(f"{self.control(decl, env, path, deparser=False)}(c, s);")


def check_scalar(t: T.Type, loc: Any) -> None:
    st = T.strip(t)
    if isinstance(st, T.Bits) and (st.signed or st.width > 64):
        raise NativeUnsupported(loc, f"type {t} as a key, parameter or argument")


def compile_c(ck: Checker) -> CProgram:
    """The C program of a checked program; raises `NativeUnsupported` for what C does not run."""
    return CCompiler(ck).compile_c()
