"""Frame parsing for NFs: Ethernet (with up to two VLAN tags) -> IPv4 -> TCP/UDP/ICMP, and checksum helpers.

`parse_frame` is on the per-packet hot path of every worker, so it uses precompiled `struct`s and
plain slicing, no scapy. It is defensive: frames come from the network, so any length or field may
be wrong. It never raises on short or garbage input; what it cannot parse is reported as
`flow=None` and offsets of -1. Rules:

- The frame is the Ethernet frame *without* the nfcluster shim (see `contract.shim.decap`).
- 802.1Q / 802.1ad tags (at most two) are skipped; `l3_offset` is where the IPv4 header starts.
- Non-IPv4 frames: `flow=None`, `l3_offset=-1`.
- IPv4 with a bad version/IHL, or a total length shorter than the header: `flow=None`.
- TCP, UDP, ICMP and other IP protocols get a `FlowKey`; ports are 0 where the protocol has none,
  and also for non-first fragments (which carry no L4 header; their `l4_offset` is -1).
- A truncated L4 header: the flow has ports 0 and `l4_offset`/`payload_offset` are -1; a TCP
  header whose data offset is invalid keeps its ports and `l4_offset` but has no payload (-1).
- The payload ends at the IPv4 total length, not at the end of the frame (Ethernet pads short
  frames); `ip_end` gives that end for NFs that must not look at padding.

The checksum helpers (`ipv4_header_checksum`, `l4_checksum`, `fix_checksums`) serve NFs that
rewrite addresses or ports (NAT, L4 LB).
"""

from __future__ import annotations

import struct

from contract.shim import Shim
from nf_host.nf_api import FlowKey, Packet

ETH_LEN = 14
ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_VLAN = 0x8100
ETHERTYPE_QINQ = 0x88A8
PROTO_ICMP = 1
PROTO_TCP = 6
PROTO_UDP = 17

TCP_FIN = 0x01
TCP_SYN = 0x02
TCP_RST = 0x04
TCP_PSH = 0x08
TCP_ACK = 0x10

_U16 = struct.Struct("!H")
_U32 = struct.Struct("!I")
_IPV4_ADDRS = struct.Struct("!II")
_PORTS = struct.Struct("!HH")
_MAX_VLAN_TAGS = 2


def parse_frame(frame: bytearray, shim: Shim) -> Packet:
    """Parse `frame` into a `Packet` with its flow key and header offsets; never raises."""
    n = len(frame)
    if n < ETH_LEN:
        return Packet(frame, shim, None, -1, -1, -1)
    off = 12
    (etype,) = _U16.unpack_from(frame, off)
    off = ETH_LEN
    tags = 0
    while etype in (ETHERTYPE_VLAN, ETHERTYPE_QINQ):
        if tags == _MAX_VLAN_TAGS or n < off + 4:
            return Packet(frame, shim, None, -1, -1, -1)
        (etype,) = _U16.unpack_from(frame, off + 2)
        off += 4
        tags += 1
    if etype != ETHERTYPE_IPV4 or n < off + 20:
        return Packet(frame, shim, None, -1, -1, -1)
    l3 = off
    ver_ihl = frame[l3]
    ihl = (ver_ihl & 0x0F) * 4
    if ver_ihl >> 4 != 4 or ihl < 20 or n < l3 + ihl:
        return Packet(frame, shim, None, l3, -1, -1)
    (total_len,) = _U16.unpack_from(frame, l3 + 2)
    if total_len < ihl:
        return Packet(frame, shim, None, l3, -1, -1)
    end = min(n, l3 + total_len)
    (frag,) = _U16.unpack_from(frame, l3 + 6)
    proto = frame[l3 + 9]
    src, dst = _IPV4_ADDRS.unpack_from(frame, l3 + 12)
    l4 = l3 + ihl
    if frag & 0x1FFF:  # a non-first fragment has no L4 header
        return Packet(frame, shim, FlowKey(src, dst, 0, 0, proto), l3, -1, -1)
    if proto == PROTO_TCP:
        if end < l4 + 20:
            return Packet(frame, shim, FlowKey(src, dst, 0, 0, proto), l3, -1, -1)
        sport, dport = _PORTS.unpack_from(frame, l4)
        doff = (frame[l4 + 12] >> 4) * 4
        if doff < 20 or end < l4 + doff:
            return Packet(frame, shim, FlowKey(src, dst, sport, dport, proto), l3, l4, -1)
        return Packet(frame, shim, FlowKey(src, dst, sport, dport, proto), l3, l4, l4 + doff)
    if proto == PROTO_UDP:
        if end < l4 + 8:
            return Packet(frame, shim, FlowKey(src, dst, 0, 0, proto), l3, -1, -1)
        sport, dport = _PORTS.unpack_from(frame, l4)
        return Packet(frame, shim, FlowKey(src, dst, sport, dport, proto), l3, l4, l4 + 8)
    if proto == PROTO_ICMP:
        if end < l4 + 8:
            return Packet(frame, shim, FlowKey(src, dst, 0, 0, proto), l3, -1, -1)
        return Packet(frame, shim, FlowKey(src, dst, 0, 0, proto), l3, l4, l4 + 8)
    return Packet(frame, shim, FlowKey(src, dst, 0, 0, proto), l3, l4, l4)


def ip_end(packet: Packet) -> int:
    """The offset just past the IPv4 packet (before any Ethernet padding); len(frame) if unknown."""
    frame = packet.frame
    l3 = packet.l3_offset
    if l3 < 0 or len(frame) < l3 + 4:
        return len(frame)
    total_len: int = _U16.unpack_from(frame, l3 + 2)[0]
    return min(len(frame), l3 + total_len)


def payload_bytes(packet: Packet) -> memoryview:
    """The L4 payload without Ethernet padding (empty if the packet has none)."""
    if packet.payload_offset < 0:
        return memoryview(b"")
    return memoryview(packet.frame)[packet.payload_offset : ip_end(packet)]


def tcp_flags(packet: Packet) -> int:
    """The TCP flags byte, or 0 when the packet is not TCP with a full header."""
    if packet.flow is None or packet.flow.proto != PROTO_TCP or packet.l4_offset < 0:
        return 0
    return packet.frame[packet.l4_offset + 13]


def _ones_complement_sum(data: bytes | bytearray | memoryview, initial: int = 0) -> int:
    if len(data) % 2:
        data = bytes(data) + b"\x00"
    total: int = initial + sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def ipv4_header_checksum(frame: bytes | bytearray | memoryview, l3: int) -> int:
    """The correct IPv4 header checksum of the header at `l3` (its checksum field is ignored)."""
    ihl = (frame[l3] & 0x0F) * 4
    hdr = bytearray(frame[l3 : l3 + ihl])
    hdr[10:12] = b"\x00\x00"
    return ~_ones_complement_sum(hdr) & 0xFFFF


def l4_checksum(frame: bytes | bytearray | memoryview, l3: int, l4: int, end: int) -> int:
    """The correct TCP/UDP checksum of the segment `frame[l4:end]` (its checksum field is ignored)."""
    proto = frame[l3 + 9]
    seg = bytearray(frame[l4:end])
    csum_off = 16 if proto == PROTO_TCP else 6
    seg[csum_off : csum_off + 2] = b"\x00\x00"
    pseudo = bytes(frame[l3 + 12 : l3 + 20]) + struct.pack("!BBH", 0, proto, len(seg))
    value = ~_ones_complement_sum(seg, _ones_complement_sum(pseudo)) & 0xFFFF
    if proto == PROTO_UDP and value == 0:
        return 0xFFFF
    return value


def fix_checksums(packet: Packet) -> None:
    """Recompute the IPv4 header checksum and, for TCP/UDP, the L4 checksum, in place.

    A UDP checksum of 0 (disabled) stays 0. Does nothing for packets it could not parse.
    """
    frame = packet.frame
    l3 = packet.l3_offset
    if packet.flow is None or l3 < 0:
        return
    struct.pack_into("!H", frame, l3 + 10, ipv4_header_checksum(frame, l3))
    l4 = packet.l4_offset
    proto = packet.flow.proto
    if l4 < 0 or packet.payload_offset < 0 or proto not in (PROTO_TCP, PROTO_UDP):
        return
    end = ip_end(packet)
    if proto == PROTO_UDP:
        (old,) = _U16.unpack_from(frame, l4 + 6)
        if old == 0:
            return
        struct.pack_into("!H", frame, l4 + 6, l4_checksum(frame, l3, l4, end))
    else:
        struct.pack_into("!H", frame, l4 + 16, l4_checksum(frame, l3, l4, end))


def _csum_update(csum: int, old_words: tuple[int, ...], new_words: tuple[int, ...]) -> int:
    """RFC 1624 (eqn. 3) incremental checksum update for 16-bit words changing from old to new."""
    total = (~csum & 0xFFFF) + sum(new_words) + 0xFFFF * len(old_words) - sum(old_words)
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _l4_csum_offset(packet: Packet) -> int:
    """Offset of the L4 checksum field that covers addresses/ports, or -1 (none, or UDP with 0)."""
    if packet.flow is None or packet.l4_offset < 0 or packet.payload_offset < 0:
        return -1
    if packet.flow.proto == PROTO_TCP:
        return packet.l4_offset + 16
    if packet.flow.proto == PROTO_UDP:
        off = packet.l4_offset + 6
        (value,) = _U16.unpack_from(packet.frame, off)
        return off if value != 0 else -1
    return -1


def _replace(packet: Packet, off: int, new: bytes, fix_l4: bool, fix_ip: bool) -> None:
    """Write `new` (an even number of bytes at an even offset from the checksummed header) at
    `off`, updating the IPv4 header and/or L4 checksum incrementally."""
    frame = packet.frame
    words = len(new) // 2
    fmt = _WORDS.get(words) or struct.Struct(f"!{words}H")
    old_words = fmt.unpack_from(frame, off)
    new_words = fmt.unpack(new)
    if old_words == new_words:
        return
    frame[off : off + len(new)] = new
    if fix_ip:
        ip_csum_off = packet.l3_offset + 10
        (c,) = _U16.unpack_from(frame, ip_csum_off)
        _U16.pack_into(frame, ip_csum_off, _csum_update(c, old_words, new_words))
    if fix_l4:
        l4_off = _l4_csum_offset(packet)
        if l4_off >= 0:
            (c,) = _U16.unpack_from(frame, l4_off)
            updated = _csum_update(c, old_words, new_words)
            if packet.flow is not None and packet.flow.proto == PROTO_UDP and updated == 0:
                updated = 0xFFFF
            _U16.pack_into(frame, l4_off, updated)


_WORDS = {n: struct.Struct(f"!{n}H") for n in (1, 2, 4)}


def rewrite_ipv4_addr(packet: Packet, *, src: int | None = None, dst: int | None = None) -> None:
    """Rewrite the source and/or destination address in place, updating the IPv4 and L4 checksums
    incrementally (so this is also right for fragments). `packet.flow` is not changed."""
    if packet.flow is None or packet.l3_offset < 0:
        raise ValueError("not an IPv4 packet")
    for value, base in ((src, 12), (dst, 16)):
        if value is None:
            continue
        _replace(packet, packet.l3_offset + base, _U32.pack(value), fix_l4=True, fix_ip=True)


def rewrite_port(packet: Packet, *, sport: int | None = None, dport: int | None = None) -> None:
    """Rewrite the TCP/UDP source and/or destination port in place, updating the L4 checksum."""
    if (
        packet.flow is None
        or packet.l4_offset < 0
        or packet.flow.proto not in (PROTO_TCP, PROTO_UDP)
    ):
        raise ValueError("not a TCP/UDP packet with a full header")
    if sport is not None:
        _replace(packet, packet.l4_offset, _U16.pack(sport & 0xFFFF), fix_l4=True, fix_ip=False)
    if dport is not None:
        _replace(packet, packet.l4_offset + 2, _U16.pack(dport & 0xFFFF), fix_l4=True, fix_ip=False)


def write_l4_words(packet: Packet, offset: int, data: bytes) -> None:
    """Overwrite `frame[offset:offset+len(data)]` inside the L4 segment, updating its checksum.

    `offset - packet.l4_offset` and `len(data)` must be even (16-bit words of the checksum).
    """
    l4 = packet.l4_offset
    if packet.flow is None or l4 < 0 or packet.payload_offset < 0:
        raise ValueError("no L4 segment to write into")
    if (offset - l4) % 2 or len(data) % 2 or offset < l4 or offset + len(data) > ip_end(packet):
        raise ValueError(
            f"cannot write {len(data)} bytes at {offset} (L4 at {l4}, unaligned or out of range)"
        )
    _replace(packet, offset, bytes(data), fix_l4=True, fix_ip=False)
