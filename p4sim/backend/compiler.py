"""Compiles a checked v1model program into Python source, executed once into fast functions.

Per-packet state is one flat list ``s``: every scalar (header field, metadata field, validity bit,
local variable) has a fixed slot, so a field access is ``s[12]``. Each parser state, control,
action and table becomes one generated Python function; nothing walks the syntax tree at packet
time. Controls applied from other controls, and actions with directional parameters, are compiled
per call site with their parameters bound to the caller's slots (copy-in/copy-out by aliasing).
The walk over the program is `p4sim.backend.emit_walk.EmitWalk` (shared with the native engine's C
compiler); this module holds its Python text and assembles the `Program`.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from p4sim.backend.codegen import lit
from p4sim.backend.emit_walk import EmitWalk
from p4sim.backend.layout import Ctx, Writer, size_of
from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.checker import Checker
from p4sim.runtime.model import CounterInfo, MeterInfo, Program, RegisterInfo, TableInfo
from p4sim.runtime.tables import BoundAction


class Compiler(EmitWalk):
    """Compiles the blocks of a checked v1model program into Python."""

    # ------------------------------------------------------------------ top level
    def compile(self) -> Program:
        fns = self.compile_blocks()
        source = "\n".join(self.funcs + self.tail) + "\n"
        ns = self.ns
        exec(compile(source, "<p4sim-generated>", "exec"), ns)
        for ti in self.tables.values():
            tbl = ti.table
            for ar in ti.actions:
                ai = self.actions[ar.fqname]
                tbl.actions[ar.fqname] = BoundAction(ar.fqname, ns[ar.fn_name], [p.width for p in ai.params], ar.scope)
            tbl.set_default(tbl.actions[ti.default_action], ti.default_args)
        m_t, m_base = self.meta
        assert self.sm_type is not None
        return Program(
            source=source, namespace=ns, template=self.template, errors=list(self.ck.errors), sm=self.sm,
            hidden=self.hidden, parser=ns[fns["parser"]], verify=ns[fns["verify"]],
            ingress=ns[fns["ingress"]], egress=ns[fns["egress"]], compute=ns[fns["compute"]],
            deparser=ns[fns["deparser"]], tables=self.tables, actions=self.actions,
            counters=self.counters, direct_counters=self.direct_counters, registers=self.registers,
            meters=self.meters,
            profiles=self.profiles, digests=self.digests, controller_headers=self.controller_headers(),
            field_lists=self.field_lists(m_t, m_base), ctx=self.ctx_obj, warnings=self.warnings,
            metadata_slots=(range(m_base, m_base + size_of(m_t)),
                            range(self.sm_base, self.sm_base + size_of(self.sm_type))),
            ser_enums={sym.name: (sym.underlying.width, dict(sym.values)) for sym in self.ck.glob.names.values()
                       if isinstance(sym, T.Enum) and sym.underlying is not None},
        )

    # ------------------------------------------------------------------ the walk's hooks: Python text
    def declare(self, name: str, code: str) -> str:
        return f"{name} = {code}"

    def scope(self, w: Writer) -> AbstractContextManager[None]:
        return nullcontext()

    def call_code(self, fn: str, args: Sequence[str], packet: bool = False) -> str:
        return f"{fn}(s{', pk' if packet else ''}{''.join(', ' + a for a in args)})"

    def define(self, kind: str, name: str, params: list[str], lines: list[str], ret: T.Type | None = None) -> None:
        ps = ["ob"] if kind == "deparser" else params
        self.funcs.append(f"def {name}(s{''.join(', ' + p for p in ps)}):")
        self.funcs.extend(lines or ["    pass"])

    def goto_state(self, w: Writer, state: str | None, names: dict[str, str]) -> None:
        w(f"return {self.state_ref(state, names)}")

    @staticmethod
    def state_ref(name: str | None, names: dict[str, str]) -> str:
        if name is None:
            return "_nomatch"
        if name == "accept":
            return "None"
        if name == "reject":
            return "_reject"
        return names[name]

    def select_table(self, tr: A.Transition, ktypes: list[T.Type], w: Writer, names: dict[str, str]) -> bool:
        """One key and constant values: a dict lookup."""
        if len(ktypes) != 1 or not all(
                isinstance(c.keyset, (A.Default, A.DontCare)) or (
                    not isinstance(c.keyset, (A.Mask, A.Range, A.TupleKeyset)) and c.keyset.const is not None)
                for c in tr.cases):
            return False
        table: dict[Any, str] = {}
        default = "_nomatch"
        for c in tr.cases:
            tgt = self.state_ref(c.state, names)
            if isinstance(c.keyset, (A.Default, A.DontCare)):
                default = tgt
                break
            table.setdefault(self.const_as(c.keyset, ktypes[0]), tgt)
        sel = self.uid("_SEL")
        self.tail.append(f"{sel} = {{{', '.join(f'{lit(k)}: {v}' for k, v in table.items())}}}")
        w(f"return {sel}.get(k0, {default})")
        return True

    def state_writer(self, pre: Writer, label: str, name: str) -> Writer:
        return Writer()

    def state_done(self, pre: Writer, w: Writer, label: str, name: str) -> None:
        self.funcs.append(f"def {label}(s, pk):")
        self.funcs.append(f"    if _T is not None: _T({'parser state ' + name!r})")
        self.funcs.extend(w.lines or ["    return None"])

    def parser_done(self, pre: Writer, names: dict[str, str], top: bool) -> str:
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

    def bind_extern(self, name: str, info: CounterInfo | RegisterInfo | MeterInfo) -> None:
        if isinstance(info, CounterInfo):
            self.ns[name + "p"], self.ns[name + "b"] = info.packets, info.bytes
        elif isinstance(info, RegisterInfo):
            self.ns[name] = info.values
        else:
            self.ns[name] = info.meters

    def table_function(self, d: A.TableDecl, ti: TableInfo, key_exprs: list[str], sel_exprs: list[str]) -> str:
        tbl = ti.table
        tn = self.uid("T")
        self.ns[tn] = tbl
        fname = self.uid(f"tbl_{d.name}_")
        fq = ti.fqname
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
        return fname

    def exit_stmt(self, w: Writer) -> None:
        w("raise _Exit")

    def action_run(self, code: str) -> str:
        return f"{code}[1]"

    def action_label(self, fq: str) -> str:
        return repr(fq)

    def peek_code(self, width: int) -> str:
        return f"_peek(pk, {width})"

    def packet_length_code(self) -> str:
        return "pk.n"

    def checksum_get(self, data: A.Expr, ctx: Ctx) -> str:
        buf, _ = self.field_list_bytes(data, ctx)
        return f"_csum16({buf})"


def compile_program(ck: Checker) -> Program:
    return Compiler(ck).compile()
