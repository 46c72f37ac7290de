"""The one walk over a checked v1model program that both engines' code generators share.

`EmitWalk` visits the program once for either back end: the V1Switch blocks and their parameter
bindings, parser states and select transitions, controls and their locals, actions and functions
(compiled once per binding of their directional parameters), statements, switches, calls and
applications of sub-controls; extern instances and tables, with the control-plane model they
make, are its base `p4sim.backend.emit_model.ModelWalk`, actions and functions `p4sim.backend.emit_calls.CallWalk`. What differs between the engines is
only the text: each per-node hook below (``define``, ``line``, ``if_``, ``goto_state`` ...) is
written once for Python (`p4sim.backend.compiler.Compiler`) and once for C
(`p4sim.native.ccompiler.CCompiler`). Expressions, places and extern calls are the
expression layer's (`p4sim.backend.codegen`, `p4sim.backend.codegen_externs`, `p4sim.native.cexpr`).
"""

from __future__ import annotations

from typing import Any

from p4sim.backend.emit_calls import CallWalk
from p4sim.backend.layout import Binding, Ctx, InstanceArg, PacketParam, Slot, Writer, field_offset
from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.diagnostics import CompileError, Loc, Unsupported, Warning_
from p4sim.frontend.symbols import ActionSym, InstanceSym, TableSym, Var

ROLES = {  # V1Switch block -> the kinds of its parameters
    "parser": ["in", "H", "M", "SM"], "verify": ["H", "M"], "ingress": ["H", "M", "SM"],
    "egress": ["H", "M", "SM"], "compute": ["H", "M"], "deparser": ["out", "H"],
}


class EmitWalk(CallWalk):
    """The program walk; subclasses give the text of each node in their language."""

    # ------------------------------------------------------------------ hooks (per back end)
    def goto_state(self, w: Writer, state: str | None, names: dict[str, str]) -> None:
        """Leave a parser state for ``state`` (None: no select case matched)."""
        raise NotImplementedError

    def select_table(self, tr: A.Transition, ktypes: list[T.Type], w: Writer, names: dict[str, str]) -> bool:
        """A faster form of a select transition, if the back end has one for it."""
        return False

    def states_begin(self, pre: Writer, names: dict[str, str]) -> None:
        """Before the first state of a parser (``pre`` holds its locals)."""

    def state_writer(self, pre: Writer, label: str, name: str) -> Writer:
        raise NotImplementedError

    def state_done(self, pre: Writer, w: Writer, label: str, name: str) -> None:
        raise NotImplementedError

    def parser_done(self, pre: Writer, names: dict[str, str], top: bool) -> str:
        raise NotImplementedError

    def exit_stmt(self, w: Writer) -> None:
        raise NotImplementedError

    def action_run(self, code: str) -> str:
        """The action-run part of a table application's result."""
        raise NotImplementedError

    def action_label(self, fq: str) -> str:
        """The value of ``action_run`` when action ``fq`` ran."""
        raise NotImplementedError

    def peek_code(self, width: int) -> str:
        raise NotImplementedError

    def packet_length_code(self) -> str:
        raise NotImplementedError

    def checksum_get(self, data: A.Expr, ctx: Ctx) -> str:
        raise NotImplementedError

    # ------------------------------------------------------------------ top level
    def compile_blocks(self) -> dict[str, str]:
        """Compile the six V1Switch blocks; their generated function names by role. Allocates the
        headers, metadata and standard metadata (``self.meta``, ``self.sm``)."""
        ck = self.ck
        main = ck.main
        assert main is not None
        pkg = main.type
        if not (isinstance(pkg, T.Block) and pkg.decl.name == "V1Switch"):
            raise Unsupported(main.loc, f"package {pkg} (only v1model's V1Switch)")
        for d in ck.prog.decls:  # top-level extern instances (a register shared by ingress and egress)
            if isinstance(d, A.Instantiation) and isinstance(d.sym.type, T.Extern):  # type: ignore[attr-defined]
                self.instance(d.sym, Ctx("", {}, self.global_objs, "control"))  # type: ignore[attr-defined]
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
        if not isinstance(blocks[0], A.ParserDecl):
            raise CompileError(blocks[0].loc, "the first V1Switch argument must be a parser")
        for b in blocks[1:]:
            if not isinstance(b, A.ControlDecl):
                raise CompileError(b.loc, "V1Switch arguments 2-6 must be controls")
        prs = blocks[0]
        pvars = [p.sym for p in prs.params]  # type: ignore[attr-defined]
        if len(pvars) != 4:
            raise CompileError(prs.loc, "the v1model parser takes 4 parameters")
        h_t, m_t, sm_t = pvars[1].type, pvars[2].type, pvars[3].type
        h_base, m_base, sm_base = self.alloc(h_t), self.alloc(m_t), self.alloc(sm_t)
        assert isinstance(sm_t, T.StructLike)
        self.sm_base, self.sm_type = sm_base, sm_t
        self.meta: tuple[T.Type, int] = (m_t, m_base)
        self.sm = {n: sm_base + field_offset(sm_t, n) for n, _ in sm_t.fields}
        self.pktlen = self.sm["packet_length"]
        types = {"H": h_t, "M": m_t, "SM": sm_t}
        bases = {"H": h_base, "M": m_base, "SM": sm_base}

        def bind(decl: A.ParserDecl | A.ControlDecl, kinds: list[str]) -> dict[Var, Binding]:
            env: dict[Var, Binding] = dict(ctor_env)
            if len(decl.params) != len(kinds):
                raise CompileError(decl.loc, f"{decl.name} must take {len(kinds)} parameters for its V1Switch role")
            for p, k in zip(decl.params, kinds, strict=True):
                v: Var = p.sym  # type: ignore[attr-defined]
                if k in ("in", "out"):
                    if not (isinstance(v.type, T.Extern) and v.type.decl.name == ("packet_in" if k == "in" else "packet_out")):
                        raise CompileError(p.loc, f"{decl.name}.{p.name} must be a packet_{k}")
                    env[v] = PacketParam(k)
                else:
                    if v.type != types[k] and v.type is not types[k]:
                        raise CompileError(p.loc, f"{decl.name}.{p.name} has type {v.type}, expected {types[k]}")
                    env[v] = Slot(bases[k])
            return env

        fns = {}
        for (role, kinds), blk in zip(ROLES.items(), blocks, strict=True):
            if isinstance(blk, A.ParserDecl):
                fns[role] = self.parser(blk, bind(blk, kinds))
            else:
                assert isinstance(blk, A.ControlDecl)
                fns[role] = self.control(blk, bind(blk, kinds), blk.name, deparser=role == "deparser")
        return fns

    # ------------------------------------------------------------------ parser
    def parser(self, d: A.ParserDecl, env: dict[Var, Binding], path: str = "",
               objs: dict[Any, str] | None = None) -> str:
        """The parser's function; ``objs``: the instance's objects, shared by its applications."""
        ctx = Ctx(path or d.name, dict(env), dict(self.global_objs) if objs is None else objs, "parser")
        pre = Writer()
        for loc in d.locals:
            self.local(loc, ctx, pre)
        names = {s.name: self.uid(f"ps_{s.name}_") for s in d.states}
        self.states_begin(pre, names)
        for st in d.states:
            w = self.state_writer(pre, names[st.name], st.name)
            for x in st.stmts:
                self.stmt(x, ctx, w)
            self.transition(st.transition, ctx, w, names)
            self.state_done(pre, w, names[st.name], st.name)
        return self.parser_done(pre, names, not path)

    def transition(self, tr: A.Transition, ctx: Ctx, w: Writer, names: dict[str, str]) -> None:
        if tr.target is not None:
            self.goto_state(w, tr.target, names)
            return
        assert tr.select is not None
        ktypes = [k.ty for k in tr.select]
        with self.scope(w):
            keys = [self.ex(k, ctx) for k in tr.select]
            for i, k in enumerate(keys):
                self.line(w, self.declare(f"k{i}", k))
            if self.select_table(tr, ktypes, w, names):
                return
            for c in tr.cases:
                with self.if_(w, self.keyset_cond(c.keyset, ktypes)):
                    self.goto_state(w, c.state, names)
            self.goto_state(w, None, names)

    def keyset_cond(self, ks: A.Expr, ktypes: list[T.Type]) -> str:
        if isinstance(ks, (A.Default, A.DontCare)):
            return self.lit(True)
        items = ks.items if isinstance(ks, A.TupleKeyset) else [ks]
        conds = []
        for i, (it, kt) in enumerate(zip(items, ktypes, strict=True)):
            if isinstance(it, (A.Default, A.DontCare)):
                continue
            if isinstance(it, A.Mask):
                m = self.const_as(it.mask, kt)
                conds.append(f"(k{i} & {self.lit(m)}) == {self.lit(self.const_as(it.value, kt) & m)}")
            elif isinstance(it, A.Range):
                lo, hi = self.lit(self.const_as(it.low, kt)), self.lit(self.const_as(it.high, kt))
                conds.append(f"({self.compare('<=', lo, f'k{i}', kt)}{self.AND}{self.compare('<=', f'k{i}', hi, kt)})")
            else:
                conds.append(f"k{i} == {self.lit(self.const_as(it, kt))}")
        return self.AND.join(conds) or self.lit(True)

    # ------------------------------------------------------------------ controls
    def control(self, d: A.ControlDecl, env: dict[Var, Binding], path: str, deparser: bool = False,
                objs: dict[Any, str] | None = None) -> str:
        ctx = Ctx(path, dict(env), dict(self.global_objs) if objs is None else objs, "control")
        pre = Writer()
        for loc in d.locals:
            self.local(loc, ctx, pre)
        w = Writer()
        for x in d.body.stmts:
            self.stmt(x, ctx, w)
        name = self.uid(f"ctl_{d.name}_")
        self.define("deparser" if deparser else "control", name, [], pre.lines + w.lines)
        return name

    def local(self, d: A.Decl, ctx: Ctx, w: Writer) -> None:
        if isinstance(d, A.VarDecl):
            self.var_decl(d, ctx, w)
        # an instance applied again has its objects already
        elif isinstance(d, A.Instantiation) and d.sym not in ctx.objs:  # type: ignore[attr-defined]
            self.instance(d.sym, ctx)  # type: ignore[attr-defined]
        elif isinstance(d, A.TableDecl) and d.sym not in ctx.objs:  # type: ignore[attr-defined]
            self.table(d.sym, ctx)  # type: ignore[attr-defined]
        # constants are folded; actions and functions are compiled where used (only table
        # actions are in P4Info, as in p4c)

    def var_decl(self, d: A.VarDecl, ctx: Ctx, w: Writer) -> None:
        v: Var = d.sym  # type: ignore[attr-defined]
        base = self.alloc(v.type)
        ctx.env[v] = Slot(base)
        if d.init is not None:
            self.assign_to(base, v.type, d.init, ctx, w)
        elif isinstance(v.type, T.StructLike) and v.type.kind == "header":
            self.line(w, f"s[{base}] = {self.lit(False)}")

    # ------------------------------------------------------------------ statements
    def stmt(self, s: A.Stmt, ctx: Ctx, w: Writer) -> None:
        if isinstance(s, A.Block):
            with self.scope(w):
                for x in s.stmts:
                    self.stmt(x, ctx, w)
        elif isinstance(s, A.Assign):
            self.assign(s.target, s.value, ctx, w)
        elif isinstance(s, A.CallStmt):
            assert isinstance(s.call, A.Call)
            self.call_stmt(s.call, ctx, w)
        elif isinstance(s, A.If):
            with self.if_(w, self.ex(s.cond, ctx)):
                self.stmt(s.then, ctx, w)
            if s.other is not None:
                with self.if_(w, None, "else"):
                    self.stmt(s.other, ctx, w)
        elif isinstance(s, A.Exit):
            self.exit_stmt(w)
        elif isinstance(s, A.Return):
            if s.value is not None and ctx.ret_slot is not None:
                self.assign_to(ctx.ret_slot, ctx.ret, s.value, ctx, w)  # type: ignore[arg-type]
                if ctx.epilogue is not None:
                    ctx.epilogue(w)
                self.line(w, "return")
            elif s.value is not None and ctx.ret is not None:
                code = self.ex_as(s.value, ctx.ret, ctx)
                if ctx.epilogue is not None:
                    with self.scope(w):
                        self.line(w, self.declare("rv_", code))
                        ctx.epilogue(w)
                        self.line(w, "return rv_")
                else:
                    self.line(w, f"return {code}")
            else:
                if ctx.epilogue is not None:
                    ctx.epilogue(w)
                self.line(w, "return")
        elif isinstance(s, A.Switch):
            self.switch(s, ctx, w)
        elif isinstance(s, A.VarDecl):
            self.var_decl(s, ctx, w)
        elif not isinstance(s, (A.ConstDecl, A.Empty)):
            raise Unsupported(s.loc, type(s).__name__)

    def switch(self, s: A.Switch, ctx: Ctx, w: Writer) -> None:
        """``switch`` on a value (constant labels) or on a table's ``action_run``; labels without a
        body fall through to the next body."""
        r = self.uid("_r")
        with self.scope(w):
            labels: list[tuple[str | None, A.Stmt | None]] = []
            if not isinstance(s.expr.ty, T.ActionEnum):
                self.line(w, self.declare(r, self.ex(s.expr, ctx)))
                for c in s.cases:
                    labels.append((None if c.value is None else self.lit(self.const_as(c.value, s.expr.ty)), c.body))
            else:
                call = s.expr
                assert isinstance(call, A.Member)
                tsym = call.expr.ref[1] if isinstance(call.expr, A.Call) else None
                assert isinstance(tsym, TableSym)
                self.line(w, self.declare(r, self.action_run(self.ex(call.expr, ctx))))
                for c in s.cases:
                    if c.label is None:
                        labels.append((None, c.body))
                        continue
                    act = next(a for a, _ in tsym.actions if a.decl.name == c.label)
                    labels.append((self.action_label(self.action_fq(act, ctx)), c.body))
            pending: list[str] = []
            first = True
            for label, body in labels:
                if label is None:
                    if body is not None:
                        with self.if_(w, self.lit(True)) if first else self.if_(w, None, "else"):
                            self.stmt(body, ctx, w)
                    break
                pending.append(label)
                if body is None:
                    continue
                with self.if_(w, self.OR.join(f"{r} == {p}" for p in pending), "if" if first else "elif"):
                    self.stmt(body, ctx, w)
                first = False
                pending = []

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
            return "(" + self.OR.join(f"s[{base + field_offset(u, n)}]" for n, _ in u.fields) + ")"
        if kind == "table":
            return self.call_code(self.table_fn(ref[1], ctx, e.loc), [])
        if kind == "function":
            return self.function_call(e, ref[1], ctx)
        if kind == "method":
            _, ext, m, _obj, _proto, tv = ref
            if ext == "packet_in" and m == "lookahead":
                st = T.strip(tv["T"])
                if not isinstance(st, T.Bits):
                    raise self.unsupported(e.loc, f"lookahead of {tv['T']} used as a whole value")
                return self.sx(self.peek_code(st.width), st.width) if st.signed else self.peek_code(st.width)
            if ext == "packet_in" and m == "length":
                return self.packet_length_code()
            if ext == "Checksum16" and m == "get":
                return self.checksum_get(e.args[0], ctx)
        raise self.unsupported(e.loc, f"call of {self.call_name(e)} as an expression")

    def call_name(self, e: A.Call) -> str:
        f = e.func
        return f.name if isinstance(f, (A.Name, A.Member)) else "?"

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
                self.store(e.func.expr, self.lit(m == "setValid"), ctx, w)
                if m == "setValid":
                    self.invalidate_siblings(e.func.expr, ctx, w)
        elif kind == "union":
            pass
        elif kind == "stack":
            assert isinstance(e.func, A.Member)
            self.stack_op(e.func.expr, ref[1], int(e.args[0].const), ctx, w)
        elif kind == "table":
            self.line(w, self.call_code(self.table_fn(ref[1], ctx, e.loc), []))
        elif kind == "action":
            sym: ActionSym = ref[1]
            ndir = len([p for p in sym.decl.params if p.direction])
            fn, args = self.action_variant(sym, e.args[:ndir], ctx, w)
            data = [self.ex_as(a, p.sym.type, ctx)  # type: ignore[attr-defined]
                    for p, a in zip(sym.decl.params[ndir:], e.args[ndir:], strict=True)]
            self.line(w, self.call_code(fn, args + data))
        elif kind == "control":
            self.apply_control(e, ref[1], ctx, w)
        elif kind == "function":
            self.line(w, self.call_code(*self.function_variant(e, ref[1], ctx)))
        elif kind == "func":
            self.extern_func(e, ref[1], ref[3], ctx, w)
        elif kind == "method":
            self.extern_method(e, ctx, w)
        else:
            raise self.unsupported(e.loc, f"call of {self.call_name(e)}")

    def apply_control(self, e: A.Call, inst: InstanceSym, ctx: Ctx, w: Writer) -> None:
        """A sub-control or sub-parser, compiled here with its parameters bound to the arguments'
        storage (copy-in/copy-out by aliasing); a reject in a sub-parser rejects the packet. An
        instance applied again is compiled again for its new arguments, sharing its tables and
        externs with the first application (a control with tables only with the same arguments:
        a table is compiled for one binding of its keys and actions)."""
        owner = ctx.path
        given = ctx.env.get(inst) if isinstance(inst, Var) else None
        if isinstance(given, InstanceArg):  # a constructor parameter: the instance given for it
            inst, owner = given.inst, given.owner
        t = inst.type
        assert isinstance(t, T.Block) and isinstance(t.decl, (A.ControlDecl, A.ParserDecl))
        decl = t.decl
        key = (owner, id(inst))
        first = self.applied.get(key)
        copies: dict[int, int] = {}
        env: dict[Var, Binding] = self.ctor_bindings(decl, inst.args, ctx)
        for i, (p, a) in enumerate(zip(decl.params, e.args, strict=True)):
            v: Var = p.sym  # type: ignore[attr-defined]
            if isinstance(v.type, T.Extern):
                b = ctx.env.get(a.ref) if isinstance(a, A.Name) else None
                if not isinstance(b, PacketParam):
                    raise Unsupported(a.loc, "extern argument other than the packet to a control or parser")
                env[v] = b
            elif self.is_place(a, ctx):
                env[v] = Slot(self.place(a, ctx))
            else:  # a value: copied into the instance's own storage for this parameter
                copy = first[2].get(i) if first is not None else None
                base = copy if copy is not None else self.alloc(v.type)
                self.assign_to(base, v.type, a, ctx, w)
                env[v] = Slot(base)
                if first is None:
                    copies[i] = base
        binding = [env[p.sym] for p in decl.params]  # type: ignore[attr-defined]
        if first is None:
            objs: dict[Any, str] = dict(self.global_objs)
            self.applied[key] = (objs, binding, copies)
        else:
            objs = first[0]
            has_tables = any(isinstance(d, A.TableDecl) for d in decl.locals)
            if has_tables and binding != first[1]:
                raise Unsupported(e.loc, f"applying control instance {inst.name}, which has tables, "
                                  "again with other arguments")
        path = given.path if isinstance(given, InstanceArg) else ctx.objs[inst]
        if isinstance(decl, A.ParserDecl):
            self.line(w, self.call_code(self.parser(decl, env, path, objs), [], packet=True))
        else:
            self.line(w, self.call_code(self.control(decl, env, path, objs=objs), []))

