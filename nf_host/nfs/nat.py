"""The NAT NF (source NAT, address-and-port-dependent filtering); its port pool is global state.

Parameters:
- `public_ip` (required): the address inside hosts appear as.
- `inside` (prefix or list, default "10.0.0.0/8"): the private side.
- `port_min`, `port_max` (default 1024, 65535): the pool of public ports.
- `pool` (default "default"): the pool's name; NAT instances sharing a name share the pool.

Outbound TCP/UDP (source inside): the first packet of a connection allocates a public port from
the pool, and every packet gets source `public_ip:port` (IPv4 and L4 checksums updated
incrementally). Inbound (destination `public_ip`): the packet's flow is a different connection for
the runtime (its 5-tuple is the translated one), so the mapping is looked up once in the global
store by destination port, checked against the remote endpoint the inside host talks to, cached in
that flow's state, and the destination is rewritten back. Inbound packets with no mapping (or from
another remote endpoint) are dropped and counted in `unsolicited`. ICMP and other protocols from
inside are dropped (`untranslatable`); other traffic (inside to inside, non-IP) passes untouched.

Global state (keys under the store's prefix):
- `nat/<pool>/cursor`: a counter; each allocation attempt takes the next candidate port with
  `increment`, so concurrent instances try different ports.
- `nat/<pool>/port/<p>`: the claim of port p, created with `compare_and_swap(key, None, ...)`:
  only one instance can create it, so no port is ever handed out twice. The value is
  `"<proto> <inside_ip> <inside_port> <remote_ip> <remote_port>"` (decimal integers).
- `nat/<pool>/flow/<proto>/<inside_ip>/<inside_port>/<remote_ip>/<remote_port>`: the port of an
  outbound connection. Looked up before allocating, so replaying a connection's first packet after
  a failover reuses the port the failed primary allocated instead of taking a second one.
A full pool (every candidate claimed) drops the packet and counts `exhausted`. Ports are not
released to the pool (its global mapping stays when the flow's state goes): see docs/nfs.md.

What it keeps and for how long (nf_host/flow_table.py): a flow's state 600 s idle
(`idle_timeout`), 10 s after a TCP FIN or RST (`closed_timeout`; `closed` is set in its state); at
most `max_flows` per worker, oldest idle first. An evicted outbound flow that comes back finds its
port again in the global store (the allocation is keyed by connection).

State per flow: outbound `{"ext_port": int, "translated": int, ...}`; inbound
`{"inside_ip": int, "inside_port": int, "translated": int, ...}`; plus the drop counters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nf_host.nf_api import (
    Context,
    FlowKey,
    FlowState,
    GlobalStore,
    NetworkFunction,
    Packet,
    Verdict,
    register_nf,
    tcp_timeout,
)
from nf_host.nfs.addresses import in_prefixes, parse_addr, parse_prefixes
from nf_host.parse import (
    PROTO_TCP,
    PROTO_UDP,
    TCP_FIN,
    TCP_RST,
    rewrite_ipv4_addr,
    rewrite_port,
    tcp_flags,
)


class PoolExhausted(RuntimeError):
    """Every port of the pool is claimed."""


class PortPool:
    """Allocation of public ports through a `GlobalStore` (see the module docstring for the keys)."""

    def __init__(self, pool: str, port_min: int, port_max: int) -> None:
        if not 1 <= port_min <= port_max <= 65535:
            raise ValueError(f"bad NAT port range {port_min}..{port_max}")
        self.base = f"nat/{pool}/"
        self.port_min = port_min
        self.size = port_max - port_min + 1

    def port_key(self, port: int) -> str:
        return f"{self.base}port/{port}"

    def flow_key(self, flow: FlowKey) -> str:
        return f"{self.base}flow/{flow.proto}/{flow.src}/{flow.sport}/{flow.dst}/{flow.dport}"

    def allocate(self, store: GlobalStore, flow: FlowKey) -> int:
        """The public port of outbound `flow`: the one it already has, or a newly claimed one."""
        fkey = self.flow_key(flow)
        existing = store.get(fkey)
        if existing is not None:
            return int(existing)
        claim = f"{flow.proto} {flow.src} {flow.sport} {flow.dst} {flow.dport}".encode()
        for _ in range(self.size):
            n = store.increment(self.base + "cursor")
            port = self.port_min + (n - 1) % self.size
            if store.compare_and_swap(self.port_key(port), None, claim):
                store.put(fkey, str(port).encode())
                return port
        raise PoolExhausted(f"NAT pool {self.base} has no free port")

    def lookup(self, store: GlobalStore, port: int) -> tuple[int, int, int, int, int] | None:
        """(proto, inside_ip, inside_port, remote_ip, remote_port) of a claimed port, or None."""
        raw = store.get(self.port_key(port))
        if raw is None:
            return None
        try:
            proto, iip, iport, rip, rport = (int(x) for x in raw.split())
        except ValueError:
            return None
        return proto, iip, iport, rip, rport


@register_nf
class Nat(NetworkFunction):
    name = "nat"
    idle_timeout = 600.0

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(params)
        if "public_ip" not in self.params:
            raise ValueError("the NAT needs a public_ip parameter")
        self.public_ip = parse_addr(self.params["public_ip"], "public_ip")
        self.inside = parse_prefixes(self.params.get("inside", "10.0.0.0/8"), "inside")
        self.pool = PortPool(
            str(self.params.get("pool", "default")),
            int(self.params.get("port_min", 1024)),
            int(self.params.get("port_max", 65535)),
        )

    def initial_state(self) -> FlowState:
        return {"translated": 0, "unsolicited": 0, "untranslatable": 0, "exhausted": 0}

    @staticmethod
    def _count(state: FlowState, what: str) -> None:
        state[what] = state.get(what, 0) + 1

    def process(self, packet: Packet, state: FlowState, context: Context) -> Verdict:
        flow = packet.flow
        if flow is None:
            return Verdict.FORWARD
        outbound = in_prefixes(flow.src, self.inside) and not in_prefixes(flow.dst, self.inside)
        inbound = flow.dst == self.public_ip
        if not outbound and not inbound:
            return Verdict.FORWARD
        if flow.proto not in (PROTO_TCP, PROTO_UDP) or packet.l4_offset < 0:
            self._count(state, "untranslatable")
            return Verdict.DROP
        if flow.proto == PROTO_TCP and tcp_flags(packet) & (TCP_FIN | TCP_RST):
            state["closed"] = True  # a FIN or RST seen: the mapping's state goes sooner
        if outbound:
            return self._outbound(packet, flow, state, context)
        return self._inbound(packet, flow, state, context)

    def flow_timeout(self, state: FlowState, flow: FlowKey | None) -> tuple[str, float]:
        return tcp_timeout(self, state, bool(state.get("closed")))

    def _outbound(
        self, packet: Packet, flow: FlowKey, state: FlowState, context: Context
    ) -> Verdict:
        port = state.get("ext_port")
        if port is None:
            try:
                port = self.pool.allocate(context.global_state, flow)
            except PoolExhausted:
                self._count(state, "exhausted")
                return Verdict.DROP
            state["ext_port"] = port
        rewrite_ipv4_addr(packet, src=self.public_ip)
        rewrite_port(packet, sport=port)
        self._count(state, "translated")
        return Verdict.FORWARD

    def _inbound(
        self, packet: Packet, flow: FlowKey, state: FlowState, context: Context
    ) -> Verdict:
        if "inside_ip" not in state:
            mapping = self.pool.lookup(context.global_state, flow.dport)
            if mapping is None or mapping[0] != flow.proto or mapping[3:] != (flow.src, flow.sport):
                self._count(state, "unsolicited")
                return Verdict.DROP
            state["inside_ip"], state["inside_port"] = mapping[1], mapping[2]
        rewrite_ipv4_addr(packet, dst=state["inside_ip"])
        rewrite_port(packet, dport=state["inside_port"])
        self._count(state, "translated")
        return Verdict.FORWARD
