"""Header unions on p4sim: extract into a member, isValid of the union, setValid of one member
invalidates the others, emit of the union.

Run one case: .venv/bin/pytest tests/p4sim/test_unions.py -k widen
"""

from __future__ import annotations

import pytest

from p4sim.runtime.switch import Switch
from tests.p4sim.harness import load

pytestmark = pytest.mark.unit

ETH = bytes(6) + bytes(5) + b"\x01" + b"\x12\x34"


@pytest.fixture(scope="module")
def sw(p4sim_engine: str) -> Switch:
    return load("unions.p4", engine=p4sim_engine)


def test_short_member_passes_through(sw):
    assert sw.process(0, ETH + b"\x01\x07tail") == [(1, ETH + b"\x01\x07tail")]


def test_long_member_and_header_lookahead(sw):
    data = ETH + b"\x02\x00\x00\x00\x00\x09tail"
    assert sw.process(0, data) == [(4, data)]  # lookahead<short_t>() saw "t" after the member
    data = ETH + b"\x02\x00\x00\x00\x00\x09Tail"
    assert sw.process(0, data) == [(1, data)]


def test_no_member_valid(sw):
    assert sw.process(0, ETH + b"\x05tail") == [(2, ETH + b"\x05tail")]


def test_widen_replaces_the_short_member(sw):
    [(port, out)] = sw.process(0, ETH + b"\x01\xfftail")
    assert port == 3
    assert out == ETH + b"\x02\x00" + (0x100).to_bytes(4, "big") + b"tail"


def test_union_member_must_be_a_header(tmp_path):
    from tests.p4sim.test_checker import compile_error

    err, line = compile_error(tmp_path, decls="header_union u_t { bit<8> x; } /*HERE*/")
    assert err.loc.line == line
    assert "header union members must be headers" in err.message
