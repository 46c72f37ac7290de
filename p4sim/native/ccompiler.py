"""Compiles a checked v1model program into C for the native engine (p4sim/native/).

The Python engine's walk over the checked program (`p4sim.backend.emit_walk.EmitWalk`: the same slot
layout, the same table, action and extern model) with every piece of emitted code in C (this
module: the walk's hooks and the assembly of the translation unit; `cexpr`: expressions, places
and externs): one C function per parser, control, action, function and table. A key or action parameter wider
than 64 bits (up to 128) is an ``unsigned __int128`` in the generated code and two ``uint64_t``
words in the table (`table_function`).
The fixed part (tables, externs, the v1model pipeline, the C API) is `runtime.h`,
`pipeline.c` and `ringloop.c` (the `--io ring` fast path) beside this file; `CProgram.source` is
one translation unit holding all of it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from p4sim.backend.emit_walk import EmitWalk
from p4sim.backend.layout import HIDDEN, Ctx, Writer, is_wide, size_of
from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.checker import Checker
from p4sim.frontend.diagnostics import Loc
from p4sim.native.cexpr import MAX_WIDTH, U128, CExterns, NativeUnsupported, cblock
from p4sim.runtime.model import CounterInfo, MeterInfo, RegisterInfo, TableInfo

HERE = Path(__file__).parent
KINDS = {"exact": "K_EXACT", "lpm": "K_LPM", "ternary": "K_TERNARY", "range": "K_RANGE", "optional": "K_OPTIONAL"}
_INT = re.compile(r"(?<![\w.])(\d+)(?![\w.])")


def _ull(m: re.Match[str]) -> str:
    """Literals that do not fit a C int get their ULL suffix (smaller ones convert exactly); one
    wider than 64 bits is written ``P4N_U128(hi, lo)`` (C has no 128-bit literals)."""
    text = m.group(1)
    v = int(text)
    if v >> 64:
        return f"P4N_U128({v >> 64}ULL, {v & ((1 << 64) - 1)}ULL)"
    return text + "ULL" if v >> 31 else text


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


class CCompiler(CExterns, EmitWalk):
    """Compiles the blocks of a checked v1model program into C (the walk's hooks in C)."""

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
        # a parameter is a uint64_t unless its declaration names its type (a wide one, `param_decl`)
        decls = "".join(", " + (p if " " in p else "uint64_t " + p) for p in params)
        head = f"static {ret} {name}(p4n_ctx *c, uint64_t *s{decls})"
        self.protos.append(head + ";")
        self.funcs.append(head + " {")
        self.funcs.extend(body)
        self.funcs.append("}")

    # ------------------------------------------------------------------ top level
    def compile_c(self) -> CProgram:
        fns = self.compile_blocks()
        m_t, m_base = self.meta
        sm_t, sm_base, sm = self.sm_type, self.sm_base, self.sm
        assert sm_t is not None
        body = [_INT.sub(_ull, line) for line in self.funcs]
        used = "\n".join(body)

        def ts(name: str) -> int:
            slot = sm.get(name, -1)
            return slot if slot >= 0 and f"s[{slot}]" in used else -1

        fl = self.field_lists(m_t, m_base)
        dmax = max([sum(2 if m.width > 64 else 1 for m in d.members) for d in self.digests.values()] + [1])
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
            # in words: a register cell wider than 64 bits is two, its low 64 bits first
            self.sizes("P4N_REGISTER_SIZE", [r.size * (2 if r.width > 64 else 1) for r in self.registers.values()]),
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
            (HERE / "pipeline.c").read_text(), (HERE / "ringloop.c").read_text(),
        ]) + "\n"
        return CProgram(source, list(self.tables), list(self.profiles), list(self.counters),
                        list(self.registers), list(self.meters), list(self.digests), dict(self.anums),
                        self.amax, dmax)

    @staticmethod
    def sizes(name: str, values: list[int]) -> str:
        return f"static const uint32_t {name}[{len(values) + 1}] = {{{', '.join(map(str, [*values, 0]))}}};"

    # ------------------------------------------------------------------ the walk's hooks: C text
    def declare(self, name: str, code: str) -> str:
        return f"{U128 if code.startswith(f'(({U128})') else 'uint64_t'} {name} = {code}"

    def scope(self, w: Writer) -> AbstractContextManager[None]:
        return cblock(w, "")

    def call_code(self, fn: str, args: Sequence[str], packet: bool = False) -> str:
        return f"{fn}(c, s{''.join(', ' + a for a in args)})"

    def define(self, kind: str, name: str, params: list[str], lines: list[str], ret: T.Type | None = None) -> None:
        void = ret is T.VOID or ret is None
        if not void:
            lines = [*lines, "    return 0;"]  # not reached: every path returns (checked)
        self.func("void" if void else U128 if ret is not None and is_wide(ret) else "uint64_t", name, params, lines)

    def goto_state(self, w: Writer, state: str | None, names: dict[str, str]) -> None:
        if state is None:
            w(f"P4N_PERR(c, {self.errcode('NoMatch')});")
        elif state == "accept":
            w("return;")
        elif state == "reject":
            w("P4N_PERR(c, 0);")
        else:
            w(f"goto {names[state]};")

    def states_begin(self, pre: Writer, names: dict[str, str]) -> None:
        pre(f"goto {names['start']};")

    def state_writer(self, pre: Writer, label: str, name: str) -> Writer:
        pre(f"{label}: {{")
        pre.ind += 1
        return pre

    def state_done(self, pre: Writer, w: Writer, label: str, name: str) -> None:
        pre.ind -= 1
        pre("}")

    def parser_done(self, pre: Writer, names: dict[str, str], top: bool) -> str:
        run = self.uid("parser_")
        self.func("void", run, [], pre.lines)
        return run

    def bind_extern(self, name: str, info: CounterInfo | RegisterInfo | MeterInfo) -> None:
        group = self.counters if isinstance(info, CounterInfo) else (
            self.registers if isinstance(info, RegisterInfo) else self.meters)
        self.cidx[name] = len(group) - 1

    def check_param(self, t: T.Type, loc: Loc | None) -> None:
        check_scalar(t, loc)

    def table_function(self, d: A.TableDecl, ti: TableInfo, key_exprs: list[str], sel_exprs: list[str]) -> str:
        tindex = len(self.tables)
        prof_index = -1 if ti.implementation is None else list(self.profiles).index(ti.implementation)
        kinds = [k.kind for k in ti.keys]
        lpms = kinds.count("lpm")
        if not kinds:
            mode = "M_KEYLESS"
        elif all(k == "exact" for k in kinds) or (lpms == 1 and all(k in ("exact", "lpm") for k in kinds)):
            mode = "M_LEVELS"
        else:
            mode = "M_LINEAR"
        prio = int(any(k in ("ternary", "range", "optional") for k in kinds))
        # a key wider than 64 bits is two columns, its high 64 bits first (runtime.h)
        cols: list[str] = []
        for k in ti.keys:
            if k.width <= 64:
                cols.append(KINDS[k.kind])
            else:
                cols += ["K_RANGE_HI", "K_RANGE_LO"] if k.kind == "range" else [KINDS[k.kind]] * 2
        if any(f"({U128})" in c for c in sel_exprs):
            raise NativeUnsupported(d.loc, f"a selector key wider than 64 bits (table {d.name})")
        self.kmax = max(self.kmax, len(cols))
        self.tdesc.append(f"{{{len(cols)}, {mode}, {prio}, {prof_index}, {{{', '.join(cols) or '0'}}}}}")
        fname = self.uid(f"tbl_{d.name}_")
        w = Writer()
        w(f"p4n_table *t = &c->tables[{tindex}];")
        if key_exprs:
            kcodes: list[str] = []
            for j, (k, code) in enumerate(zip(ti.keys, key_exprs, strict=True)):
                if k.width <= 64:
                    kcodes.append(code)
                else:
                    w(f"{U128} kw{j} = {code};")
                    kcodes += [f"(uint64_t)(kw{j} >> 64)", f"(uint64_t)kw{j}"]
            w(f"uint64_t k[] = {{{', '.join(kcodes)}}};")
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
            for ar in ti.actions:
                ai = self.actions[ar.fqname]
                args, nw = "", 0  # action data wider than 64 bits are two words, the low one first
                for pi in ai.params:
                    args += f", P4N_U128(d[{nw + 1}], d[{nw}])" if pi.width > 64 else f", d[{nw}]"
                    nw += 2 if pi.width > 64 else 1
                self.amax = max(self.amax, nw)
                w(f"case {self.anum(ar.fqname)}: {ar.fn_name}(c, s{args}); break;")
            w("default: break;")
        w("(void)d;")
        w("return r;")
        self.func("uint64_t", fname, [], w.lines)
        return fname

    def exit_stmt(self, w: Writer) -> None:
        self.has_exit = True
        w("P4N_EXIT(c);")

    def action_run(self, code: str) -> str:
        return f"{code} & 0xffffffff"

    def action_label(self, fq: str) -> str:
        return str(self.anum(fq))

    def peek_code(self, width: int) -> str:
        return f"p4n_peek(c, {width})"

    def packet_length_code(self) -> str:
        return "(uint64_t)c->pk_n"

    def checksum_get(self, data: A.Expr, ctx: Ctx) -> str:
        return self.hash_code(data, "p4n_csum16", ctx)


def check_scalar(t: T.Type, loc: Any) -> None:
    st = T.strip(t)
    if isinstance(st, T.Bits) and st.width > MAX_WIDTH:
        raise NativeUnsupported(loc, f"type {t} (wider than {MAX_WIDTH} bits) as a key, parameter or argument")


def compile_c(ck: Checker) -> CProgram:
    """The C program of a checked program; raises `NativeUnsupported` for what C does not run."""
    return CCompiler(ck).compile_c()
