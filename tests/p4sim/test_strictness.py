"""p4sim is as strict as p4c (and p4c-bm2-ss) and accepts what they accept.

Each rejection is a small program written for this file after a check that p4c makes (its
``testdata/p4_16_errors`` programs, the P4_16 specification, the BMv2 back end). It asserts the
message and the line of the ``/*HERE*/`` marker, in p4c's ``file:line:col: error: message`` form.
Each acceptance is a valid construct p4c compiles for v1model; some also run packets to show the
construct does what the specification says.

Run: .venv/bin/pytest tests/p4sim/test_strictness.py -q
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from p4sim.backend.p4info import build_p4info
from p4sim.build import build
from p4sim.frontend.diagnostics import CompileError, Unsupported
from p4sim.runtime.engine_loader import load_switch

pytestmark = pytest.mark.unit

PROGRAM = """#include <core.p4>
#include <v1model.p4>
header h_t {{ bit<8> a; bit<16> b; bit<32> c; }}
header s_t {{ bit<8> v; }}
struct headers_t {{ h_t h; s_t[4] st; }}
struct meta_t {{ bit<8> m; bit<16> w; bool f; }}
{decls}
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {{
{parser}
}}
control VC(inout headers_t hdr, inout meta_t meta) {{ apply {{ }} }}
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {{
{ingress}
}}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control CC(inout headers_t hdr, inout meta_t meta) {{ apply {{ }} }}
control D(packet_out pkt, in headers_t hdr) {{
{deparser}
}}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""

START = "state start { pkt.extract(hdr.h); transition accept; }"


def source(decls: str = "", parser: str = START, ingress: str = "apply { }",
           deparser: str = "apply { pkt.emit(hdr.h); }") -> str:
    return PROGRAM.format(decls=decls, parser=parser, ingress=ingress, deparser=deparser)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prog.p4"
    path.write_text(text)
    return path


# (id, program pieces, expected message part). The error must be on the /*HERE*/ line.
REJECTED: list[tuple[str, dict[str, str], str]] = [
    # implicit width and type changes
    ("compare_different_widths", {"ingress": "apply {\n if (hdr.h.a == hdr.h.b) { } /*HERE*/\n}"},
     "operands have different types: bit<8> and bit<16>"),
    ("multiply_different_widths", {"ingress": "apply {\n hdr.h.c = hdr.h.a * hdr.h.c; /*HERE*/\n}"},
     "operands have different types: bit<8> and bit<32>"),
    ("signed_and_unsigned", {"ingress": "apply {\n int<8> s = 1;\n hdr.h.a = hdr.h.a + s; /*HERE*/\n}"},
     "operands have different types: bit<8> and int<8>"),
    ("narrowing_slice", {"ingress": "apply {\n hdr.h.a = hdr.h.b[8:0]; /*HERE*/\n}"},
     "cannot implicitly convert bit<9> to bit<8>"),
    ("concatenation_result_width", {"ingress": "apply {\n hdr.h.a = 8w1 ++ 8w2; /*HERE*/\n}"},
     "cannot implicitly convert bit<16> to bit<8>"),
    ("compound_assignment_width", {"ingress": "apply {\n hdr.h.a += 16w1; /*HERE*/\n}"},
     "operands have different types: bit<8> and bit<16>"),
    ("conditional_branch_widths", {"ingress": "apply {\n hdr.h.a = meta.f ? 8w1 : 16w2; /*HERE*/\n}"},
     "operands have different types: bit<8> and bit<16>"),
    ("sized_literal_overflow", {"ingress": "apply {\n hdr.h.a = 8w256; /*HERE*/\n}"},
     "value 256 does not fit in bit<8>"),
    ("unsized_literal_overflow", {"ingress": "apply {\n hdr.h.a = 300; /*HERE*/\n}"},
     "value 300 does not fit in bit<8>"),
    ("signed_literal_overflow", {"ingress": "apply {\n int<8> s = 128; /*HERE*/\n}"},
     "value 128 does not fit in int<8>"),
    ("bool_into_bit", {"ingress": "apply {\n bit<1> x = true; /*HERE*/\n}"},
     "cannot implicitly convert bool to bit<1>"),
    ("bit_into_bool", {"ingress": "apply {\n meta.f = hdr.h.a; /*HERE*/\n}"},
     "cannot implicitly convert bit<8> to bool"),
    ("cast_bit8_to_bool", {"ingress": "apply {\n meta.f = (bool)hdr.h.a; /*HERE*/\n}"},
     "cannot cast bit<8> to bool"),
    ("cast_header_to_bits", {"ingress": "apply {\n hdr.h.c = (bit<32>)hdr.h; /*HERE*/\n}"},
     "cannot cast h_t to bit<32>"),
    ("logical_not_of_bits", {"ingress": "apply {\n meta.f = !hdr.h.a; /*HERE*/\n}"},
     "! needs a bool, not bit<8>"),
    ("ordering_of_bools", {"ingress": "apply {\n if (meta.f < meta.f) { } /*HERE*/\n}"},
     "< cannot be applied to bool"),
    ("conditional_on_bits", {"ingress": "apply {\n hdr.h.a = hdr.h.a ? 8w1 : 8w2; /*HERE*/\n}"},
     "condition must be bool"),
    ("different_enums", {"decls": "enum E { X }\nenum F { X }",
                         "ingress": "apply {\n if (E.X == F.X) { } /*HERE*/\n}"},
     "operands have different types: E and F"),
    ("struct_into_other_struct", {"ingress": "apply {\n meta = hdr; /*HERE*/\n}"},
     "cannot implicitly convert headers_t to meta_t"),
    ("signed_division", {"ingress": "apply {\n int<8> x = 4;\n int<8> y = x / 2; /*HERE*/\n}"},
     "/ is not defined for signed values"),
    # shifts and slices
    ("shift_by_negative", {"ingress": "apply {\n hdr.h.a = hdr.h.a << -1; /*HERE*/\n}"}, "negative shift amount"),
    ("shift_by_signed", {"ingress": "apply {\n hdr.h.a = hdr.h.a << 8s1; /*HERE*/\n}"},
     "shift amount must be unsigned"),
    ("slice_out_of_range", {"ingress": "apply {\n hdr.h.a = hdr.h.b[16:9]; /*HERE*/\n}"},
     "slice [16:9] out of range for bit<16>"),
    # directions, constants, action data
    ("write_in_parameter", {"ingress": "action a(in bit<8> v) {\n v = 1; /*HERE*/\n}\napply { a(1); }"},
     "cannot assign to v: it is an 'in' parameter"),
    ("write_action_data", {"ingress": "action a(bit<8> v) {\n v = v + 1; /*HERE*/\n}\napply { a(1); }"},
     "directionless"),
    ("write_local_constant", {"ingress": "apply {\n const bit<8> k = 1;\n k = 2; /*HERE*/\n}"},
     "cannot assign to constant k"),
    ("in_parameter_as_out_argument",
     {"decls": "control Sub(in bit<8> v) {\n action set(out bit<8> x) { x = 1; }\n apply {\n set(v); /*HERE*/\n }\n}"},
     "cannot pass as out argument v: it is an 'in' parameter"),
    ("constant_from_a_field", {"ingress": "apply {\n const bit<8> k = hdr.h.a; /*HERE*/\n}"},
     "k: initializer is not a compile-time constant"),
    ("action_data_before_direction", {"ingress": "action a(bit<8> v, inout bit<8> x) { } /*HERE*/\napply { }"},
     "directional parameters must come before action data parameters"),
    # where statements may appear
    ("table_applied_in_action",
     {"ingress": "action n() { }\ntable t { actions = { n; } }\naction a() { t.apply(); /*HERE*/ }\n"
                 "table u { actions = { a; } }\napply { u.apply(); }"},
     "tables cannot be applied inside actions or functions"),
    ("exit_in_parser", {"parser": "state start {\n exit; /*HERE*/\n transition accept; }"},
     "exit is not allowed in a parser"),
    ("return_in_parser", {"parser": "state start {\n return; /*HERE*/\n transition accept; }"},
     "return is not allowed in a parser"),
    ("return_value_from_action", {"ingress": "action a() {\n return 1; /*HERE*/\n}\napply { a(); }"},
     "return with a value outside a function"),
    ("verify_in_control", {"ingress": "apply {\n verify(true, error.NoMatch); /*HERE*/\n}"},
     "verify: may only be invoked in parsers"),
    ("action_called_from_parser", {"decls": "action top() { }",
                                   "parser": "state start {\n top(); /*HERE*/\n transition accept; }"},
     "actions cannot be called from a parser"),
    ("stack_next_in_control", {"ingress": "apply {\n hdr.st.next.v = 1; /*HERE*/\n}"},
     "stack.next may only be used in a parser"),
    # extern calls: argument count and types
    ("register_read_one_argument", {"ingress": "register<bit<8>>(4) r;\napply {\n r.read(meta.m); /*HERE*/\n}"},
     "register.read: no overload takes 1 arguments"),
    ("register_write_wrong_value_width",
     {"ingress": "register<bit<8>>(4) r;\napply {\n r.write(0, hdr.h.b); /*HERE*/\n}"},
     "cannot implicitly convert bit<16> to bit<8> for parameter value"),
    ("register_index_not_bit32",
     {"ingress": "register<bit<8>>(4) r;\napply {\n r.write(hdr.h.a, 1); /*HERE*/\n}"},
     "cannot implicitly convert bit<8> to bit<32> for parameter index"),
    ("hash_without_max", {"ingress": "apply {\n hash(meta.w, HashAlgorithm.crc16, 16w0, {hdr.h.a}); /*HERE*/\n}"},
     "hash: no overload takes 4 arguments"),
    ("hash_algorithm_not_enum",
     {"ingress": "apply {\n hash(meta.w, 8w1, 16w0, {hdr.h.a}, 32w16); /*HERE*/\n}"},
     "cannot implicitly convert bit<8> to HashAlgorithm for parameter algo"),
    ("digest_without_data", {"ingress": "apply {\n digest<meta_t>(1); /*HERE*/\n}"},
     "digest: no overload takes 1 arguments"),
    ("mark_to_drop_without_metadata", {"ingress": "apply {\n mark_to_drop(); /*HERE*/\n}"},
     "mark_to_drop: no overload takes 0 arguments"),
    ("counter_index_width",
     {"ingress": "counter(4, CounterType.packets) c;\napply {\n c.count(8w1); /*HERE*/\n}"},
     "cannot implicitly convert bit<8> to bit<32> for parameter index"),
    ("action_missing_argument", {"ingress": "action a(bit<8> v) { hdr.h.a = v; }\napply {\n a(); /*HERE*/\n}"},
     "action a: too few arguments (0 given, 1 expected)"),
    ("action_argument_width",
     {"ingress": "action a(in bit<8> v) { hdr.h.a = v; }\napply {\n a(hdr.h.b); /*HERE*/\n}"},
     "cannot implicitly convert bit<16> to bit<8> for parameter v"),
    ("push_front_negative", {"ingress": "apply {\n hdr.st.push_front(-1); /*HERE*/\n}"},
     "push_front: the count must not be negative"),
    # declarations
    ("duplicate_action", {"ingress": "action a() { }\naction a() { } /*HERE*/\napply { }"}, "a: duplicate declaration"),
    ("duplicate_local", {"ingress": "apply {\n bit<8> x = 1;\n bit<8> x = 2; /*HERE*/\n}"},
     "x: duplicate declaration"),
    ("duplicate_field", {"decls": "header d_t { bit<8> a;\n bit<8> a; /*HERE*/\n}"}, "a: duplicate field in d_t"),
    ("duplicate_type", {"decls": "struct h_t { bit<8> z; } /*HERE*/"}, "h_t: duplicate declaration"),
    ("duplicate_state", {"parser": "state start { transition accept; }\nstate start { transition accept; } /*HERE*/"},
     "start: duplicate declaration"),
    ("declared_accept_state", {"parser": "state start { transition accept; }\nstate accept { transition reject; } /*HERE*/"},
     "state accept is built in and cannot be declared"),
    ("variable_used_before_declaration", {"ingress": "apply {\n y = 1; /*HERE*/\n bit<8> y = 2;\n}"},
     "y: undeclared name"),
    ("action_used_before_declaration", {"ingress": "action a() { b(); /*HERE*/ }\naction b() { }\napply { a(); }"},
     "b: undeclared name"),
    ("header_inside_header", {"decls": "header d_t { h_t inner; /*HERE*/\n}"},
     "d_t.inner: header fields must be bit<>, int<>, bool, serializable enums or structs of these, not h_t"),
    ("header_field_of_type_int", {"decls": "header d_t { int inner; /*HERE*/\n}"},
     "field d_t.inner cannot have type int"),
    ("header_not_whole_bytes", {"decls": "header d_t { bit<7> a; /*HERE*/\n}"}, "header d_t is 7 bits wide"),
    ("zero_width", {"ingress": "apply {\n bit<0> z = 0; /*HERE*/\n}"}, "bit width must be a positive compile-time constant"),
    ("undeclared_enum_member", {"decls": "enum E { X, Y }", "ingress": "apply {\n E e = E.Z; /*HERE*/\n}"},
     "E.Z: no such member"),
    ("undeclared_error", {"parser": "state start {\n verify(false, error.Nope); /*HERE*/\n transition accept; }"},
     "error.Nope: not declared"),
    # parsers and select
    ("transition_to_missing_state", {"parser": "state start {\n transition nowhere; /*HERE*/\n}"},
     "nowhere: no such parser state"),
    ("select_case_wider_than_key",
     {"parser": "state start { pkt.extract(hdr.h);\n transition select(hdr.h.a) { 16w1: accept; /*HERE*/\n default: reject; } }"},
     "cannot implicitly convert bit<16> to bit<8>"),
    ("select_case_literal_overflow",
     {"parser": "state start { pkt.extract(hdr.h);\n transition select(hdr.h.a) { 300: accept; /*HERE*/\n default: reject; } }"},
     "value 300 does not fit in bit<8>"),
    ("select_tuple_too_short",
     {"parser": "state start { pkt.extract(hdr.h);\n transition select(hdr.h.a, hdr.h.b) { 8w1: accept; /*HERE*/\n"
                " default: reject; } }"},
     "keyset has 1 elements, the select has 2"),
    ("select_tuple_element_width",
     {"parser": "state start { pkt.extract(hdr.h);\n transition select(hdr.h.a, hdr.h.b) { (8w1, 8w2): accept; /*HERE*/\n"
                " default: reject; } }"},
     "cannot implicitly convert bit<8> to bit<16>"),
    ("verify_with_bits", {"parser": "state start {\n verify(8w1, error.NoMatch); /*HERE*/\n transition accept; }"},
     "cannot implicitly convert bit<8> to bool for parameter check"),
    # methods on the wrong kind of value
    ("isValid_on_struct", {"ingress": "apply {\n if (meta.isValid()) { } /*HERE*/\n}"}, "isValid: no such method of meta_t"),
    ("isValid_on_field", {"ingress": "apply {\n if (hdr.h.a.isValid()) { } /*HERE*/\n}"},
     "isValid: no such method of bit<8>"),
    ("setValid_on_struct", {"ingress": "apply {\n meta.setValid(); /*HERE*/\n}"}, "setValid: no such method of meta_t"),
    ("emit_a_field", {"deparser": "apply {\n pkt.emit(hdr.h.a); /*HERE*/\n}"}, "emit needs a header, not bit<8>"),
    ("extract_a_field", {"parser": "state start {\n pkt.extract(hdr.h.a); /*HERE*/\n transition accept; }"},
     "extract needs a header, not bit<8>"),
    ("apply_on_header", {"ingress": "apply {\n hdr.h.apply(); /*HERE*/\n}"}, "apply: no such method of h_t"),
    ("member_of_bits", {"ingress": "apply {\n hdr.h.a.b = 1; /*HERE*/\n}"}, "b: no such member of bit<8>"),
    ("stack_index_out_of_bounds", {"ingress": "apply {\n hdr.st[4].v = 1; /*HERE*/\n}"}, "index 4 out of bounds for s_t[4]"),
    # tables
    ("entry_missing_action_data",
     {"ingress": "action a(bit<8> v) { hdr.h.a = v; }\ntable t { key = { hdr.h.a: exact; } actions = { a; }\n"
                 " const entries = { 1: a(); /*HERE*/\n } }\napply { t.apply(); }"},
     "action a takes 1 action data arguments, got 0"),
    ("default_action_data_width",
     {"ingress": "action a(bit<8> v) { hdr.h.a = v; }\ntable t { key = { hdr.h.a: exact; } actions = { a; }\n"
                 " default_action = a(16w5); /*HERE*/\n}\napply { t.apply(); }"},
     "cannot implicitly convert bit<16> to bit<8>"),
    ("entry_key_wider_than_key",
     {"ingress": "action a() { }\ntable t { key = { hdr.h.a: exact; } actions = { a; }\n"
                 " const entries = { 16w1: a(); /*HERE*/\n } }\napply { t.apply(); }"},
     "cannot implicitly convert bit<16> to bit<8>"),
    ("entry_key_literal_overflow",
     {"ingress": "action a() { }\ntable t { key = { hdr.h.a: exact; } actions = { a; }\n"
                 " const entries = { 300: a(); /*HERE*/\n } }\napply { t.apply(); }"},
     "value 300 does not fit in bit<8>"),
    ("two_lpm_keys",
     {"ingress": "action a() { }\ntable t { key = { hdr.h.a: lpm;\n hdr.h.b: lpm; /*HERE*/\n } actions = { a; } }\n"
                 "apply { t.apply(); }"},
     "table t: more than one lpm key (BMv2 allows one per table)"),
    ("table_lists_a_non_action", {"ingress": "table t { actions = { nope; /*HERE*/\n } }\napply { t.apply(); }"},
     "nope: not an action"),
    ("table_size_not_constant",
     {"ingress": "action a() { }\ntable t { key = { hdr.h.a: exact; } actions = { a; }\n size = hdr.h.a; /*HERE*/\n}\n"
                 "apply { t.apply(); }"},
     "table size must be a compile-time constant"),
    ("digest_list_in_wrong_order",
     {"decls": "struct dg_t { bit<8> a; bit<16> b; }", "ingress": "apply {\n digest<dg_t>(1, {hdr.h.b, hdr.h.a}); /*HERE*/\n}"},
     "digest: cannot implicitly convert {bit<16>, bit<8>} to dg_t for parameter data"),
    ("compare_header_with_struct", {"ingress": "apply {\n if (hdr.h == meta) { } /*HERE*/\n}"},
     "operands have different types: h_t and meta_t"),
    ("switch_label_wider_than_value", {"ingress": "apply {\n switch (hdr.h.a) { 16w1: { } /*HERE*/\n } }"},
     "cannot implicitly convert bit<16> to bit<8>"),
]


@pytest.mark.parametrize("pieces,expected", [pytest.param(p, m, id=i) for i, p, m in REJECTED])
def test_rejected_like_p4c(tmp_path: Path, pieces: dict[str, str], expected: str) -> None:
    text = source(**pieces)
    path = write(tmp_path, text)
    line = next(n for n, ln in enumerate(text.splitlines(), 1) if "/*HERE*/" in ln)
    with pytest.raises(CompileError) as ei:
        build(str(path))
    e = ei.value
    assert expected in e.message
    assert (e.loc.file, e.loc.line) == (str(path), line), str(e)
    assert e.loc.col >= 1
    assert str(e) == f"{path}:{line}:{e.loc.col}: error: {e.message}"


def test_rejection_catalogue_is_large_enough() -> None:
    assert len(REJECTED) >= 25


def test_for_loop_is_rejected_by_name(tmp_path: Path) -> None:
    text = source(ingress="apply {\n for (bit<8> i = 0; i < 4; i = i + 1) { } /*HERE*/\n}")
    with pytest.raises(Unsupported) as ei:
        build(str(write(tmp_path, text)))
    assert ei.value.loc.line == 14
    assert ei.value.message == "for loop (P4_16 1.2.5) is not supported by p4sim"


# ---------------------------------------------------------------- acceptances

ACCEPTED: list[tuple[str, dict[str, str]]] = [
    ("header_stack_next_last_push_front", {
        "parser": "state start { pkt.extract(hdr.h); transition s; }\n"
                  "state s { pkt.extract(hdr.st.next); transition select(hdr.st.last.v) { 0: accept; default: s; } }",
        "ingress": "apply { hdr.st.push_front(1); hdr.st.pop_front(1); if (hdr.st[0].isValid()) { hdr.st[0].v = 1; }\n"
                   " hdr.h.a = (bit<8>)hdr.st.lastIndex; hdr.h.b = (bit<16>)hdr.st.size; }"}),
    ("lookahead_in_select", {
        "parser": "state start { bit<8> t = pkt.lookahead<bit<8>>();\n"
                  " transition select(pkt.lookahead<bit<8>>()) { 1: a; default: accept; } }\n"
                  "state a { pkt.extract(hdr.h); transition accept; }"}),
    ("verify_with_own_error", {"decls": "error { Bad }",
                               "parser": "state start { pkt.extract(hdr.h); verify(hdr.h.a != 0, error.Bad); transition accept; }"}),
    ("switch_on_action_run_with_default", {
        "ingress": "action x() { } action y() { }\ntable t { key = { hdr.h.a: exact; } actions = { x; y; } }\n"
                   "apply { switch (t.apply().action_run) { x: { hdr.h.a = 1; } default: { hdr.h.a = 2; } } }"}),
    ("ternary_and_range_entries_with_priorities", {
        "ingress": "action x() { }\ntable t { key = { hdr.h.a: ternary; hdr.h.b: range; } actions = { x; }\n"
                   " entries = { priority=10: (8w1 &&& 8w0xF, 1..5): x(); priority=20: (_, _): x(); } }\n"
                   "apply { t.apply(); }"}),
    ("name_and_id_annotations", {
        "ingress": "@name(\".global_x\") @id(0x01000099) action x() { }\n"
                   "@name(\"renamed\") table t { key = { hdr.h.a: exact @name(\"k\"); } actions = { x; } }\n"
                   "apply { t.apply(); }"}),
    ("nested_structs_in_metadata", {
        "decls": "struct inner_t { bit<8> p; bit<8> q; }\nstruct outer_t { inner_t i; bit<16> r; }",
        "ingress": "apply { outer_t o; o.i.p = hdr.h.a; o.i = {p = 1, q = 2}; hdr.h.a = o.i.q; }"}),
    ("struct_inside_header", {
        "decls": "struct pair_t { bit<8> p; bit<8> q; }\nheader hp_t { pair_t pr; bit<16> z; }",
        "ingress": "apply { hp_t x; x.setValid(); x.pr.p = 1; hdr.h.a = x.pr.p; }"}),
    ("serializable_enum_in_select", {
        "decls": "enum bit<8> K { A = 1, B = 2 }",
        "parser": "state start { pkt.extract(hdr.h);\n"
                  " transition select((K)hdr.h.a) { K.A: accept; K.B: reject; default: accept; } }"}),
    ("serializable_enum_header_field", {
        "decls": "enum bit<8> K { A = 1, B = 2 }\nheader ek_t { K k; }",
        "ingress": "apply { ek_t e; e.setValid(); e.k = K.A; if (e.k == K.B) { hdr.h.a = (bit<8>)e.k; } }"}),
    ("const_entries_with_masks", {
        "ingress": "action x(bit<8> v) { hdr.h.a = v; }\n"
                   "table t { key = { hdr.h.b: ternary; hdr.h.a: exact; } actions = { x; }\n"
                   " const entries = { (0x0800 &&& 0xFF00, 1): x(1); (_, 2): x(2); } }\napply { t.apply(); }"}),
    ("concatenation", {"ingress": "apply { hdr.h.b = hdr.h.a ++ hdr.h.a; hdr.h.c = hdr.h.b ++ 8w1 ++ hdr.h.a; }"}),
    ("saturating_arithmetic", {"ingress": "apply { hdr.h.a = hdr.h.a |+| 8w200; hdr.h.a = hdr.h.a |-| 1;\n"
                                          " int<8> s = -5; s = s |-| 127; }"}),
    ("casts_between_typedefs_and_types", {
        "decls": "typedef bit<8> byte_t;\ntype bit<16> port_id_t;\ntypedef port_id_t pid2_t;",
        "ingress": "apply { byte_t b = hdr.h.a; port_id_t p = (port_id_t)hdr.h.b; hdr.h.b = (bit<16>)p;\n"
                   " pid2_t q = p; hdr.h.a = b; }"}),
    ("bool_header_field", {"decls": "header bh_t { bool f; bit<7> r; }",
                           "ingress": "apply { bh_t x; x.setValid(); x.f = true; if (x.f) { hdr.h.a = 1; } }"}),
    ("infinite_precision_constants", {"decls": "const int K = 5;\nconst bit<8> K8 = K + 1;",
                                      "ingress": "apply { hdr.h.a = K; hdr.h.a = K8 + K; hdr.h.b = (bit<16>)K8 << 2; }"}),
    ("literal_forms", {"ingress": "apply { hdr.h.a = 0xF_F; hdr.h.b = 16w0b1010; hdr.h.c = 32w0d100;\n"
                                  " hdr.h.a = 8w0o17; int<8> s = -8s3; hdr.h.a = -1; }"}),
    ("exit_in_action_and_return_in_control", {"ingress": "action x() { exit; }\napply { x(); return; }"}),
    ("function_with_out_parameters", {
        "decls": "void split(in bit<16> w, out bit<8> hi, out bit<8> lo) { hi = w[15:8]; lo = w[7:0]; }",
        "ingress": "apply { split(hdr.h.b, hdr.h.a, meta.m); }"}),
    ("state_without_transition", {"parser": "state start {\n pkt.extract(hdr.h);\n}"}),
    ("compound_assignments", {"ingress": "apply { hdr.h.a += 1; hdr.h.b |= 3; hdr.h.b <<= 2; hdr.h.b >>= 1;\n"
                                         " hdr.h.a |+|= 9; hdr.st[0].v -= 1; }"}),
    ("min_size_of_header", {"ingress": "apply { hdr.h.a = (bit<8>)hdr.h.minSizeInBytes();\n"
                                       " hdr.h.c = (bit<32>)hdr.h.minSizeInBits(); }"}),
    ("tuple_select_with_masks_and_ranges", {
        "parser": "state start { pkt.extract(hdr.h);\n"
                  " transition select(hdr.h.a, hdr.h.b) { (1, 0x0800 &&& 0xFF00): accept; (_, 5..9): reject;"
                  " default: accept; } }"}),
    ("one_lpm_and_exact_keys", {"ingress": "action x() { }\n"
                                           "table t { key = { hdr.h.a: exact; hdr.h.c: lpm; } actions = { x; } }\n"
                                           "apply { t.apply(); }"}),
    ("table_key_expressions", {"ingress": "action x() { }\n"
                                          "table t { key = { hdr.h.a & 0xF: exact @name(\"low\"); hdr.h.isValid(): exact; }"
                                          " actions = { x; } }\napply { t.apply(); }"}),
    ("digest_of_a_list", {"decls": "struct dg_t { bit<8> a; bit<16> b; }",
                          "ingress": "apply { digest<dg_t>(1, {hdr.h.a, hdr.h.b}); digest<dg_t>(1, {a = 1, b = hdr.h.b}); }"}),
    ("header_and_struct_equality", {"ingress": "apply { h_t x = hdr.h; if (x == hdr.h && meta != meta) { }\n"
                                               " if (hdr.st != hdr.st) { } }"}),
    ("type_parameter_names_of_v1model_as_ordinary_names", {
        "decls": "const bit<8> T = 3;\nenum bit<4> Z { M = 1, H = 2 }\nbit<8> f(in bit<8> O) { return O; }",
        "ingress": "action a(bit<8> H) { hdr.h.a = f(H) + T; }\ntable t { key = { hdr.h.a: exact; } actions = { a; } }\n"
                   "apply { bit<4> M = (bit<4>)Z.M; t.apply(); hdr.h.b = (bit<16>)(M ++ (bit<4>)Z.H); }"}),
    ("enum_switch", {"decls": "enum Color { Red, Green }",
                     "ingress": "apply { Color c = Color.Red; switch (c) { Color.Red: { hdr.h.a = 1; } Color.Green: { } } }"}),
]


@pytest.mark.parametrize("pieces", [pytest.param(p, id=i) for i, p in ACCEPTED])
def test_accepted_like_p4c(tmp_path: Path, pieces: dict[str, str]) -> None:
    build(str(write(tmp_path, source(**pieces))))


def test_acceptance_catalogue_is_large_enough() -> None:
    assert len(ACCEPTED) >= 15


# ---------------------------------------------------------------- behaviour of the newly accepted constructs

ETH = "header eth_t { bit<48> dst; bit<48> src; bit<16> type; }\n"
RUN = """#include <core.p4>
#include <v1model.p4>
{decls}
struct meta_t {{ bit<8> m; }}
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {{
{parser}
}}
control VC(inout headers_t hdr, inout meta_t meta) {{ apply {{ }} }}
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {{
 apply {{ sm.egress_spec = 2; {ingress} }}
}}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control CC(inout headers_t hdr, inout meta_t meta) {{ apply {{ }} }}
control D(packet_out pkt, in headers_t hdr) {{ apply {{ pkt.emit(hdr); }} }}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""

ETH_BYTES = bytes.fromhex("000000000002" "000000000001" "88b6")


def run_one(tmp_path: Path, packet: bytes, **pieces: Any) -> bytes:
    sw = load_switch(str(write(tmp_path, RUN.format(**pieces))), [], {}, cpu_port=510)
    out = sw.process(1, packet)
    assert [port for port, _ in out] == [2]
    return out[0][1]


def test_struct_inside_header_is_parsed_and_deparsed_in_wire_order(tmp_path: Path) -> None:
    decls = ETH + ("struct pair_t { bit<4> hi; bit<12> lo; }\n"
                   "header x_t { bit<8> k; pair_t pr; bit<8> z; }\n"
                   "struct headers_t { eth_t eth; x_t x; }")
    parser = "state start { pkt.extract(hdr.eth); pkt.extract(hdr.x); transition accept; }"
    ingress = "hdr.x.z = (bit<8>)hdr.x.pr.hi; hdr.x.pr.lo = hdr.x.pr.lo + 1; hdr.x.k = (bit<8>)hdr.x.minSizeInBytes();"
    data = run_one(tmp_path, ETH_BYTES + bytes([0x77, 0xA1, 0x23, 0x00]) + b"tail",
                   decls=decls, parser=parser, ingress=ingress)
    assert data[14:] == bytes([4, 0xA1, 0x24, 0x0A]) + b"tail"


def test_struct_inside_header_from_lookahead(tmp_path: Path) -> None:
    decls = ETH + ("struct pair_t { bit<8> p; bit<8> q; }\n"
                   "header x_t { pair_t pr; }\n"
                   "struct headers_t { eth_t eth; x_t x; x_t y; }")
    parser = "state start { pkt.extract(hdr.eth); hdr.y = pkt.lookahead<x_t>(); pkt.extract(hdr.x); transition accept; }"
    data = run_one(tmp_path, ETH_BYTES + bytes([5, 6]), decls=decls, parser=parser, ingress="hdr.y.pr.q = 9;")
    assert data[14:] == bytes([5, 6, 5, 9])


def test_compound_assignments_compute_like_their_long_forms(tmp_path: Path) -> None:
    decls = ETH + "header v_t { bit<8> a; bit<8> b; bit<16> c; int<8> s; }\nstruct headers_t { eth_t eth; v_t v; }"
    parser = "state start { pkt.extract(hdr.eth); pkt.extract(hdr.v); transition accept; }"
    ingress = "hdr.v.a += 250; hdr.v.b |+|= 250; hdr.v.c <<= 4; hdr.v.c >>= 1; hdr.v.s |-|= 127; hdr.v.b ^= 0x0F;"
    data = run_one(tmp_path, ETH_BYTES + bytes([10, 10, 0x12, 0x34, 0x80 | 0x7E]),
                   decls=decls, parser=parser, ingress=ingress)
    # a: 10 + 250 wraps to 4; b: saturates at 255 then ^ 0x0F; c: (0x1234 << 4) & 0xFFFF >> 1; s: -2 - 127 saturates at -128
    assert data[14:] == bytes([4, 0xF0]) + ((0x2340 >> 1).to_bytes(2, "big")) + bytes([0x80])


def test_state_without_transition_rejects(tmp_path: Path) -> None:
    """A state with no transition statement goes to reject: the header extracted so far stays valid
    and parser_error stays NoError, as for an explicit ``transition reject``."""
    decls = ETH + "header v_t { bit<8> a; }\nstruct headers_t { eth_t eth; v_t v; }"
    parser = "state start { pkt.extract(hdr.eth); transition more; }\nstate more { }"
    ingress = "if (sm.parser_error == error.NoError && !hdr.v.isValid()) { hdr.eth.type = 16w0xAAAA; }"
    data = run_one(tmp_path, ETH_BYTES + b"\x01", decls=decls, parser=parser, ingress=ingress)
    assert data[12:14] == b"\xaa\xaa"


def test_serializable_enums_appear_in_p4info_type_info(tmp_path: Path) -> None:
    text = source(decls="enum bit<8> K { A = 1, B = 2 }\nenum bit<12> W { X = 0xABC }",
                  ingress="action x(K k) { hdr.h.a = (bit<8>)k; }\n"
                          "table t { key = { hdr.h.a: exact; } actions = { x; } default_action = x(K.B); }\n"
                          "apply { t.apply(); }")
    info = build_p4info(build(str(write(tmp_path, text))))
    enums = info.type_info.serializable_enums
    assert sorted(enums) == ["K", "W"]
    assert enums["K"].underlying_type.bitwidth == 8
    assert [(m.name, m.value) for m in enums["K"].members] == [("A", b"\x01"), ("B", b"\x02")]
    assert [(m.name, m.value) for m in enums["W"].members] == [("X", b"\x0a\xbc")]
    (act,) = [a for a in info.actions if a.preamble.name.endswith(".x")]
    assert [(p.name, p.bitwidth) for p in act.params] == [("k", 8)]


def test_header_and_struct_equality(tmp_path: Path) -> None:
    """Headers are equal when both are invalid or both valid with equal fields; structs when all
    members are equal."""
    decls = ETH + "header v_t { bit<8> a; bit<8> b; }\nstruct pair_t { v_t p; bit<8> n; }\n" \
                  "struct headers_t { eth_t eth; v_t v; v_t w; v_t r; }"
    parser = "state start { pkt.extract(hdr.eth); pkt.extract(hdr.v); pkt.extract(hdr.w); transition accept; }"
    ingress = ("v_t none1; v_t none2; pair_t x = {p = hdr.v, n = 1}; pair_t y = {p = hdr.w, n = 1};\n"
               "hdr.r.setValid(); hdr.r.a = (bit<1>)(hdr.v == hdr.w) ++ (bit<1>)(none1 == none2)\n"
               "  ++ (bit<1>)(hdr.v == none1) ++ (bit<1>)(x == y) ++ (bit<1>)(x != y) ++ 3w0;")
    same = run_one(tmp_path, ETH_BYTES + bytes([1, 2, 1, 2]), decls=decls, parser=parser, ingress=ingress)
    differ = run_one(tmp_path, ETH_BYTES + bytes([1, 2, 1, 3]), decls=decls, parser=parser, ingress=ingress)
    assert same[18] == 0b11010000
    assert differ[18] == 0b01001000


def test_digest_of_a_list_expression(tmp_path: Path) -> None:
    decls = ETH + "header v_t { bit<8> a; bit<16> b; }\nstruct headers_t { eth_t eth; v_t v; }\n" \
                  "struct dg_t { bit<16> b; bit<9> port; bool f; }"
    parser = "state start { pkt.extract(hdr.eth); pkt.extract(hdr.v); transition accept; }"
    ingress = "digest<dg_t>(1, {hdr.v.b, sm.ingress_port, hdr.v.a == 7});"
    sw = load_switch(str(write(tmp_path, RUN.format(decls=decls, parser=parser, ingress=ingress))), [], {},
                     cpu_port=510)
    sw.process(3, ETH_BYTES + bytes([7, 0x12, 0x34]))
    ((_, members),) = sw.take_digests()
    assert members == [b"\x12\x34", b"\x00\x03", b"\x01"]
