"""Constructs of p4c's STF sample programs (testdata/p4_16_samples) that p4sim runs, each in a small
program written for p4sim: names that are also type names, p4c's include guards, and the language
features the samples use. (The samples themselves run with ``p4sim stf``, docs/p4sim.md.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from p4sim.frontend.diagnostics import CompileError, Unsupported
from p4sim.runtime.api_values import ActionCall, Match, TableEntry
from p4sim.runtime.engine_loader import load_switch
from p4sim.runtime.switch import Switch

pytestmark = pytest.mark.unit

V1_TAIL = """
control VC(inout Headers h, inout Meta m) { apply { } }
control E(inout Headers h, inout Meta m, inout standard_metadata_t sm) { apply { } }
control CC(inout Headers h, inout Meta m) { apply { } }
control D(packet_out b, in Headers h) { apply { b.emit(h); } }
"""


def load(tmp_path: Path, text: str, name: str = "prog.p4") -> Switch:
    path = tmp_path / name
    path.write_text(text)
    return load_switch(str(path), [str(tmp_path)])


def test_type_names_as_declared_names(tmp_path: Path) -> None:
    # `header hdr` is core.p4's `extract<T>(out T hdr)` parameter name, `parser p` v1model.p4's
    # `Parser<H, M> p`: p4c's grammar takes a type name wherever a name is declared
    sw = load(tmp_path, """#include <core.p4>
#include <v1model.p4>
header hdr { bit<8> a; bit<8> b; }
struct Headers { hdr hdr; }
struct Meta { bit<8> ingress; }
parser p(packet_in b, out Headers h, inout Meta m, inout standard_metadata_t sm) {
    state hdr { b.extract(h.hdr); transition accept; }
    state start { transition hdr; }
}
control ingress(inout Headers h, inout Meta m, inout standard_metadata_t sm) {
    action p(bit<8> v) { h.hdr.b = v; m.ingress = v; }
    table t { key = { h.hdr.a : exact; } actions = { p; } }
    apply { t.apply(); sm.egress_spec = 2; }
}
""" + V1_TAIL + "V1Switch(p(), VC(), ingress(), E(), CC(), D()) main;\n")
    tid = sw.table_id("ingress.t")
    aid = sw.action_id("ingress.p")
    sw.table_insert(TableEntry(tid, {sw.field_id(tid, "h.hdr.a"): Match("exact", 1)},
                               ActionCall(aid, {sw.param_id(aid, "v"): 0x77})))
    assert sw.process(0, bytes([1, 0])) == [(2, bytes([1, 0x77]))]


def test_values_hide_type_names_in_their_scope(tmp_path: Path) -> None:
    # as p4c's lexer: a parameter of a control (in its body) and a variable or constant (after
    # its declaration, to the end of its block) named like a type denote the value there
    sw = load(tmp_path, """#include <core.p4>
#include <v1model.p4>
header hdr { bit<8> a; bit<8> b; }
struct Headers { hdr h; }
struct Meta { }
control Sub(inout hdr hdr) { apply { hdr.a = hdr.a + 1; } }
bit<8> twice(in bit<8> Meta) { return Meta + Meta; }
parser p(packet_in b, out Headers h, inout Meta m, inout standard_metadata_t sm) {
    state start { b.extract(h.h); transition accept; }
}
control ingress(inout Headers h, inout Meta m, inout standard_metadata_t sm) {
    Sub() s;
    apply {
        hdr tmp = h.h;
        s.apply(tmp);
        bit<8> Meta = twice(tmp.a);
        h.h.b = Meta;
        sm.egress_spec = 1;
    }
}
""" + V1_TAIL + "V1Switch(p(), VC(), ingress(), E(), CC(), D()) main;\n")
    assert sw.process(0, bytes([3, 0])) == [(1, bytes([3, 8]))]


def test_p4c_include_guards_are_defined(tmp_path: Path) -> None:
    # p4c's skeleton files (arith-skeleton.p4 ...) guard on the include guards of core.p4 and
    # v1model.p4; p4sim's own include files define them too
    (tmp_path / "skeleton.p4").write_text("""
#ifdef _CORE_P4_
#ifdef _V1_MODEL_P4_
struct Meta { }
parser P(packet_in b, out Headers h, inout Meta m, inout standard_metadata_t sm) {
    state start { b.extract(h.h); transition accept; }
}
""" + V1_TAIL + """
control I(inout Headers h, inout Meta m, inout standard_metadata_t sm) { apply { sm.egress_spec = 1; } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
#endif
#endif
""")
    sw = load(tmp_path, """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; }
struct Headers { h_t h; }
#include "skeleton.p4"
""")
    assert sw.process(0, b"\x05") == [(1, b"\x05")]


SUB_PROGRAM = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; }
struct Headers { h_t h1; h_t h2; h_t h3; }
struct Meta { }
parser Sub(packet_in b, out h_t h) {
    state start { b.extract(h); transition select(h.a) { 0: reject; default: accept; } }
}
parser P(packet_in b, out Headers h, inout Meta m, inout standard_metadata_t sm) {
    Sub() sub;
    state start { sub.apply(b, h.h1); transition second; }
    state second { sub.apply(b, h.h2); transition accept; }
}
control Add(inout h_t h, in bit<8> v) {
    counter(4, CounterType.packets) hits;
    apply { h.a = h.a + v; hits.count((bit<32>)v); }
}
control ingress(inout Headers h, inout Meta m, inout standard_metadata_t sm) {
    Add() add;
    apply { add.apply(h.h1, 1); add.apply(h.h2, 2); sm.egress_spec = 1; }
}
control VC(inout Headers h, inout Meta m) { apply { } }
control E(inout Headers h, inout Meta m, inout standard_metadata_t sm) { apply { } }
control CC(inout Headers h, inout Meta m) { apply { } }
control D(packet_out b, in Headers h) { apply { b.emit(h); } }
V1Switch(P(), VC(), ingress(), E(), CC(), D()) main;
"""


def test_parser_and_control_instances_applied_twice(tmp_path: Path) -> None:
    # parser-inline-test*.p4, header-stack-ops-bmv2.p4: one instance, applied at two places with
    # other arguments; its externs are shared by the applications
    sw = load(tmp_path, SUB_PROGRAM)
    assert sw.process(0, bytes([5, 7, 9])) == [(1, bytes([6, 9, 9]))]
    cid = sw.entity_id("counter", "ingress.add.hits")
    assert [sw.counter_read(cid, i)[0] for i in range(4)] == [0, 1, 1, 0]
    # the second application rejects: the headers extracted so far stay valid (v1model), h3 is not
    assert sw.process(0, bytes([5, 0, 9])) == [(1, bytes([6, 2, 9]))]


def test_control_with_tables_applied_twice_with_other_arguments_is_refused(tmp_path: Path) -> None:
    text = SUB_PROGRAM.replace("apply { h.a = h.a + v;", """
    action set(bit<8> x) { h.a = x; }
    table t { key = { h.a : exact; } actions = { set; NoAction; } default_action = NoAction(); }
    apply { t.apply(); h.a = h.a + v;""")
    with pytest.raises(Unsupported, match=r"prog.p4:23:33: error: applying control instance add, which has tables, "
                       "again with other arguments is not supported by p4sim"):
        load(tmp_path, text)
    # with the same arguments it runs (p4sim warns that the table is applied twice)
    sw = load(tmp_path, text.replace("add.apply(h.h2, 2)", "add.apply(h.h1, 1)"))
    assert sw.process(0, bytes([5, 7, 9])) == [(1, bytes([7, 7, 9]))]


VARBIT_PROGRAM = """#include <core.p4>
#include <v1model.p4>
header len_t { bit<8> n; }
header opt_t { bit<8> kind; varbit<32> data; bit<8> tail; }
struct Headers { len_t len; opt_t o1; opt_t o2; }
struct Meta { bit<16> sum; bit<8> err; }
parser P(packet_in b, out Headers h, inout Meta m, inout standard_metadata_t sm) {
    state start {
        b.extract(h.len);
        b.extract(h.o1, (bit<32>)h.len.n);
        b.extract(h.o2, (bit<32>)h.len.n);
        transition accept;
    }
}
control I(inout Headers h, inout Meta m, inout standard_metadata_t sm) {
    varbit<32> tmp;
    apply {
        sm.egress_spec = 1;
        h.len.n = sm.parser_error == error.NoError ? 8w0 :
                  sm.parser_error == error.ParserInvalidArgument ? 8w1 :
                  sm.parser_error == error.HeaderTooShort ? 8w2 :
                  sm.parser_error == error.PacketTooShort ? 8w3 : 8w4;
        if (h.o1.isValid() && h.o2.isValid()) {
            if (h.o1.data == h.o2.data) { h.o1.kind = 0xEE; }
            if (h.o1 == h.o2) { h.o2.kind = 0xEE; }
            tmp = h.o1.data;             // swap the two varbit fields
            h.o1.data = h.o2.data;
            h.o2.data = tmp;
        }
    }
}
control VC(inout Headers h, inout Meta m) { apply { } }
control E(inout Headers h, inout Meta m, inout standard_metadata_t sm) { apply { } }
control CC(inout Headers h, inout Meta m) {
    apply { update_checksum(true, { h.o1.kind, h.o1.data }, h.o1.tail, HashAlgorithm.csum16); }
}
control D(packet_out b, in Headers h) { apply { b.emit(h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def _csum16(data: bytes) -> int:
    data += b"\0" * (len(data) % 2)
    s = sum(int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


@pytest.mark.parametrize("n", [0, 8, 16, 32])
def test_varbit_extract_emit_compare_assign_checksum(tmp_path: Path, n: int) -> None:
    # the varbit samples (issue447-*, equality-bmv2, checksum1-bmv2 ...): extract(h, bits),
    # emit with the current length, == of varbit fields and of headers, assignment, checksums
    sw = load(tmp_path, VARBIT_PROGRAM)
    nb = n // 8
    d1, d2 = bytes(range(1, nb + 1)), bytes(range(0x41, 0x41 + nb))
    pkt = bytes([n]) + b"\x10" + d1 + b"\x00" + b"\x20" + d2 + b"\x00" + b"payload"
    [(port, out)] = sw.process(0, pkt)
    assert port == 1 and out[0] == 0
    kind1 = 0xEE if d1 == d2 else 0x10  # only equal when empty; the headers differ in kind
    tail = _csum16(bytes([kind1]) + d2) & 0xFF  # the checksum over the (swapped) varbit's bytes
    assert out == bytes([0, kind1]) + d2 + bytes([tail, 0x20]) + d1 + b"\x00" + b"payload"


def test_varbit_extract_errors(tmp_path: Path) -> None:
    sw = load(tmp_path, VARBIT_PROGRAM)
    # a length that is not whole bytes, longer than varbit<32>, longer than the packet
    for n, code in ((12, 1), (40, 2), (32, 3)):
        [(_, out)] = sw.process(0, bytes([n]) + b"\x10\x01\x02")
        assert out[0] == code, (n, out.hex())


COPY_PROGRAM = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; bit<8> e; }
struct Headers { h_t h; }
struct Meta { }
bit<8> two_outs(inout bit<8> x, out bit<8> y) {
    if (x == 1) { y = 3; return 0; }   // copy-out on this return too: y (3) is copied last
    y = 4;
    return 0;
}
parser P(packet_in b, out Headers h, inout Meta m, inout standard_metadata_t sm) {
    state start { b.extract(h.h); transition accept; }
}
control ingress(inout Headers h, inout Meta m, inout standard_metadata_t sm) {
    bit<8> c = 12;
    action keep(inout bit<8> x) { h.h.a = x; c = 24; }        // copy-out of x restores c
    action look(in h_t v) { h.h.b = 1; h.h.c = v.b; }          // v is a copy: the old b
    action bit0(inout bit<1> x) { h.h.d = 2; x = 1; }          // a slice argument: copied out
    apply {
        keep(c);
        keep(c);
        look(h.h);
        bit0(h.h.d[0:0]);
        two_outs(h.h.e, h.h.e);
        sm.egress_spec = 1;
    }
}
control VC(inout Headers h, inout Meta m) { apply { } }
control E(inout Headers h, inout Meta m, inout standard_metadata_t sm) { apply { } }
control CC(inout Headers h, inout Meta m) { apply { } }
control D(packet_out b, in Headers h) { apply { b.emit(h); } }
V1Switch(P(), VC(), ingress(), E(), CC(), D()) main;
"""


@pytest.mark.parametrize(("e", "e_out"), [(1, 3), (9, 4)])
def test_copy_in_copy_out_where_aliasing_differs(tmp_path: Path, e: int, e_out: int) -> None:
    # gauntlet_copy_out, gauntlet_indirect_hdr_assign_*, gauntlet_side_effect_order_5, issue2498
    sw = load(tmp_path, COPY_PROGRAM)
    [(port, out)] = sw.process(0, bytes([0, 7, 0, 0x10, e]))
    assert port == 1
    assert out == bytes([12, 1, 7, 3, e_out])


def _one_header(tmp_path: Path, ingress: str, parser: str = "b.extract(h.h); transition accept;",
                fields: str = "bit<8> a; bit<8> b; bit<8> c; bit<8> d;") -> Switch:
    head = """#include <core.p4>
#include <v1model.p4>
header h_t { FIELDS }
struct Headers { h_t h; }
struct Meta { }
struct B8 { bit<64> bits; }
parser P(packet_in b, out Headers h, inout Meta m, inout standard_metadata_t sm) {
    state start { PARSER }
}
control ingress(inout Headers h, inout Meta m, inout standard_metadata_t sm) {
INGRESS
}
"""
    head = head.replace("FIELDS", fields).replace("PARSER", parser).replace("INGRESS", ingress)
    return load(tmp_path, head + V1_TAIL.replace("b.emit(h)", "b.emit(h.h)")
        + "V1Switch(P(), VC(), ingress(), E(), CC(), D()) main;\n")


def test_integer_literals_compare_as_the_other_sides_type(tmp_path: Path) -> None:
    # issue2392-bmv2.p4, gauntlet_various_ops-bmv2.p4: -1 is 8w255 next to a bit<8>, also when
    # both sides are constants and the comparison is folded
    sw = _one_header(tmp_path, """apply {
        sm.egress_spec = 1;
        if (8w255 == -1) { h.h.a = 1; }
        if (-1 > 4w8) { h.h.b = 1; }
        if (4w8 > -1) { h.h.c = 1; }
        if (-1 > 4s7) { h.h.d = 1; }
    }""")
    assert sw.process(0, bytes(4)) == [(1, bytes([1, 1, 0, 0]))]


def test_bmv2_priority_annotation_on_const_entries(tmp_path: Path) -> None:
    # table-entries-priority-bmv2.p4: p4c gives BMv2 @priority(n), else the entry's position
    # from 1, and the smallest wins
    sw = _one_header(tmp_path, """
    action set(bit<8> v) { h.h.b = v; }
    table t {
        key = { h.h.a : ternary; }
        actions = { set; }
        const entries = {
            0x01 &&& 0x0F : set(1) @priority(3);
            0x11          : set(2);
            0x11 &&& 0xF1 : set(3) @priority(1);
        }
    }
    apply { t.apply(); sm.egress_spec = 1; }""")
    assert sw.process(0, bytes([0x11, 0, 0, 0]))[0][1][1] == 3
    assert sw.process(0, bytes([0x21, 0, 0, 0]))[0][1][1] == 1


def test_lookahead_as_a_statement_checks_the_length(tmp_path: Path) -> None:
    # issue1768-bmv2.p4: lookahead<T>() whose value is not used still fails on a short packet
    sw = _one_header(tmp_path, """apply {
        sm.egress_spec = 1;
        if (sm.parser_error == error.PacketTooShort) { h.h.setValid(); h.h.a = 0xEE; }
    }""", parser="b.lookahead<B8>(); b.extract(h.h); transition accept;", fields="bit<8> a;")
    assert sw.process(0, bytes(7)) == [(1, bytes([0xEE]) + bytes(7))]
    assert sw.process(0, bytes([5]) + bytes(7)) == [(1, bytes([5]) + bytes(7))]


def test_header_union_stacks(tmp_path: Path) -> None:
    # issue561-4..7-bmv2.p4: a stack of header unions, extracted by index and through next
    sw = load(tmp_path, """#include <core.p4>
#include <v1model.p4>
header t_t { bit<8> t; }
header o1_t { bit<8> data; }
header o2_t { bit<16> data; }
header_union U { o1_t byte; o2_t short; }
struct Headers { t_t base; U[2] u; }
struct Meta { }
parser P(packet_in b, out Headers h, inout Meta m, inout standard_metadata_t sm) {
    state start {
        b.extract(h.base);
        transition select(h.base.t) { 0: bytes; 1: mixed; default: accept; }
    }
    state bytes { b.extract(h.u.next.byte); b.extract(h.u.next.byte); transition accept; }
    state mixed { b.extract(h.u[0].short); b.extract(h.u[1].byte); transition accept; }
}
control ingress(inout Headers h, inout Meta m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (h.u[1].byte.isValid()) { h.u[1].byte.data = h.u[1].byte.data + 1; }
        if (h.u[0].short.isValid()) { h.u[0].byte.setValid(); h.u[0].byte.data = 0xAA; }
    }
}
""" + V1_TAIL + "V1Switch(P(), VC(), ingress(), E(), CC(), D()) main;\n")
    assert sw.process(0, bytes([0, 5, 6, 7])) == [(1, bytes([0, 5, 7, 7]))]
    # the short of u[0] becomes invalid when its byte is made valid
    assert sw.process(0, bytes([1, 1, 2, 3, 9])) == [(1, bytes([1, 0xAA, 4, 9]))]


FUNCTIONS_PROGRAM = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
header i_t { bit<8> idx; }
struct Headers { h_t h; h_t[2] s; i_t i; }
struct Meta { }
h_t make(inout bit<8> x) {          // returns a header; copy-out of x happens before the caller's copy
    if (x == 1) { x = 9; return { 1, 1 }; }
    return { 2, x };
}
bit<8> sum(in h_t v) { return v.a + v.b; }
bit<1> pick(inout bit<8> v) { v = v + 1; return 0; }
parser P(packet_in b, out Headers h, inout Meta m, inout standard_metadata_t sm) {
    state start { b.extract(h.h); b.extract(h.s.next); b.extract(h.s.next); b.extract(h.i); transition accept; }
}
control ingress(inout Headers h, inout Meta m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        h.h = make(h.h.a);
        h.i.idx = sum({ 3, 4 });
        h.s[pick(h.s[h.h.b[0:0]].a)].b = 0xEE;
    }
}
""" + V1_TAIL + "V1Switch(P(), VC(), ingress(), E(), CC(), D()) main;\n"


@pytest.mark.parametrize(("a", "out_h"), [(1, [1, 1]), (5, [2, 5])])
def test_functions_returning_headers_and_taking_values(tmp_path: Path, a: int, out_h: list[int]) -> None:
    # gauntlet_function_if_hdr_return, gauntlet_hdr_function_cast, issue2383: a function returns a
    # header; gauntlet_hdr_in_value: a struct value as an argument; gauntlet_index_8: an inout
    # argument at a run-time index
    sw = load(tmp_path, FUNCTIONS_PROGRAM)
    [(port, out)] = sw.process(0, bytes([a, 0, 10, 11, 20, 21, 0]))
    # pick() increments s[1].a (h.h.b is odd) and gives index 0
    assert port == 1 and list(out) == [*out_h, 10, 0xEE, 21, 21, 7]


def test_default_action_may_repeat_the_directional_arguments(tmp_path: Path) -> None:
    # v1model-special-ops-bmv2.p4: default_action = my_drop(standard_metadata), the argument of
    # the actions list; another argument is refused
    ingress = """
    action fwd(inout standard_metadata_t s, bit<9> port) { s.egress_spec = port; }
    table t {
        key = { h.h.a : exact; }
        actions = { fwd(sm); }
        default_action = fwd(sm, 3);
    }
    apply { t.apply(); }"""
    sw = _one_header(tmp_path, ingress)
    assert sw.process(0, bytes(4)) == [(3, bytes(4))]
    with pytest.raises(CompileError, match=r"argument other of action fwd is not the one of the actions list \(sm\)"):
        _one_header(tmp_path, "standard_metadata_t other;" + ingress.replace("fwd(sm, 3)", "fwd(other, 3)"))


def test_empty_actions_list_nested_slice_target_and_extract_into_dontcare(tmp_path: Path) -> None:
    # gauntlet_nested_switch-bmv2.p4 (actions = {}), gauntlet_nested_slice-bmv2.p4,
    # issue774-4-bmv2.p4 (extract<H>(_) skips an H)
    sw = _one_header(tmp_path, """
    table t { key = { } actions = { } }
    apply {
        sm.egress_spec = 1;
        switch (t.apply().action_run) { default: { h.h.b = 7; } }
        bit<8> n = 0xFF;
        n[7:4][2:0][1:0] = 0;
        h.h.a = n;
    }""", parser="b.extract<h_t>(_); b.extract(h.h); transition accept;")
    assert sw.process(0, bytes(range(8))) == [(1, bytes([0xCF, 7, 6, 7]))]


def test_top_level_register_shared_by_ingress_and_egress(tmp_path: Path) -> None:
    # issue1097-2-bmv2.p4: an extern instance declared at the top level, used by two controls
    sw = load(tmp_path, """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct Headers { h_t h; }
struct Meta { }
register<bit<8>>(4) r;
parser P(packet_in b, out Headers h, inout Meta m, inout standard_metadata_t sm) {
    state start { b.extract(h.h); transition accept; }
}
control ingress(inout Headers h, inout Meta m, inout standard_metadata_t sm) {
    apply { r.write(1, h.h.a); sm.egress_spec = 1; }
}
control E(inout Headers h, inout Meta m, inout standard_metadata_t sm) {
    apply { bit<8> v; r.read(v, 1); h.h.b = v + 1; }
}
control VC(inout Headers h, inout Meta m) { apply { } }
control CC(inout Headers h, inout Meta m) { apply { } }
control D(packet_out b, in Headers h) { apply { b.emit(h); } }
V1Switch(P(), VC(), ingress(), E(), CC(), D()) main;
""")
    assert sw.process(0, bytes([5, 0])) == [(1, bytes([5, 6]))]
    assert sw.register_read(sw.entity_id("register", "r"), 1) == 5


def test_serializable_enum_key_with_an_integer_mask(tmp_path: Path) -> None:
    # table-entries-ser-enum-bmv2.p4: K.X &&& 0xf0 in a const entry of an enum-typed key
    sw = load(tmp_path, """#include <core.p4>
#include <v1model.p4>
enum bit<8> K { X = 0x12, Y = 0x34 }
header h_t { K e; bit<8> b; }
struct Headers { h_t h; }
struct Meta { }
parser P(packet_in b, out Headers h, inout Meta m, inout standard_metadata_t sm) {
    state start { b.extract(h.h); transition accept; }
}
control ingress(inout Headers h, inout Meta m, inout standard_metadata_t sm) {
    action set(bit<8> v) { h.h.b = v; }
    table t {
        key = { h.h.e : ternary; }
        actions = { set; NoAction; }
        const entries = { K.X &&& 0xf0 : set(1); K.Y : set(2); }
    }
    apply { t.apply(); sm.egress_spec = 1; }
}
""" + V1_TAIL + "V1Switch(P(), VC(), ingress(), E(), CC(), D()) main;\n")
    assert sw.process(0, bytes([0x1F, 0]))[0][1] == bytes([0x1F, 1])
    assert sw.process(0, bytes([0x34, 0]))[0][1] == bytes([0x34, 2])
    assert sw.process(0, bytes([0x35, 0]))[0][1] == bytes([0x35, 0])


def test_tuple_variables(tmp_path: Path) -> None:
    # issue2488-bmv2.p4: a tuple variable initialized from a list whose items have side effects
    sw = _one_header(tmp_path, """
    bit<8> bump(inout bit<8> x) { x = x + 1; return x; }
    tuple<bit<8>, bit<8>> t = { h.h.a, bump(h.h.b) };
    apply { t = { 1, bump(h.h.c) }; sm.egress_spec = 1; }""")
    assert sw.process(0, bytes([1, 2, 3, 4])) == [(1, bytes([1, 3, 4, 4]))]


def test_direct_invocation_of_a_control_type(tmp_path: Path) -> None:
    # issue1566-bmv2.p4: E.apply(x) applies an implicit instance of the control type E
    sw = load(tmp_path, """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct Headers { h_t h; }
struct Meta { }
control Add(inout bit<8> x) {
    counter(1, CounterType.packets) hits;
    apply { x = x + 1; hits.count(0); }
}
control Inc(inout bit<8> x) { apply { x = x + 1; } }
parser P(packet_in b, out Headers h, inout Meta m, inout standard_metadata_t sm) {
    state start { b.extract(h.h); transition accept; }
}
control ingress(inout Headers h, inout Meta m, inout standard_metadata_t sm) {
    apply { Add.apply(h.h.a); Inc.apply(h.h.b); Inc.apply(h.h.b); sm.egress_spec = 1; }
}
""" + V1_TAIL + "V1Switch(P(), VC(), ingress(), E(), CC(), D()) main;\n")
    assert sw.process(0, bytes([1, 2])) == [(1, bytes([2, 4]))]
    # p4c's InstantiateDirectCalls: an instance per call, named after the type for the control plane
    assert sw.counter_read(sw.entity_id("counter", "ingress.Add.hits"), 0)[0] == 1


def test_control_instance_as_constructor_argument(tmp_path: Path) -> None:
    # issue1566-bmv2.p4: C2(c1) c2; C3(c1) c3; both apply the one instance c1 (its counter shared)
    sw = load(tmp_path, """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; }
struct Headers { h_t h; }
struct Meta { }
control Step(inout bit<8> x);
control C1(inout bit<8> x) {
    counter(1, CounterType.packets) stats;
    apply { x = x + 1; stats.count(0); }
}
control Twice(inout bit<8> x)(Step s) { apply { x = x << 1; s.apply(x); } }
parser P(packet_in b, out Headers h, inout Meta m, inout standard_metadata_t sm) {
    state start { b.extract(h.h); transition accept; }
}
control ingress(inout Headers h, inout Meta m, inout standard_metadata_t sm) {
    C1() c1;
    Twice(c1) t1;
    Twice(c1) t2;
    apply { t1.apply(h.h.a); t2.apply(h.h.a); sm.egress_spec = 1; }
}
""" + V1_TAIL + "V1Switch(P(), VC(), ingress(), E(), CC(), D()) main;\n")
    assert sw.process(0, bytes([1])) == [(1, bytes([7]))]  # ((1 << 1) + 1) << 1) + 1
    assert sw.counter_read(sw.entity_id("counter", "ingress.c1.stats"), 0)[0] == 2
    with pytest.raises(CompileError, match="cannot implicitly convert"):
        load(tmp_path, (tmp_path / "prog.p4").read_text().replace("control Step(inout bit<8> x);",
                                                                   "control Step(in bit<8> x);"))
