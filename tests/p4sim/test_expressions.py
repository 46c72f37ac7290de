"""Expressions and statements on p4sim, checked against Python arithmetic: wrap-around and
saturating arithmetic, shifts, slices, concatenation, casts, signed values, booleans, actions with
directional parameters, return, exit, sub-controls, enums, header validity and header stacks.

Run one case: .venv/bin/pytest tests/p4sim/test_expressions.py -k signed
"""

from __future__ import annotations

import pytest
from scapy.layers.l2 import Dot1Q, Ether

from tests.p4sim.harness import Scratch, load, result, run_scratch, scratch_packet

pytestmark = pytest.mark.unit

PAIRS = [(0, 0), (1, 2), (200, 100), (100, 200), (255, 255), (0x80, 0x7F), (3, 0)]


@pytest.fixture(scope="module")
def sw(p4sim_engine: str):
    return load("expressions.p4", engine=p4sim_engine)


def sx8(v: int) -> int:
    return v - 256 if v & 0x80 else v


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_wraparound_arithmetic(sw, a, b):
    r = run_scratch(sw, Scratch(op=1, a=a, b=b))
    assert r.r8 == (a + b) & 0xFF
    assert r.r16 == a * 3
    assert r.r32 == (a - b) & 0xFF


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_saturating_division_and_concat(sw, a, b):
    r = run_scratch(sw, Scratch(op=2, a=a, b=b))
    assert r.r8 == min(a + b, 255)
    assert r.r16 == max(a - b, 0)
    assert r.r32 == ((a // 3) << 24) | (b % 5)


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_shifts(sw, a, b):
    r = run_scratch(sw, Scratch(op=3, a=a, b=b))
    assert r.r8 == (a << 3) & 0xFF
    assert r.r16 == (a << (b & 0xF)) & 0xFFFF
    assert r.r32 == (a >> 2) ^ 0xF0000000


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_slices_and_slice_assignment(sw, a, b):
    r = run_scratch(sw, Scratch(op=4, a=a, b=b))
    assert r.r16 == (a << 8) | b
    assert r.r8 == (((a << 8) | b) >> 4) & 0xFF
    assert r.r32 == (a << 24) | (0xF << 12) | b


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_signed_arithmetic(sw, a, b):
    r = run_scratch(sw, Scratch(op=5, a=a, b=b))
    sa, sb = sx8(a), sx8(b)
    assert r.r8 == (sa + sb) & 0xFF
    assert r.r16 == sa & 0xFFFF
    assert r.r32 == (1 if sa < sb else 0)
    assert r.b == max(-128, min(127, sa + sb)) & 0xFF
    assert r.a == (sa >> 1) & 0xFF


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_booleans_and_unary(sw, a, b):
    r = run_scratch(sw, Scratch(op=6, a=a, b=b))
    both = a > b and b != 0
    either = a == 0 or not b <= 3
    assert r.r8 == (int(both) << 7) | int(either)
    assert r.r16 == (~a) & 0xFF
    assert r.r32 == (-a) & 0xFF


def test_action_with_inout_parameter(sw):
    r = run_scratch(sw, Scratch(op=7, b=10, r8=1))
    assert r.r8 == 16 and r.r16 == 1


def test_sub_control_with_return(sw):
    r = run_scratch(sw, Scratch(op=8, a=3, b=4))
    assert (r.r8, r.r16) == (12, 0x0D0D)
    r = run_scratch(sw, Scratch(op=8, a=0, b=4))
    assert (r.r8, r.r16) == (0, 0)  # returned before setting r16


def test_exit_in_action_stops_ingress(sw):
    r = run_scratch(sw, Scratch(op=9))
    assert r.r16 == 0xE1E1


def test_enums_and_new_types(sw):
    r = run_scratch(sw, Scratch(op=10, a=2, b=0x99))
    assert r.r8 == 2 and r.r16 == 0x99
    r = run_scratch(sw, Scratch(op=10, a=1, b=0x99))
    assert r.r8 == 0


def test_push_front_adds_vlan_and_egress_pops_second(sw):
    out = sw.process(1, scratch_packet(Scratch(op=11)))
    assert len(out) == 1
    pkt = Ether(out[0][1])
    assert pkt.type == 0x8100
    assert pkt[Dot1Q].vlan == 0xABC and pkt[Dot1Q].type == 0x88B6
    # a packet that already has a VLAN tag ends up with two; egress pops the front one again
    tagged = bytes(Ether(dst="00:00:00:00:00:02", type=0x8100) / Dot1Q(vlan=5, type=0x88B6)) + Scratch(op=11).pack()
    out = sw.process(1, tagged)
    pkt = Ether(out[0][1])
    assert pkt[Dot1Q].vlan == 5 and pkt[Dot1Q].type == 0x88B6


def test_set_invalid_removes_header(sw):
    out = sw.process(1, scratch_packet(Scratch(op=12, a=1), payload=b"xyz"))
    data = out[0][1]
    assert data[12:14] == b"\x08\x00"
    assert data[14:] == b"xyz"


def test_header_copy_via_local(sw):
    r = run_scratch(sw, Scratch(op=13, a=7))
    assert (r.a, r.r8, r.r16) == (7, 0x42, 1)


def test_port_and_payload_untouched(sw):
    port, r = result(sw.process(3, scratch_packet(Scratch(op=99, a=1, b=2), payload=b"tail")))
    assert port == 1 and (r.a, r.b) == (1, 2)


@pytest.mark.parametrize(("a", "r8"), [(1, 10), (2, 23), (3, 23), (0x42, 99), (7, 0xDD)])
def test_switch_on_a_value(sw, a, r8):
    r = run_scratch(sw, Scratch(op=14, a=a))
    assert r.r8 == r8 and r.r16 == 2


@pytest.mark.parametrize(("a", "b", "r32"), [(0, 0, 9), (1, 1, 9), (0, 1, 9), (1, 5, 0)])
def test_variable_header_stack_index(sw, a, b, r32):
    r = run_scratch(sw, Scratch(op=15, a=a, b=b))
    assert r.r8 == 1
    assert r.r16 == (9 if a == b else 7)
    assert r.r32 == r32  # out-of-bounds writes are ignored, reads give 0


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_functions_with_return_values_and_inout(sw, a, b):
    r = run_scratch(sw, Scratch(op=16, a=a, b=b))
    assert r.r8 == min(max(a, b) + max(b, 1), 255)
    assert (r.a, r.b) == (b, a)


def test_control_constructor_parameters(sw):
    assert run_scratch(sw, Scratch(op=17, r8=1)).r8 == 14
