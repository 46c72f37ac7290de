"""The L4 load balancer NF: spreads connections to a virtual IP over backends (destination NAT).

Parameters:
- `vip` (required): the virtual address clients connect to.
- `backends` (required, non-empty list of addresses).
- `vport` (optional int): balance only TCP/UDP to this port of the VIP (others to the VIP pass
  untouched); without it every TCP/UDP packet to the VIP is balanced.
- `policy`: "hash" (default): the backend is a CRC-32 of the 5-tuple modulo the backend count, so
  the same connection always maps to the same backend, even after its state is lost;
  "round_robin": a global counter `l4lb/<name>/rr` in the global store (`name` parameter, default
  "default") picks the next backend, shared by every LB instance with that name.

Client to VIP: the first packet of a connection chooses a backend and stores it in the flow state
(`{"backend": int, "packets": int}`), so the connection stays on it whatever the policy; every
packet's destination is rewritten to the backend, with the IPv4 and L4 checksums updated.
Backend to client (source is a backend, and source port `vport` if set): the source is rewritten
back to the VIP. That reply path is stateless because the reply has a different 5-tuple (another
flow, maybe another NF instance) and the VIP is fixed; its flow state only counts `packets`.
Not supported: per-backend health, weights, removing a backend without moving connections.

Kept 300 s idle (`idle_timeout`), at most `max_flows` per worker, oldest idle first
(nf_host/flow_table.py): an evicted connection that comes back gets its backend again with
"hash", maybe another one with "round_robin".
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from typing import Any

from nf_host.nf_api import Context, FlowState, NetworkFunction, Packet, Verdict, register_nf
from nf_host.nfs.addresses import parse_addr
from nf_host.parse import PROTO_TCP, PROTO_UDP, rewrite_ipv4_addr

_TUPLE = struct.Struct("!IIHHB")
POLICIES = ("hash", "round_robin")


@register_nf
class L4LoadBalancer(NetworkFunction):
    name = "l4lb"

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(params)
        if "vip" not in self.params:
            raise ValueError("the L4 LB needs a vip parameter")
        self.vip = parse_addr(self.params["vip"], "vip")
        backends = self.params.get("backends")
        if not isinstance(backends, list | tuple) or not backends:
            raise ValueError("the L4 LB needs a non-empty list of backends")
        self.backends = [parse_addr(b, "backends") for b in backends]
        self.backend_set = frozenset(self.backends)
        vport = self.params.get("vport")
        self.vport = None if vport is None else int(vport)
        self.policy = str(self.params.get("policy", "hash"))
        if self.policy not in POLICIES:
            raise ValueError(f"L4 LB policy {self.policy!r} is not one of {POLICIES}")
        self.rr_key = f"l4lb/{self.params.get('name', 'default')}/rr"

    def initial_state(self) -> FlowState:
        return {"backend": None, "packets": 0}

    def _choose(self, packet: Packet, context: Context) -> int:
        flow = packet.flow
        assert flow is not None
        if self.policy == "round_robin":
            n = context.global_state.increment(self.rr_key)
            return self.backends[(n - 1) % len(self.backends)]
        digest = zlib.crc32(_TUPLE.pack(flow.src, flow.dst, flow.sport, flow.dport, flow.proto))
        return self.backends[digest % len(self.backends)]

    def process(self, packet: Packet, state: FlowState, context: Context) -> Verdict:
        flow = packet.flow
        if flow is None or flow.proto not in (PROTO_TCP, PROTO_UDP) or packet.l4_offset < 0:
            return Verdict.FORWARD
        if flow.dst == self.vip and (self.vport is None or flow.dport == self.vport):
            backend = state.get("backend")
            if backend is None:
                backend = self._choose(packet, context)
                state["backend"] = backend
            rewrite_ipv4_addr(packet, dst=backend)
            state["packets"] = state.get("packets", 0) + 1
        elif flow.src in self.backend_set and (self.vport is None or flow.sport == self.vport):
            rewrite_ipv4_addr(packet, src=self.vip)
            state["packets"] = state.get("packets", 0) + 1
        return Verdict.FORWARD
