"""P4Runtime bytestrings: decoding with width checks, and canonical encoding (P4Runtime spec 8.4)."""

from __future__ import annotations

from p4sim.server.errors import invalid


def decode(data: bytes, bitwidth: int, what: str) -> int:
    """The unsigned value of `data`; padded (non-canonical) input is accepted and normalised.

    An empty string, or a value that does not fit in `bitwidth` bits, is INVALID_ARGUMENT.
    """
    if not data:
        raise invalid(f"{what}: empty bytestring")
    value = int.from_bytes(data, "big")
    if bitwidth > 0 and value.bit_length() > bitwidth:
        raise invalid(f"{what}: value {data.hex()} does not fit in {bitwidth} bits")
    return value


def encode(value: int) -> bytes:
    """The canonical bytestring of `value`: no leading zero bytes, and b'\\x00' for zero."""
    if value < 0:
        raise ValueError("negative value")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def full_mask(bitwidth: int) -> int:
    return (1 << bitwidth) - 1
