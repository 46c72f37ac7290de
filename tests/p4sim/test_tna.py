"""The TNA (Tofino) program is checked by p4sim's front end against p4sim's own TNA declarations
(``p4sim check --arch tna``, p4sim/frontend/p4include/tna.p4), and the check catches what p4c's front end
catches: a missing argument, a wrong direction, a block that does not fit the architecture, a
bad abstract method implementation, and an ``out`` parameter left unwritten on some path
(p4c's ``uninitialized_out_param`` warning, a failure with ``--Werror``).

Front end only: these tests run once, not once per packet engine.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from p4sim.build import build
from p4sim.frontend.check import check_file
from p4sim.frontend.diagnostics import CompileError

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
SHARED = str(REPO / "p4src" / "shared")
TNA = REPO / "p4src" / "tna"


@pytest.fixture(autouse=True, scope="module")
def p4sim_engine() -> Iterator[str]:
    """Overrides tests/p4sim/conftest.py's per-engine runs: nothing here runs packets."""
    yield "none"


# A small TNA program; the %NAME% markers are replaced per test.
TEMPLATE = """#include <core.p4>
#include <tna.p4>
header h_t { bit<8> a; bit<16> b; }
struct headers_t { h_t h; }
struct inner_t { bit<8> x; bool y; }
struct meta_t { bit<8> m; inner_t i; }
%DECLS%
parser IP(packet_in pkt, out headers_t hdr, %IPMETA%, out ingress_intrinsic_metadata_t ig_intr_md) {
%IPARSER%
}
control Ig(inout headers_t hdr, inout meta_t meta, in ingress_intrinsic_metadata_t ig_intr_md,
           in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
           inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
           inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
%INGRESS%
}
control ID(packet_out pkt, inout headers_t hdr, in meta_t meta,
           in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    apply { pkt.emit(hdr.h); }
}
parser EP(packet_in pkt, out headers_t hdr, out meta_t meta, out egress_intrinsic_metadata_t eg_intr_md) {
    state start { pkt.extract(eg_intr_md); meta = {0, {0, false}}; transition accept; }
}
control Eg(inout headers_t hdr, inout meta_t meta, in egress_intrinsic_metadata_t eg_intr_md,
           in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
           inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
           inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    apply { }
}
control ED(packet_out pkt, inout headers_t hdr, in meta_t meta,
           in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    apply { pkt.emit(hdr.h); }
}
%PIPE%
Switch(pipe) main;
"""

DEFAULTS = {
    "DECLS": "",
    "IPMETA": "out meta_t meta",
    "IPARSER": """    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        meta.m = 0;
        meta.i = {0, false};
        pkt.extract(hdr.h);
        transition accept;
    }""",
    "INGRESS": "    apply { }",
    "PIPE": "Pipeline(IP(), Ig(), ID(), EP(), Eg(), ED()) pipe;",
}


def program(tmp_path: Path, **parts: str) -> Path:
    text = TEMPLATE
    for key, default in DEFAULTS.items():
        text = text.replace(f"%{key}%", parts.get(key, default))
    path = tmp_path / "prog.p4"
    path.write_text(text)
    return path


def line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def refused(path: Path, needle: str) -> str:
    """The check's error, which must be at the first line holding ``needle``."""
    with pytest.raises(CompileError) as info:
        check_file(str(path), "tna", [SHARED])
    assert info.value.loc.line == line_of(path, needle), str(info.value)
    return info.value.message


def warnings(path: Path) -> list[str]:
    return [str(w) for w in check_file(str(path), "tna", [SHARED]).warnings]


# ---------------------------------------------------------------- nfcluster's programs


def test_the_tna_program_passes_the_check_without_warnings() -> None:
    assert warnings(TNA / "nfcluster.p4") == []


def test_the_check_command_passes_the_tna_program_and_fails_a_broken_one(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "p4sim", "check", "--arch", "tna", "-I", SHARED, "--Werror"]
    ok = subprocess.run([*cmd, str(TNA / "nfcluster.p4")], capture_output=True, text=True, cwd=REPO,
                        timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "checked for tna: 0 warning(s)" in ok.stdout
    bad = tna_copy(tmp_path, "parser.p4", "    m.seq_base = 0;                   \\\n", "")
    fail = subprocess.run([*cmd, str(bad)], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert fail.returncode == 1
    assert "uninitialized_out_param" in fail.stderr and "treated as errors" in fail.stderr


def test_the_v1model_program_passes_the_check_without_warnings() -> None:
    result = check_file(str(REPO / "p4src" / "v1model" / "nfcluster.p4"), "v1model", [SHARED])
    assert result.warnings == []


def tna_copy(tmp_path: Path, file: str, old: str, new: str) -> Path:
    """A copy of p4src/tna with ``old`` replaced by ``new`` in ``file``; its nfcluster.p4."""
    dst = tmp_path / "tna"
    shutil.copytree(TNA, dst)
    target = next(dst.rglob(file))
    text = target.read_text()
    assert old in text
    target.write_text(text.replace(old, new, 1))
    return dst / "nfcluster.p4"


def test_issue_31_the_packetio_call_without_ig_dprsr_md_is_an_error(tmp_path: Path) -> None:
    """The error p4c 1.2.4.8 reported: PacketIoIngress gained a parameter, its call did not."""
    path = tna_copy(tmp_path, "nfcluster.p4", "packetio.apply(hdr, meta, ig_intr_md, ig_tm_md, ig_dprsr_md);",
                    "packetio.apply(hdr, meta, ig_intr_md, ig_tm_md);")
    with pytest.raises(CompileError) as info:
        check_file(str(path), "tna", [SHARED])
    assert info.value.loc.line == line_of(path, "packetio.apply(")
    assert info.value.message == "control PacketIoIngress: too few arguments (4 given, 5 expected)"


def test_issue_31_metadata_not_set_by_the_parsers_is_warned_for_both_parsers(tmp_path: Path) -> None:
    """The two warnings p4c reported: a local_metadata_t field the parsers did not set."""
    path = tna_copy(tmp_path, "parser.p4", "    m.slot_index = 0;                 \\\n", "")
    found = warnings(path)
    assert len(found) == 2
    for w, parser in zip(found, ["NfcIngressParser", "NfcEgressParser"], strict=True):
        assert f"warning: [uninitialized_out_param] out parameter 'meta' may be uninitialized when '{parser}' " \
               "terminates (not written on every path: meta.slot_index)" in w


# ---------------------------------------------------------------- calls: counts and directions


SUB = """control Sub(inout headers_t hdr, inout meta_t meta, inout ingress_intrinsic_metadata_for_tm_t tm) {
    apply { tm.ucast_egress_port = 1; }
}"""


def test_a_sub_control_applied_with_all_its_arguments_passes(tmp_path: Path) -> None:
    path = program(tmp_path, DECLS=SUB, INGRESS="    Sub() sub;\n    apply { sub.apply(hdr, meta, ig_tm_md); }")
    assert warnings(path) == []


def test_a_missing_argument_at_a_control_call_is_an_error(tmp_path: Path) -> None:
    path = program(tmp_path, DECLS=SUB, INGRESS="    Sub() sub;\n    apply { sub.apply(hdr, meta); }")
    assert refused(path, "sub.apply") == "control Sub: too few arguments (2 given, 3 expected)"


def test_an_in_parameter_given_for_an_inout_one_is_an_error(tmp_path: Path) -> None:
    path = program(tmp_path, DECLS=SUB.replace("ingress_intrinsic_metadata_for_tm_t tm",
                                               "ingress_intrinsic_metadata_t tm").replace(
                   "tm.ucast_egress_port = 1;", "tm.ingress_port = 1;"),
                   INGRESS="    Sub() sub;\n    apply { sub.apply(hdr, meta, ig_intr_md); }")
    assert refused(path, "sub.apply") == ("cannot pass as inout argument ig_intr_md: it is an 'in' parameter "
                                          "(read-only)")


def test_a_parser_whose_parameter_direction_differs_from_the_architecture_is_an_error(tmp_path: Path) -> None:
    path = program(tmp_path, IPMETA="inout meta_t meta")
    assert refused(path, "parser IP(") == (
        "parser IP (for IngressParserT<IH, IM>, package Pipeline, parameter ingress_parser): parameter meta "
        "is 'inout', the architecture's ig_md is 'out'")


def test_blocks_in_the_wrong_place_of_the_pipeline_are_an_error(tmp_path: Path) -> None:
    path = program(tmp_path, PIPE="Pipeline(IP(), Ig(), ED(), EP(), Eg(), ID()) pipe;")
    message = refused(path, "in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md)")
    assert message.startswith("control ED (for IngressDeparserT<IH, IM>, package Pipeline, parameter "
                              "ingress_deparser): parameter eg_dprsr_md has type")


def test_the_main_package_must_be_tnas_switch(tmp_path: Path) -> None:
    path = program(tmp_path)
    path.write_text(path.read_text().replace("Switch(pipe) main;", "Pipeline(IP(), Ig(), ID(), EP(), Eg(), ED()) main;"))
    assert refused(path, ") main;") == "main is a Pipeline, not tna's top-level package Switch"


def test_optional_parameters_may_be_left_out_but_not_exceeded(tmp_path: Path) -> None:
    meter = "    Meter<bit<8>>(4, MeterType_t.PACKETS) mt;\n    Counter<bit<32>, bit<8>>(4, CounterType_t.PACKETS) ct;\n"
    ok = program(tmp_path, INGRESS=meter + "    apply { meta.m = mt.execute(0); ct.count(1); ct.count(1, 8); }")
    assert warnings(ok) == []
    bad = program(tmp_path, INGRESS=meter + "    apply { ct.count(1, 8, 9); }")
    assert refused(bad, "ct.count") == "Counter.count: no overload takes 3 arguments"


def test_a_missing_argument_at_a_sub_parser_call_is_an_error(tmp_path: Path) -> None:
    sub = "parser Sub(packet_in pkt, out h_t h) { state start { pkt.extract(h); transition accept; } }"
    parser = """    Sub() sub;
    state start {
        pkt.extract(ig_intr_md);
        meta = {0, {0, false}};
        sub.apply(pkt);
        transition accept;
    }"""
    path = program(tmp_path, DECLS=sub, IPARSER=parser)
    assert refused(path, "sub.apply") == "parser Sub: too few arguments (1 given, 2 expected)"
    path.write_text(path.read_text().replace("sub.apply(pkt);", "sub.apply(pkt, hdr.h);"))
    assert warnings(path) == []


def test_an_extern_out_argument_must_be_writable(tmp_path: Path) -> None:
    parser = """    Checksum() ck;
    state start {
        pkt.extract(ig_intr_md);
        meta = {0, {0, false}};
        ck.subtract_all_and_deposit(16w0);
        transition accept;
    }"""
    path = program(tmp_path, IPARSER=parser)
    assert refused(path, "subtract_all_and_deposit") == (
        "Checksum.subtract_all_and_deposit: argument for out parameter residual must be an l-value")


# ---------------------------------------------------------------- RegisterAction


REG = """    Register<bit<32>, bit<8>>(16, 0) r;
    RegisterAction<bit<32>, bit<8>, bit<8>>(r) ra = {
        void apply(%PARAMS%) {
%BODY%
        }
    };
"""


def register_program(tmp_path: Path, params: str, body: str) -> Path:
    locals_ = REG.replace("%PARAMS%", params).replace("%BODY%", body)
    return program(tmp_path, INGRESS=locals_ + "    apply { meta.m = ra.execute(meta.m); }")


def test_a_register_action_with_a_well_typed_apply_passes(tmp_path: Path) -> None:
    path = register_program(tmp_path, "inout bit<32> value, out bit<8> rv",
                            "            value = value + 1; rv = (bit<8>)value;")
    assert warnings(path) == []


def test_a_register_action_apply_with_a_wrong_type_is_an_error(tmp_path: Path) -> None:
    path = register_program(tmp_path, "inout bit<16> value, out bit<8> rv", "            rv = 0;")
    assert refused(path, "void apply(") == ("ra.apply: parameter value has type bit<16>, the abstract method's "
                                            "value has type bit<32>")


def test_a_register_action_apply_with_a_wrong_direction_is_an_error(tmp_path: Path) -> None:
    path = register_program(tmp_path, "in bit<32> value", "            meta.m = 1;")
    assert refused(path, "void apply(") == ("ra.apply: parameter value is 'in', the abstract method's value "
                                            "is 'inout'")


def test_a_register_action_body_is_type_checked(tmp_path: Path) -> None:
    path = register_program(tmp_path, "inout bit<32> value, out bit<8> rv", "            rv = value;")
    assert refused(path, "rv = value;") == "cannot implicitly convert bit<32> to bit<8>"


def test_a_register_action_without_apply_is_an_error(tmp_path: Path) -> None:
    path = program(tmp_path, INGRESS="    Register<bit<32>, bit<8>>(16) r;\n"
                                     "    RegisterAction<bit<32>, bit<8>, bit<8>>(r) ra;\n    apply { }")
    assert refused(path, "RegisterAction") == "ra: RegisterAction instances must implement the abstract method apply"


def test_a_register_action_apply_that_may_leave_rv_unwritten_is_warned(tmp_path: Path) -> None:
    path = register_program(tmp_path, "inout bit<32> value, out bit<8> rv",
                            "            if (value == 0) { rv = 1; }")
    [w] = warnings(path)
    assert "out parameter 'rv' may be uninitialized when 'apply' terminates (not written on every path: rv)" in w
    assert f"prog.p4:{line_of(path, 'void apply(')}:" in w


# ---------------------------------------------------------------- uninitialised out parameters


def test_a_parser_leaving_a_nested_field_unwritten_on_one_path_is_warned(tmp_path: Path) -> None:
    parser = """    state start {
        pkt.extract(ig_intr_md);
        meta.m = 0;
        meta.i.x = 0;
        transition select(ig_intr_md.ingress_port) {
            1: set_y;
            default: accept;
        }
    }
    state set_y {
        meta.i.y = true;
        transition accept;
    }"""
    path = program(tmp_path, IPARSER=parser)
    [w] = warnings(path)
    assert f"prog.p4:{line_of(path, 'parser IP(')}:" in w
    assert ("[uninitialized_out_param] out parameter 'meta' may be uninitialized when 'IP' terminates "
            "(not written on every path: meta.i.y)") in w


def test_a_parser_writing_the_field_on_every_path_is_not_warned(tmp_path: Path) -> None:
    parser = """    state start {
        pkt.extract(ig_intr_md);
        meta.m = 0;
        meta.i.x = 0;
        transition select(ig_intr_md.ingress_port) {
            1: set_y;
            default: clear_y;
        }
    }
    state set_y { meta.i.y = true; transition accept; }
    state clear_y { meta.i.y = false; transition accept; }"""
    assert warnings(program(tmp_path, IPARSER=parser)) == []


def test_an_explicit_reject_path_counts_as_a_termination(tmp_path: Path) -> None:
    parser = """    state start {
        pkt.extract(ig_intr_md);
        transition select(ig_intr_md.ingress_port) {
            1: reject;
            default: init;
        }
    }
    state init { meta = {0, {0, false}}; transition accept; }"""
    [w] = warnings(program(tmp_path, IPARSER=parser))
    assert "(not written on every path: meta.m, meta.i.x, meta.i.y)" in w


def test_headers_need_not_be_written(tmp_path: Path) -> None:
    """An out struct of headers (hdr) and an out header (ig_intr_md) may stay invalid."""
    parser = """    state start {
        meta = {0, {0, false}};
        transition accept;
    }"""
    assert warnings(program(tmp_path, IPARSER=parser)) == []


FUNC = """bit<8> pick(in bit<8> a, out bit<8> b) {
    if (a == 0) {
        return 1;
    }
    b = a;
    return 0;
}"""


def test_a_function_returning_before_writing_its_out_parameter_is_warned(tmp_path: Path) -> None:
    path = program(tmp_path, DECLS=FUNC)
    [w] = warnings(path)
    assert "out parameter 'b' may be uninitialized when 'pick' terminates" in w


def test_a_control_with_an_out_parameter_and_an_exit_before_it_is_written_is_warned(tmp_path: Path) -> None:
    sub = """control Sub(in bit<8> a, out bit<8> b) {
    action set_b() { b = a; }
    table t { key = { a: exact; } actions = { set_b; } default_action = set_b(); }
    apply {
        if (a == 0) {
            exit;
        }
        t.apply();
    }
}"""
    path = program(tmp_path, DECLS=sub, INGRESS="    Sub() sub;\n    apply { sub.apply(meta.m, meta.i.x); }")
    [w] = warnings(path)
    assert "out parameter 'b' may be uninitialized when 'Sub' terminates" in w
    # without the exit, the table's only action writes b on every path
    path.write_text(path.read_text().replace("exit;", "b = 0;"))
    assert warnings(path) == []


def test_the_v1model_compile_reports_the_warning_too(tmp_path: Path) -> None:
    src = (REPO / "tests" / "p4sim" / "programs" / "ipv4_forward.p4").read_text()
    path = tmp_path / "fwd.p4"
    path.write_text(src.replace("#include <v1model.p4>", "#include <v1model.p4>\n" + FUNC, 1))
    prog = build(str(path))
    assert [w.message for w in prog.warnings] == [
        "[uninitialized_out_param] out parameter 'b' may be uninitialized when 'pick' terminates "
        "(not written on every path: b)"]
