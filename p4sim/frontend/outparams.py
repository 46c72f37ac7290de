"""Uninitialised ``out`` parameters: p4c's ``uninitialized_out_param`` warning.

p4c warns "out parameter 'meta' may be uninitialized when 'P' terminates" when some path
through a parser (to ``accept`` or an explicit ``reject``), a control (to its end, or an
``exit``/``return``) or a function (to its end or a ``return``; also an extern instance's
abstract method implementation) leaves part of an ``out`` parameter unwritten. As in p4c,
headers (and header stacks and unions) are left out: an unwritten header is simply invalid;
what must be written are the other fields, at any depth of structs (``meta.new_flow.slot``).
Tofino does not zero its PHV containers, so on that target such a field holds garbage.

The analysis is a must-be-written set of field paths per program point:

* an assignment writes its target (a whole struct writes every field under it; a slice
  writes nothing); an argument given to an ``out`` or ``inout`` parameter of a call (extern
  method, function, action, parser or control) is written by the call;
* a direct action call writes what the action's body writes; a table apply writes what every
  one of its actions writes (the intersection);
* ``if``/``switch`` branches meet with an intersection (a ``switch`` without ``default`` also
  meets the path that runs no case); parser states meet the same way over the state graph,
  computed to a fixed point. The implicit ``reject`` of a failed ``extract`` or an unmatched
  ``select`` is not a path here, as in p4c.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.diagnostics import Warning_
from p4sim.frontend.symbols import ActionSym, FunctionSym, InstanceSym, TableSym, Var

Defs = frozenset[str]
WARNING = "uninitialized_out_param"


def out_param_warnings(prog: A.Program) -> list[Warning_]:
    """Warnings for every parser, control and function of a checked program."""
    found: list[Warning_] = []
    for d in prog.decls:
        if isinstance(d, A.ParserDecl):
            found += _Flow(d.name, d.params).parser(d)
        elif isinstance(d, A.ControlDecl):
            for loc in d.locals:
                found += _functions(loc)
            found += _Flow(d.name, d.params).control(d)
        else:
            found += _functions(d)
    return found


def _functions(d: A.Decl) -> list[Warning_]:
    """Functions declared at ``d``: a function, or an extern instance's abstract method bodies."""
    funcs = [d] if isinstance(d, A.FunctionDecl) else list(getattr(d, "initializer", None) or [])
    found: list[Warning_] = []
    for f in funcs:
        found += _Flow(f.name, f.proto.params).function(f)
    return found


def _leaves(ty: T.Type, path: str) -> list[str]:
    """The field paths of a value that must be written: none for headers, stacks and unions."""
    t = T.strip(ty)
    if isinstance(t, T.Stack):
        return []
    if isinstance(t, T.StructLike):
        if t.kind != "struct":
            return []
        return [leaf for name, ft in t.fields for leaf in _leaves(ft, f"{path}.{name}")]
    return [path]


class _Flow:
    """The must-be-written analysis of one parser, control or function."""

    def __init__(self, block: str, params: list[A.Param]) -> None:
        self.block = block
        self.outs: list[tuple[A.Param, Var, list[str]]] = []
        for p in params:
            v = getattr(p, "sym", None)
            if p.direction == "out" and isinstance(v, Var):
                leaves = _leaves(v.type, p.name)
                if leaves:
                    self.outs.append((p, v, leaves))
        self.all: list[str] = [leaf for _, _, leaves in self.outs for leaf in leaves]
        self.exits: list[Defs] = []  # the written sets at each exit (it ends the block)
        self.returns: list[Defs] = []  # ... at each return (it ends the action or the block)
        self.active: set[int] = set()  # actions being walked (no recursion in P4, but be safe)

    # ---------------------------------------------------------------- blocks
    def parser(self, d: A.ParserDecl) -> list[Warning_]:
        if not self.outs:
            return []
        states = {s.name: s for s in d.states}
        into: dict[str, Defs] = {"start": frozenset()}
        work = ["start"]
        while work:
            name = work.pop()
            st = states.get(name)
            if st is None:
                continue  # accept, reject: collected below
            cur: Defs | None = into[name]
            for s in st.stmts:
                cur = self.stmt(s, cur)
            assert cur is not None
            tr = st.transition
            for e in tr.select or []:
                cur = self.expr(e, cur)
            for tgt in [tr.target] if tr.target else [c.state for c in tr.cases]:
                old = into.get(tgt)
                new = cur if old is None else old & cur
                if new != old:
                    into[tgt] = new
                    work.append(tgt)
        ends = [into[s] for s in ("accept", "reject") if s in into]
        return self.report(ends)

    def control(self, d: A.ControlDecl) -> list[Warning_]:
        if not self.outs:
            return []
        end = self.stmt(d.body, frozenset())
        return self.report(self.exits + self.returns + ([end] if end is not None else []))

    def function(self, f: A.FunctionDecl) -> list[Warning_]:
        if not self.outs:
            return []
        end = self.stmt(f.body, frozenset())
        return self.report(self.exits + self.returns + ([end] if end is not None else []))

    def report(self, ends: list[Defs]) -> list[Warning_]:
        if not ends:
            return []
        written = frozenset.intersection(*ends)
        found = []
        for p, _, leaves in self.outs:
            missing = [leaf for leaf in leaves if leaf not in written]
            if missing:
                shown = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
                found.append(Warning_(p.loc, (
                    f"[{WARNING}] out parameter '{p.name}' may be uninitialized when '{self.block}' "
                    f"terminates (not written on every path: {shown})")))
        return found

    # ---------------------------------------------------------------- statements
    def stmt(self, s: A.Stmt, cur: Defs | None) -> Defs | None:
        """The written set after ``s``; None when no path goes on after it."""
        if cur is None:
            return None
        if isinstance(s, A.Block):
            for x in s.stmts:
                cur = self.stmt(x, cur)
            return cur
        if isinstance(s, A.Assign):
            cur = self.expr(s.value, cur)
            return self.write(s.target, cur)
        if isinstance(s, A.CallStmt):
            return self.expr(s.call, cur)
        if isinstance(s, A.VarDecl):
            return self.expr(s.init, cur) if s.init is not None else cur
        if isinstance(s, A.If):
            cur = self.expr(s.cond, cur)
            return _meet(self.stmt(s.then, cur), self.stmt(s.other, cur) if s.other is not None else cur)
        if isinstance(s, A.Switch):
            return self.switch(s, cur)
        if isinstance(s, A.Exit):
            self.exits.append(cur)
            return None
        if isinstance(s, A.Return):
            self.returns.append(self.expr(s.value, cur) if s.value is not None else cur)
            return None
        return cur

    def switch(self, s: A.Switch, cur: Defs) -> Defs | None:
        cur = self.expr(s.expr, cur)
        out: Defs | None = None
        has_default = False
        for c in s.cases:
            if c.label is None and c.value is None:
                has_default = True
            if c.body is not None:  # a case without a body falls through to the next one's
                out = _meet(out, self.stmt(c.body, cur))
        return out if has_default else _meet(out, cur)

    # ---------------------------------------------------------------- writes and calls
    def path(self, e: A.Expr) -> str | None:
        """``meta.a.b`` of an l-value rooted at one of the out parameters, else None."""
        if isinstance(e, A.Name):
            return e.name if any(e.ref is v for _, v, _ in self.outs) else None
        if isinstance(e, A.Member):
            base = self.path(e.expr)
            return None if base is None else f"{base}.{e.name}"
        return None  # a slice or stack element writes part of a field, or a header

    def write(self, target: A.Expr, cur: Defs) -> Defs:
        p = self.path(target)
        if p is None:
            return cur
        return cur | {leaf for leaf in self.all if leaf == p or leaf.startswith(p + ".")}

    def expr(self, e: A.Expr, cur: Defs) -> Defs:
        """The calls inside ``e``, innermost first."""
        for call in _calls(e):
            cur = self.call(call, cur)
        return cur

    def call(self, e: A.Call, cur: Defs) -> Defs:
        ref = e.ref
        params: list[A.Param] = []
        if isinstance(ref, tuple) and ref:
            kind = ref[0]
            if kind in ("func", "method") and isinstance(ref[-2], A.FunctionProto):
                params = ref[-2].params
            elif kind == "function" and isinstance(ref[1], FunctionSym):
                params = ref[1].decl.proto.params
            elif kind == "action" and isinstance(ref[1], ActionSym):
                params = ref[1].decl.params
                cur = self.action(ref[1], cur)
            elif kind == "control" and isinstance(ref[1], InstanceSym) and isinstance(ref[1].type, T.Block):
                params = list(getattr(ref[1].type.decl, "params", []))
            elif kind == "table" and isinstance(ref[1], TableSym):
                cur = self.table(ref[1], cur)
        for p, a in zip(params, e.args, strict=False):
            if p.direction in ("out", "inout"):
                cur = self.write(a, cur)
        return cur

    def action(self, sym: ActionSym, cur: Defs) -> Defs:
        if id(sym) in self.active:
            return cur
        self.active.add(id(sym))
        saved = self.returns
        self.returns = []
        out = self.stmt(sym.decl.body, cur)
        returned = self.returns
        self.returns = saved
        self.active.discard(id(sym))
        # an action goes on to its caller from its end or a return (an exit ends the block)
        paths = returned + ([out] if out is not None else [])
        return frozenset.intersection(*paths) if paths else cur

    def table(self, t: TableSym, cur: Defs) -> Defs:
        syms = [a for a, _ in t.actions] + ([t.default[0]] if t.default is not None else [])
        if not syms:
            return cur
        return frozenset.intersection(*(self.action(a, cur) for a in syms))


def _meet(a: Defs | None, b: Defs | None) -> Defs | None:
    if a is None:
        return b
    if b is None:
        return a
    return a & b


def _calls(e: object) -> Iterator[A.Call]:
    """Every call in an expression tree, arguments before the call that takes them."""
    if isinstance(e, A.Expr):
        for f in dataclasses.fields(e):
            yield from _calls(getattr(e, f.name))
        if isinstance(e, A.Call):
            yield e
    elif isinstance(e, list):
        for x in e:
            yield from _calls(x)
