"""Negative tests of the p4sim front end: each bad program is refused with p4c-like
``file:line:col: error: message``, naming the problem, at the right line.

Run one case: .venv/bin/pytest tests/p4sim/test_checker.py -k direction
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from p4sim.build import build
from p4sim.frontend.diagnostics import CompileError

pytestmark = pytest.mark.unit

TEMPLATE = """#include <core.p4>
#include <v1model.p4>
header h_t {{ bit<8> a; bit<16> b; bit<32> c; }}
struct headers_t {{ h_t h; }}
struct meta_t {{ bit<8> m; }}
{decls}
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {{
    state start {{ pkt.extract(hdr.h); transition accept; }}
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


def compile_error(tmp_path: Path, ingress: str = "apply { }", decls: str = "",
                  deparser: str = "apply { pkt.emit(hdr.h); }") -> tuple[CompileError, int]:
    """Compile a program; return the error and the line of the ``/*HERE*/`` marker."""
    text = TEMPLATE.format(decls=decls, ingress=ingress, deparser=deparser)
    path = tmp_path / "bad.p4"
    path.write_text(text)
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "/*HERE*/" in ln)
    with pytest.raises(CompileError) as ei:
        build(str(path))
    assert str(ei.value).startswith(f"{path}:{ei.value.loc.line}:")
    assert ": error: " in str(ei.value)
    return ei.value, line


def test_template_compiles(tmp_path):
    path = tmp_path / "ok.p4"
    path.write_text(TEMPLATE.format(decls="", ingress="apply { }", deparser="apply { pkt.emit(hdr.h); }"))
    build(str(path))


def test_width_mismatch_in_assignment(tmp_path):
    err, line = compile_error(tmp_path, "apply {\n hdr.h.a = hdr.h.b; /*HERE*/\n}")
    assert err.loc.line == line
    assert "cannot implicitly convert bit<16> to bit<8>" in err.message


def test_width_mismatch_in_binary_operation(tmp_path):
    err, line = compile_error(tmp_path, "apply {\n hdr.h.c = hdr.h.c + hdr.h.b; /*HERE*/\n}")
    assert err.loc.line == line
    assert "bit<32> and bit<16>" in err.message


def test_width_mismatch_in_extern_argument(tmp_path):
    err, line = compile_error(
        tmp_path, "counter(4, CounterType.packets) c;\napply {\n c.count(hdr.h.b); /*HERE*/\n}")
    assert err.loc.line == line
    assert "cannot implicitly convert bit<16> to bit<32>" in err.message


def test_undeclared_name(tmp_path):
    err, line = compile_error(tmp_path, "apply {\n hdr.h.a = nothere; /*HERE*/\n}")
    assert err.loc.line == line
    assert "nothere: undeclared name" in err.message


def test_undeclared_field(tmp_path):
    err, line = compile_error(tmp_path, "apply {\n hdr.h.zz = 1; /*HERE*/\n}")
    assert err.loc.line == line
    assert "h_t has no field zz" in err.message


def test_undeclared_type(tmp_path):
    err, line = compile_error(tmp_path, "apply {\n nosuch_t x; /*HERE*/\n}")
    assert err.loc.line == line


def test_assignment_to_in_parameter(tmp_path):
    err, line = compile_error(tmp_path, deparser="apply {\n hdr.h.a = 1; /*HERE*/\n pkt.emit(hdr.h);\n}")
    assert err.loc.line == line
    assert "cannot assign to hdr: it is an 'in' parameter" in err.message


def test_wrong_direction_in_argument(tmp_path):
    decls = "control Sub(in bit<8> v) {\n action bump(inout bit<8> x) { x = x + 1; }\n apply {\n bump(v); /*HERE*/\n }\n}"
    err, line = compile_error(tmp_path, decls=decls)
    assert err.loc.line == line
    assert "cannot pass as inout argument v: it is an 'in' parameter" in err.message


def test_out_argument_must_be_lvalue(tmp_path):
    err, line = compile_error(
        tmp_path, "register<bit<8>>(4) r;\napply {\n r.read(hdr.h.a + 1, 0); /*HERE*/\n}")
    assert err.loc.line == line
    assert "must be an l-value" in err.message


def test_assignment_to_action_data(tmp_path):
    err, line = compile_error(tmp_path, "action a(bit<8> v) {\n v = 1; /*HERE*/\n}\napply { a(1); }")
    assert err.loc.line == line
    assert "directionless" in err.message


def test_assignment_to_constant(tmp_path):
    err, line = compile_error(tmp_path, "const bit<8> K = 1;\napply {\n K = 2; /*HERE*/\n}")
    assert err.loc.line == line
    assert "constant K" in err.message


def test_condition_must_be_bool(tmp_path):
    err, line = compile_error(tmp_path, "apply {\n if (hdr.h.a) { } /*HERE*/\n}")
    assert err.loc.line == line
    assert "must be bool" in err.message


def test_default_action_not_in_actions(tmp_path):
    ingress = ("action x() { }\naction y() { }\n"
               "table t { key = { hdr.h.a: exact; } actions = { x; }\n default_action = y(); /*HERE*/\n}\n"
               "apply { t.apply(); }")
    err, line = compile_error(tmp_path, ingress)
    assert err.loc.line == line
    assert "default action y is not in the actions of table t" in err.message


def test_unknown_match_kind(tmp_path):
    err, line = compile_error(
        tmp_path, "action x() { }\ntable t { key = {\n hdr.h.a: fuzzy; /*HERE*/\n} actions = { x; } }\napply { t.apply(); }")
    assert err.loc.line == line
    assert "fuzzy: unknown match kind" in err.message


def test_direct_meter_is_rejected_by_name(tmp_path):
    err, line = compile_error(tmp_path, "direct_meter<bit<2>>(MeterType.packets) m; /*HERE*/\napply { }")
    assert err.loc.line == line
    assert err.message == "extern direct_meter is not supported by p4sim"


def test_syntax_error(tmp_path):
    err, line = compile_error(tmp_path, "apply {\n hdr.h.a = = 1; /*HERE*/\n}")
    assert err.loc.line == line
    assert "syntax error" in err.message


def test_literal_too_wide(tmp_path):
    err, line = compile_error(tmp_path, "apply {\n hdr.h.a = 8w256; /*HERE*/\n}")
    assert err.loc.line == line
    assert "does not fit" in err.message


def test_slice_out_of_range(tmp_path):
    err, line = compile_error(tmp_path, "apply {\n hdr.h.a = hdr.h.b[16:9]; /*HERE*/\n}")
    assert err.loc.line == line
    assert "out of range" in err.message


def test_error_in_included_file_names_that_file(tmp_path):
    inc = tmp_path / "inc.p4"
    inc.write_text("// included\nconst bit<8> BAD = undefined_thing;\n")
    text = TEMPLATE.format(decls='#include "inc.p4"', ingress="apply { }", deparser="apply { }")
    path = tmp_path / "main.p4"
    path.write_text(text)
    with pytest.raises(CompileError) as ei:
        build(str(path))
    assert ei.value.loc.file.endswith("inc.p4") and ei.value.loc.line == 2


def test_cli_exits_nonzero_with_the_error(tmp_path):
    path = tmp_path / "bad.p4"
    path.write_text(TEMPLATE.format(decls="", ingress="apply {\n hdr.h.a = hdr.h.c;\n}", deparser="apply { }"))
    proc = subprocess.run([sys.executable, "-m", "p4sim", "compile", str(path)], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 1
    assert f"{path}:13:" in proc.stderr and "error: cannot implicitly convert bit<32> to bit<8>" in proc.stderr


def test_clone3_with_fields_is_rejected_by_name(tmp_path):
    err, line = compile_error(tmp_path, "apply {\n clone3(CloneType.I2E, 5, { meta.m }); /*HERE*/\n}")
    assert err.loc.line == line
    assert "clone3 with a list of fields to preserve" in err.message and "not supported" in err.message


def test_function_must_return_a_value(tmp_path):
    err, line = compile_error(tmp_path, decls="bit<8> f(in bit<8> x) { if (x > 1) { return x; } } /*HERE*/")
    assert err.loc.line == line
    assert "does not return a value on every path" in err.message


def test_function_return_width(tmp_path):
    err, line = compile_error(tmp_path, decls="bit<8> f(in bit<16> x) {\n return x; /*HERE*/\n}")
    assert err.loc.line == line
    assert "cannot implicitly convert bit<16> to bit<8>" in err.message


def test_switch_label_must_be_an_action(tmp_path):
    ingress = ("action x() { }\ntable t { key = { hdr.h.a: exact; } actions = { x; } }\n"
               "apply {\n switch (t.apply().action_run) {\n 1: { } /*HERE*/\n }\n}")
    err, line = compile_error(tmp_path, ingress)
    assert err.loc.line == line
    assert "labels must be action names" in err.message


def test_switch_on_value_duplicate_label(tmp_path):
    err, line = compile_error(tmp_path, "apply {\n switch (hdr.h.a) {\n 1: { }\n 1: { } /*HERE*/\n }\n}")
    assert err.loc.line == line
    assert "duplicate switch label 1" in err.message


def test_pcpp_fallback_keeps_error_lines(tmp_path, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    err, line = compile_error(tmp_path, "apply {\n hdr.h.a = hdr.h.b; /*HERE*/\n}")
    assert err.loc.line == line and err.loc.file.endswith("bad.p4")


def test_table_applied_twice_warns_like_bmv2_would_refuse(tmp_path):
    ingress = ("action x() { }\ntable t { key = { hdr.h.a: exact; } actions = { x; } }\n"
               "apply {\n if (hdr.h.a == 1) { t.apply(); } else {\n t.apply(); /*HERE*/\n }\n}")
    text = TEMPLATE.format(decls="", ingress=ingress, deparser="apply { }")
    path = tmp_path / "twice.p4"
    path.write_text(text)
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "/*HERE*/" in ln)
    from p4sim.runtime.engine_loader import load_switch

    sw = load_switch(str(path))
    [w] = sw.warnings
    assert w.startswith(f"{path}:{line}:") and "warning: table t is applied more than once" in w


def test_variables_need_a_width(tmp_path):
    err, line = compile_error(tmp_path, "apply {\n int x = 5; /*HERE*/\n}")
    assert err.loc.line == line
    assert "cannot have type int" in err.message


def test_two_varbit_fields_in_a_header_are_refused(tmp_path):
    err, line = compile_error(tmp_path, decls="header opt_t { varbit<32> a;\n varbit<32> b; /*HERE*/ }")
    assert err.loc.line == line
    assert err.message == "opt_t.b: a header has at most one varbit field"


@pytest.mark.parametrize(("ingress", "message"), [
    ("apply {\n hdr.v.b = hdr.v.o + 1; /*HERE*/\n}", "operands have different types"),
    ("apply {\n hdr.v.b = (bit<8>)hdr.v.o; /*HERE*/\n}", "cast"),
])
def test_varbit_is_only_assigned_and_compared(tmp_path, ingress, message):
    decls = "header v_t { bit<8> b; varbit<32> o; }\nstruct w_t { v_t v; }"
    err, line = compile_error(tmp_path, ingress.replace("hdr.v", "meta2.v").replace("apply {", "w_t meta2;\napply {"),
                              decls=decls)
    assert err.loc.line == line and message in err.message
