"""The numbered-traffic record carried at the start of every test payload.

Layout (16 bytes, network byte order), written by the traffic generators (`topo/traffic.py`,
`nf_host/harness.py`), stamped by the checker NF (`nf_host/nfs/checker.py`), read by the sinks:

    flow_id: u32   which flow (a connection: both directions share it)
    pkt_no:  u32   numbered from 1 per flow and direction by the sender
    count:   u64   0 when sent; the checker NF writes its running per-flow count here
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

RECORD = struct.Struct("!IIQ")
RECORD_LEN = RECORD.size
COUNT_OFFSET = 8
"""Where `count` starts in the record (the bytes the checker NF overwrites)."""


@dataclass(frozen=True, slots=True)
class Record:
    flow_id: int
    pkt_no: int
    count: int = 0

    def pack(self, size: int = RECORD_LEN) -> bytes:
        """The record, padded with zeros to `size` bytes."""
        return RECORD.pack(self.flow_id, self.pkt_no, self.count).ljust(size, b"\0")

    @classmethod
    def unpack(cls, payload: bytes | bytearray | memoryview) -> Record:
        if len(payload) < RECORD_LEN:
            raise ValueError(f"payload of {len(payload)} bytes is shorter than a record ({RECORD_LEN})")
        return cls(*RECORD.unpack_from(payload))
