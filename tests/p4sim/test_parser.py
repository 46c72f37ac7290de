"""The p4sim parser: select on tuples with masks/ranges/default, lookahead, advance, verify with a
program error, header stacks, and v1model parser errors (the packet continues to ingress).

Run one case: .venv/bin/pytest tests/p4sim/test_parser.py -k mpls
"""

from __future__ import annotations

import random

import pytest
from scapy.contrib.mpls import MPLS
from scapy.layers.l2 import Ether

from p4sim.runtime.switch import Switch
from tests.p4sim.harness import Scratch, load

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def sw(p4sim_engine: str):
    return load("parser.p4", engine=p4sim_engine)


def eth(src_low: int, ether_type: int) -> bytes:
    return bytes(Ether(dst="ff:ff:00:00:00:02", src=f"00:00:00:00:00:{src_low:02x}", type=ether_type))


def run(sw: Switch, data: bytes) -> tuple[int, bytes]:
    out = sw.process(9, data)
    assert len(out) == 1
    return out[0]


@pytest.mark.parametrize(("src_low", "path"), [(0x01, 1), (0x11, 1), (0x25, 2), (0x30, 0), (0x00, 0)])
def test_select_tuple_mask_range_default(sw, src_low, path):
    port, data = run(sw, eth(src_low, 0x88B6) + Scratch(op=1).pack())
    assert port == 1
    r = Scratch.unpack(data[14:])
    assert r.r8 == path
    assert r.r16 == 0xFFFF  # lookahead saw the first 16 bits of the destination MAC


def test_advance_skips_bytes(sw):
    port, data = run(sw, eth(0xFF, 0x88B7) + b"\xAA\xBB" + Scratch(op=2).pack())
    assert port == 1
    assert Scratch.unpack(data[14:]).r8 == 3  # the two skipped bytes are not re-emitted
    assert len(data) == 14 + 10


@pytest.mark.parametrize("labels", [1, 2, 3])
def test_header_stack_next_and_last(sw, labels):
    stack = Ether(dst="ff:ff:00:00:00:02", src="00:00:00:00:00:01", type=0x8847)
    for i in range(labels):
        stack = stack / MPLS(label=100 + i, s=int(i == labels - 1), ttl=64)
    port, data = run(sw, bytes(stack) + b"data")
    assert port == 1
    pkt = Ether(data)
    assert pkt.src == f"00:00:00:00:00:{labels:02x}"
    assert data.endswith(b"data")
    assert len(data) == len(bytes(stack)) + 4


def test_stack_overflow_is_stack_out_of_bounds(sw):
    stack = Ether(type=0x8847)
    for i in range(4):
        stack = stack / MPLS(label=i, s=0)
    port, _ = run(sw, bytes(stack))
    assert port == 5  # StackOutOfBounds: some other parser error


def test_truncated_header_is_packet_too_short(sw):
    port, data = run(sw, eth(0x00, 0x88B6) + b"\x01\x02\x03")
    assert port == 2
    assert data[14:] == b"\x01\x02\x03"  # the unparsed bytes stay as payload


def test_verify_sets_program_error(sw):
    port, _ = run(sw, eth(0x00, 0x88B6) + Scratch(op=0xEE).pack())
    assert port == 3


def test_no_select_match_is_no_match(sw):
    port, _ = run(sw, eth(0x00, 0x88B6) + Scratch(op=0x50).pack())
    assert port == 4


def test_explicit_reject_continues_to_ingress(sw):
    port, _ = run(sw, eth(0x00, 0x88B6) + Scratch(op=0xFF).pack())
    assert port == 1


@pytest.mark.parametrize("program", ["parser.p4", "tables.p4", "expressions.p4", "ipv4_forward.p4",
                                     "pre.p4", "externs.p4", "profiles.p4", "unions.p4"])
def test_garbage_never_crashes(program):
    sw = load(program)
    rng = random.Random(7)
    for n in list(range(0, 64)) + [rng.randrange(64, 1600) for _ in range(40)]:
        for _ in range(3):
            data = bytes(rng.getrandbits(8) for _ in range(n))
            for port, out in sw.process(rng.randrange(0, 16), data):
                assert 0 <= port < 512
                assert isinstance(out, bytes)
