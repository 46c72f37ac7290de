"""The native engine's build and fallback: it builds once per program (content-hash cache), and a
program or machine it cannot serve runs on the Python engine with a log line saying why.

Run one case: .venv/bin/pytest tests/p4sim/test_native.py -k fallback
"""

from __future__ import annotations

from pathlib import Path

import pytest

from p4sim.native import build as native_build
from p4sim.runtime.engine_loader import load_switch
from p4sim.runtime.switch import Switch
from tests.p4sim.harness import CPU_PORT, PROGRAMS, one_header_program

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module", autouse=True)
def p4sim_engine() -> str:
    """These tests name their engine (overrides the per-engine parametrisation)."""
    return "both"


def load(name: str, engine: str) -> Switch:
    return load_switch(str(PROGRAMS / name), [str(PROGRAMS / "include")], cpu_port=CPU_PORT, engine=engine)


def test_library_is_built_once_per_program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("P4SIM_NATIVE_CACHE", str(tmp_path))
    first = load("ipv4_forward.p4", "native")
    assert first.engine == "native"
    [lib] = list(tmp_path.glob("p4sim-*.so"))
    stamp = lib.stat().st_mtime_ns
    again = load("ipv4_forward.p4", "native")
    assert again.lib_path == lib and lib.stat().st_mtime_ns == stamp  # type: ignore[attr-defined]
    load("tables.p4", "native")
    assert len(list(tmp_path.glob("p4sim-*.so"))) == 2  # another program, another library


def wide_program(decl: str) -> str:
    """A program that computes ``hdr.h.a - 1`` through a local of type ``decl`` (bit<N>/int<N>)."""
    return one_header_program("bit<8> a;", """    apply {
        WIDE_T wide = (WIDE_T)(BITS_T)hdr.h.a;
        hdr.h.a = (bit<8>)(BITS_T)(wide - 1);
        sm.egress_spec = 1;
    }""").replace("WIDE_T", decl).replace("BITS_T", "bit<" + decl.split("<")[1])


@pytest.mark.parametrize("decl", ["bit<129>", "int<129>", "int<1000>"])
def test_unsupported_construct_falls_back_with_its_name(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                        decl: str) -> None:
    src = tmp_path / "wide.p4"
    src.write_text(wide_program(decl))
    sw = load_switch(str(src), [], engine="native")
    assert sw.engine == "python"
    assert sw.native_fallback is not None and decl in sw.native_fallback
    assert "wider than 128 bits" in sw.native_fallback
    assert "native engine unavailable" in caplog.text and decl in caplog.text
    assert sw.process(0, b"\x00")[0][1] == b"\xff"  # the Python engine runs it: 0 - 1 wraps


@pytest.mark.parametrize("decl", ["bit<65>", "int<65>", "bit<128>", "int<128>", "int<100>"])
def test_values_up_to_128_bits_run_natively(tmp_path: Path, decl: str) -> None:
    src = tmp_path / "wide.p4"
    src.write_text(wide_program(decl))
    sw = load_switch(str(src), [], engine="native")
    assert sw.engine == "native", sw.native_fallback
    assert sw.process(0, b"\x00")[0][1] == b"\xff"
    assert sw.process(0, b"\x07")[0][1] == b"\x06"


def test_signed_values_run_natively() -> None:
    assert load("expressions.p4", "native").engine == "native"


def test_no_compiler_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("P4SIM_NATIVE_CACHE", str(tmp_path))
    monkeypatch.setattr(native_build, "find_cc", lambda: None)
    sw = load("ipv4_forward.p4", "native")
    assert sw.engine == "python"
    assert sw.native_fallback == "no C compiler found (install gcc, or set CC)"
    assert "no C compiler found" in caplog.text


def test_python_engine_when_asked() -> None:
    sw = load("ipv4_forward.p4", "python")
    assert sw.engine == "python" and sw.native_fallback is None


def test_unknown_engine_is_refused() -> None:
    with pytest.raises(Exception, match="unknown engine 'fast'"):
        load("ipv4_forward.p4", "fast")


WIDE_CONST = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> op; bit<128> x; int<100> y; bit<4> pad; }
struct headers_t { h_t h; h_t p; }
struct meta_t { }
parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { hdr.p = pkt.lookahead<h_t>(); pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t m) { apply { } }
control I(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    action setx(bit<128> v) { hdr.h.x = v; }
    table t {
        key = { hdr.h.x: exact; }
        actions = { setx; NoAction; }
        const entries = {
            128w0x0102030405060708090a0b0c0d0e0f10 : setx(128w0xffffffffffffffffffffffffffffffff);
            128w5 : setx(128w0x10000000000000000);
        }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        switch (t.apply().action_run) { setx: { hdr.h.op = hdr.h.op + 1; } default: { } }
        if (hdr.p.x == hdr.h.x) { hdr.h.y = -100s7; }
        switch (hdr.p.x) { 128w5: { hdr.h.pad = 1; } 128w0x10000000000000000: { hdr.h.pad = 2; } default: { hdr.h.pad = 3; } }
        if (hdr.h == hdr.p) { hdr.h.op = 0xEE; }
    }
}
control E(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); pkt.emit(hdr.p); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_wide_const_entries_lookahead_switch_and_header_equality(tmp_path: Path) -> None:
    """bit<128> const entries and action data, a lookahead of a header with wide fields, a switch on
    a bit<128>, == of headers with wide fields: the native engine gives the Python engine's outputs."""
    src = tmp_path / "wide_const.p4"
    src.write_text(WIDE_CONST)
    py, nat = (load_switch(str(src), [], engine=e) for e in ("python", "native"))
    assert nat.engine == "native", nat.native_fallback
    for x in [0x0102030405060708090A0B0C0D0E0F10, 5, 1 << 64, 7, (1 << 128) - 1]:
        for y in [0, 1, (1 << 100) - 1, 1 << 99]:
            pkt = b"\x03" + x.to_bytes(16, "big") + (y << 4).to_bytes(13, "big") + b"tail"
            assert py.process(0, pkt) == nat.process(0, pkt), (x, y)
