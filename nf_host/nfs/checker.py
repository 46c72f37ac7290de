"""The checker NF: stamps each packet with its flow's running packet count, for end-to-end proofs.

The traffic generator sends packets whose L4 payload starts with the record `!IIQ`
(`contract.checker_record`) =
(flow_id, pkt_no, checker_count = 0). For each such packet the checker increments the per-flow
`count` (both directions of the connection share it) and writes it into `checker_count` (payload
bytes 8..16), updating the TCP/UDP checksum. A sink then checks that `checker_count` rises by
exactly one per packet of a flow: any lost, duplicated or reordered processing, and any state lost
in a move or a failover, shows up as a gap or a repeat. Packets with fewer than 16 payload bytes
(e.g. bare TCP ACKs) are forwarded untouched and counted in `short`, without touching `count`.

Parameter: `work_us` (float, default 0): busy work per packet in microseconds, as the generic NF's
knob, so a proof can make CPU the bottleneck (`make run RUN_ARGS=--hot`) and still check counts.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from contract.checker_record import COUNT_OFFSET, RECORD
from nf_host.nf_api import Context, FlowState, NetworkFunction, Packet, Verdict, register_nf
from nf_host.nfs.generic import spin
from nf_host.parse import payload_bytes, write_l4_words

_U64 = struct.Struct("!Q")


@register_nf
class Checker(NetworkFunction):
    """State: `{"count": packets stamped, "short": packets too short to carry the record}`."""

    name = "checker"

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(params)
        self.work_s = float(self.params.get("work_us", 0.0)) / 1e6
        if self.work_s < 0:
            raise ValueError(f"work_us must be >= 0, not {self.params.get('work_us')}")

    def initial_state(self) -> FlowState:
        return {"count": 0, "short": 0}

    def process(self, packet: Packet, state: FlowState, context: Context) -> Verdict:
        if len(payload_bytes(packet)) < RECORD.size:
            state["short"] = state.get("short", 0) + 1
            return Verdict.FORWARD
        spin(self.work_s)
        count = state.get("count", 0) + 1
        state["count"] = count
        write_l4_words(packet, packet.payload_offset + COUNT_OFFSET, _U64.pack(count))
        return Verdict.FORWARD
