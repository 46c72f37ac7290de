"""Table matching on p4sim: exact, LPM, ternary with priorities, range, optional, const entries,
default actions, hit/miss and switch on action_run, direct counters.

Run one case: .venv/bin/pytest tests/p4sim/test_tables.py -k ternary
"""

from __future__ import annotations

import pytest

from p4sim.runtime.api_values import ActionCall, Match, P4simError, TableEntry
from tests.p4sim.harness import Scratch, add, load, run_scratch, scratch_packet

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def program_sw(p4sim_engine: str):
    return load("tables.p4", engine=p4sim_engine)


@pytest.fixture
def sw():
    return load("tables.p4")


def test_exact_hit_sets_port_and_counts(sw):
    e = add(sw, "t_exact", {"hdr.test.a": Match("exact", 5)}, "set_port", {"port": 7})
    out = sw.process(1, scratch_packet(Scratch(a=5)))
    assert [p for p, _ in out] == [7]
    r = run_scratch(sw, Scratch(a=5))
    assert r.r32 & 0xFF == 1  # hit branch
    tid = sw.table_id("t_exact")
    pk, by = sw.direct_counter_read(tid, e)
    assert pk == 2
    assert by == 2 * len(scratch_packet(Scratch(a=5)))
    [entry] = sw.table_entries(tid)
    assert entry.packets == 2


def test_exact_miss_runs_default_drop(sw):
    add(sw, "t_exact", {"hdr.test.a": Match("exact", 5)}, "set_port", {"port": 7})
    assert sw.process(1, scratch_packet(Scratch(a=6))) == []


def test_switch_action_run_and_ternary_priority(sw):
    add(sw, "t_exact", {"hdr.test.a": Match("exact", 1)}, "set_port", {"port": 2})
    add(sw, "t_ternary", {"b": Match("ternary", 0x10, mask=0xF0)}, "set_r8", {"v": 0x11}, priority=10)
    add(sw, "t_ternary", {"b": Match("ternary", 0x12, mask=0xFF)}, "set_r8", {"v": 0x22}, priority=20)
    r = run_scratch(sw, Scratch(a=1, b=0x12))
    assert r.r8 == 0x22 and r.r32 == 0x101
    r = run_scratch(sw, Scratch(a=1, b=0x13))
    assert r.r8 == 0x11 and r.r32 == 0x101
    r = run_scratch(sw, Scratch(a=1, b=0x23))
    assert r.r8 == 0 and r.r32 == 0x201  # default NoAction -> default: branch


def test_range_and_const_default(sw):
    add(sw, "t_exact", {"hdr.test.a": Match("exact", 1)}, "set_port", {"port": 2})
    add(sw, "t_range", {"b_range": Match("range", 10, high=20)}, "set_r16", {"v": 0x1234}, priority=1)
    assert run_scratch(sw, Scratch(a=1, b=15)).r16 == 0x1234
    assert run_scratch(sw, Scratch(a=1, b=20)).r16 == 0x1234
    assert run_scratch(sw, Scratch(a=1, b=21)).r16 == 0xEEEE
    tid = sw.table_id("t_range")
    with pytest.raises(P4simError) as ei:
        sw.table_set_default(tid, ActionCall(sw.action_id("mark_miss"), {}))
    assert ei.value.code == "INVALID_ARGUMENT"


def test_optional_wildcard_and_value(sw):
    add(sw, "t_exact", {"hdr.test.a": Match("exact", 3)}, "set_port", {"port": 2})
    add(sw, "t_optional", {"a": Match("exact", 3)}, "set_r8", {"v": 1}, priority=1)
    add(sw, "t_optional", {"op": Match("optional", 0xAA), "a": Match("exact", 3)}, "set_r8", {"v": 2}, priority=5)
    assert run_scratch(sw, Scratch(op=0xAA, a=3)).r8 == 2
    tid = sw.table_id("t_optional")
    sw.table_delete(TableEntry(tid, {sw.field_id(tid, "op"): Match("optional", 0xAA),
                                     sw.field_id(tid, "a"): Match("exact", 3)}, priority=5))
    assert run_scratch(sw, Scratch(op=0xAA, a=3)).r8 == 1


def test_default_action_with_data_and_modify(sw):
    add(sw, "t_exact", {"hdr.test.a": Match("exact", 4)}, "set_port", {"port": 2})
    assert run_scratch(sw, Scratch(op=0xAA, a=4)).r8 == 0x77
    tid = sw.table_id("t_optional")
    aid = sw.action_id("set_r8")
    sw.table_set_default(tid, ActionCall(aid, {1: 0x55}))
    assert sw.table_get_default(tid) == ActionCall(aid, {1: 0x55})
    assert run_scratch(sw, Scratch(op=0xAA, a=4)).r8 == 0x55
    sw.table_set_default(tid, None)
    assert run_scratch(sw, Scratch(op=0xAA, a=4)).r8 == 0x77


def test_const_entries_match_in_order_and_reject_writes(sw):
    add(sw, "t_exact", {"hdr.test.a": Match("exact", 0x15)}, "set_port", {"port": 2})
    add(sw, "t_exact", {"hdr.test.a": Match("exact", 0x01)}, "set_port", {"port": 2})
    add(sw, "t_exact", {"hdr.test.a": Match("exact", 0x33)}, "set_port", {"port": 2})
    assert run_scratch(sw, Scratch(op=0xBB, a=0x15)).r16 == 0x1010
    assert run_scratch(sw, Scratch(op=0xBB, a=0x01)).r16 == 0x0101
    assert run_scratch(sw, Scratch(op=0xBB, a=0x33)).r16 == 0xFFFF
    tid = sw.table_id("t_const")
    assert len(sw.table_entries(tid)) == 3
    with pytest.raises(P4simError):
        add(sw, "t_const", {"a": Match("ternary", 1, mask=0xFF)}, "set_r16", {"v": 1}, priority=9)


def test_lpm_longest_prefix_wins():
    sw = load("ipv4_forward.p4")
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    add(sw, "ipv4_lpm", {"dst_addr": Match("lpm", 0x0A000000, prefix_len=8)}, "ipv4_forward",
        {"dst_addr": 0xA, "port": 1})
    add(sw, "ipv4_lpm", {"dst_addr": Match("lpm", 0x0A010000, prefix_len=16)}, "ipv4_forward",
        {"dst_addr": 0xB, "port": 2})
    add(sw, "ipv4_lpm", {"dst_addr": Match("lpm", 0x0A010203, prefix_len=32)}, "ipv4_forward",
        {"dst_addr": 0xC, "port": 3})

    def port_of(dst: str) -> list[int]:
        p = Ether() / IP(dst=dst, ttl=9) / UDP()
        return [port for port, _ in sw.process(4, bytes(p))]

    assert port_of("10.1.2.3") == [3]
    assert port_of("10.1.2.4") == [2]
    assert port_of("10.9.9.9") == [1]
    assert port_of("11.0.0.1") == []  # default drop


@pytest.mark.parametrize(
    ("match", "code"),
    [
        ({"hdr.test.a": Match("exact", 256)}, "OUT_OF_RANGE"),
        ({"hdr.test.a": Match("lpm", 1, prefix_len=8)}, "INVALID_ARGUMENT"),
        ({}, "INVALID_ARGUMENT"),
    ],
)
def test_bad_entries_are_refused(program_sw, match, code):
    with pytest.raises(P4simError) as ei:
        add(program_sw, "t_exact", match, "set_port", {"port": 1})
    assert ei.value.code == code


def test_entry_errors_name_the_problem(sw):
    add(sw, "t_exact", {"hdr.test.a": Match("exact", 9)}, "set_port", {"port": 1})
    with pytest.raises(P4simError) as ei:
        add(sw, "t_exact", {"hdr.test.a": Match("exact", 9)}, "set_port", {"port": 1})
    assert ei.value.code == "ALREADY_EXISTS"
    with pytest.raises(P4simError) as ei:
        add(sw, "t_exact", {"hdr.test.a": Match("exact", 8)}, "drop")
    assert ei.value.code == "INVALID_ARGUMENT" and "defaultonly" in ei.value.message
    with pytest.raises(P4simError) as ei:
        add(sw, "t_exact", {"hdr.test.a": Match("exact", 8)}, "set_port", {"port": 512})
    assert ei.value.code == "OUT_OF_RANGE" and "port" in ei.value.message
    with pytest.raises(P4simError) as ei:
        add(sw, "t_ternary", {"b": Match("ternary", 1, mask=0xFF)}, "set_r8", {"v": 1})
    assert "priority" in ei.value.message
    tid = sw.table_id("t_exact")
    with pytest.raises(P4simError) as ei:
        sw.table_delete(TableEntry(tid, {sw.field_id(tid, "hdr.test.a"): Match("exact", 77)}))
    assert ei.value.code == "NOT_FOUND"


def test_table_full_is_resource_exhausted(sw):
    for i in range(16):
        add(sw, "t_exact", {"hdr.test.a": Match("exact", i)}, "set_port", {"port": 1})
    with pytest.raises(P4simError) as ei:
        add(sw, "t_exact", {"hdr.test.a": Match("exact", 100)}, "set_port", {"port": 1})
    assert ei.value.code == "RESOURCE_EXHAUSTED"
