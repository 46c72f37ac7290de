"""Signed values (int<N>) on both engines, checked against Python's two's complement arithmetic
(tests/p4sim/programs/signed.p4); the differential test compares the engines on random packets.

Run one case: .venv/bin/pytest tests/p4sim/test_signed.py -k saturating
"""

from __future__ import annotations

from pathlib import Path

import pytest
from scapy.layers.l2 import Ether

from p4sim.runtime.api_values import Match
from p4sim.runtime.engine_loader import load_switch
from p4sim.runtime.switch import Switch
from tests.p4sim.harness import add, load, one_header_program

pytestmark = pytest.mark.unit

WIDTHS = [8, 8, 16, 32, 64, 4, 4, 8, 16, 32, 64, 3, 5, 8]  # sgn_t after op
NAMES = ["a", "b", "c", "d", "e", "f", "g", "r8", "r16", "r32", "r64", "r3", "r5", "sel"]
SIGNED = {"a", "b", "c", "d", "e", "f", "r8", "r16", "r32", "r64", "r3"}
EDGES8 = [(0, 0), (1, -1), (127, 1), (-128, -1), (-128, 127), (100, 100), (-100, -100), (-1, -1)]


def sx(v: int, w: int) -> int:
    v &= (1 << w) - 1
    return v - (1 << w) if v >> (w - 1) else v


def packet(op: int, **vals: int) -> bytes:
    v = op
    for n, w in zip(NAMES, WIDTHS, strict=True):
        v = v << w | (vals.get(n, 0) & ((1 << w) - 1))
    return bytes(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01", type=0x88B7)) + v.to_bytes(35, "big")


def run(sw: Switch, op: int, **vals: int) -> dict[str, int]:
    out = sw.process(1, packet(op, **vals))
    assert len(out) == 1, out
    v = int.from_bytes(out[0][1][14:49], "big")
    res: dict[str, int] = {}
    for n, w in reversed(list(zip(NAMES, WIDTHS, strict=True))):
        res[n] = sx(v, w) if n in SIGNED else v & ((1 << w) - 1)
        v >>= w
    return res


@pytest.fixture(scope="module")
def sw(p4sim_engine: str) -> Switch:
    return load("signed.p4", engine=p4sim_engine)


@pytest.mark.parametrize(("a", "b"), EDGES8)
def test_wrapping_arithmetic(sw, a, b):
    c, d, e = a * 200, a * 70000 + b, -(1 << 63) + a if a < 0 else (1 << 63) - 1 - a
    r = run(sw, 0, a=a, b=b, c=c, d=d, e=e, f=-3)
    assert r["r8"] == sx(a + b, 8)
    assert r["r16"] == sx(c - a, 16)
    assert r["r32"] == sx(d * b, 32)
    assert r["r64"] == sx(e + d, 64)
    assert r["r3"] == sx(-3, 3)


@pytest.mark.parametrize(("a", "b"), EDGES8)
def test_saturating(sw, a, b):
    c, d, e = sx(a * 300, 16), a * (1 << 24), -(1 << 63) + 5 if a < 0 else (1 << 63) - 5
    r = run(sw, 1, a=a, b=b, c=c, d=d, e=e, f=a % 8 - 4)

    def sat(v: int, w: int) -> int:
        return max(-(1 << (w - 1)), min((1 << (w - 1)) - 1, v))

    assert r["r8"] == sat(a + b, 8)
    assert r["r16"] == sat(c - b, 16)
    assert r["r32"] == sat(d + d, 32)
    assert r["r64"] == sat(e - c, 64)
    assert r["r3"] == sat(sx(a % 8 - 4, 3) + 2, 3)


@pytest.mark.parametrize(("a", "b"), EDGES8)
def test_comparisons_and_negation(sw, a, b):
    r = run(sw, 2, a=a, b=b, c=a * 100, d=b * 10, e=a)
    assert r["r8"] == (a < b) | (a <= b) << 1 | (a > b) << 2 | (a >= b) << 3
    assert r["r16"] == abs(a * 100)
    assert r["r32"] == (1 if -1000 < b * 10 < 1000 else -1)
    assert r["r64"] == (-1 if a < b * 10 else 1)
    r = run(sw, 6, a=a, b=b, c=a * 100, d=b * 1000, e=-(1 << 63) if a == -128 else a, f=-8)
    assert r["r8"] == sx(-a, 8)
    assert r["r16"] == ~(a * 100)
    assert r["r32"] == -b * 1000 + ~b
    assert r["r64"] == (-(1 << 63) if a == -128 else -a)
    assert r["f"] == -8 and r["r3"] == 0  # -(int<4>)-8 wraps to -8; (int<3>)-8 is 0


@pytest.mark.parametrize(("a", "g"), [(-128, 0), (-1, 15), (-77, 3), (77, 5), (127, 1)])
def test_shifts(sw, a, g):
    c, d, e = a * 250, a * 123457, a * (1 << 55) + 12345
    r = run(sw, 3 | (g & 0xF) << 4, a=a, c=c, d=d, e=e, f=a % 16, g=g)
    assert r["r8"] == a >> 2
    assert r["r16"] == sx(c, 16) >> g
    assert r["r32"] == sx(d << g, 32)
    assert r["r64"] == sx((e >> 40) ^ (e << 3), 64)
    assert r["r3"] == sx(sx(a % 16, 4) >> 1, 3)
    assert r["sel"] == (a >> g) & 0xFF


@pytest.mark.parametrize("a", [-128, -1, 0, 1, 127, -77])
def test_casts_slices_concat(sw, a):
    c = sx(a * 257 + 0x1234, 16)
    r = run(sw, 4, a=a, c=c, g=0xD)
    assert (r["r16"], r["r32"], r["r64"], r["r8"]) == (a, a & 0xFF, c, sx(c, 8))
    assert r["r5"] == a & 0x1F and r["r3"] == sx(0xD, 3)
    r = run(sw, 5, a=a, b=-2, c=c, e=-(1 << 40), f=-3, g=0x9)
    assert r["r16"] == sx((a & 0xFF) << 8 | 0xFE, 16)
    assert r["r32"] == (0x9 << 20 | 0xD << 16 | (a & 0xFF) << 8 | 0xFE)
    assert r["r8"] == sx((c >> 4) & 0xFF, 8)
    assert r["r64"] == sx((((-(1 << 40)) & ~(0xFF << 56)) | (a & 0xFF) << 56) & ~0xF | 0x9, 64)
    assert r["c"] == sx((c & 0x0FFF) | 0x8000, 16)


def test_select_on_signed_keys(sw):
    assert run(sw, 15, a=-100)["sel"] == 0
    assert run(sw, 15, a=-64, f=-1)["sel"] == 1
    assert run(sw, 15, a=-1, f=-6)["sel"] == 3
    assert run(sw, 15, a=0x0F)["sel"] == 2
    assert run(sw, 15, a=-128 + 0x0F)["sel"] == 0


def test_signed_lookahead_function_and_switch(sw):
    r = run(sw, 7 | 0x80, a=-5, b=-3, c=1000)
    assert r["r8"] == sx(0x87, 8)  # lookahead<int<8>>: the op byte
    peeked16 = sx(0x87 << 8 | 0xFB, 16)
    assert r["r16"] == sx(100 + peeked16, 16)
    assert r["r32"] == max(-3, min(30000, sx(-5 * 300, 16)))
    for a, want in [(-1, 10), (-128, 20), (0, 30), (1, 30), (5, -40)]:
        assert run(sw, 9, a=a, b=3)["r8"] == want


def test_signed_table_key_and_action_data(sw):
    add(sw, "MyIngress.by_signed", {"hdr.s.b": Match("exact", 0xFE), "hdr.s.f": Match("ternary", 0x8, mask=0x8)},
        "MyIngress.set_r", {"v": 0xFF00, "w": 0x80}, priority=1)
    r = run(sw, 8, a=5, b=-2, f=-1)
    assert (r["r16"], r["r8"], r["r32"]) == (-256, sx(-128 - 5, 8), -256 * -128)
    r = run(sw, 8, a=5, b=-2, f=1)  # default action scale(-3)
    assert (r["r8"], r["r3"]) == (-15, sx(-3, 3))


def test_digest_of_signed_fields(sw):
    sw.take_digests()
    run(sw, 10, a=-2, c=-300, d=-1)
    (_, vals), = sw.take_digests()
    assert vals == [b"\xfe", (-300 & 0xFFFF).to_bytes(2, "big"), b"\x0a"]


REGISTER_PROGRAM = one_header_program("int<16> x; bit<8> idx;", """    register<int<16>>(4) acc;
    apply {
        sm.egress_spec = 1;
        int<16> v;
        bit<32> i = (bit<32>)hdr.h.idx;
        acc.read(v, i);
        acc.write(i, v + hdr.h.x);
        hdr.h.x = v < 0 ? -v : v;
    }""")


def test_signed_register(tmp_path: Path, p4sim_engine: str):
    src = tmp_path / "sreg.p4"
    src.write_text(REGISTER_PROGRAM)
    sw = load_switch(str(src), [], engine=p4sim_engine)
    assert sw.engine == p4sim_engine, sw.native_fallback
    rid = sw.p4info.registers[0].preamble.id
    sw.register_write(rid, 1, 0xFFF0)  # the control plane writes the bits of -16
    out = sw.process(0, (-5 & 0xFFFF).to_bytes(2, "big") + b"\x01")
    assert out[0][1][:2] == (16).to_bytes(2, "big")  # |-16|
    assert sw.register_read(rid, 1) == (-21 & 0xFFFF)
