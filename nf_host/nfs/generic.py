"""The thesis's generic NF: a synthetic NF whose cost and state are parameters.

Parameters:
- `work_us` (float, default 0): busy work per packet, in microseconds (spins on the clock, so it
  costs CPU like real processing instead of sleeping).
- `global_update_rate` (float 0..1, default 0): the fraction of packets that increment a global
  counter `generic/<counter>` in the global store (`counter` defaults to "updates"). The choice is
  deterministic, not random: a per-flow accumulator adds the rate on every packet and an update
  happens each time it reaches 1. A replay of the same packets (after promotion) therefore makes
  the same choices.
- `state_bytes` (int, default 0): the size of a per-flow blob; every packet rewrites one 8-byte
  word of it (round robin; one byte if smaller than 8), so the whole blob is dirty state the runtime must replicate.

State: `{"packets": n, "acc": float, "blob": bytes of state_bytes}` (the blob may be `bytes` after
a move, since serialisers return bytes; it is turned back into a `bytearray` on the next packet).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Mapping
from typing import Any

from nf_host.nf_api import Context, FlowState, NetworkFunction, Packet, Verdict, register_nf

_U64 = struct.Struct("!Q")
MAX_STATE_BYTES = 1 << 20


def spin(seconds: float) -> None:
    """Busy work: spin on the clock, so it costs CPU like real processing instead of sleeping."""
    if seconds > 0:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            pass


@register_nf
class Generic(NetworkFunction):
    name = "generic"

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(params)
        self.work_s = float(self.params.get("work_us", 0.0)) / 1e6
        self.rate = float(self.params.get("global_update_rate", 0.0))
        self.state_bytes = int(self.params.get("state_bytes", 0))
        self.counter_key = "generic/" + str(self.params.get("counter", "updates"))
        if self.work_s < 0:
            raise ValueError(f"work_us must be >= 0, not {self.params.get('work_us')}")
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"global_update_rate must be within 0..1, not {self.rate}")
        if not 0 <= self.state_bytes <= MAX_STATE_BYTES:
            raise ValueError(
                f"state_bytes must be within 0..{MAX_STATE_BYTES}, not {self.state_bytes}"
            )

    def initial_state(self) -> FlowState:
        return {"packets": 0, "acc": 0.0, "blob": bytearray(self.state_bytes)}

    def process(self, packet: Packet, state: FlowState, context: Context) -> Verdict:
        spin(self.work_s)
        n = state.get("packets", 0) + 1
        state["packets"] = n
        if self.rate > 0:
            acc = state.get("acc", 0.0) + self.rate
            if acc >= 1.0 - 1e-9:
                acc -= 1.0
                context.global_state.increment(self.counter_key)
            state["acc"] = acc
        if self.state_bytes > 0:
            blob = state.get("blob")
            if not isinstance(blob, bytearray):
                blob = bytearray(blob) if isinstance(blob, bytes | bytearray) else bytearray()
                if len(blob) != self.state_bytes:
                    blob = bytearray(self.state_bytes)
                state["blob"] = blob
            if self.state_bytes >= 8:
                _U64.pack_into(blob, ((n - 1) % (self.state_bytes // 8)) * 8, n)
            else:
                blob[(n - 1) % self.state_bytes] = n & 0xFF
        return Verdict.FORWARD
