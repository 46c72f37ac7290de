"""Helpers the generated code calls at packet time: arithmetic, checksums and hashes, parser input."""

from __future__ import annotations

import random as _random
import zlib
from array import array


class ParserError(Exception):
    """Raised by generated parser code; ``code`` is the error's index in the program's errors."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class ExitBlock(Exception):
    """Raised by ``exit`` in a control; caught at the top of the pipeline block."""


class PacketIn:
    """The packet a parser reads: data and the current byte offset."""

    __slots__ = ("data", "n", "off")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.n = len(data)
        self.off = 0


def sx(v: int, w: int) -> int:
    """Interpret the low ``w`` bits of ``v`` as a two's complement number."""
    v &= (1 << w) - 1
    return v - (1 << w) if v >> (w - 1) else v


def div(a: int, b: int) -> int:
    return a // b if b else 0


def mod(a: int, b: int) -> int:
    return a % b if b else 0


def shl(a: int, b: int, w: int) -> int:
    return (a << b) & ((1 << w) - 1) if b < w else 0


def sat(v: int, lo: int, hi: int) -> int:
    return lo if v < lo else hi if v > hi else v


def peek(pk: PacketIn, bits: int) -> int:
    """lookahead<bit<bits>>(): the next ``bits`` bits without consuming them."""
    nbytes = (bits + 7) // 8
    if pk.off + nbytes > pk.n:
        raise ParserError(1)
    v = int.from_bytes(pk.data[pk.off : pk.off + nbytes], "big")
    return v >> (nbytes * 8 - bits)


def csum16(data: bytes) -> int:
    """Internet checksum (ones' complement of the ones' complement sum of 16-bit words)."""
    if len(data) & 1:
        data += b"\x00"
    a = array("H", data)
    if a.itemsize != 2:  # pragma: no cover
        raise RuntimeError("unsupported platform")
    import sys

    if sys.byteorder == "little":
        a.byteswap()
    total = sum(a)
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def csum16i(v: int) -> int:
    """Internet checksum of an integer holding an even number of bytes (big-endian words).

    The ones' complement sum of the 16-bit words of v equals v mod 0xFFFF (2**16 = 1 mod 0xFFFF),
    except that a non-zero sum that is a multiple of 0xFFFF is 0xFFFF, not 0.
    """
    r = v % 0xFFFF
    if r == 0 and v:
        r = 0xFFFF
    return ~r & 0xFFFF


def _crc16_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xA001 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC16 = _crc16_table()


def crc16(data: bytes) -> int:
    """CRC-16/ARC (poly 0x8005 reflected, init 0), the crc16 of BMv2."""
    c = 0
    for b in data:
        c = (c >> 8) ^ _CRC16[(c ^ b) & 0xFF]
    return c


def crc32(data: bytes) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def xor16(data: bytes) -> int:
    if len(data) & 1:
        data += b"\x00"
    r = 0
    for i in range(0, len(data), 2):
        r ^= (data[i] << 8) | data[i + 1]
    return r


def identity(data: bytes) -> int:
    """BMv2's identity "hash": the first 8 bytes as a big-endian integer."""
    return int.from_bytes(data[:8], "big")


def pack_bits(items: tuple[tuple[int, int, bool], ...]) -> bytes:
    """A field list as BMv2's BufBuilder packs it: each (value, width, valid) of a valid header
    (or metadata) appended bit by bit, most significant first; zero padding at the end."""
    acc = n = 0
    for value, width, valid in items:
        if valid:
            acc = (acc << width) | (value & ((1 << width) - 1))
            n += width
    pad = -n % 8
    return (acc << pad).to_bytes((n + pad) // 8, "big")


def rnd(lo: int, hi: int) -> int:
    return _random.randint(lo, hi) if hi >= lo else lo


HASHES = {
    "crc32": crc32,
    "crc32_custom": crc32,
    "crc16": crc16,
    "crc16_custom": crc16,
    "identity": identity,
    "csum16": csum16,
    "xor16": xor16,
}
