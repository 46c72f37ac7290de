"""Assignments for both engines' expression compilers: a value stored into a place (a scalar, a
slice, slices of slices, a whole header, struct, stack, tuple or varbit), from a list or struct
expression, a header ``lookahead``, or a function returning a header or struct.
"""

from __future__ import annotations

from p4sim.backend.codegen import ExprCompiler
from p4sim.backend.layout import Ctx, Writer, field_offset, leaf_bits, size_of
from p4sim.frontend import ast as A
from p4sim.frontend import types as T


class AssignCompiler(ExprCompiler):
    """Stores into places; the text of a slot write is the engine's (``slot_write``)."""

    def assign(self, target: A.Expr, value: A.Expr, ctx: Ctx, w: Writer) -> None:
        tt = target.ty
        while isinstance(target, A.Slice) and isinstance(target.expr, A.Slice):
            # x[7:4][3:0][1:0] = v is x[5:4] = v
            inner = target.expr
            lo = int(inner.lo.const) + int(target.lo.const)
            hi = int(inner.lo.const) + int(target.hi.const)
            bounds = [A.Number(target.loc, n, None, False) for n in (hi, lo)]
            for b in bounds:
                b.const, b.ty = b.value, T.INT
            target = A.Slice(target.loc, inner.expr, bounds[0], bounds[1])
            target.ty = tt
        if isinstance(target, A.Slice):
            base = target.expr
            bt = T.strip(base.ty)
            assert isinstance(bt, T.Bits)
            self.check_type(bt, target.loc)
            hi, lo = int(target.hi.const), int(target.lo.const)
            m = ((1 << (hi - lo + 1)) - 1) << lo
            cur = self.ex(base, ctx)
            v = self.ex_as(value, tt, ctx)
            newv = f"(({cur} & {bt.mask ^ m}) | (({self.widen(v, bt.width)} << {lo}) & {m}))"
            if bt.signed:
                newv = self.sx(newv, bt.width)
            self.assign_code(base, newv, ctx, w)
            return
        if isinstance(tt, (T.StructLike, T.Stack, T.Varbit, T.Tuple)):
            slot = self.place(target, ctx)
            self.assign_to(slot, tt, value, ctx, w)
            if isinstance(tt, T.StructLike) and tt.kind == "header":
                self.invalidate_siblings(target, ctx, w, when=f"s[{slot}]")
            return
        self.assign_code(target, self.ex_as(value, tt, ctx), ctx, w)

    def assign_code(self, target: A.Expr, code: str, ctx: Ctx, w: Writer) -> None:
        self.store(target, code, ctx, w)

    def assign_to(self, base: int, t: T.Type, value: A.Expr, ctx: Ctx, w: Writer) -> None:
        """Store ``value`` into the storage of type ``t`` at ``base``."""
        if isinstance(t, (T.StructLike, T.Stack, T.Varbit, T.Tuple)):
            v = value
            while isinstance(v, A.Cast):
                v = v.expr
            if isinstance(v, A.ListExpr) and isinstance(t, T.Tuple):
                off = base
                for it_t, item in zip(t.items, v.items, strict=True):
                    self.assign_to(off, it_t, item, ctx, w)
                    off += size_of(it_t)
                return
            if isinstance(v, (A.ListExpr, A.StructExpr)) and isinstance(t, T.StructLike):
                if t.kind == "header":
                    self.line(w, f"s[{base}] = {self.lit(True)}")
                items = v.items if isinstance(v, A.ListExpr) else [dict(v.fields)[n] for n, _ in t.fields]
                for (n, ft), item in zip(t.fields, items, strict=True):
                    self.assign_to(base + field_offset(t, n), ft, item, ctx, w)
                return
            if self.is_place(v, ctx):
                src = self.place(v, ctx)
                if src != base:
                    self.copy_slots(w, base, src, size_of(t))
                return
            if self.is_header_lookahead(v) and isinstance(t, T.StructLike):
                self.lookahead_header(w, base, t)
                return
            if self.composite_call(base, t, v, ctx, w):
                return
            raise self.unsupported(value.loc, f"this kind of {t} value")
        self.line(w, self.slot_write(str(base), t, self.ex_as(value, t, ctx)))

    def composite_call(self, base: int, t: T.Type, e: A.Expr, ctx: Ctx, w: Writer) -> bool:
        """Store the header or struct a function call ``e`` returns at ``base``, if it is one
        (`p4sim.backend.emit_calls.CallWalk`)."""
        return False

    def copy_slots(self, w: Writer, dst: int, src: int, n: int) -> None:
        w(f"s[{dst}:{dst + n}] = s[{src}:{src + n}]")

    def lookahead_header(self, w: Writer, base: int, t: T.StructLike) -> None:
        """Store ``pkt.lookahead<H>()`` (not consuming the bits) into header ``base``."""
        nbits = T.width_of(t)
        w(f"v = _peek(pk, {nbits})")
        for i, off, fw, ft in leaf_bits(t):
            w(f"s[{base + i}] = {self.field_code('v', nbits - off - fw, fw, ft)}")
        w(f"s[{base}] = True")
