"""The IDS NF: drops packets whose payload completes a forbidden byte pattern, across packets too.

Parameters:
- `patterns` (required, non-empty list): the byte patterns; each is a `str` (UTF-8 encoded) or
  `bytes`, or a dict `{"hex": "deadbeef"}` for binary patterns.

A pattern may straddle packet boundaries. Per direction of a connection the state keeps the tail
of the payload seen so far (at most the longest pattern length - 1 bytes), and each packet is
searched as `tail + payload`. A match must end inside the current payload (a match wholly inside
the tail would have been found on an earlier packet: the tail is the end of data already searched
without a match).
This finds a split pattern only when the pieces are processed in stream order, which nfcluster
guarantees per slot; there is no TCP reassembly by sequence number, so retransmissions and
overlapping segments are not normalised.

On a match the packet is dropped, `alerts` is incremented and the direction's tail is cleared
(the dropped bytes never reach the receiver, so they cannot combine with later ones).

State: `{"alerts": int, "tail_fwd": bytes, "tail_rev": bytes, "scanned": int}`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from nf_host.nf_api import Context, FlowState, NetworkFunction, Packet, Verdict, register_nf
from nf_host.parse import payload_bytes

MAX_PATTERN_LEN = 4096


def _pattern_bytes(item: object) -> bytes:
    if isinstance(item, bytes):
        return item
    if isinstance(item, str):
        return item.encode()
    if isinstance(item, Mapping) and isinstance(item.get("hex"), str):
        return bytes.fromhex(item["hex"])
    raise ValueError(f"IDS pattern {item!r} is not a str, bytes or {{'hex': ...}}")


@register_nf
class Ids(NetworkFunction):
    name = "ids"

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(params)
        raw = self.params.get("patterns")
        if not isinstance(raw, list | tuple) or not raw:
            raise ValueError("the IDS needs a non-empty list of patterns")
        self.patterns = [_pattern_bytes(p) for p in raw]
        if any(not 0 < len(p) <= MAX_PATTERN_LEN for p in self.patterns):
            raise ValueError(f"IDS patterns must be 1..{MAX_PATTERN_LEN} bytes long")
        self.keep = max(len(p) for p in self.patterns) - 1
        self._regex = re.compile(b"|".join(re.escape(p) for p in self.patterns))

    def initial_state(self) -> FlowState:
        return {"alerts": 0, "tail_fwd": b"", "tail_rev": b"", "scanned": 0}

    def process(self, packet: Packet, state: FlowState, context: Context) -> Verdict:
        payload = bytes(payload_bytes(packet))
        if not payload:
            return Verdict.FORWARD
        tail_key = "tail_rev" if context.reverse else "tail_fwd"
        data = bytes(state.get(tail_key, b"")) + payload
        state["scanned"] = state.get("scanned", 0) + len(payload)
        if self._regex.search(data) is not None:
            state["alerts"] = state.get("alerts", 0) + 1
            state[tail_key] = b""
            return Verdict.DROP
        state[tail_key] = data[max(0, len(data) - self.keep) :] if self.keep else b""
        return Verdict.FORWARD
