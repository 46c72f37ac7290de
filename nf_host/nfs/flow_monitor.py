"""The flow monitor NF: per-connection packet and byte counts and first/last-seen times.

State per connection (both directions share it; "fwd" is the direction of the canonical flow key,
"rev" the other): `packets`, `bytes` (Ethernet frame bytes without the shim), `packets_rev`,
`bytes_rev` (the reverse direction's share of the totals), `first` and `last` (`context.now` of the
first and latest packet, seconds). Every packet is forwarded.

Kept 300 s idle (`idle_timeout`), at most `max_flows` per worker, oldest idle first
(nf_host/flow_table.py): an evicted flow's counts are gone, and it starts again from zero.
"""

from __future__ import annotations

from nf_host.nf_api import Context, FlowState, NetworkFunction, Packet, Verdict, register_nf


@register_nf
class FlowMonitor(NetworkFunction):
    name = "flow_monitor"

    def initial_state(self) -> FlowState:
        return {
            "packets": 0,
            "bytes": 0,
            "packets_rev": 0,
            "bytes_rev": 0,
            "first": None,
            "last": None,
        }

    def process(self, packet: Packet, state: FlowState, context: Context) -> Verdict:
        size = len(packet.frame)
        state["packets"] = state.get("packets", 0) + 1
        state["bytes"] = state.get("bytes", 0) + size
        if context.reverse:
            state["packets_rev"] = state.get("packets_rev", 0) + 1
            state["bytes_rev"] = state.get("bytes_rev", 0) + size
        if state.get("first") is None:
            state["first"] = context.now
        state["last"] = context.now
        return Verdict.FORWARD
