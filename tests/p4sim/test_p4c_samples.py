"""Constructs of p4c's STF sample programs (testdata/p4_16_samples) that p4sim runs, each in a small
program written for p4sim: names that are also type names, p4c's include guards, and the language
features the samples use. (The samples themselves run with ``p4sim stf``, docs/p4sim.md.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from p4sim.switch import ActionCall, Match, Switch, TableEntry

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
    return Switch.load(str(path), [str(tmp_path)])


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
