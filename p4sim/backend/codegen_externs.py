"""Code generation of v1model and core extern calls: packet I/O, checksums, hashes, registers,
counters, digests, clone/resubmit/recirculate, header stack operations."""

from __future__ import annotations

from p4sim.backend.codegen_assign import AssignCompiler
from p4sim.backend.layout import (
    DROP_PORT,
    Ctx,
    Writer,
    defaults,
    field_offset,
    leaf_types,
    scalar_width,
    size_of,
)
from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.diagnostics import CompileError, Unsupported
from p4sim.runtime import primitives as R
from p4sim.runtime.model import (
    DigestInfo,
    ParamInfo,
)


class ExternCompiler(AssignCompiler):
    """Adds extern calls to the expression code generator."""

    def stack_op(self, stk: A.Expr, op: str, n: int, ctx: Ctx, w: Writer) -> None:
        t = stk.ty
        assert isinstance(t, T.Stack)
        b = self.place(stk, ctx)
        es = size_of(t.elem)
        first = b + 1
        total = t.size * es
        n = min(n, t.size)
        empty = defaults(t.elem) * n
        if op == "push_front":
            w(f"s[{first + n * es}:{first + total}] = s[{first}:{first + total - n * es}]")
            w(f"s[{first}:{first + n * es}] = {empty!r}")
            w(f"s[{b}] = min(s[{b}] + {n}, {t.size})")
        else:
            w(f"s[{first}:{first + total - n * es}] = s[{first + n * es}:{first + total}]")
            w(f"s[{first + total - n * es}:{first + total}] = {empty!r}")
            w(f"s[{b}] = max(s[{b}] - {n}, 0)")

    # ------------------------------------------------------------------ externs
    def concat(self, data: A.Expr, ctx: Ctx) -> tuple[str, int]:
        """An integer made of the bits of a field list / header / struct, and its width (every
        field, valid or not: for digests and `Checksum16.get`-like uses that want the value)."""
        parts = self.field_list_parts(data, ctx)
        fixed = [(c, wd, v) for c, wd, v in parts if isinstance(wd, int)]
        if len(fixed) != len(parts):
            raise self.unsupported(data.loc, "a varbit field in this field list")
        return self._join(fixed), sum(wd for _, wd, _ in fixed)

    def field_list_parts(self, data: A.Expr, ctx: Ctx) -> list[tuple[str, int | str, str | None]]:
        """(code, width, validity code or None) of every field of a field list, in order; the
        validity is that of the header the field belongs to (None: metadata, constants); the
        width of a varbit field is the code of its current length."""
        parts: list[tuple[str, int | str, str | None]] = []

        def add(x: A.Expr | None, t: T.Type, base: int | None, valid: str | None) -> None:
            if isinstance(t, T.Varbit):
                b = base if base is not None else self.place(x, ctx)  # type: ignore[arg-type]
                if valid is None and isinstance(x, A.Member) and self.is_place(x.expr, ctx):
                    valid = f"s[{self.place(x.expr, ctx)}]"
                parts.append((f"s[{b}]", f"s[{b + 1}]", valid))
                return
            if isinstance(t, T.StructLike):
                b = base if base is not None else self.place(x, ctx)  # type: ignore[arg-type]
                inner = f"s[{b}]" if t.kind == "header" else valid
                for n, ft in t.fields:
                    add(None, ft, b + field_offset(t, n), inner)
                return
            self.check_type(t, x.loc if x is not None else None)
            w = scalar_width(t)
            code = self.unsigned(self.slot_read(str(base), t) if base is not None else self.ex(x, ctx), t)  # type: ignore[arg-type]
            if (valid is None and isinstance(x, A.Member) and isinstance(x.expr.ty, T.StructLike)
                    and x.expr.ty.kind == "header" and self.is_place(x.expr, ctx)):
                valid = f"s[{self.place(x.expr, ctx)}]"
            parts.append((code, w, valid))

        items = data.items if isinstance(data, A.ListExpr) else [data]
        for it in items:
            if it.ty is T.INT:
                raise CompileError(it.loc, "field list elements need a width (cast the literal)")
            add(it, it.ty, None, None)
        return parts

    def unsigned(self, code: str, t: T.Type) -> str:
        """A scalar's value as the unsigned number of its bits (bool as 0/1, int<N> masked)."""
        st = T.strip(t)
        if st is T.BOOL:
            return f"int({code})"
        if isinstance(st, T.Bits) and st.signed:
            return f"({code} & {st.mask})"
        return code

    @staticmethod
    def _join(parts: list[tuple[str, int, str | None]]) -> str:
        total = sum(wd for _, wd, _ in parts)
        if not parts:
            return "0"
        code = []
        shift = total
        for c, wd, _ in parts:
            shift -= wd
            code.append(f"({c} << {shift})" if shift else c)
        return "(" + " | ".join(code) + ")"

    def field_list_bytes(self, data: A.Expr, ctx: Ctx) -> tuple[str, str | None]:
        """Code of the bytes BMv2 hashes or checksums for a field list (`BufBuilder`): the
        fields of valid headers (and metadata, constants) packed bit by bit, most significant
        first, zero padding at the end to a whole byte; a field of an invalid header is left
        out. Also returns, when no header can be invalid, the code of the same bytes as one
        integer of 16-bit words (a zero byte appended to an odd count: the csum16 shortcut's
        input), else None."""
        parts = self.field_list_parts(data, ctx)
        if not all(isinstance(wd, int) for _, wd, _ in parts):  # a varbit: its length is known at run time
            return "_pack((" + "".join(f"({c}, {wd}, {v or 'True'}), " for c, wd, v in parts) + "))", None
        fixed = [(c, wd, v) for c, wd, v in parts if isinstance(wd, int)]
        total = sum(wd for _, wd, _ in fixed)
        nbytes = (total + 7) // 8
        pad = nbytes * 8 - total
        joined = self._join(fixed)
        as_int = f"({joined} << {pad})" if pad else joined
        static = f"({as_int}).to_bytes({nbytes}, 'big')"
        conds = sorted({v for _, _, v in parts if v is not None})
        if not conds:
            return static, f"({as_int} << 8)" if nbytes % 2 else as_int
        packed = "_pack((" + "".join(f"({c}, {wd}, {v or 'True'}), " for c, wd, v in parts) + "))"
        return f"({static} if {' and '.join(conds)} else {packed})", None

    def algo_name(self, e: A.Expr) -> str:
        en = e.ty
        if not isinstance(en, T.Enum) or e.const is None:
            raise CompileError(e.loc, "the hash algorithm must be a constant HashAlgorithm")
        name = en.members[int(e.const)]
        if name not in R.HASHES:
            raise Unsupported(e.loc, f"HashAlgorithm.{name}")
        return name

    def sm_slot(self, arg: A.Expr, field: str, ctx: Ctx) -> int:
        assert self.sm_type is not None
        return self.place(arg, ctx) + field_offset(self.sm_type, field)

    # hash() and random(), the same in both engines but for these hooks
    def hash_value(self, data: A.Expr, algo: A.Expr, ctx: Ctx) -> str:
        """The unsigned hash of field list `data` by algorithm `algo`, as an expression."""
        buf, _ = self.field_list_bytes(data, ctx)
        return f"_H[{self.algo_name(algo)!r}]({buf})"

    def random_value(self, lo: str, hi: str) -> str:
        return f"_rnd({lo}, {hi})"

    def hash_into(self, args: list[A.Expr], ctx: Ctx, w: Writer) -> None:
        """`hash(out, algo, base, data, max)`: out = base + hash % max (max 0: no modulo)."""
        out, algo, base, data, mx = args
        ot = T.strip(out.ty)
        if not isinstance(ot, T.Bits):
            raise CompileError(out.loc, "hash result must be a bit<> field")
        h_ = self.hash_value(data, algo, ctx)
        b = self.ex_as(base, ot, ctx)
        if mx.const is not None and int(mx.const) == 0:
            val = f"({b} + {h_})"
        elif mx.const is not None:
            val = f"({b} + {h_} % {self.lit(mx.const)})"
        else:
            val = f"({b} + {self.DIVMOD['%']}({h_}, {self.ex(mx, ctx)}))"
        self.assign_code(out, self.fit(val, ot), ctx, w)

    def fit(self, code: str, t: T.Bits) -> str:
        """An unsigned number's low bits as a value of type ``t`` (``int<N>``: sign-extended)."""
        return self.sx(code, t.width) if t.signed else f"({code} & {t.mask})"

    def random_into(self, args: list[A.Expr], ctx: Ctx, w: Writer) -> None:
        """`random(out, lo, hi)`."""
        out = args[0]
        ot = T.strip(out.ty)
        assert isinstance(ot, T.Bits)
        lo, hi = self.ex_as(args[1], ot, ctx), self.ex_as(args[2], ot, ctx)
        self.assign_code(out, self.random_value(lo, hi), ctx, w)

    def extern_func(self, e: A.Call, name: str, tv: dict[str, T.Type], ctx: Ctx, w: Writer) -> None:
        args = e.args
        if name == "verify":
            w(f"if not {self.ex(args[0], ctx)}:")
            with w.block():
                w(f"raise _PErr({self.ex(args[1], ctx)})")
        elif name == "mark_to_drop":
            w(f"s[{self.sm_slot(args[0], 'egress_spec', ctx)}] = {DROP_PORT}")
            w(f"s[{self.sm_slot(args[0], 'mcast_grp', ctx)}] = 0")
        elif name == "hash":
            self.hash_into(args, ctx, w)
        elif name == "random":
            self.random_into(args, ctx, w)
        elif name == "digest":
            data = args[1]
            dt = data.ty
            if isinstance(data, (A.ListExpr, A.StructExpr)) and isinstance(tv.get("T"), T.StructLike):
                dt = tv["T"]  # digest<S>(receiver, {a, b}): the list initialises a struct S
            if not isinstance(dt, T.StructLike):
                raise Unsupported(data.loc, "digest of a value that is not a struct")
            members = [ParamInfo(n, scalar_width(ft)) for n, ft in dt.fields]
            old = self.digests.get(dt.name)
            if old is None:
                self.digests[dt.name] = DigestInfo(dt.name, members)
            vals = []
            if self.is_place(data, ctx):
                db = self.place(data, ctx)
                for n, ft in dt.fields:
                    vals.append(self.unsigned(f"s[{db + field_offset(dt, n)}]", ft))
            elif isinstance(data, (A.ListExpr, A.StructExpr)):
                items = data.items if isinstance(data, A.ListExpr) else [dict(data.fields)[n] for n, _ in dt.fields]
                for (_, ft), item in zip(dt.fields, items, strict=True):
                    if isinstance(ft, (T.StructLike, T.Stack)):
                        raise Unsupported(item.loc, "a digest member that is a struct or header")
                    vals.append(self.unsigned(self.ex_as(item, ft, ctx), ft))
            else:
                raise Unsupported(data.loc, "digest of a struct expression (use a metadata struct)")
            w(f"CTX.digest({dt.name!r}, ({''.join(v + ', ' for v in vals)}))")
        elif name in ("verify_checksum", "update_checksum", "verify_checksum_with_payload",
                      "update_checksum_with_payload"):
            cond, data, ck, algo = args
            buf, as_words = self.field_list_bytes(data, ctx)
            fn = self.algo_name(algo)
            payload = " + CTX.payload" if name.endswith("_with_payload") else ""
            ct = T.strip(ck.ty)
            assert isinstance(ct, T.Bits)
            if fn == "csum16" and not payload and as_words is not None:
                val = f"_csum16i({as_words})"
            else:
                val = f"(_H[{fn!r}]({buf}{payload}) & {ct.mask})"
            w(f"if {self.ex(cond, ctx)}:")
            with w.block():
                if name.startswith("verify"):
                    w(f"if {val} != {self.ex(ck, ctx)}:")
                    with w.block():
                        w(f"s[{self.sm['checksum_error']}] = 1")
                else:
                    self.assign_code(ck, val, ctx, w)
        elif name in ("clone3", "resubmit", "recirculate") and not (
                isinstance(args[-1], A.ListExpr) and not args[-1].items):
            alt = "clone_preserving_field_list" if name == "clone3" else f"{name}_preserving_field_list"
            raise Unsupported(e.loc, f"{name} with a list of fields to preserve (use {alt} and @field_list)")
        elif self.pipeline_flags(name, args, ctx, w):
            pass
        elif name in ("assert", "assume"):
            w(f"if not {self.ex(args[0], ctx)}:")
            with w.block():
                w(f"CTX.log({name + ' failed at ' + str(e.loc)!r})")
        elif name == "log_msg":
            extra = ""
            if len(args) > 1:
                code, _ = self.concat(args[1], ctx) if isinstance(args[1], A.ListExpr) else (self.ex(args[1], ctx), 0)
                extra = f", {code}"
            w(f"CTX.log({self.ex(args[0], ctx) if args[0].const is None else repr(args[0].const)}{extra})")
        else:
            raise Unsupported(e.loc, f"extern function {name}")

    NO_FIELD_LIST = "-1"  # a hidden field-list slot's value when no field list is preserved

    def pipeline_flags(self, name: str, args: list[A.Expr], ctx: Ctx, w: Writer) -> bool:
        """clone, resubmit, recirculate and truncate: they set hidden slots the v1model pipeline
        reads after the block; False for the other extern functions."""
        h = self.hidden
        if name in ("clone", "clone3", "clone_preserving_field_list"):
            ctype = args[0]
            en = ctype.ty
            assert isinstance(en, T.Enum)
            kind = en.members[int(ctype.const)]
            self.line(w, f"s[{h['clone_type']}] = {1 if kind == 'I2E' else 2}")
            self.line(w, f"s[{h['clone_session']}] = {self.ex(args[1], ctx)}")
            fl = self.ex(args[2], ctx) if name == "clone_preserving_field_list" else self.NO_FIELD_LIST
            self.line(w, f"s[{h['clone_fl']}] = {fl}")
        elif name in ("resubmit", "resubmit_preserving_field_list", "recirculate",
                      "recirculate_preserving_field_list"):
            which = "resubmit" if name.startswith("resubmit") else "recirculate"
            fl = self.ex(args[0], ctx) if name.endswith("field_list") else self.NO_FIELD_LIST
            self.line(w, f"s[{h[which]}] = 1")
            self.line(w, f"s[{h[which + '_fl']}] = {fl}")
        elif name == "truncate":
            self.line(w, f"s[{h['truncate']}] = {self.ex(args[0], ctx)}")
        else:
            return False
        return True

    def extern_object(self, e: A.Call, ctx: Ctx, w: Writer) -> str | None:
        """A method call of an extern: packet_in's and packet_out's are compiled here (None);
        for the others, the generated name of the extern object."""
        _, ext, m, obj, _proto, tv = e.ref
        args = e.args
        if ext == "packet_in":
            if m == "extract":
                if isinstance(args[0], A.DontCare) and len(args) == 1:  # extract<H>(_): skip an H
                    self.advance(str(T.width_of(tv["T"])), w)
                else:
                    self.extract(args[0], ctx, w, args[1] if len(args) > 1 else None)
            elif m == "advance":
                if args[0].const is not None and int(args[0].const) % 8:
                    raise self.unsupported(e.loc, "advance by a number of bits that is not a multiple of 8")
                self.advance(self.ex(args[0], ctx), w)
            elif m == "lookahead":  # as a statement: only its PacketTooShort (issue1768-bmv2.p4)
                self.lookahead_check((T.width_of(tv["T"]) + 7) // 8, w)
            else:
                raise self.unsupported(e.loc, f"packet_in.{m}")
            return None
        if ext == "packet_out":
            self.emit(args[0], args[0].ty, None, ctx, w)
            return None
        assert isinstance(obj, A.Expr)
        oname = ctx.objs.get(obj.ref)
        if oname is None:
            raise CompileError(e.loc, f"{ext} instance is not visible here")
        return oname

    def lookahead_check(self, nbytes: int, w: Writer) -> None:
        """PacketTooShort unless ``nbytes`` more bytes are left to parse."""
        w(f"if pk.off + {nbytes} > pk.n:")
        with w.block():
            w(f"raise _PErr({self.errcode('PacketTooShort')})")

    def advance(self, bits: str, w: Writer) -> None:
        w(f"pk.off += {bits} >> 3")
        w("if pk.off > pk.n:")
        with w.block():
            w(f"raise _PErr({self.errcode('PacketTooShort')})")

    def extern_method(self, e: A.Call, ctx: Ctx, w: Writer) -> None:
        _, ext, m, _obj, _proto, tv = e.ref
        args = e.args
        oname = self.extern_object(e, ctx, w)
        if oname is None:
            return
        if ext == "counter" and m == "count":
            i = self.uid("_i")
            ci = self.counters[self.extern_fq[oname]]
            w(f"{i} = {self.ex_as(args[0], T.Bits(32), ctx)}")
            w(f"if {i} < {ci.size}:")
            with w.block():
                w(f"{oname}p[{i}] += 1")
                w(f"{oname}b[{i}] += s[{self.pktlen}]")
            return
        if ext == "direct_counter" and m == "count":
            return  # direct counters count every hit of their table
        if ext == "meter" and m == "execute_meter":
            idx, out = args
            ot = T.strip(out.ty)
            if not isinstance(ot, T.Bits):
                raise CompileError(out.loc, "execute_meter's result must be a bit<> field")
            i = self.uid("_i")
            w(f"{i} = {self.ex_as(idx, T.Bits(32), ctx)}")
            w(f"if {i} < {oname}.size:")  # BMv2: out of range, neither meter nor result changes
            with w.block():
                self.assign_code(out, self.fit(f"{oname}.execute({i}, s[{self.pktlen}])", ot), ctx, w)
            return
        if ext == "register":
            ri = self.registers[self.extern_fq[oname]]
            if m == "read":
                out, idx = args
                i = self.uid("_i")
                w(f"{i} = {self.ex_as(idx, T.Bits(32), ctx)}")
                code = f"({oname}[{i}] if {i} < {ri.size} else 0)"
                ost = T.strip(out.ty)
                if ost is T.BOOL:
                    code = f"bool{code}"
                elif isinstance(ost, T.Bits) and ost.signed:
                    code = self.sx(code, ost.width)  # registers hold the bits, as the control plane sees them
                self.assign_code(out, code, ctx, w)
            elif m == "write":
                idx, val = args
                i = self.uid("_i")
                w(f"{i} = {self.ex_as(idx, T.Bits(32), ctx)}")
                w(f"if {i} < {ri.size}:")
                with w.block():
                    v = self.ex_as(val, tv.get("T", val.ty), ctx)
                    st = T.strip(tv.get("T", val.ty))
                    if isinstance(st, T.Bits) and st.signed:
                        v = f"({v} & {st.mask})"
                    w(f"{oname}[{i}] = {v}")
            return
        raise Unsupported(e.loc, f"{ext}.{m}")

    def extract(self, target: A.Expr, ctx: Ctx, w: Writer, size: A.Expr | None = None) -> None:
        """``extract(target)``, or ``extract(target, size)`` of a header with a varbit field of
        ``size`` bits (as BMv2: ParserInvalidArgument if it is not a whole number of bytes,
        HeaderTooShort if it exceeds the field's maximum width)."""
        t = target.ty
        if not (isinstance(t, T.StructLike) and t.kind == "header"):
            raise CompileError(target.loc, f"extract needs a header, not {t}")
        fields = leaf_types(t)
        vb = [ft for ft in fields if isinstance(ft, T.Varbit)]
        if vb and size is None:
            raise CompileError(target.loc, f"header {t.name} has a varbit field: extract needs its size in bits")
        if size is not None and not vb:
            raise CompileError(target.loc, f"two-argument extract needs a header with a varbit field, not {t.name}")
        nbits = T.width_of(t)  # the fixed fields
        if isinstance(target, A.Member) and isinstance(target.expr.ty, T.Stack) and target.name == "next":
            stk_t = target.expr.ty
            sb = self.place(target.expr, ctx)
            es = size_of(stk_t.elem)
            w(f"i = s[{sb}]")
            w(f"if i >= {stk_t.size}:")
            with w.block():
                w(f"raise _PErr({self.errcode('StackOutOfBounds')})")
            w(f"b = {sb + 1} + i * {es}")
            base = "b"
            after = f"s[{sb}] = i + 1"
        elif (isinstance(target, A.Member) and isinstance(target.expr, A.Member) and target.expr.name == "next"
              and isinstance(target.expr.expr.ty, T.Stack)):  # a member of a header union stack's next
            stk_t = target.expr.expr.ty
            u = stk_t.elem
            assert isinstance(u, T.StructLike)
            sb = self.place(target.expr.expr, ctx)
            w(f"i = s[{sb}]")
            w(f"if i >= {stk_t.size}:")
            with w.block():
                w(f"raise _PErr({self.errcode('StackOutOfBounds')})")
            w(f"u = {sb + 1} + i * {size_of(u)}")
            w(f"b = u + {field_offset(u, target.name)}")
            base = "b"
            after = "; ".join([f"s[u + {field_offset(u, n)}] = False" for n, _ in u.fields if n != target.name]
                              + [f"s[{sb}] = i + 1"])
        else:
            base = str(self.place(target, ctx))
            after = ""
        nb = str(nbits // 8)
        if size is not None:
            w(f"vl = {self.ex_as(size, T.Bits(32), ctx)}")
            for cond, err in (("vl & 7", "ParserInvalidArgument"), (f"vl > {vb[0].width}", "HeaderTooShort")):
                w(f"if {cond}:")
                with w.block():
                    w(f"raise _PErr({self.errcode(err)})")
            nb = f"{nb} + (vl >> 3)"
        w("o = pk.off")
        w(f"e = o + {nb}")
        w("if e > pk.n:")
        with w.block():
            w(f"raise _PErr({self.errcode('PacketTooShort')})")
        w("v = int.from_bytes(pk.data[o:e], 'big')")
        w("pk.off = e")
        off = 1
        shift = nbits
        after_vb = False
        for ft in fields:
            if isinstance(ft, T.Varbit):
                after_vb = True
                value = f"(v >> {shift}) & ((1 << vl) - 1)" if shift else "v & ((1 << vl) - 1)"
                w(f"s[{base} + {off}] = {value}" if base == "b" else f"s[{int(base) + off}] = {value}")
                w(f"s[{base} + {off + 1}] = vl" if base == "b" else f"s[{int(base) + off + 1}] = vl")
                off += size_of(ft)
                continue
            fw = scalar_width(ft)
            shift -= fw
            sh = f"{shift} + vl" if vb and not after_vb else str(shift) if shift else ""
            code = f"(v >> ({sh}))" if sh else "v"
            if sh:
                code = f"({code} & {(1 << fw) - 1})"
            elif fw != nbits or vb:
                code = f"(v & {(1 << fw) - 1})"
            st = T.strip(ft)
            if st is T.BOOL:
                code = f"bool({code})"
            elif isinstance(st, T.Bits) and st.signed:
                code = f"_sx({code}, {fw})"
            w(f"s[{base} + {off}] = {code}" if base == "b" else f"s[{int(base) + off}] = {code}")
            off += size_of(ft)
        w(f"s[{base}] = True")
        if after:
            w(after)
        else:
            self.invalidate_siblings(target, ctx, w)

    def emit(self, x: A.Expr | None, t: T.Type, base: int | None, ctx: Ctx, w: Writer) -> None:
        b = base if base is not None else self.place(x, ctx)  # type: ignore[arg-type]
        if isinstance(t, T.StructLike) and t.kind == "header":
            self.emit_header(b, t, w)
        elif isinstance(t, T.StructLike):
            for n, ft in t.fields:
                if not isinstance(ft, (T.StructLike, T.Stack)):
                    raise CompileError(x.loc if x else None, f"emit: {t.name}.{n} is not a header")
                self.emit(None, ft, b + field_offset(t, n), ctx, w)
        elif isinstance(t, T.Stack):
            es = size_of(t.elem)
            for i in range(t.size):
                self.emit(None, t.elem, b + 1 + i * es, ctx, w)
        else:
            raise CompileError(x.loc if x else None, f"emit needs a header, not {t}")

    def emit_header(self, b: int, t: T.StructLike, w: Writer) -> None:
        """Deparse the header at slot ``b`` if it is valid (a varbit field: its current length)."""
        nbits = T.width_of(t)
        fields = leaf_types(t)
        vb = next((b + 1 + sum(size_of(f) for f in fields[:i]) for i, ft in enumerate(fields)
                   if isinstance(ft, T.Varbit)), None)
        parts = []
        shift = nbits
        off = 1
        for ft in fields:
            if isinstance(ft, T.Varbit):
                parts.append(f"(s[{b + off}] << {shift})" if shift else f"s[{b + off}]")
                off += size_of(ft)
                continue
            fw = scalar_width(ft)
            shift -= fw
            c = f"s[{b + off}]"
            st = T.strip(ft)
            if st is T.BOOL:
                c = f"int({c})"
            elif isinstance(st, T.Bits) and st.signed:
                c = f"({c} & {st.mask})"
            sh = f"({shift} + s[{vb + 1}])" if vb is not None and b + off < vb else str(shift) if shift else ""
            parts.append(f"({c} << {sh})" if sh else c)
            off += size_of(ft)
        nbytes = f"{nbits // 8} + (s[{vb + 1}] >> 3)" if vb is not None else str(nbits // 8)
        w(f"if s[{b}]:")
        with w.block():
            w(f"ob.append(({' | '.join(parts)}).to_bytes({nbytes}, 'big'))")
