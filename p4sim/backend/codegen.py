"""Code generation of expressions, places and assignments, shared by both engines, in Python.

Per-packet state is one flat list ``s`` (the layout is `p4sim.backend.layout`). An expression compiles to
a Python expression string over ``s`` and the Python locals that hold action data; an l-value
compiles to a slot index (or, below a variable header stack index, to slot code plus a bounds
guard). `ExprCompiler` holds the state of one compilation and the one walk over expressions,
places and assignments; what is language-specific is a small hook (``lit``, ``not_``,
``cond_``, ``line``, ``if_``, ``copy_slots``, ``shift_code`` ...) that the native engine's C
generator (`p4sim.native.cexpr`) overrides.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from p4sim.backend.aliasing import has_call
from p4sim.backend.layout import (
    HIDDEN,
    Binding,
    Ctx,
    Py,
    Slot,
    Writer,
    defaults,
    field_offset,
    scalar_width,
    size_of,
)
from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.checker import Checker
from p4sim.frontend.diagnostics import CompileError, Loc, Unsupported, Warning_
from p4sim.runtime import primitives as R
from p4sim.runtime.model import (
    ActionInfo,
    CounterInfo,
    DigestInfo,
    DirectCounterInfo,
    MeterInfo,
    ProfileInfo,
    RegisterInfo,
    TableInfo,
)


def lit(v: Any) -> str:
    if isinstance(v, bool):
        return "True" if v else "False"
    return repr(v)


class ExprCompiler:
    """State of one compilation and the expression/assignment code generator."""

    def __init__(self, ck: Checker) -> None:
        self.ck = ck
        self.funcs: list[str] = []
        self.tail: list[str] = []
        self.ns: dict[str, Any] = {
            "_PErr": R.ParserError, "_Exit": R.ExitBlock, "_sx": R.sx, "_div": R.div, "_mod": R.mod,
            "_shl": R.shl, "_sat": R.sat, "_peek": R.peek, "_csum16": R.csum16, "_csum16i": R.csum16i, "_H": R.HASHES,
            "_pack": R.pack_bits,
            "_rnd": R.rnd, "_T": None,
        }
        self.template: list[Any] = [0] * len(HIDDEN)
        self.hidden = {n: i for i, n in enumerate(HIDDEN)}
        self.ids = itertools.count()
        self.tables: dict[str, TableInfo] = {}
        self.actions: dict[str, ActionInfo] = {}
        self.counters: dict[str, CounterInfo] = {}
        self.direct_counters: dict[str, DirectCounterInfo] = {}
        self.registers: dict[str, RegisterInfo] = {}
        self.meters: dict[str, MeterInfo] = {}
        self.profiles: dict[str, ProfileInfo] = {}
        self.digests: dict[str, DigestInfo] = {}
        self.variants: dict[Any, str] = {}
        self.global_objs: dict[Any, str] = {}  # extern instances declared at the top level
        self.ret_slots: dict[str, int] = {}  # function variant returning a header/struct -> its value's storage
        self.extern_fq: dict[str, str] = {}  # generated name of a counter/register/meter -> its fq name
        # (path, instance) of an applied sub-control/parser -> its objects, its parameters' bindings
        # and the storage of the parameters given values (not places), by parameter index
        self.applied: dict[Any, tuple[dict[Any, str], list[Binding], dict[int, int]]] = {}
        self.sm_base = -1
        self.sm_type: T.StructLike | None = None
        self.pktlen = -1
        self.sm: dict[str, int] = {}  # standard_metadata field -> slot (set by the compiler)
        self.err = {n: i for i, n in enumerate(ck.errors)}
        self.ctx_obj = RunCtx()
        self.apply_sites: dict[str, list[Loc]] = {}
        self.warnings: list[Warning_] = []
        self.ns["CTX"] = self.ctx_obj

    # ------------------------------------------------------------------ helpers
    def uid(self, prefix: str) -> str:
        return f"{prefix}{next(self.ids)}"

    def alloc(self, t: T.Type) -> int:
        base = len(self.template)
        self.template.extend(defaults(t))
        return base

    def fq(self, path: str, name: str, anns: list[A.Annotation]) -> str:
        return A.qualified_name(path, name, anns)

    def errcode(self, name: str) -> int:
        return self.err[name]

    def const_as(self, e: A.Expr, t: T.Type) -> Any:
        v = e.const
        st = T.strip(t)
        if isinstance(st, T.Bits) and isinstance(v, int) and not isinstance(v, bool):
            return self.ck.convert_const(v, e.ty, st)
        return v

    # ------------------------------------------------------------------ places
    def is_place(self, e: A.Expr, ctx: Ctx) -> bool:
        if isinstance(e, A.Name):
            return isinstance(ctx.env.get(e.ref), Slot)
        if isinstance(e, A.Member):
            return not isinstance(e.expr.ty, T.Stack) and self.is_place(e.expr, ctx)
        if isinstance(e, A.Index):
            return e.index.const is not None and self.is_place(e.expr, ctx)
        return False

    def place(self, e: A.Expr, ctx: Ctx) -> int:
        if isinstance(e, A.Name):
            b = ctx.env.get(e.ref)
            if isinstance(b, Slot):
                return b.base
            raise CompileError(e.loc, f"{e.name} has no storage")
        if isinstance(e, A.Member):
            t = e.expr.ty
            if isinstance(t, T.Stack):
                raise Unsupported(e.loc, f"header stack member {e.name} outside extract")
            assert isinstance(t, T.StructLike)
            return self.place(e.expr, ctx) + field_offset(t, e.name)
        if isinstance(e, A.Index):
            t = e.expr.ty
            assert isinstance(t, T.Stack)
            return self.place(e.expr, ctx) + 1 + int(e.index.const) * size_of(t.elem)
        raise CompileError(e.loc, "expression is not an l-value")

    def declare(self, name: str, code: str) -> str:
        """A statement declaring a scalar local ``name`` holding ``code`` (each engine's)."""
        raise NotImplementedError

    def dyn_place(self, e: A.Expr, ctx: Ctx, w: Writer | None = None) -> tuple[str, list[str]]:
        """Slot index code for a place known only at run time (``stack.last``, ``stack[i]``
        with a variable ``i``) and the conditions under which it is in bounds. With ``w``, an
        index that calls a function is evaluated once, now, into a local (before the value
        stored: P4 evaluates an assignment's target first)."""
        if self.is_place(e, ctx):
            return str(self.place(e, ctx)), []
        if isinstance(e, A.Member) and isinstance(e.expr.ty, T.Stack) and e.name == "last":
            st = e.expr.ty
            sb = self.place(e.expr, ctx)
            return f"({sb + 1} + (s[{sb}] - 1) * {size_of(st.elem)})", [f"s[{sb}] > 0"]
        if isinstance(e, A.Index) and isinstance(e.expr.ty, T.Stack):
            st = e.expr.ty
            scode, guards = self.dyn_place(e.expr, ctx, w)
            idx = self.ex(e.index, ctx)
            if w is not None and has_call(e.index):
                tmp = self.uid("ix")
                self.line(w, self.declare(tmp, idx))
                idx = tmp
            return f"({scode} + 1 + {idx} * {size_of(st.elem)})", [*guards, f"{idx} < {st.size}"]
        if isinstance(e, A.Member) and isinstance(e.expr.ty, T.StructLike):
            code, guards = self.dyn_place(e.expr, ctx, w)
            return f"{code} + {field_offset(e.expr.ty, e.name)}", guards
        raise Unsupported(e.loc, "this header stack access")

    def union_siblings(self, e: A.Expr, ctx: Ctx) -> list[int]:
        """Validity slots of the other members if ``e`` is a member of a header union."""
        if isinstance(e, A.Member) and isinstance(e.expr.ty, T.StructLike) and e.expr.ty.kind == "header_union":
            if not self.is_place(e.expr, ctx):
                raise Unsupported(e.loc, "header union inside a header stack indexed at run time")
            base = self.place(e.expr, ctx)
            u = e.expr.ty
            return [base + field_offset(u, n) for n, _ in u.fields if n != e.name]
        return []

    # ------------------------------------------------------------------ the language's syntax
    # (Python here; the native engine's C compiler overrides these, p4sim/native/cexpr.py)
    AND = " and "  # boolean operators, with spaces around them
    OR = " or "

    def lit(self, v: Any) -> str:
        return lit(v)

    def not_(self, code: str) -> str:
        return f"(not {code})"

    def cond_(self, cond: str, then: str, other: str) -> str:
        return f"({then} if {cond} else {other})"

    def line(self, w: Writer, text: str) -> None:
        """One simple statement."""
        w(text)

    @contextmanager
    def _if(self, w: Writer, head: str) -> Iterator[None]:
        w(head)
        n = len(w.lines)
        with w.block():
            yield
            if len(w.lines) == n:
                w("pass")

    def if_(self, w: Writer, cond: str | None, kind: str = "if") -> AbstractContextManager[None]:
        """A conditional block: ``kind`` is "if", "elif" or "else" (``cond`` None)."""
        return self._if(w, "else:" if kind == "else" else f"{kind} {cond}:")

    def unsupported(self, loc: Loc | None, construct: str) -> CompileError:
        """The error for a construct this back end does not run."""
        return Unsupported(loc, construct)

    def check_type(self, t: T.Type, loc: Loc | None) -> None:
        """Refuse a type this back end cannot hold (the Python engine holds them all)."""

    # ------------------------------------------------------------------ places
    def invalidate_siblings(self, e: A.Expr, ctx: Ctx, w: Writer, when: str | None = None) -> None:
        """A union member became valid: the other members become invalid (P4 semantics)."""
        sib = self.union_siblings(e, ctx)
        if not sib:
            return
        with self.if_(w, when) if when is not None else nullcontext():
            for b in sib:
                self.line(w, f"s[{b}] = {self.lit(False)}")

    def load(self, e: A.Expr, ctx: Ctx) -> str:
        """Read a scalar place; out-of-bounds stack reads give 0 (undefined in P4)."""
        code, guards = self.dyn_place(e, ctx)
        if not guards:
            return self.slot_read(code, e.ty)
        return self.cond_(self.AND.join(guards), self.slot_read(code, e.ty), "0")

    def store(self, target: A.Expr, code: str, ctx: Ctx, w: Writer) -> None:
        """Write a scalar place; out-of-bounds stack writes are ignored (as P4 specifies)."""
        slot, guards = self.dyn_place(target, ctx, w)
        with self.if_(w, self.AND.join(guards)) if guards else nullcontext():
            self.line(w, self.slot_write(slot, target.ty, code))

    def widen(self, code: str, width: int) -> str:
        """The left operand of a shift into a value of `width` bits (C widens it to 64 bits
        first, or to 128 for a wider value)."""
        return code

    def sx(self, code: str, width: int) -> str:
        """The low ``width`` bits of ``code`` as a two's complement number (an ``int<width>``)."""
        return f"_sx({code}, {width})"

    def compare(self, op: str, a: str, b: str, t: T.Type) -> str:
        """``a op b`` for a comparison operator ``op`` of two values of type ``t``."""
        return f"({a} {op} {b})"

    @staticmethod
    def is_header_lookahead(e: A.Expr) -> bool:
        """``pkt.lookahead<H>()`` with a header type H."""
        ref = e.ref if isinstance(e, A.Call) else None
        return (isinstance(ref, tuple) and ref[0] == "method" and ref[1] == "packet_in"
                and ref[2] == "lookahead" and isinstance(e.ty, T.StructLike))

    @staticmethod
    def field_bits(t: T.StructLike, name: str) -> tuple[int, int]:
        """(shift from the least significant bit, width) of a header field in the header's bits."""
        shift = T.width_of(t)
        for n, ft in t.fields:
            fw = scalar_width(ft)
            shift -= fw
            if n == name:
                return shift, fw
        raise KeyError(name)

    @staticmethod
    def field_code(var: str, shift: int, fw: int, ft: T.Type) -> str:
        code = f"(({var} >> {shift}) & {(1 << fw) - 1})" if shift else f"({var} & {(1 << fw) - 1})"
        st = T.strip(ft)
        if st is T.BOOL:
            return f"bool({code})"
        if isinstance(st, T.Bits) and st.signed:
            return f"_sx({code}, {fw})"
        return code

    # ------------------------------------------------------------------ expressions
    def ex_as(self, e: A.Expr, t: T.Type, ctx: Ctx) -> str:
        """Code for ``e`` converted (only integer literals are ever converted) to type ``t``."""
        if e.const is not None and not isinstance(e.const, str):
            v = e.const
            st = T.strip(t)
            if isinstance(st, T.Bits) and not isinstance(v, bool):
                v = self.ck.convert_const(int(v), e.ty, st)
            return self.lit(v)
        return self.ex(e, ctx)

    def ex(self, e: A.Expr, ctx: Ctx) -> str:
        if e.const is not None and not isinstance(e.const, str) and (
                not isinstance(e, A.Call) or (e.ref is not None and e.ref[0] == "size")):
            return self.lit(e.const)
        if isinstance(e.ty, T.Varbit):
            raise self.unsupported(e.loc, f"a {e.ty} value used other than in an assignment, == or !=")
        if isinstance(e.ty, T.Tuple):
            raise self.unsupported(e.loc, f"a {e.ty} value used other than assigned a list")
        if e.ty is not None and not isinstance(e.ty, (T.StructLike, T.Stack)):
            self.check_type(e.ty, e.loc)
        if isinstance(e, A.Name):
            b = ctx.env.get(e.ref)
            if isinstance(b, Slot):
                if isinstance(e.ty, (T.StructLike, T.Stack)):
                    raise Unsupported(e.loc, f"{e.ty} value used as an expression")
                return self.slot_read(str(b.base), e.ty)
            if isinstance(b, Py):
                return b.name
            raise CompileError(e.loc, f"{e.name} cannot be used here")
        if isinstance(e, A.Member) and self.is_header_lookahead(e.expr):
            ht = e.expr.ty
            assert isinstance(ht, T.StructLike)
            if isinstance(e.ty, T.StructLike):
                raise self.unsupported(e.loc, "a struct field of a lookahead header")
            shift, fw = self.field_bits(ht, e.name)
            return self.lookahead_field(ht, shift, fw, e.ty)
        if isinstance(e, (A.Member, A.Index)):
            if isinstance(e, A.Member) and isinstance(e.expr.ty, T.ApplyResult):
                return self.apply_result(self.ex(e.expr, ctx), e.name)
            if isinstance(e, A.Member) and isinstance(e.expr.ty, T.Stack):
                sb = self.place(e.expr, ctx)
                if e.name == "lastIndex":
                    return f"((s[{sb}] - 1) & 0xffffffff)"
                if e.name == "nextIndex":
                    return f"s[{sb}]"
                raise Unsupported(e.loc, f"header stack member {e.name} as a value")
            if isinstance(e.ty, (T.StructLike, T.Stack)):
                raise Unsupported(e.loc, f"{e.ty} value used as an expression")
            return self.load(e, ctx)
        if isinstance(e, A.Slice):
            hi, lo = int(e.hi.const), int(e.lo.const)
            return f"(({self.ex(e.expr, ctx)} >> {lo}) & {(1 << (hi - lo + 1)) - 1})"
        if isinstance(e, A.Call):
            return self.call_expr(e, ctx)
        if isinstance(e, A.Unary):
            return self.unary(e, ctx)
        if isinstance(e, A.Binary):
            return self.binary(e, ctx)
        if isinstance(e, A.Cond):
            t = e.ty
            return self.cond_(self.ex(e.cond, ctx), self.ex_as(e.then, t, ctx), self.ex_as(e.other, t, ctx))
        if isinstance(e, A.Cast):
            return self.cast(e, ctx)
        raise Unsupported(e.loc, f"expression {type(e).__name__}")

    def lookahead_field(self, ht: T.StructLike, shift: int, fw: int, ft: T.Type) -> str:
        """A field of ``pkt.lookahead<H>()``: ``fw`` bits ``shift`` above the header's last bit."""
        return self.field_code(f"_peek(pk, {T.width_of(ht)})", shift, fw, ft)

    def apply_result(self, r: str, member: str) -> str:
        """``hit``, ``miss`` or ``action_run`` of a table application's result ``r``."""
        if member == "hit":
            return f"{r}[0]"
        if member == "miss":
            return f"(not {r}[0])"
        return f"{r}[1]"

    def unary(self, e: A.Unary, ctx: Ctx) -> str:
        a = self.ex(e.expr, ctx)
        t = T.strip(e.ty)
        if e.op == "!":
            return f"(not {a})"
        assert isinstance(t, T.Bits)
        if e.op == "~":
            return f"({a} ^ {t.mask})" if not t.signed else f"(~{a})"
        if t.signed:
            return self.sx(f"(0 - {a})", t.width)
        return f"(-{a} & {t.mask})"

    def wrap(self, code: str, t: T.Bits) -> str:
        if t.signed:
            return self.sx(code, t.width)
        return f"({code} & {t.mask})"

    def equal_code(self, t: T.Type, a: int, b: int) -> str:
        """``==`` of two stored values of type ``t``: headers are equal when both are invalid, or
        both valid with equal fields; structs and stacks when all their members are equal."""
        if isinstance(t, T.StructLike) and t.kind == "header":
            same = self.slots_equal(a + 1, b + 1, size_of(t) - 1)
            return f"(s[{a}] == s[{b}]{self.AND}({self.not_(f's[{a}]')}{self.OR}{same}))"
        if isinstance(t, T.StructLike):
            parts = [self.equal_code(ft, a + field_offset(t, n), b + field_offset(t, n)) for n, ft in t.fields]
            return "(" + self.AND.join(parts) + ")" if parts else self.lit(True)
        if isinstance(t, T.Varbit):  # the same length and the same value
            return f"({self.slots_equal(a, b, 2)})"
        if isinstance(t, T.Stack):
            es = size_of(t.elem)
            return "(" + self.AND.join(self.equal_code(t.elem, a + 1 + i * es, b + 1 + i * es)
                                       for i in range(t.size)) + ")"
        return f"({self.slot_read(str(a), t)} == {self.slot_read(str(b), t)})"

    def slot_read(self, index: str, t: T.Type | None) -> str:
        """The value of the scalar of type ``t`` stored at slot ``index`` (code)."""
        return f"s[{index}]"

    def slot_write(self, index: str, t: T.Type | None, code: str) -> str:
        """The statement storing ``code`` into the scalar of type ``t`` at slot ``index``."""
        return f"s[{index}] = {code}"

    def param_decl(self, name: str, t: T.Type) -> str:
        """A generated function's parameter ``name`` of type ``t``."""
        return name

    def slots_equal(self, a: int, b: int, n: int) -> str:
        return f"s[{a}:{a + n}] == s[{b}:{b + n}]"

    def binary(self, e: A.Binary, ctx: Ctx) -> str:
        op = e.op
        if op in ("&&", "||"):
            return f"({self.ex(e.left, ctx)}{self.AND if op == '&&' else self.OR}{self.ex(e.right, ctx)})"
        lt, rt = e.left.ty, e.right.ty
        if op in ("==", "!=") and isinstance(lt, (T.StructLike, T.Stack, T.Varbit)):
            if not (self.is_place(e.left, ctx) and self.is_place(e.right, ctx)):
                raise self.unsupported(e.loc, f"comparison of {lt} values that are not variables or fields")
            code = self.equal_code(lt, self.place(e.left, ctx), self.place(e.right, ctx))
            return code if op == "==" else self.not_(code)
        if op == "++":
            return self.concat_code(e, ctx)
        if op in ("<<", ">>"):
            return self.shift_code(e, ctx)
        ot = lt if lt is not T.INT else rt
        a, b = self.ex_as(e.left, ot, ctx), self.ex_as(e.right, ot, ctx)
        if op in ("==", "!=", "<", ">", "<=", ">="):
            return self.compare(op, a, b, ot)
        t = T.strip(e.ty)
        if not isinstance(t, T.Bits):
            raise self.unsupported(e.loc, f"{op} on {e.ty} at run time")
        if op in ("+", "-", "*"):
            return self.wrap(f"({a} {op} {b})", t)
        if op in ("/", "%"):
            return f"{self.DIVMOD[op]}({a}, {b})"
        if op in ("&", "|", "^"):
            return f"({a} {op} {b})"
        if op in ("|+|", "|-|"):
            return self.saturate(op, a, b, t)
        raise self.unsupported(e.loc, f"operator {op}")

    DIVMOD = {"/": "_div", "%": "_mod"}  # unsigned division and modulo, x / 0 == x % 0 == 0

    def concat_code(self, e: A.Binary, ctx: Ctx) -> str:
        res, ls, rs = T.strip(e.ty), T.strip(e.left.ty), T.strip(e.right.ty)
        assert isinstance(res, T.Bits) and isinstance(ls, T.Bits) and isinstance(rs, T.Bits)
        a, b = self.ex(e.left, ctx), self.ex(e.right, ctx)
        if ls.signed:
            a = f"({a} & {ls.mask})"
        if rs.signed:
            b = f"({b} & {rs.mask})"
        code = f"(({self.widen(a, res.width)} << {rs.width}) | {b})"
        return self.sx(code, res.width) if res.signed else code

    def shift_code(self, e: A.Binary, ctx: Ctx) -> str:
        t = T.strip(e.ty)
        assert isinstance(t, T.Bits)
        a = self.ex(e.left, ctx)
        if e.right.const is not None:
            n = int(e.right.const)
            if e.op == ">>":
                return f"({a} >> {n})"
            if n >= t.width:
                return "0"
            return self.wrap(f"({a} << {n})", t)
        b = self.ex(e.right, ctx)
        if e.op == ">>":
            return f"({a} >> {b})"
        code = f"_shl({a}, {b}, {t.width})"
        return self.sx(code, t.width) if t.signed else code

    def saturate(self, op: str, a: str, b: str, t: T.Bits) -> str:
        if not t.signed:
            return f"min({a} + {b}, {t.mask})" if op == "|+|" else f"max({a} - {b}, 0)"
        lo, hi = -(1 << (t.width - 1)), (1 << (t.width - 1)) - 1
        return f"_sat({a} {'+' if op == '|+|' else '-'} {b}, {lo}, {hi})"

    def cast(self, e: A.Cast, ctx: Ctx) -> str:
        dst, src = T.strip(e.ty), T.strip(e.expr.ty)
        a = self.ex(e.expr, ctx)
        if dst is T.BOOL:
            return f"({a} != 0)" if src is not T.BOOL else a
        if isinstance(dst, T.Bits):
            if src is T.BOOL:
                return f"int({a})"
            sw = src.width if isinstance(src, T.Bits) else scalar_width(src) if isinstance(src, T.Enum) else 10**9
            ssigned = isinstance(src, T.Bits) and src.signed
            if dst.signed:
                if isinstance(src, T.Bits) and src.signed and src.width <= dst.width:
                    return a
                return self.sx(a, dst.width)
            if not ssigned and sw <= dst.width:
                return a
            return f"({a} & {dst.mask})"
        if isinstance(dst, T.Enum):
            if dst.underlying is not None and isinstance(src, T.Bits) and src.signed:
                return f"({a} & {dst.underlying.mask})"
            return a
        return a

    def call_expr(self, e: A.Call, ctx: Ctx) -> str:  # pragma: no cover - overridden
        raise NotImplementedError


class RunCtx:
    """Side channel of the generated code: queued digests, the current payload, log messages."""

    MAX_DIGESTS = 65536  # queued digests beyond this (nobody taking them) are dropped and counted

    def __init__(self) -> None:
        self.digests: list[tuple[str, tuple[int, ...]]] = []
        self.digests_dropped = 0
        self.payload = b""
        self.trace: Callable[[str], None] | None = None

    def digest(self, name: str, values: tuple[int, ...]) -> None:
        if len(self.digests) < self.MAX_DIGESTS:
            self.digests.append((name, values))
        else:
            self.digests_dropped += 1

    def log(self, msg: str, *vals: Any) -> None:
        if self.trace is not None:
            self.trace("log: " + msg + ("" if not vals else " " + " ".join(str(v) for v in vals)))


