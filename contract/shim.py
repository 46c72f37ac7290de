"""The nfcluster shim header as the host runtime sees it.

The switch inserts this header between Ethernet and the original EtherType's header on every packet it
sends to an NF, and an NF sends its output back with the same header and `kind == Kind.OUTPUT`.
The P4 definition is `nfc_shim_h` in `p4src/shared/header.p4`; `tests/nf_host/test_shim.py` checks
that the two agree field by field. Layout (16 bytes, network byte order):

    offset  size  field
    0       1     kind        (Kind)
    1       1     flags       (bit 0: first packet of a new epoch; bit 1: reverse direction)
    2       1     stage       (service-chain stage, 0 without chains)
    3       1     reserved    (0)
    4       2     slot        (slot index: stage << SLOT_BITS | slot)
    6       2     epoch       (ownership version of the slot)
    8       2     nf_id       (target NF of this copy)
    10      4     seq         (per-slot sequence number, stamped by the switch)
    14      2     ether_type  (the original EtherType)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

ETHERTYPE_NFC = 0x88B5
SLOT_BITS = 12  # the P4 program's SLOT_BITS (p4src/shared/define.p4): a slot index's stage part
SHIM_LEN = 16
ETH_HDR_LEN = 14
FLAG_FIRST_OF_EPOCH = 0x01
FLAG_REVERSE = 0x02  # the packet traverses its chain backwards; an NF's output keeps it
FLAG_WATERMARK = 0x04  # an NF's output that only advances the dedup watermark (nf_host/watermark.py)

_SHIM = struct.Struct("!BBBBHHHIH")
assert _SHIM.size == SHIM_LEN
SHIM_HEAD = struct.Struct("!BBBBHHHI")
"""The shim without its trailing ether_type: what an NF's output inserts before its own EtherType."""

# Where the fields are in an Ethernet frame that carries the shim, for the paths that read or
# write them in place (the worker's fast path, the socket filter, the backup's copies)
ETHERTYPE_OFFSET = 12
ETHERTYPE_NFC_BYTES = ETHERTYPE_NFC.to_bytes(2, "big")
SHIM_FRAME_LEN = ETH_HDR_LEN + SHIM_LEN
FRAME_KIND = ETH_HDR_LEN
FRAME_FLAGS = ETH_HDR_LEN + 1
FRAME_SLOT = ETH_HDR_LEN + 4
SLOT_SEQ = struct.Struct("!H4xI")
"""(slot, seq), read at `FRAME_SLOT`."""


class Kind(IntEnum):
    """What a shim-carrying packet is."""

    PRIMARY = 1
    BACKUP = 2
    OUTPUT = 3
    CONTROL = 4
    MARKER = 5  # a slot move's marker: old owner -> switch -> adopter (nf_host/move_marker.py)


class ShimError(ValueError):
    """A frame that does not carry a well-formed shim."""


@dataclass(frozen=True, slots=True)
class Shim:
    kind: int
    flags: int
    slot: int
    epoch: int
    nf_id: int
    seq: int
    ether_type: int
    stage: int = 0

    @property
    def first_of_epoch(self) -> bool:
        return bool(self.flags & FLAG_FIRST_OF_EPOCH)

    @property
    def reverse(self) -> bool:
        return bool(self.flags & FLAG_REVERSE)

    def pack(self) -> bytes:
        return _SHIM.pack(
            self.kind, self.flags, self.stage, 0, self.slot, self.epoch, self.nf_id, self.seq,
            self.ether_type,
        )

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> Shim:
        if len(data) - offset < SHIM_LEN:
            raise ShimError(f"shim truncated: {len(data) - offset} bytes, need {SHIM_LEN}")
        kind, flags, stage, _res, slot, epoch, nf_id, seq, etype = _SHIM.unpack_from(data, offset)
        if kind not in _KINDS:
            raise ShimError(f"shim kind {kind} is not one of {sorted(_KINDS)}")
        return cls(kind, flags, slot, epoch, nf_id, seq, etype, stage)


_KINDS = frozenset(int(k) for k in Kind)


def with_kind(frame: bytes | bytearray, kind: Kind) -> bytes:
    """A copy of a shim-carrying frame with its kind set to `kind` (a copy made input, as an
    NF forwards it, or input filed as a backup's copy)."""
    data = bytearray(frame)
    data[FRAME_KIND] = kind
    return bytes(data)


def decap(frame: bytes | bytearray | memoryview) -> tuple[Shim, bytes]:
    """Split an Ethernet frame carrying a shim into (shim, the frame without the shim).

    The returned frame has the original EtherType restored, as the NF would have seen it without
    nfcluster in the path.
    """
    if len(frame) < ETH_HDR_LEN + SHIM_LEN:
        raise ShimError(f"frame of {len(frame)} bytes is too short for Ethernet + shim")
    if int.from_bytes(frame[12:14], "big") != ETHERTYPE_NFC:
        raise ShimError(f"EtherType {int.from_bytes(frame[12:14], 'big'):#06x} is not the shim's")
    shim = Shim.unpack(frame, ETH_HDR_LEN)
    inner = bytes(frame[:12]) + shim.ether_type.to_bytes(2, "big") + bytes(frame[ETH_HDR_LEN + SHIM_LEN :])
    return shim, inner


def encap(shim: Shim, frame: bytes | bytearray | memoryview) -> bytes:
    """Insert `shim` into an Ethernet frame; `shim.ether_type` must be the frame's EtherType."""
    if len(frame) < ETH_HDR_LEN:
        raise ShimError(f"frame of {len(frame)} bytes is too short for Ethernet")
    return (
        bytes(frame[:12]) + ETHERTYPE_NFC.to_bytes(2, "big") + shim.pack() + bytes(frame[ETH_HDR_LEN:])
    )
