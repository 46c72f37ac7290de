"""A Python model of the switch's symmetric slot hash (p4src/v1model/include/control/slot.p4).

The switch orders the two endpoints of the 5-tuple canonically (the smaller (address, port)
first), then takes CRC-16 (the BMv2 `crc16`: polynomial 0x8005, reflected, initial value 0,
no final XOR, also known as CRC-16/ARC) of
`lo_addr(32) hi_addr(32) lo_port(16) hi_port(16) protocol(8)` modulo the slot count.
The ports are those of the TCP or UDP header, found behind IPv4 options too; a packet without
one (ICMP, a later fragment) hashes with ports 0, except that a later fragment (offset > 0) is
given the slot its first fragment had, which the switch remembers (SlotMap's fragment memory).
Tests and the topology's traffic (`topo/launch/hot.py`) use it to know which slot a packet lands in before sending it; one test checks that
the model agrees with the switch.
"""

from __future__ import annotations

import ipaddress

from contract.shim import SLOT_BITS

DEFAULT_SLOT_BITS = SLOT_BITS

_CRC16_TABLE: list[int] = []
for _byte in range(256):
    _crc = _byte
    for _ in range(8):
        _crc = (_crc >> 1) ^ 0xA001 if _crc & 1 else _crc >> 1
    _CRC16_TABLE.append(_crc)


def crc16(data: bytes) -> int:
    """CRC-16/ARC of `data`, as BMv2's `HashAlgorithm.crc16` computes it."""
    crc = 0
    for byte in data:
        crc = (crc >> 8) ^ _CRC16_TABLE[(crc ^ byte) & 0xFF]
    return crc


def _addr(value: str | int) -> int:
    return int(ipaddress.IPv4Address(value))


def flow_hash(
    src_addr: str | int,
    dst_addr: str | int,
    src_port: int = 0,
    dst_port: int = 0,
    protocol: int = 0,
) -> int:
    """The switch's 16-bit hash of this 5-tuple, the same for both directions; the slot is the
    hash modulo the slot count."""
    src, dst = _addr(src_addr), _addr(dst_addr)
    if (src, src_port) > (dst, dst_port):
        src, dst, src_port, dst_port = dst, src, dst_port, src_port
    data = (
        src.to_bytes(4, "big")
        + dst.to_bytes(4, "big")
        + src_port.to_bytes(2, "big")
        + dst_port.to_bytes(2, "big")
        + protocol.to_bytes(1, "big")
    )
    return crc16(data)


def slot_of(
    src_addr: str | int,
    dst_addr: str | int,
    src_port: int = 0,
    dst_port: int = 0,
    protocol: int = 0,
    slot_bits: int = DEFAULT_SLOT_BITS,
) -> int:
    """The slot the switch gives a packet with this 5-tuple (ports 0 when it has no TCP/UDP)."""
    return flow_hash(src_addr, dst_addr, src_port, dst_port, protocol) % (1 << slot_bits)
