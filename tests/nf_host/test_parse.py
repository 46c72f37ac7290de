"""parse_frame: flow keys and offsets for well-formed frames, and no exception on any garbage."""

from __future__ import annotations

import random
import struct

import pytest
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Packet as ScapyPacket

from nf_host.nf_api import FlowKey
from nf_host.parse import (
    TCP_ACK,
    TCP_SYN,
    fix_checksums,
    ip_end,
    parse_frame,
    payload_bytes,
    rewrite_ipv4_addr,
    rewrite_port,
    tcp_flags,
    write_l4_words,
)
from tests.nf_host.nfs.packets import checksums_valid, eth, frame_of, ip2int, packet_of, shim

pytestmark = pytest.mark.unit


def test_tcp_flow_offsets_and_payload() -> None:
    p = packet_of(
        eth()
        / IP(src="10.0.0.1", dst="10.0.0.2")
        / TCP(sport=1234, dport=80, flags="SA")
        / b"hello"
    )
    assert p.flow == FlowKey(ip2int("10.0.0.1"), ip2int("10.0.0.2"), 1234, 80, 6)
    assert (p.l3_offset, p.l4_offset, p.payload_offset) == (14, 34, 54)
    assert bytes(p.payload) == b"hello"
    assert tcp_flags(p) == TCP_SYN | TCP_ACK


def test_tcp_options_move_payload() -> None:
    pkt = eth() / IP() / TCP(options=[("MSS", 1460), ("NOP", None), ("NOP", None)]) / b"x"
    p = packet_of(pkt)
    assert p.payload_offset == 34 + 28
    assert bytes(p.payload) == b"x"


def test_udp_with_ip_options_and_vlan() -> None:
    pkt = (
        eth()
        / Dot1Q(vlan=5)
        / IP(src="1.2.3.4", dst="5.6.7.8", options=b"\x01\x01\x01\x00")
        / UDP(sport=5, dport=6)
        / b"abc"
    )
    p = packet_of(pkt)
    assert p.flow == FlowKey(ip2int("1.2.3.4"), ip2int("5.6.7.8"), 5, 6, 17)
    assert (p.l3_offset, p.l4_offset, p.payload_offset) == (18, 42, 50)
    assert bytes(p.payload) == b"abc"


def test_ethernet_padding_is_not_payload() -> None:
    frame = frame_of(eth() / IP() / UDP() / b"ab") + bytearray(20)
    p = parse_frame(frame, shim())
    assert ip_end(p) == 14 + 20 + 8 + 2
    assert bytes(payload_bytes(p)) == b"ab"


def test_icmp_and_other_protocols_have_zero_ports() -> None:
    p = packet_of(eth() / IP(src="1.1.1.1", dst="2.2.2.2") / ICMP())
    assert p.flow == FlowKey(ip2int("1.1.1.1"), ip2int("2.2.2.2"), 0, 0, 1)
    assert p.payload_offset == 42
    q = packet_of(eth() / IP(proto=47) / b"gre!")
    assert q.flow is not None and q.flow.proto == 47 and q.flow.sport == 0
    assert bytes(q.payload) == b"gre!"


def test_non_first_fragment_has_no_ports() -> None:
    p = packet_of(eth() / IP(frag=10, proto=6) / (b"\x00" * 30))
    assert p.flow is not None and (p.flow.sport, p.flow.dport) == (0, 0)
    assert p.l4_offset == -1 and p.payload_offset == -1


def test_non_ipv4_and_truncated_frames() -> None:
    arp = frame_of(eth(type=0x0806) / (b"\x00" * 28))
    p = parse_frame(arp, shim())
    assert p.flow is None and p.l3_offset == -1
    assert parse_frame(bytearray(b"\x00" * 5), shim()).flow is None
    tcp_full = frame_of(eth() / IP() / TCP())
    cut = parse_frame(tcp_full[:40], shim())  # IP header complete, TCP truncated
    assert cut.flow is not None and cut.flow.sport == 0 and cut.l4_offset == -1
    bad_ihl = bytearray(tcp_full)
    bad_ihl[14] = 0x43
    assert parse_frame(bad_ihl, shim()).flow is None


def test_garbage_never_raises() -> None:
    rng = random.Random(1)
    base = frame_of(eth() / IP() / TCP() / b"payload")
    for _ in range(3000):
        frame = bytearray(base[: rng.randrange(len(base) + 1)])
        for _ in range(rng.randrange(4)):
            if frame:
                frame[rng.randrange(len(frame))] = rng.randrange(256)
        p = parse_frame(frame, shim())
        assert p.payload_offset <= len(frame)
        if p.flow is None:
            assert p.l4_offset == -1 and p.payload_offset == -1
        bytes(payload_bytes(p))
    for _ in range(500):
        frame = bytearray(rng.randbytes(rng.randrange(80)))
        frame[12:14] = struct.pack("!H", rng.choice([0x0800, 0x8100, 0x88A8]))[: len(frame[12:14])]
        parse_frame(frame, shim())


@pytest.mark.parametrize("l4", ["tcp", "udp"])
def test_incremental_rewrite_keeps_checksums_valid(l4: str) -> None:
    seg = TCP(sport=1000, dport=80) if l4 == "tcp" else UDP(sport=1000, dport=53)
    p = packet_of(eth() / IP(src="192.168.1.10", dst="8.8.8.8") / seg / b"data!")
    rewrite_ipv4_addr(p, src=ip2int("203.0.113.7"))
    rewrite_port(p, sport=40000)
    rewrite_ipv4_addr(p, dst=ip2int("10.9.9.9"))
    got = Ether(bytes(p.frame))
    assert got[IP].src == "203.0.113.7" and got[IP].dst == "10.9.9.9"
    assert got.sport == 40000
    assert checksums_valid(p.frame)


def test_random_rewrites_keep_checksums_valid() -> None:
    rng = random.Random(7)
    for i in range(150):
        sport, dport = rng.randrange(65536), rng.randrange(65536)
        seg: ScapyPacket = (
            UDP(sport=sport, dport=dport) if i % 2 else TCP(sport=sport, dport=dport, flags="PA")
        )
        payload = rng.randbytes(rng.randrange(0, 41))
        src = ".".join(str(rng.randrange(256)) for _ in range(4))
        p = packet_of(eth() / IP(src=src, dst="10.0.0.1") / seg / payload)
        rewrite_ipv4_addr(p, src=rng.getrandbits(32), dst=rng.getrandbits(32))
        rewrite_port(p, sport=rng.randrange(65536), dport=rng.randrange(65536))
        if len(payload) >= 8:
            write_l4_words(p, p.payload_offset + 2, rng.randbytes(6))
        assert checksums_valid(p.frame), bytes(p.frame).hex()


def test_fix_checksums_recomputes_from_scratch() -> None:
    p = packet_of(eth() / IP(src="10.0.0.1", dst="10.0.0.2") / TCP() / b"abc")
    p.frame[p.l3_offset + 10 : p.l3_offset + 12] = b"\x12\x34"
    p.frame[p.l4_offset + 16 : p.l4_offset + 18] = b"\x56\x78"
    assert not checksums_valid(p.frame)
    fix_checksums(p)
    assert checksums_valid(p.frame)
