"""v1model externs on p4sim: registers, indexed counters, digests, hash algorithms, random, and
ipv4 checksum verification and update.

Run one case: .venv/bin/pytest tests/p4sim/test_externs.py -k hash
"""

from __future__ import annotations

import zlib

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from p4sim.runtime.primitives import crc16, csum16
from tests.p4sim.harness import Scratch, load, run_scratch, scratch_packet

pytestmark = pytest.mark.unit


@pytest.fixture
def sw():
    return load("externs.p4")


def test_register_accumulates_and_is_readable(sw):
    rid = sw.entity_id("register", "totals")
    assert sw.register_size(rid) == 16
    assert run_scratch(sw, Scratch(op=1, a=3, b=10)).r32 == 10
    assert run_scratch(sw, Scratch(op=1, a=3, b=5)).r32 == 15
    assert sw.register_read(rid, 3) == 15
    sw.register_write(rid, 3, 100)
    assert run_scratch(sw, Scratch(op=1, a=3, b=1)).r32 == 101
    assert run_scratch(sw, Scratch(op=1, a=200, b=1)).r32 == 1  # out-of-range index reads 0


def test_counter_counts_per_index(sw):
    cid = sw.entity_id("counter", "op_packets")
    for _ in range(3):
        run_scratch(sw, Scratch(op=1, a=1))
    run_scratch(sw, Scratch(op=5))
    assert sw.counter_read(cid, 1)[0] == 3
    assert sw.counter_read(cid, 5)[0] == 1
    sw.counter_write(cid, 1, 0, 0)
    assert sw.counter_read(cid, 1) == (0, 0)


def test_digest_members_as_bytes(sw):
    run_scratch(sw, Scratch(op=2, a=0x42))
    run_scratch(sw, Scratch(op=2, a=0x43))
    did = sw.entity_id("digest", "learn_t")
    assert sw.take_digests() == [
        (did, [b"\x02", b"\x42", b"\xbe\xef"]),
        (did, [b"\x02", b"\x43", b"\xbe\xef"]),
    ]
    assert sw.take_digests() == []


def test_digest_type_in_p4info(sw):
    [d] = sw.p4info.digests
    assert d.preamble.name == "learn_t"
    members = sw.p4info.type_info.structs["learn_t"].members
    assert [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in members] == [("op", 8), ("a", 8), ("l4_dst", 16)]


@pytest.mark.parametrize(("a", "b"), [(0, 0), (1, 2), (0xAB, 0xCD)])
def test_hash_algorithms(sw, a, b):
    data = bytes([a, b])
    r = run_scratch(sw, Scratch(op=3, a=a, b=b))
    assert r.r16 == crc16(data)
    assert r.r32 == zlib.crc32(data)
    r = run_scratch(sw, Scratch(op=4, a=a, b=b))
    assert r.r16 == csum16(data)
    assert r.r32 == 100 + ((a << 8) | b) % 1000


def test_crc16_is_crc16_arc():
    assert crc16(b"123456789") == 0xBB3D


def test_random_in_range(sw):
    seen = {run_scratch(sw, Scratch(op=5)).r8 for _ in range(200)}
    assert seen <= set(range(10, 21)) and len(seen) > 3


def test_checksum_verify_and_update(sw):
    good = Ether() / IP(src="1.2.3.4", dst="5.6.7.8", ttl=10) / UDP()
    out = sw.process(1, bytes(good))
    assert [p for p, _ in out] == [1]
    ip = Ether(out[0][1])[IP]
    assert ip.ttl == 9
    sent = ip.chksum
    del ip.chksum
    assert IP(bytes(ip)).chksum == sent
    bad = Ether() / IP(src="1.2.3.4", dst="5.6.7.8", ttl=10, chksum=0x1234) / UDP()
    assert [p for p, _ in sw.process(1, bytes(bad))] == [9]


def test_udp_checksum_with_payload_verify_and_update(sw):
    pkt = Ether() / IP(src="10.0.0.1", dst="10.0.0.2", ttl=10) / UDP(sport=5, dport=7) / b"some payload!"
    raw = bytes(pkt)
    out = sw.process(1, raw)
    assert [p for p, _ in out] == [1]
    udp = Ether(out[0][1])[UDP]
    sent = udp.chksum
    assert sent == Ether(raw)[UDP].chksum  # recomputed over pseudo header, UDP header and payload
    broken = bytearray(raw)
    broken[-1] ^= 0xFF  # payload changed, checksum not: verify_checksum_with_payload flags it
    assert [p for p, _ in sw.process(1, bytes(broken))] == [9]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_meter_marks_green_then_yellow_then_red_and_refills(sw):
    """RFC 2698 as BMv2 runs it: within cburst green, then yellow until the peak bucket is
    empty, then red; the buckets refill at cir and pir."""
    from p4sim.runtime.meters import MeterConfig

    mid = sw.entity_id("meter", "op_meter")
    clock = Clock()
    [info] = [m for m in sw.prog.meters.values() if m.fqname.endswith("op_meter")]
    info.meters.clock = clock

    def colour(index: int = 1) -> int:
        return run_scratch(sw, Scratch(op=6, a=index)).r8

    assert [colour() for _ in range(3)] == [0, 0, 0]  # unconfigured: always green
    sw.meter_write(mid, 1, MeterConfig(cir=10, cburst=2, pir=20, pburst=4))
    assert sw.meter_read(mid, 1) == MeterConfig(10, 2, 20, 4)
    assert [colour() for _ in range(5)] == [0, 0, 1, 1, 2]  # 2 green, 2 yellow, then red
    assert colour(2) == 0  # another index, unconfigured
    clock.now += 0.1  # +1 committed token, +2 peak tokens
    assert [colour() for _ in range(3)] == [0, 1, 2]
    clock.now += 10.0  # full again (capped at the bursts)
    assert [colour() for _ in range(5)] == [0, 0, 1, 1, 2]
    sw.meter_write(mid, 1, None)  # reset: unconfigured again
    assert sw.meter_read(mid, 1) is None and colour() == 0
    with pytest.raises(Exception, match="pir 1 is below cir 5"):
        sw.meter_write(mid, 1, MeterConfig(cir=5, cburst=1, pir=1, pburst=1))
    with pytest.raises(Exception, match="out of range"):
        sw.meter_write(mid, 4, MeterConfig(1, 1, 1, 1))


def test_bytes_meter_pays_the_packet_length(sw):
    from p4sim.runtime.meters import MeterConfig

    mid = sw.entity_id("meter", "byte_meter")
    [info] = [m for m in sw.prog.meters.values() if m.fqname.endswith("byte_meter")]
    info.meters.clock = Clock()
    length = len(scratch_packet(Scratch(op=6)))
    sw.meter_write(mid, 0, MeterConfig(cir=1, cburst=2 * length, pir=1, pburst=3 * length))
    colours = [run_scratch(sw, Scratch(op=6, b=0)).r32 for _ in range(4)]
    assert colours == [0, 0, 1, 2]


def test_meters_in_p4info(sw):
    meters = {m.preamble.name.rsplit(".", 1)[-1]: m for m in sw.p4info.meters}
    assert meters["op_meter"].size == 4 and meters["byte_meter"].size == 2
    from finsy.proto import p4i

    assert meters["op_meter"].spec.unit == p4i.MeterSpec.PACKETS
    assert meters["byte_meter"].spec.unit == p4i.MeterSpec.BYTES


# -- field lists as BMv2 builds them (behavioral-model src/bm_sim/calculations.cpp, BufBuilder) ----
# Independent reference implementations: a bit string packed by hand, a bit-at-a-time CRC-16/ARC
# (not p4sim's table), zlib's CRC-32, a ones'-complement sum written out.

def _bits(*fields: tuple[int, int]) -> bytes:
    """Fields (value, width) packed most significant bit first, zeros padded at the end."""
    text = "".join(format(v, f"0{w}b") for v, w in fields)
    text += "0" * (-len(text) % 8)
    return int(text, 2).to_bytes(len(text) // 8, "big") if text else b""


def _crc16_arc_bitwise(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def _ones_complement_sum16(data: bytes) -> int:
    if len(data) % 2:
        data += b"\x00"
    total = sum(int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


@pytest.mark.parametrize(("a", "b"), [(0x0F, 0xAB), (0x35, 0x00), (0xFF, 0xFF)])
def test_a_field_list_of_19_bits_is_packed_bit_by_bit_and_padded_at_the_end(sw, a, b):
    r = run_scratch(sw, Scratch(op=7, a=a, b=b))
    data = _bits((a & 0xF, 4), (b, 12), (5, 3))
    assert len(data) == 3
    assert r.r16 == _crc16_arc_bitwise(data)
    assert r.r32 == zlib.crc32(data)


def test_fields_and_whole_headers_that_are_invalid_are_left_out(sw):
    r = run_scratch(sw, Scratch(op=8, a=0x12, b=0x34))
    assert r.r16 == _crc16_arc_bitwise(bytes([0x12, 0x34]))
    assert r.r32 == zlib.crc32(bytes([0x12, 0x34]))


def test_identity_takes_the_first_8_bytes(sw):
    r = run_scratch(sw, Scratch(op=9, a=0xA1, b=0xB2))
    first8 = bytes([0xA1, 0xB2, 9, 0x11, 0x22, 0x33, 0x44, 0x55])
    assert (r.r16 << 48 | r.r32) == int.from_bytes(first8, "big") & 0xFFFF0000FFFFFFFF


def test_csum16_of_a_padded_field_list_without_the_invalid_header(sw):
    r = run_scratch(sw, Scratch(op=10, a=0xC3, b=0x0D))
    assert r.r16 == _ones_complement_sum16(_bits((0xC3, 8), (0xD, 4)))


def test_fields_of_a_header_made_valid_are_in(sw):
    """The lists of op 8 when hdr.ipv4 is valid at run time: its field and whole header are hashed."""
    a, b = 0x12, 0x34
    r = run_scratch(sw, Scratch(op=11, a=a, b=b))
    ipv4 = bytes(IP(version=4, ihl=5, tos=0, len=20, id=0x1234, flags=2, frag=0, ttl=0x40, proto=17, chksum=0,
                    src="10.0.0.1", dst="10.0.0.2"))
    assert len(ipv4) == 20
    assert r.r16 == _crc16_arc_bitwise(bytes([a, 0x40, b]))
    assert r.r32 == zlib.crc32(bytes([a]) + ipv4 + bytes([b]))


@pytest.mark.parametrize(("op", "widths"), [(12, (4, 8, 3)), (13, (4, 12, 3))])
@pytest.mark.parametrize(("a", "b"), [(0x0F, 0xAB), (0x09, 0x00), (0xFF, 0xFF)])
def test_update_checksum_csum16_of_a_list_not_a_multiple_of_8_bits_is_padded_at_the_end(sw, op, widths, a, b):
    r = run_scratch(sw, Scratch(op=op, a=a, b=b))
    wa, wb, wc = widths
    data = _bits((a & 0xF, wa), (b, wb), (5, wc))
    assert len(data) == (sum(widths) + 7) // 8
    assert r.r16 == _ones_complement_sum16(data)


def test_fields_and_elements_of_a_header_stack_that_are_invalid_are_left_out(sw):
    r = run_scratch(sw, Scratch(op=14, a=0x56, b=0x78))
    assert r.r16 == _crc16_arc_bitwise(bytes([0x56, 0x78]))
    assert r.r32 == zlib.crc32(bytes([0x56, 0x78]))
