"""Actions and functions for the program walk of both engines (`p4sim.backend.emit_walk.EmitWalk`).

An action or function is compiled once per binding of its parameters (a "variant"): ``out``,
``inout`` and composite parameters are bound to the argument's storage, or, where that would
differ from copy-in/copy-out (`p4sim.backend.aliasing`), get storage of their own, copied in on entry
and out at every return; the other parameters are parameters of the generated function. A
function returning a header or struct writes its value into storage of the variant, which the
caller copies. The hooks that write text (``define``, ``declare`` ...) are the engines'.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from p4sim.backend.aliasing import outer_refs, overlaps
from p4sim.backend.emit_model import ModelWalk
from p4sim.backend.layout import Binding, Ctx, Py, Slot, Writer, size_of
from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.diagnostics import Unsupported
from p4sim.frontend.symbols import ActionSym, FunctionSym, Var


class CallWalk(ModelWalk):
    """Variants of actions and functions; the text hooks below are each back end's."""

    def scope(self, w: Writer) -> AbstractContextManager[None]:
        """A block statement's scope (its locals stay inside)."""
        raise NotImplementedError

    def call_code(self, fn: str, args: Sequence[str], packet: bool = False) -> str:
        """A call of a generated function (``packet``: a parser, which reads the packet)."""
        raise NotImplementedError

    def define(self, kind: str, name: str, params: list[str], lines: list[str], ret: T.Type | None = None) -> None:
        """A generated function: kind is control, deparser, action or function."""
        raise NotImplementedError

    def stmt(self, s: A.Stmt, ctx: Ctx, w: Writer) -> None:
        """A statement (`p4sim.backend.emit_walk.EmitWalk.stmt`)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ actions and functions
    def storage_range(self, e: A.Expr, ctx: Ctx) -> tuple[int, int] | None:
        """The slots [start, end) an expression may read or write: its own if it is a place (a
        slice: the sliced place), else those of its root variable (a run-time index); None if
        it has no storage."""
        base = e
        while isinstance(base, A.Slice):
            base = base.expr
        if self.is_place(base, ctx):
            p = self.place(base, ctx)
            return p, p + size_of(base.ty)
        while isinstance(base, (A.Member, A.Index, A.Slice)):
            base = base.expr
        b = ctx.env.get(base.ref) if isinstance(base, A.Name) else None
        return (b.base, b.base + size_of(base.ty)) if isinstance(b, Slot) else None

    def static_place(self, e: A.Expr, ctx: Ctx) -> bool:
        """A place, or a slice of one: code the callee can evaluate as well as the caller."""
        while isinstance(e, A.Slice):
            e = e.expr
        return self.is_place(e, ctx)

    def closed(self, e: A.Expr, ctx: Ctx) -> bool:
        """Whether the callee can evaluate ``e`` as well as the caller: constants, storage,
        functions of these (no names bound to the caller's own parameters)."""
        if e.const is not None:
            return True
        if isinstance(e, A.Name):
            return isinstance(ctx.env.get(e.ref), Slot)
        if isinstance(e, (A.Member, A.Slice, A.Unary, A.Cast)):
            return self.closed(e.expr, ctx)
        if isinstance(e, A.Index):
            return self.closed(e.expr, ctx) and self.closed(e.index, ctx)
        if isinstance(e, A.Binary):
            return self.closed(e.left, ctx) and self.closed(e.right, ctx)
        if isinstance(e, A.Cond):
            return all(self.closed(x, ctx) for x in (e.cond, e.then, e.other))
        if isinstance(e, A.ListExpr):
            return all(self.closed(x, ctx) for x in e.items)
        if isinstance(e, A.StructExpr):
            return all(self.closed(x, ctx) for _, x in e.fields)
        if isinstance(e, A.Call) and e.ref is not None and e.ref[0] == "function":
            return all(self.closed(x, ctx) for x in e.args)
        return False

    def must_copy(self, params: list[A.Param], args: Sequence[A.Expr], body: A.Block, ctx: Ctx,
                  values: bool = False) -> set[int]:
        """Indexes of the arguments passed by reference (out/inout, composite) that aliasing would
        get wrong (`p4sim.backend.aliasing`): a slice, a place computed at run time, storage the body (or
        another such argument) reaches too; with ``values`` (a function, whose call is an
        expression), also composite values (``f({1, 2})``)."""
        byref = [i for i, (p, a) in enumerate(zip(params, args, strict=False))
                 if p.direction in ("out", "inout") or isinstance(p.sym.type, (T.StructLike, T.Stack))]  # type: ignore[attr-defined]
        ranges = {i: self.storage_range(args[i], ctx) for i in byref}
        outer = [r for x in outer_refs(body, lambda n: isinstance(ctx.env.get(n.ref), Slot))
                 if (r := self.storage_range(x, ctx)) is not None]
        out = set()
        for i in byref:
            r = ranges[i]
            if not self.static_place(args[i], ctx):
                # a value, or a place computed at run time (h.s[i].f): copied by the callee if it
                # can evaluate it, else (an action's argument) copied in at the call
                if (r is not None or values) and self.closed(args[i], ctx):
                    out.add(i)
                continue
            assert r is not None
            if not self.is_place(args[i], ctx):
                out.add(i)  # a slice
            elif any(overlaps(r, o) for o in outer) or any(
                    j != i and q is not None and overlaps(r, q) for j, q in ranges.items()):
                out.add(i)
        return out

    def bind_args(self, params: list[A.Param], args: Sequence[A.Expr], ctx: Ctx, env: dict[Var, Binding],
                  prefix: str, w: Writer | None, refuse: str | None = None,
                  copy: set[int] | None = None) -> tuple[list[Any], list[str], list[str]]:
        """Bind the parameters that have arguments: out/inout and composite ones to the argument's
        storage (or, with ``w`` and no ``refuse`` message, to a copy of its value), the others to
        function parameters ``prefix_name``; those of ``copy`` are left out of ``env`` (`variant`
        gives them their own storage, copied in and out). With ``refuse``, every parameter needs an
        argument. Returns the binding key, the function parameters and the argument code for them."""
        binds: list[Any] = []
        names: list[str] = []
        codes: list[str] = []
        for i, (p, a) in enumerate(zip(params, args, strict=refuse is not None)):
            v: Var = p.sym  # type: ignore[attr-defined]
            if copy and i in copy:
                rng = self.storage_range(a, ctx)
                binds.append(("copy", p.direction, self.place(a, ctx) if self.is_place(a, ctx) else
                              (rng, a.hi.const, a.lo.const) if isinstance(a, A.Slice) and self.is_place(a.expr, ctx)
                              else id(a)))
            elif p.direction in ("out", "inout") or isinstance(v.type, (T.StructLike, T.Stack)):
                if self.is_place(a, ctx):
                    b = self.place(a, ctx)
                elif refuse is not None or w is None:
                    raise Unsupported(a.loc, refuse or "non-l-value composite action argument in an actions list")
                else:
                    b = self.alloc(v.type)
                    self.assign_to(b, v.type, a, ctx, w)
                env[v] = Slot(b)
                binds.append(b)
            else:
                self.check_param(v.type, p.loc)
                pn = f"{prefix}_{p.name}"
                env[v] = Py(pn)
                names.append(self.param_decl(pn, v.type))
                codes.append(self.ex_as(a, v.type, ctx))
                binds.append(None)
        return binds, names, codes

    def variant(self, key: Any, kind: str, d: A.ActionDecl | A.FunctionDecl, ctx: Ctx, env: dict[Var, Binding],
                params: list[str], ret: T.Type | None = None,
                copies: Sequence[tuple[A.Param, A.Expr]] = ()) -> str:
        """The generated function of an action or function for one binding ``key``, compiled once;
        the parameters of ``copies`` get their own storage: the argument copied in on entry
        (not for ``out``: a header starts invalid), copied out on every return, in order."""
        name = self.variants.get(key)
        if name is None:
            name = self.uid(f"{'act' if kind == 'action' else 'fn'}_{d.name}_")
            self.variants[key] = name
            env = dict(env)
            fw = Writer()
            outs: list[tuple[A.Expr, A.Expr]] = []
            for p, a in copies:
                v: Var = p.sym  # type: ignore[attr-defined]
                slot = self.alloc(v.type)
                env[v] = Slot(slot)
                if p.direction != "out":
                    self.assign_to(slot, v.type, a, ctx, fw)
                elif isinstance(v.type, T.StructLike) and v.type.kind == "header":
                    self.line(fw, f"s[{slot}] = {self.lit(False)}")
                if p.direction in ("out", "inout"):
                    ref = A.Name(p.loc, p.name)
                    ref.ref, ref.ty = v, v.type
                    outs.append((a, ref))
            fctx = Ctx(ctx.path, env, ctx.objs, kind, ret)
            if isinstance(ret, (T.StructLike, T.Stack)):  # returned through storage
                fctx.ret_slot = self.ret_slots[name] = self.alloc(ret)
            if outs:
                def epilogue(w: Writer) -> None:
                    for target, value in outs:
                        self.assign(target, value, Ctx(ctx.path, env, ctx.objs, kind, ret), w)
                fctx.epilogue = epilogue
            for x in d.body.stmts:
                self.stmt(x, fctx, fw)
            if fctx.epilogue is not None:
                fctx.epilogue(fw)
            self.define(kind, name, params, fw.lines, None if fctx.ret_slot is not None else ret)
        return name

    def action_variant(self, sym: ActionSym, dir_args: list[A.Expr], ctx: Ctx, w: Writer | None) -> tuple[str, list[str]]:
        """Compile (once per binding) the action with directional parameters bound to ``dir_args``
        (``w`` None: bound by a table, a control-plane visible action). Returns the function name
        and the argument code to pass for ``in`` parameters."""
        d = sym.decl
        if w is None:
            self.action_info(d, self.action_fq(sym, ctx))
        env = dict(ctx.env)
        copy = self.must_copy(d.params, dir_args, d.body, ctx) if w is not None else set()
        binds, params, args = self.bind_args(d.params, dir_args, ctx, env, "i", w, None, copy)
        for p in d.params[len(dir_args):]:
            v: Var = p.sym  # type: ignore[attr-defined]
            self.check_param(v.type, p.loc)
            vt = T.strip(v.type)
            # action data are the bits the control plane wrote: an int<N> parameter sign-extends them
            env[v] = Py(self.sx(f"d_{p.name}", vt.width) if isinstance(vt, T.Bits) and vt.signed else f"d_{p.name}")
            params.append(self.param_decl(f"d_{p.name}", v.type))
        return self.variant((ctx.path, id(sym), tuple(binds)), "action", d, ctx, env, params,
                            copies=[(d.params[i], dir_args[i]) for i in sorted(copy)]), args

    def function_variant(self, e: A.Call, sym: FunctionSym, ctx: Ctx) -> tuple[str, list[str]]:
        """The function's variant for this call (compiled once per binding of its out/inout
        parameters) and the argument code to pass."""
        d = sym.decl
        env = dict(ctx.env)
        copy = self.must_copy(d.proto.params, e.args, d.body, ctx, values=True)
        binds, params, args = self.bind_args(d.proto.params, e.args, ctx, env, "f", None,
                                             f"argument of function {d.name} that is not a variable or field", copy)
        name = self.variant((ctx.path, id(sym), tuple(binds)), "function", d, ctx, env, params, sym.ret,
                            [(d.proto.params[i], e.args[i]) for i in sorted(copy)])
        return name, args

    def function_call(self, e: A.Call, sym: FunctionSym, ctx: Ctx) -> str:
        """Code calling the function, as a value."""
        if isinstance(sym.ret, (T.StructLike, T.Stack)):
            raise Unsupported(e.loc, f"a {sym.ret} returned by a function used other than assigned whole")
        name, args = self.function_variant(e, sym, ctx)
        return self.call_code(name, args)

    def composite_call(self, base: int, t: T.Type, e: A.Expr, ctx: Ctx, w: Writer) -> bool:
        if not (isinstance(e, A.Call) and e.ref is not None and e.ref[0] == "function"):
            return False
        name, args = self.function_variant(e, e.ref[1], ctx)
        self.line(w, self.call_code(name, args))
        self.copy_slots(w, base, self.ret_slots[name], size_of(t))
        return True
