"""The stateful firewall NF: TCP connection tracking; inside may open connections, outside may not.

Parameters:
- `inside` (prefix or list of prefixes, default "10.0.0.0/8"): the protected side.
- `allow_inbound_ports` (list of ints, default []): TCP/UDP destination ports that outside hosts
  may open connections to (servers inside).
- `allow_non_ip` (bool, default True): forward frames that are not IPv4 (ARP); else drop them.

State per connection (both directions share it):
`{"state": str, "init_rev": bool | None, "fin_init": bool, "fin_resp": bool, "allowed": int,
"dropped": int}`. `init_rev` is `context.reverse` of the packet that opened the connection, so a
later packet comes from the initiator iff its `context.reverse` equals it.

TCP states: NONE -> (SYN from inside, or to an allowed port) SYN_SENT -> (SYN+ACK from the
responder) SYN_RECEIVED -> (ACK from the initiator) ESTABLISHED -> (FIN from both sides) CLOSING;
RST in any tracked state -> CLOSED. NONE, CLOSED and CLOSING accept a new SYN (a new connection on
the same 5-tuple). Anything else in NONE or CLOSED is dropped: unsolicited from outside, invalid
from inside. Packets out of handshake order (responder data before the handshake completes, an
initiator ACK before the SYN+ACK) are dropped. Sequence numbers are not checked.

UDP, ICMP and other IP protocols: the first packet from inside (or UDP to an allowed port) opens
the flow (state OPEN) and then both directions pass; an outside-first flow is dropped. There are no
idle timeouts of its own: the runtime's (below) remove a flow's state.

What it keeps and for how long (nf_host/flow_table.py): a TCP connection 3600 s idle
(`idle_timeout`), 10 s once closed (RST, or FIN from both sides: `closed_timeout`), a UDP/ICMP flow
120 s idle (`udp_timeout`); at most `max_flows` (default 1,000,000) per worker, oldest idle first.
A packet refused while its flow is in state NONE (unsolicited, a scan) keeps no state
(`Verdict.DROP_FORGET`, counted as eviction "nf"), unless `keep_refused` is true: then the flow's
`dropped` count is kept like any other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nf_host.nf_api import (
    Context,
    FlowKey,
    FlowState,
    NetworkFunction,
    Packet,
    Verdict,
    register_nf,
    tcp_timeout,
)
from nf_host.nfs.addresses import in_prefixes, parse_prefixes
from nf_host.parse import PROTO_TCP, PROTO_UDP, TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN, tcp_flags

NONE = "NONE"
SYN_SENT = "SYN_SENT"
SYN_RECEIVED = "SYN_RECEIVED"
ESTABLISHED = "ESTABLISHED"
CLOSING = "CLOSING"
CLOSED = "CLOSED"
OPEN = "OPEN"
_RESTARTABLE = (NONE, CLOSED, CLOSING)


@register_nf
class Firewall(NetworkFunction):
    name = "firewall"
    idle_timeout = 3600.0

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(params)
        self.inside = parse_prefixes(self.params.get("inside", "10.0.0.0/8"), "inside")
        self.inbound_ports = frozenset(int(p) for p in self.params.get("allow_inbound_ports", []))
        self.allow_non_ip = bool(self.params.get("allow_non_ip", True))
        self.keep_refused = bool(self.params.get("keep_refused", False))

    def initial_state(self) -> FlowState:
        return {
            "state": NONE,
            "init_rev": None,
            "fin_init": False,
            "fin_resp": False,
            "allowed": 0,
            "dropped": 0,
        }

    def process(self, packet: Packet, state: FlowState, context: Context) -> Verdict:
        flow = packet.flow
        if flow is None:
            verdict = Verdict.FORWARD if self.allow_non_ip else Verdict.DROP
        elif flow.proto == PROTO_TCP:
            verdict = self._tcp(packet, state, context)
        else:
            verdict = self._other(packet, state, context)
        key = "allowed" if verdict == Verdict.FORWARD else "dropped"
        state[key] = state.get(key, 0) + 1
        if verdict == Verdict.DROP and state.get("state", NONE) == NONE and not self.keep_refused \
                and not state.get("allowed"):
            return Verdict.DROP_FORGET  # never opened: a scan costs no state
        return verdict

    def flow_timeout(self, state: FlowState, flow: FlowKey | None) -> tuple[str, float]:
        if flow is not None and flow.proto == PROTO_TCP:
            if state.get("state") in (CLOSED, CLOSING):
                return tcp_timeout(self, state, True)
            return "idle", self.limit("idle_timeout")
        return "udp", float(self.params.get("udp_timeout", 120.0))

    def _may_open(self, packet: Packet) -> bool:
        flow = packet.flow
        assert flow is not None
        if in_prefixes(flow.src, self.inside):
            return True
        return flow.proto in (PROTO_TCP, PROTO_UDP) and flow.dport in self.inbound_ports

    def _other(self, packet: Packet, state: FlowState, context: Context) -> Verdict:
        if state.get("state") == OPEN:
            return Verdict.FORWARD
        if self._may_open(packet):
            state["state"] = OPEN
            state["init_rev"] = context.reverse
            return Verdict.FORWARD
        return Verdict.DROP

    def _tcp(self, packet: Packet, state: FlowState, context: Context) -> Verdict:
        if packet.l4_offset < 0:
            return Verdict.DROP  # truncated header or a fragment: cannot be tracked
        flags = tcp_flags(packet)
        st = state.get("state", NONE)
        syn_only = flags & (TCP_SYN | TCP_ACK | TCP_RST) == TCP_SYN
        if st in _RESTARTABLE and syn_only and self._may_open(packet):
            state.update(state=SYN_SENT, init_rev=context.reverse, fin_init=False, fin_resp=False)
            return Verdict.FORWARD
        if st in (NONE, CLOSED):
            return Verdict.DROP
        from_init = context.reverse == state.get("init_rev")
        if flags & TCP_RST:
            state["state"] = CLOSED
            return Verdict.FORWARD
        if st == SYN_SENT:
            if from_init:
                return Verdict.FORWARD if syn_only else Verdict.DROP
            if flags & (TCP_SYN | TCP_ACK) == TCP_SYN | TCP_ACK:
                state["state"] = SYN_RECEIVED
                return Verdict.FORWARD
            return Verdict.DROP
        if st == SYN_RECEIVED:
            if from_init:
                if flags & TCP_ACK and not flags & TCP_SYN:
                    state["state"] = ESTABLISHED
                    self._fin(state, flags, from_init)
                    return Verdict.FORWARD
                return Verdict.FORWARD if syn_only else Verdict.DROP
            is_synack = flags & (TCP_SYN | TCP_ACK) == TCP_SYN | TCP_ACK
            return Verdict.FORWARD if is_synack else Verdict.DROP
        # ESTABLISHED or CLOSING: a bare SYN here is not part of this connection
        if syn_only:
            return Verdict.DROP
        self._fin(state, flags, from_init)
        return Verdict.FORWARD

    @staticmethod
    def _fin(state: FlowState, flags: int, from_init: bool) -> None:
        if flags & TCP_FIN:
            state["fin_init" if from_init else "fin_resp"] = True
            if state.get("fin_init") and state.get("fin_resp"):
                state["state"] = CLOSING
