"""The STF runner (p4sim/stf/format.py, p4sim/stf/run.py) on small programs of its own: the format's
commands, the BMv2 runner's verdict rules, and the ``p4sim stf`` command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from p4sim.__main__ import main
from p4sim.stf.format import Add, Expect, Packet, StfError, match_packet, parse_stf
from p4sim.stf.run import collect, run_test
from tests.p4sim.harness import one_header_program

# h.a selects: a table on (a exact, b ternary) sets the port and writes c
TABLE_PROGRAM = one_header_program("bit<8> a; bit<8> b; bit<8> c;", """
    action fwd(bit<9> port, bit<8> v) { sm.egress_spec = port; hdr.h.c = v; }
    action to_group(bit<16> g) { sm.mcast_grp = g; }
    action drop() { mark_to_drop(sm); }
    table t {
        key = { hdr.h.a : exact; hdr.h.b : ternary; }
        actions = { fwd; to_group; drop; }
        default_action = drop();
    }
    apply { t.apply(); }""")

STF_OK = """
# comment line
add t 10 hdr.h.a:1 hdr.h.b:0x0* fwd(port:2, v:0x33)   # trailing comment
add I.t 20 h.a:1 h.b:0x05 I.fwd(port:3, v:0x44)
packet 0 01 02 00 FF
expect 2 01 02 33 FF$
packet 0 01 05 00
expect 3 01 05 ** $
packet 0 02 05 00
"""


def _write(tmp_path: Path, program: str, stf: str, name: str = "prog") -> Path:
    p4 = tmp_path / f"{name}.p4"
    p4.write_text(program)
    p4.with_suffix(".stf").write_text(stf)
    return p4


def test_parse_statements() -> None:
    sts = parse_stf(STF_OK)
    assert isinstance(sts[0], Add)
    assert sts[0].table == "t" and sts[0].priority == 10
    assert sts[0].keys == (("hdr.h.a", "1"), ("hdr.h.b", "0x0*"))
    assert sts[0].action.args == (("port", "2"), ("v", "0x33"))
    assert sts[2] == Packet(5, 0, bytes.fromhex("010200ff"))
    assert sts[3] == Expect(6, 2, "010233FF", exact=True)
    with pytest.raises(StfError, match="line 1: unknown command 'bogus'"):
        parse_stf("bogus 1 2")
    with pytest.raises(StfError, match="odd number"):
        parse_stf("packet 0 123")


def test_match_packet_rules() -> None:
    assert match_packet("01**03", False, bytes.fromhex("01ff0304")) is None  # longer is fine
    assert match_packet("01**03", True, bytes.fromhex("01ff0304")) is not None  # '$': exact length
    assert match_packet("01**03", False, bytes.fromhex("01ff")) is not None  # too short
    assert "differs at byte 2" in str(match_packet("010203", False, bytes.fromhex("010204")))


def test_table_entries_wildcards_priorities_pass(tmp_path: Path) -> None:
    r = run_test(_write(tmp_path, TABLE_PROGRAM, STF_OK))
    assert (r.verdict, r.reason) == ("PASS", "")


def test_wrong_output_fails_with_reason(tmp_path: Path) -> None:
    r = run_test(_write(tmp_path, TABLE_PROGRAM, STF_OK.replace("01 02 33 FF$", "01 02 34 FF$")))
    assert r.verdict == "FAIL" and "port 2 packet 0" in r.reason and "differs at byte 2" in r.reason


def test_unexpected_packet_on_an_interface_fails(tmp_path: Path) -> None:
    # port 0 is an interface (packets come in on it): a packet out of it must be expected
    stf = "add t 1 hdr.h.a:1 hdr.h.b:0x00 fwd(port:0, v:1)\npacket 0 01 00 00\n"
    r = run_test(_write(tmp_path, TABLE_PROGRAM, stf))
    assert r.verdict == "FAIL" and "port 0: expected 0 packets, got 1" in r.reason
    # `expect 0` alone accepts anything on port 0; a port never named is not an interface
    assert run_test(_write(tmp_path, TABLE_PROGRAM, stf + "expect 0\n")).verdict == "PASS"
    stf9 = "add t 1 hdr.h.a:1 hdr.h.b:0x00 fwd(port:9, v:1)\npacket 0 01 00 00\n"
    assert run_test(_write(tmp_path, TABLE_PROGRAM, stf9)).verdict == "PASS"


def test_missing_packet_fails(tmp_path: Path) -> None:
    r = run_test(_write(tmp_path, TABLE_PROGRAM, "packet 0 01 00 00\nexpect 1 01 00 00\n"))
    assert r.verdict == "FAIL" and "port 1: expected 1 packets, got 0" in r.reason


def test_setdefault_and_multicast(tmp_path: Path) -> None:
    stf = """
setdefault t to_group(g:5)
mc_mgrp_create 5
mc_node_create 0 1 2
mc_node_create 7 3
mc_node_associate 5 0
mc_node_associate 5 1
packet 0 09 00 00
expect 1 09 00 00
expect 2 09 00 00
expect 3 09 00 00
"""
    r = run_test(_write(tmp_path, TABLE_PROGRAM, stf))
    assert (r.verdict, r.reason) == ("PASS", "")


def test_bad_names_fail_naming_the_line(tmp_path: Path) -> None:
    r = run_test(_write(tmp_path, TABLE_PROGRAM, "add nosuch hdr.h.a:1 fwd(port:1, v:1)\n"))
    assert r.verdict == "FAIL" and "line 1" in r.reason and "no table nosuch" in r.reason
    r = run_test(_write(tmp_path, TABLE_PROGRAM, "add t 1 hdr.h.a:1 hdr.h.b:1 fwd(port:1, nope:1)\n"))
    assert r.verdict == "FAIL" and "has no parameter nope" in r.reason


def test_refused_program_names_the_line(tmp_path: Path) -> None:
    r = run_test(_write(tmp_path, TABLE_PROGRAM.replace("hdr.h.c = v;", "hdr.h.c = 9w1;"), ""))
    assert r.verdict == "REFUSED" and "prog.p4:" in r.reason and "error" in r.reason


def test_cli_on_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path, TABLE_PROGRAM, STF_OK, "a-bmv2")
    _write(tmp_path, TABLE_PROGRAM, "packet 0 01 00 00\nexpect 5 00\n", "b-bmv2")
    _write(tmp_path, "#include <core.p4>\n", "packet 0 00\n", "c_ebpf")  # not v1model: not a test
    (tmp_path / "d.p4").write_text(TABLE_PROGRAM)  # no .stf: not a test
    assert [p.name for p in collect([str(tmp_path)])] == ["a-bmv2.p4", "b-bmv2.p4"]
    assert main(["stf", str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("PASS") and out[1].startswith("FAIL")
    assert out[-1] == "1 passed, 1 failed (0 refused by the front end)"
    assert main(["stf", str(tmp_path / "a-bmv2.p4")]) == 0


EXTERN_PROGRAM = one_header_program("bit<8> a; bit<8> b; bit<8> c;", """
    counter(4, CounterType.packets_and_bytes) hits;
    register<bit<8>>(4) r;
    apply {
        hits.count((bit<32>)hdr.h.a);
        r.read(hdr.h.c, (bit<32>)hdr.h.a);
        sm.egress_spec = 1;
        if (hdr.h.b == 1) { clone(CloneType.I2E, 7); }
    }""")


def test_counters_registers_and_mirroring(tmp_path: Path) -> None:
    stf = """
register_write r 2 0x55
mirroring_add 7 4
packet 0 02 01 00
expect 1 02 01 55
expect 4 02 01 00
packet 0 02 00 00
expect 1 02 00 55
check_counter hits(2) packets == 2
check_counter hits(2) bytes == 6
check_counter hits(1) packets == 0
register_reset r
packet 0 02 00 00
expect 1 02 00 00
wait
"""
    r = run_test(_write(tmp_path, EXTERN_PROGRAM, stf))
    assert (r.verdict, r.reason) == ("PASS", "")
    r = run_test(_write(tmp_path, EXTERN_PROGRAM, stf.replace("packets == 2", "packets > 2")))
    assert r.verdict == "FAIL" and "counter hits[2] packets is 2, expected > 2" in r.reason
