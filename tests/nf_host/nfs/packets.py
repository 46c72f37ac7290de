"""Test helpers: build frames with scapy and run them through `parse_frame` like the runtime does."""

from __future__ import annotations

import ipaddress
from typing import Any

import msgpack
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet as ScapyPacket

from contract.shim import Kind, Shim
from nf_host.global_state import MemoryStore
from nf_host.nf_api import (
    Context,
    FlowKey,
    FlowState,
    GlobalStore,
    NetworkFunction,
    Packet,
    Verdict,
)
from nf_host.parse import parse_frame


def eth(**fields: Any) -> ScapyPacket:
    """Ethernet with fixed MACs (an Ether() without dst makes scapy ARP for the IP destination)."""
    return Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", **fields)


def ip2int(addr: str) -> int:
    return int(ipaddress.IPv4Address(addr))


def shim(seq: int = 1, slot: int = 7) -> Shim:
    return Shim(kind=Kind.PRIMARY, flags=0, slot=slot, epoch=1, nf_id=1, seq=seq, ether_type=0x0800)


def frame_of(pkt: ScapyPacket) -> bytearray:
    return bytearray(bytes(pkt))


def packet_of(pkt: ScapyPacket, seq: int = 1) -> Packet:
    return parse_frame(frame_of(pkt), shim(seq))


def tcp(
    src: str, dst: str, sport: int, dport: int, flags: str = "S", payload: bytes = b""
) -> ScapyPacket:
    return eth() / IP(src=src, dst=dst) / TCP(sport=sport, dport=dport, flags=flags) / payload


def udp(src: str, dst: str, sport: int, dport: int, payload: bytes = b"") -> ScapyPacket:
    return eth() / IP(src=src, dst=dst) / UDP(sport=sport, dport=dport) / payload


def context_for(packet: Packet, store: GlobalStore, now: float = 0.0, nf_id: int = 1) -> Context:
    """The context the runtime builds: canonical key and direction of the packet's flow."""
    if packet.flow is None:
        return Context(packet.shim.slot, packet.shim.seq, nf_id, None, False, store, now)
    key, rev = packet.flow.canonical()
    return Context(packet.shim.slot, packet.shim.seq, nf_id, key, rev, store, now)


def checksums_valid(frame: bytes | bytearray) -> bool:
    """True if scapy, recomputing them, finds the same IPv4 and TCP/UDP checksums."""
    got = Ether(bytes(frame))
    ref = got.copy()
    del ref[IP].chksum
    l4 = TCP if TCP in ref else UDP if UDP in ref else None
    if l4 is not None:
        del ref[l4].chksum
    ref = Ether(bytes(ref))
    ok = bool(got[IP].chksum == ref[IP].chksum)
    if l4 is not None:
        ok = ok and got[l4].chksum == ref[l4].chksum
    return ok


class FlowTable:
    """A minimal stand-in for the runtime: per-connection state, a sequence number, one NF."""

    def __init__(self, nf: NetworkFunction, store: GlobalStore | None = None) -> None:
        self.nf = nf
        self.store: GlobalStore = store if store is not None else MemoryStore()
        self.states: dict[FlowKey | None, FlowState] = {}
        self.seq = 0
        self.now = 1000.0

    def send(self, pkt: ScapyPacket | bytes) -> tuple[Verdict, bytes, FlowState]:
        """Run one frame through parse_frame and the NF; return verdict, output frame, flow state."""
        self.seq += 1
        self.now += 0.5
        packet = parse_frame(bytearray(bytes(pkt)), shim(self.seq))
        ctx = context_for(packet, self.store, now=self.now)
        state = self.states.setdefault(ctx.flow_key, self.nf.initial_state())
        verdict = self.nf.process(packet, state, ctx)
        if verdict == Verdict.DROP_FORGET:  # as the runtime: no state kept for the flow
            del self.states[ctx.flow_key]
        return verdict, bytes(packet.frame), state

    def state_of(self, pkt: ScapyPacket) -> FlowState:
        packet = packet_of(pkt)
        assert packet.flow is not None
        return self.states[packet.flow.canonical()[0]]

    def move_states(self) -> None:
        """Serialise and deserialise every state as a move or a replication would."""
        self.states = {k: msgpack.unpackb(msgpack.packb(v)) for k, v in self.states.items()}
