"""The pass-through NF: forwards every packet unchanged and keeps no state (runtime benchmarks)."""

from __future__ import annotations

from nf_host.nf_api import Context, FlowState, NetworkFunction, Packet, Verdict, register_nf


@register_nf
class PassThrough(NetworkFunction):
    """Forward everything; the per-flow state is an empty dict."""

    name = "passthrough"

    def initial_state(self) -> FlowState:
        return {}

    def process(self, packet: Packet, state: FlowState, context: Context) -> Verdict:
        return Verdict.FORWARD
