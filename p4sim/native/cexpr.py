"""C code generation of expressions, places, assignments and extern calls for the native engine.

Overrides the Python engine's code generator (`p4sim.backend.codegen`, `p4sim.backend.codegen_externs`) method by
method, over the same slot layout: every scalar is a ``uint64_t`` slot of ``s``. A ``bit<N>`` slot
holds the value; an ``int<N>`` slot holds the value sign-extended to 64 bits, which is the Python
engine's (a Python int in ``[-2^(N-1), 2^(N-1))``) modulo 2^64: ``+ - * & | ^ ~`` and ``==`` are
then the same unsigned C operations, every result is sign-extended back to N bits (``p4n_sx``,
where Python calls ``_sx``), and only ``< <= > >=``, ``>>`` and the saturating operators read the
slot as an ``int64_t``. Where bits leave a signed value (header emit, table keys, field lists,
digests, registers) they are masked to N bits, as in the Python engine.

A value wider than 64 bits (``bit<N>``/``int<N>``, 64 < N <= 128) has two slots (`layout.WIDE`),
its low then its high 64 bits (``p4n_ld128``/``p4n_st128``), and is computed as an
``unsigned __int128`` (``p4n_u128``): `ex` casts every expression of such a type to it, an
``int<N>`` is sign-extended to 128 bits (``p4n_sx128``; a narrower ``int<M>`` cast to it is
sign-extended from its 64 first), signed comparisons and ``>>`` read it as an ``__int128``, and
shifts, saturation, division and sign extension have 128-bit helpers in ``runtime.h``. Where such
a value meets the C API's ``uint64_t`` words it is two of them: header fields
(``p4n_getbits128``/``p4n_putbits128``), field lists (``p4n_bb_put128``), digest members and
register cells (low word first), table keys and action data (`ccompiler`). Anything the C form
cannot hold exactly (values wider than 128 bits, varbit) raises `NativeUnsupported`, and the
program runs on the Python engine instead. Integer literals are written bare (a negative one, of
an ``int<N>``, as ``(int64_t)-v``, which converts to its ``uint64_t`` or sign-extends to its
``__int128``); the compiler gives those that do not fit a C ``int`` the ``ULL`` suffix when it
assembles the C source and writes those wider than 64 bits as ``P4N_U128(hi, lo)``, and every
narrow shift's left operand is cast to ``uint64_t``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from p4sim.backend.codegen_externs import ExternCompiler
from p4sim.backend.layout import (
    DROP_PORT,
    Ctx,
    Writer,
    field_offset,
    is_wide,
    leaf_bits,
    scalar_width,
    size_of,
)
from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.diagnostics import CompileError, Loc
from p4sim.runtime.model import DigestInfo, ParamInfo

U128 = "p4n_u128"  # unsigned __int128: the C type of a value wider than 64 bits
MAX_WIDTH = 128
ALGOS = {"crc32": "p4n_crc32", "crc32_custom": "p4n_crc32", "crc16": "p4n_crc16", "crc16_custom": "p4n_crc16",
         "identity": "p4n_identity", "csum16": "p4n_csum16", "xor16": "p4n_xor16"}


class NativeUnsupported(CompileError):
    """A construct the native engine does not run: the program falls back to the Python engine."""

    def __init__(self, loc: Loc | None, construct: str) -> None:
        super().__init__(loc, f"{construct} is not supported by the native engine")
        self.construct = construct


def clit(v: object) -> str:
    """A C literal (ints get their ULL suffix when the source is assembled)."""
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        if v < 0:
            if v < -(1 << (MAX_WIDTH - 1)):
                raise NativeUnsupported(None, f"constant {v} below -2^{MAX_WIDTH - 1}")
            if v < -(1 << 63):  # an int<N>, N > 64: its 128-bit two's complement
                return str(v & ((1 << 128) - 1))
            return f"((int64_t)-{-v})"  # converts to uint64_t, or sign-extends to an int<N>'s 128 bits
        if v >> MAX_WIDTH:
            raise NativeUnsupported(None, f"constant {v:#x} wider than {MAX_WIDTH} bits")
        return str(v)  # the compiler writes one wider than 64 bits as P4N_U128(hi, lo)
    raise NativeUnsupported(None, f"constant {v!r}")


def check_type(t: T.Type, loc: Loc | None) -> None:
    """Refuse scalars wider than 128 bits (a value wider than 64 bits is an ``unsigned __int128``
    in two slots)."""
    st = T.strip(t)
    if isinstance(st, T.Bits):
        if st.width > MAX_WIDTH:
            raise NativeUnsupported(loc, f"type {t} (wider than {MAX_WIDTH} bits)")
    elif isinstance(st, T.Enum) and st.underlying is not None and st.underlying.width > 64:
        raise NativeUnsupported(loc, f"enum {t} over {st.underlying} (wider than 64 bits)")
    elif isinstance(st, T.StructLike):
        for _, ft in st.fields:
            check_type(ft, loc)
    elif isinstance(st, T.Stack):
        check_type(st.elem, loc)
    elif isinstance(st, T.Varbit):
        raise NativeUnsupported(loc, "varbit")


@contextmanager
def cblock(w: Writer, head: str) -> Iterator[None]:
    w(head + " {")
    with w.block():
        yield
    w("}")


class CExterns(ExternCompiler):
    """Expressions, places and externs as C."""

    cidx: dict[str, int]  # generated object name (counter/register/meter) -> its C index
    has_exit: bool

    # ------------------------------------------------------------------ storage
    def alloc(self, t: T.Type) -> int:
        check_type(t, None)
        return super().alloc(t)

    # ------------------------------------------------------------------ the language's syntax: C
    AND = " && "
    OR = " || "
    DIVMOD = {"/": "p4n_div", "%": "p4n_mod"}

    def lit(self, v: Any) -> str:
        return clit(v)

    def not_(self, code: str) -> str:
        return f"(!{code})"

    def cond_(self, cond: str, then: str, other: str) -> str:
        return f"(({cond}) ? {then} : {other})"

    def line(self, w: Writer, text: str) -> None:
        w(text + ";")

    def if_(self, w: Writer, cond: str | None, kind: str = "if") -> AbstractContextManager[None]:
        return cblock(w, {"if": f"if ({cond})", "elif": f"else if ({cond})", "else": "else"}[kind])

    def unsupported(self, loc: Loc | None, construct: str) -> CompileError:
        return NativeUnsupported(loc, construct)

    def check_type(self, t: T.Type, loc: Loc | None) -> None:
        check_type(t, loc)

    def widen(self, code: str, width: int) -> str:
        return f"({U128}){code}" if width > 64 else f"(uint64_t){code}"

    def sx(self, code: str, width: int) -> str:
        return f"p4n_sx128({code}, {width})" if width > 64 else f"p4n_sx({code}, {width})"

    def compare(self, op: str, a: str, b: str, t: T.Type) -> str:
        st = T.strip(t)
        if isinstance(st, T.Bits) and st.signed and op not in ("==", "!="):
            it = "__int128" if st.width > 64 else "int64_t"
            return f"(({it}){a} {op} ({it}){b})"
        return f"({a} {op} {b})"

    # ------------------------------------------------------------------ values wider than 64 bits
    def slot_read(self, index: str, t: T.Type | None) -> str:
        return f"p4n_ld128(&s[{index}])" if t is not None and is_wide(t) else f"s[{index}]"

    def slot_write(self, index: str, t: T.Type | None, code: str) -> str:
        return f"p4n_st128(&s[{index}], {code})" if t is not None and is_wide(t) else f"s[{index}] = {code}"

    def param_decl(self, name: str, t: T.Type) -> str:
        return f"{U128} {name}" if is_wide(t) else name

    def ex(self, e: A.Expr, ctx: Ctx) -> str:
        code = super().ex(e, ctx)  # a value wider than 64 bits is computed as an unsigned __int128
        return f"(({U128}){code})" if e.ty is not None and is_wide(e.ty) else code

    def ex_as(self, e: A.Expr, t: T.Type, ctx: Ctx) -> str:
        code = super().ex_as(e, t, ctx)
        return f"(({U128}){code})" if is_wide(t) and not code.startswith(f"(({U128})") else code

    def equal_code(self, t: T.Type, a: int, b: int) -> str:
        if is_wide(t):
            return f"!memcmp(&s[{a}], &s[{b}], 2 * sizeof(uint64_t))"
        return super().equal_code(t, a, b)

    def binary(self, e: A.Binary, ctx: Ctx) -> str:
        if e.op in ("/", "%") and is_wide(e.ty):
            a, b = self.ex_as(e.left, e.ty, ctx), self.ex_as(e.right, e.ty, ctx)
            return f"p4n_{'div' if e.op == '/' else 'mod'}128({a}, {b})"
        return super().binary(e, ctx)

    # ------------------------------------------------------------------ places and values
    def copy_slots(self, w: Writer, dst: int, src: int, n: int) -> None:
        w(f"memmove(&s[{dst}], &s[{src}], {n} * sizeof(uint64_t));")

    def lookahead_header(self, w: Writer, base: int, t: T.StructLike) -> None:
        with cblock(w, ""):
            w(f"p4n_peek(c, {T.width_of(t)});")
            for i, off, fw, ft in leaf_bits(t):
                bits = self.field_bits_c(self.getbits("c->pk + c->pk_off", off, fw), fw, ft)
                w(self.slot_write(str(base + i), ft, bits) + ";")
            w(f"s[{base}] = 1;")

    def lookahead_field(self, ht: T.StructLike, shift: int, fw: int, ft: T.Type) -> str:
        off = T.width_of(ht) - shift - fw
        if fw > 64:
            raise NativeUnsupported(None, f"a lookahead field wider than 64 bits ({ft})")
        bits = self.field_bits_c(f"p4n_getbits(c->pk + c->pk_off, {off}, {fw})", fw, ft)
        return f"(p4n_peek(c, {T.width_of(ht)}), {bits})"

    @staticmethod
    def getbits(p: str, off: int, fw: int) -> str:
        return f"p4n_getbits128({p}, {off}, {fw})" if fw > 64 else f"p4n_getbits({p}, {off}, {fw})"

    def field_bits_c(self, code: str, fw: int, ft: T.Type) -> str:
        """A header field's value from its ``fw`` bits ``code`` (an ``int<N>`` sign-extends them)."""
        st = T.strip(ft)
        return self.sx(code, fw) if isinstance(st, T.Bits) and st.signed else code

    def apply_result(self, r: str, member: str) -> str:
        if member == "hit":
            return f"(({r}) >> 32)"
        if member == "miss":
            return f"!(({r}) >> 32)"
        return f"(({r}) & 0xffffffff)"

    def slots_equal(self, a: int, b: int, n: int) -> str:
        return f"!memcmp(&s[{a}], &s[{b}], {n} * sizeof(uint64_t))"

    def unary(self, e: A.Unary, ctx: Ctx) -> str:
        a = self.ex(e.expr, ctx)
        t = T.strip(e.ty)
        if e.op == "!":
            return f"(!{a})"
        assert isinstance(t, T.Bits)
        if e.op == "~":
            return f"(~{a})" if t.signed else f"({a} ^ {t.mask})"
        zero = f"({U128})0" if t.width > 64 else "0"
        return self.sx(f"({zero} - {a})", t.width) if t.signed else f"(({zero} - {a}) & {t.mask})"

    def shift_code(self, e: A.Binary, ctx: Ctx) -> str:
        t = T.strip(e.ty)
        assert isinstance(t, T.Bits)
        if t.width > 64:
            return self.shift_code128(e, t, ctx)
        a = self.ex(e.left, ctx)
        if e.right.const is not None:
            n = int(e.right.const)
            if e.op == ">>" and t.signed:
                return f"(uint64_t)((int64_t){a} >> {min(n, 63)})"  # arithmetic: the sign fills in
            if n >= 64 or (e.op == "<<" and n >= t.width):
                return "0"
            return f"({a} >> {n})" if e.op == ">>" else self.wrap(f"((uint64_t){a} << {n})", t)
        b = self.ex(e.right, ctx)
        if is_wide(e.right.ty):
            b = f"p4n_amt({b})"
        if e.op == ">>":
            return f"p4n_sar({a}, {b})" if t.signed else f"p4n_shr({a}, {b})"
        code = f"p4n_shl({a}, {b}, {t.width}, {t.mask})"
        return self.sx(code, t.width) if t.signed else code

    def shift_code128(self, e: A.Binary, t: T.Bits, ctx: Ctx) -> str:
        a = self.ex(e.left, ctx)
        if e.right.const is not None:
            n = int(e.right.const)
            if e.op == ">>" and t.signed:
                return f"(({U128})((__int128){a} >> {min(n, 127)}))"
            if n >= 128 or (e.op == "<<" and n >= t.width):
                return f"(({U128})0)"
            return f"({a} >> {n})" if e.op == ">>" else self.wrap(f"(({U128}){a} << {n})", t)
        b = self.ex(e.right, ctx)
        if e.op == ">>":
            return f"p4n_sar128({a}, {b})" if t.signed else f"p4n_shr128({a}, {b})"
        code = f"p4n_shl128({a}, {b}, {t.width}, {t.mask})"
        return self.sx(code, t.width) if t.signed else code

    def saturate(self, op: str, a: str, b: str, t: T.Bits) -> str:
        if t.width > 64:
            if t.signed:
                return f"p4n_ssat128({a}, {b}, {int(op == '|-|')}, {t.width})"
            return f"p4n_sadd128({a}, {b}, {t.mask})" if op == "|+|" else f"p4n_ssub128({a}, {b})"
        if t.signed:
            return f"p4n_ssat({a}, {b}, {int(op == '|-|')}, {t.width})"
        return f"p4n_sadd({a}, {b}, {t.mask})" if op == "|+|" else f"p4n_ssub({a}, {b})"

    def cast(self, e: A.Cast, ctx: Ctx) -> str:
        dst, src = T.strip(e.ty), T.strip(e.expr.ty)
        a = self.ex(e.expr, ctx)
        if dst is T.BOOL:
            return f"({a} != 0)" if src is not T.BOOL else a
        if isinstance(dst, T.Bits):
            if src is T.BOOL:
                return a
            sw = src.width if isinstance(src, T.Bits) else scalar_width(src) if isinstance(src, T.Enum) else 1 << 30
            ssigned = isinstance(src, T.Bits) and src.signed
            if ssigned and dst.width > 64 >= sw:  # sign-extend to the 128 bits of the wide value
                a = f"(({U128})(__int128)(int64_t){a})"
            if dst.signed:  # int<M> to a wider int<N>: the slot is sign-extended already
                return a if ssigned and sw <= dst.width else self.sx(a, dst.width)
            return a if not ssigned and sw <= dst.width else f"({a} & {dst.mask})"
        if isinstance(dst, T.Enum) and dst.underlying is not None and isinstance(src, T.Bits) and src.signed:
            return f"({a} & {dst.underlying.mask})"
        return a

    # ------------------------------------------------------------------ field lists, hashes
    def unsigned(self, code: str, t: T.Type) -> str:
        st = T.strip(t)  # bool is 0/1 already; an int<N>'s bits are its low N bits
        return f"({code} & {st.mask})" if isinstance(st, T.Bits) and st.signed else code

    def hash_code(self, data: A.Expr, fn: str, ctx: Ctx, with_payload: bool = False) -> str:
        """A GNU statement expression: the hash `fn` of a field list's BufBuilder bytes."""
        parts = [(c, wd, v) for c, wd, v in self.field_list_parts(data, ctx) if isinstance(wd, int)]
        if len(parts) != len(self.field_list_parts(data, ctx)):
            raise NativeUnsupported(data.loc, "varbit")
        nbytes = (sum(wd for _, wd, _ in parts) + 7) // 8
        b = self.uid("bb")
        puts = []
        for code, wd, valid in parts:
            put = f"p4n_bb_put{'128' if wd > 64 else ''}(&{b}, {code}, {wd});"
            puts.append(f"if ({valid}) {put}" if valid is not None else put)
        body = " ".join(puts)
        return (f"({{ uint8_t {b}_[{nbytes + 1}]; p4n_bb {b} = {{{b}_, 0}}; {body} "
                f"p4n_hash_buf(c, {fn}, &{b}, {1 if with_payload else 0}); }})")

    # ------------------------------------------------------------------ extern functions
    def hash_value(self, data: A.Expr, algo: A.Expr, ctx: Ctx) -> str:
        return self.hash_code(data, ALGOS[self.algo_name(algo)], ctx)

    def random_value(self, lo: str, hi: str) -> str:
        return f"p4n_rnd(c, {lo}, {hi})"

    def random_into(self, args: list[A.Expr], ctx: Ctx, w: Writer) -> None:
        ot = T.strip(args[0].ty)
        if is_wide(ot):
            raise NativeUnsupported(args[0].loc, f"random() into a {ot} (wider than 64 bits)")
        if not (isinstance(ot, T.Bits) and ot.signed):
            super().random_into(args, ctx, w)
            return
        lo, hi = self.ex_as(args[1], ot, ctx), self.ex_as(args[2], ot, ctx)
        self.assign_code(args[0], f"p4n_srnd(c, {lo}, {hi})", ctx, w)

    def extern_func(self, e: A.Call, name: str, tv: dict[str, T.Type], ctx: Ctx, w: Writer) -> None:
        args = e.args
        if name == "verify":
            w(f"if (!({self.ex(args[0], ctx)})) P4N_PERR(c, {self.ex(args[1], ctx)});")
        elif name == "mark_to_drop":
            w(f"s[{self.sm_slot(args[0], 'egress_spec', ctx)}] = {DROP_PORT};")
            w(f"s[{self.sm_slot(args[0], 'mcast_grp', ctx)}] = 0;")
        elif name == "hash":
            self.hash_into(args, ctx, w)
        elif name == "random":
            self.random_into(args, ctx, w)
        elif name == "digest":
            self.digest(args[1], tv, ctx, w)
        elif name in ("verify_checksum", "update_checksum", "verify_checksum_with_payload",
                      "update_checksum_with_payload"):
            cond, data, ck, algo = args
            ct = T.strip(ck.ty)
            assert isinstance(ct, T.Bits)
            fn = ALGOS[self.algo_name(algo)]
            val = self.fit(self.hash_code(data, fn, ctx, name.endswith('_with_payload')), ct)
            with cblock(w, f"if ({self.ex(cond, ctx)})"):
                if name.startswith("verify"):
                    w(f"if ({val} != {self.ex(ck, ctx)}) s[{self.sm['checksum_error']}] = 1;")
                else:
                    self.assign_code(ck, val, ctx, w)
        elif name in ("clone3", "resubmit", "recirculate") and not (
                isinstance(args[-1], A.ListExpr) and not args[-1].items):
            raise NativeUnsupported(e.loc, f"{name} with a list of fields to preserve")
        elif self.pipeline_flags(name, args, ctx, w):
            pass
        elif name in ("assert", "assume", "log_msg"):
            pass  # the native engine does not log: run the Python engine to see these
        else:
            raise NativeUnsupported(e.loc, f"extern function {name}")

    def digest(self, data: A.Expr, tv: dict[str, T.Type], ctx: Ctx, w: Writer) -> None:
        dt = data.ty
        if isinstance(data, (A.ListExpr, A.StructExpr)) and isinstance(tv.get("T"), T.StructLike):
            dt = tv["T"]
        if not isinstance(dt, T.StructLike):
            raise NativeUnsupported(data.loc, "digest of a value that is not a struct")
        if dt.name not in self.digests:
            self.digests[dt.name] = DigestInfo(dt.name, [ParamInfo(n, scalar_width(ft)) for n, ft in dt.fields])
        vals = []
        if self.is_place(data, ctx):
            db = self.place(data, ctx)
            vals = [self.unsigned(self.slot_read(str(db + field_offset(dt, n)), ft), ft) for n, ft in dt.fields]
        elif isinstance(data, (A.ListExpr, A.StructExpr)):
            items = data.items if isinstance(data, A.ListExpr) else [dict(data.fields)[n] for n, _ in dt.fields]
            for (_, ft), item in zip(dt.fields, items, strict=True):
                if isinstance(ft, (T.StructLike, T.Stack)):
                    raise NativeUnsupported(item.loc, "a digest member that is a struct or header")
                vals.append(self.unsigned(self.ex_as(item, ft, ctx), ft))
        else:
            raise NativeUnsupported(data.loc, "digest of a struct expression")
        idx = list(self.digests).index(dt.name)
        v = self.uid("dg")
        words, pre = [], ""  # a member wider than 64 bits is two words, its low 64 bits first
        for k, ((_, ft), code) in enumerate(zip(dt.fields, vals, strict=True)):
            if is_wide(ft):
                pre += f"{U128} {v}_{k} = {code}; "
                words += [f"(uint64_t){v}_{k}", f"(uint64_t)({v}_{k} >> 64)"]
            else:
                words.append(code)
        w(f"{{ {pre}uint64_t {v}[] = {{{', '.join(words) or '0'}}}; p4n_digest(c, {idx}, {v}, {len(words)}); }}")

    # ------------------------------------------------------------------ extern methods
    NO_FIELD_LIST = "(uint64_t)-1"

    def lookahead_check(self, nbytes: int, w: Writer) -> None:
        w(f"if (c->pk_off + {nbytes} > c->pk_n) P4N_PERR(c, {self.errcode('PacketTooShort')});")

    def advance(self, bits: str, w: Writer) -> None:
        w(f"c->pk_off += (uint32_t)({bits} >> 3);")
        w(f"if (c->pk_off > c->pk_n) P4N_PERR(c, {self.errcode('PacketTooShort')});")

    def extern_method(self, e: A.Call, ctx: Ctx, w: Writer) -> None:
        _, ext, m, _obj, _proto, tv = e.ref
        args = e.args
        oname = self.extern_object(e, ctx, w)
        if oname is None:
            return
        i = self.uid("ix")
        if ext == "counter" and m == "count":
            ci = self.counters[self.extern_fq[oname]]
            k = self.cidx[oname]
            w(f"{{ uint64_t {i} = {self.ex_as(args[0], T.Bits(32), ctx)}; if ({i} < {ci.size}) "
              f"{{ c->cnt_p[{k}][{i}] += 1; c->cnt_b[{k}][{i}] += s[{self.pktlen}]; }} }}")
            return
        if ext == "direct_counter" and m == "count":
            return
        if ext == "meter" and m == "execute_meter":
            idx, out = args
            ot = T.strip(out.ty)
            if not isinstance(ot, T.Bits):
                raise CompileError(out.loc, "execute_meter's result must be a bit<> field")
            k = self.cidx[oname]
            mi = self.meters[self.extern_fq[oname]]
            units = "1.0" if mi.unit == "PACKETS" else f"(double)s[{self.pktlen}]"
            with cblock(w, ""):
                w(f"uint64_t {i} = {self.ex_as(idx, T.Bits(32), ctx)};")
                with cblock(w, f"if ({i} < {mi.size})"):
                    self.assign_code(out, self.fit(f"p4n_meter_mark(&c->met[{k}][{i}], p4n_meter_now(c), {units})", ot), ctx, w)
            return
        if ext == "register":
            ri = self.registers[self.extern_fq[oname]]
            k = self.cidx[oname]
            if m == "read":
                out, idx = args
                with cblock(w, ""):
                    w(f"uint64_t {i} = {self.ex_as(idx, T.Bits(32), ctx)};")
                    ost = T.strip(out.ty)
                    code = f"({i} < {ri.size} ? c->reg[{k}][{i}] : 0)"
                    if ri.width > 64:  # two words a cell
                        code = f"({i} < {ri.size} ? p4n_ld128(&c->reg[{k}][2 * {i}]) : 0)"
                    if isinstance(ost, T.Bits) and ost.signed:
                        code = self.sx(code, ost.width)  # a register holds the bits
                    self.assign_code(out, code, ctx, w)
            elif m == "write":
                idx, val = args
                v = self.unsigned(self.ex_as(val, tv.get("T", val.ty), ctx), tv.get("T", val.ty))
                put = f"p4n_st128(&c->reg[{k}][2 * {i}], {v})" if ri.width > 64 else f"c->reg[{k}][{i}] = {v}"
                w(f"{{ uint64_t {i} = {self.ex_as(idx, T.Bits(32), ctx)}; if ({i} < {ri.size}) {put}; }}")
            return
        raise NativeUnsupported(e.loc, f"{ext}.{m}")

    def stack_op(self, stk: A.Expr, op: str, n: int, ctx: Ctx, w: Writer) -> None:
        t = stk.ty
        assert isinstance(t, T.Stack)
        b = self.place(stk, ctx)
        es = size_of(t.elem)
        first = b + 1
        total = t.size * es
        n = min(n, t.size)
        moved = (total - n * es)
        if op == "push_front":
            w(f"memmove(&s[{first + n * es}], &s[{first}], {moved} * sizeof(uint64_t));")
            w(f"memset(&s[{first}], 0, {n * es} * sizeof(uint64_t));")
            w(f"s[{b}] = s[{b}] + {n} < {t.size} ? s[{b}] + {n} : {t.size};")
        else:
            w(f"memmove(&s[{first}], &s[{first + n * es}], {moved} * sizeof(uint64_t));")
            w(f"memset(&s[{first + moved}], 0, {n * es} * sizeof(uint64_t));")
            w(f"s[{b}] = s[{b}] > {n} ? s[{b}] - {n} : 0;")

    # ------------------------------------------------------------------ parser input, deparser output
    def extract(self, target: A.Expr, ctx: Ctx, w: Writer, size: A.Expr | None = None) -> None:
        t = target.ty
        if not (isinstance(t, T.StructLike) and t.kind == "header"):
            raise CompileError(target.loc, f"extract needs a header, not {t}")
        check_type(t, target.loc)
        nb = T.width_of(t) // 8
        w("{")
        with w.block():
            if isinstance(target, A.Member) and isinstance(target.expr.ty, T.Stack) and target.name == "next":
                stk_t = target.expr.ty
                sb = self.place(target.expr, ctx)
                es = size_of(stk_t.elem)
                w(f"uint64_t i_ = s[{sb}];")
                w(f"if (i_ >= {stk_t.size}) P4N_PERR(c, {self.errcode('StackOutOfBounds')});")
                w(f"uint64_t *h_ = &s[{sb + 1} + i_ * {es}];")
                after = f"s[{sb}] = i_ + 1;"
            elif (isinstance(target, A.Member) and isinstance(target.expr, A.Member) and target.expr.name == "next"
                  and isinstance(target.expr.expr.ty, T.Stack)):  # a member of a header union stack's next
                stk_t = target.expr.expr.ty
                u = stk_t.elem
                assert isinstance(u, T.StructLike)
                sb = self.place(target.expr.expr, ctx)
                w(f"uint64_t i_ = s[{sb}];")
                w(f"if (i_ >= {stk_t.size}) P4N_PERR(c, {self.errcode('StackOutOfBounds')});")
                w(f"uint64_t *u_ = &s[{sb + 1} + i_ * {size_of(u)}];")
                w(f"uint64_t *h_ = u_ + {field_offset(u, target.name)};")
                after = " ".join([f"u_[{field_offset(u, n)}] = 0;" for n, _ in u.fields if n != target.name]
                                 + [f"s[{sb}] = i_ + 1;"])
            else:
                w(f"uint64_t *h_ = &s[{self.place(target, ctx)}];")
                after = ""
            w(f"if (c->pk_off + {nb} > c->pk_n) P4N_PERR(c, {self.errcode('PacketTooShort')});")
            w("const uint8_t *p_ = c->pk + c->pk_off;")
            for i, off, fw, ft in leaf_bits(t):
                bits = self.field_bits_c(self.getbits("p_", off, fw), fw, ft)
                w(f"p4n_st128(&h_[{i}], {bits});" if fw > 64 else f"h_[{i}] = {bits};")
            w(f"c->pk_off += {nb};")
            w("h_[0] = 1;")
            if after:
                w(after)
            else:
                self.invalidate_siblings(target, ctx, w)
        w("}")

    def emit_header(self, b: int, t: T.StructLike, w: Writer) -> None:
        check_type(t, None)
        nb = T.width_of(t) // 8
        self.deparse_max += nb
        with cblock(w, f"if (s[{b}] && c->ob_n + {nb} <= DEPARSE_MAX)"):
            w("uint8_t *q_ = c->ob + c->ob_n;")
            w(f"memset(q_, 0, {nb});")
            for i, off, fw, _ft in leaf_bits(t):
                if fw > 64:
                    w(f"p4n_putbits128(q_, {off}, {fw}, p4n_ld128(&s[{b + i}]));")
                else:
                    w(f"p4n_putbits(q_, {off}, {fw}, s[{b + i}]);")
            w(f"c->ob_n += {nb};")

    deparse_max = 0
