"""Packets of the PTF suite: the shim as a scapy layer, and named transforms for expectations.

Expected packets are built from the packet the test sends by small transforms
(`push_shim`, `strip_shim`, `set_field`); fields the test cannot know in advance (a sequence
number that depends on earlier traffic) are masked with `masked`.
"""

from __future__ import annotations

from typing import Any

from ptf.mask import Mask
from scapy.fields import ByteField, IntField, ShortField, XShortField
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, bind_layers

from contract.shim import ETHERTYPE_NFC, Kind

ETHERTYPE_IPV4 = 0x0800
FLAG_FIRST_OF_EPOCH = 0x01
FLAG_REVERSE = 0x02


class NfcShim(Packet):
    """The nfcluster shim (16 bytes); same layout as contract.shim.Shim."""

    name = "NfcShim"
    fields_desc = [
        ByteField("kind", int(Kind.PRIMARY)),
        ByteField("flags", 0),
        ByteField("stage", 0),
        ByteField("reserved", 0),
        ShortField("slot", 0),
        ShortField("epoch", 0),
        ShortField("nf_id", 0),
        IntField("seq", 0),
        XShortField("ether_type", ETHERTYPE_IPV4),
    ]


def _bind_once() -> None:
    # ptf's test loader also imports this file as a bare module `packets` (it walks every
    # directory under --test-dir); bind only the first NfcShim class so dissection stays
    # on the class the test modules use (they are imported first).
    if any(getattr(cls, "__name__", "") == "NfcShim" for _, cls in Ether.payload_guess):
        return
    bind_layers(Ether, NfcShim, type=ETHERTYPE_NFC)
    bind_layers(NfcShim, IP, ether_type=ETHERTYPE_IPV4)


_bind_once()


def udp_packet(
    src: str,
    dst: str,
    sport: int,
    dport: int,
    length: int = 100,
    eth_src: str = "00:00:00:00:00:01",
    eth_dst: str = "00:00:00:00:00:02",
) -> Packet:
    """An Ethernet/IPv4/UDP packet padded to `length` bytes."""
    pkt = Ether(src=eth_src, dst=eth_dst) / IP(src=src, dst=dst, ttl=64) / UDP(sport=sport, dport=dport)
    return _pad(pkt, length)


def tcp_packet(
    src: str,
    dst: str,
    sport: int,
    dport: int,
    flags: str = "A",
    length: int = 100,
    eth_src: str = "00:00:00:00:00:01",
    eth_dst: str = "00:00:00:00:00:02",
) -> Packet:
    """An Ethernet/IPv4/TCP packet with `flags` padded to `length` bytes."""
    pkt = (
        Ether(src=eth_src, dst=eth_dst)
        / IP(src=src, dst=dst, ttl=64)
        / TCP(sport=sport, dport=dport, flags=flags)
    )
    return _pad(pkt, length)


def _pad(pkt: Packet, length: int) -> Packet:
    missing = length - len(pkt)
    if missing > 0:
        pkt = pkt / (b"\x5a" * missing)
    return Ether(bytes(pkt))


def push_shim(
    pkt: Packet,
    kind: int,
    slot: int = 0,
    epoch: int = 0,
    nf_id: int = 0,
    seq: int = 0,
    flags: int = 0,
    stage: int = 0,
) -> Packet:
    """`pkt` with the shim inserted after Ethernet, as the switch sends it toward an NF (`slot`
    is the slot index, stage << SLOT_BITS | slot)."""
    eth = pkt[Ether]
    shim = NfcShim(
        kind=kind, flags=flags, stage=stage, slot=slot, epoch=epoch, nf_id=nf_id, seq=seq,
        ether_type=eth.type,
    )
    out = Ether(src=eth.src, dst=eth.dst, type=ETHERTYPE_NFC) / shim / eth.payload.copy()
    return Ether(bytes(out))


def strip_shim(pkt: Packet) -> Packet:
    """`pkt` without its shim, the original EtherType restored."""
    eth = pkt[Ether]
    shim = pkt[NfcShim]
    out = Ether(src=eth.src, dst=eth.dst, type=shim.ether_type) / shim.payload.copy()
    return Ether(bytes(out))


def set_field(pkt: Packet, layer: type[Packet], field: str, value: Any) -> Packet:
    """A copy of `pkt` with `layer.field` set to `value`."""
    out = pkt.copy()
    setattr(out[layer], field, value)
    return Ether(bytes(out))


def masked(pkt: Packet, dont_care: list[tuple[type[Packet], str]]) -> Mask:
    """A ptf Mask matching `pkt` except the listed (layer, field)s."""
    mask = Mask(pkt)
    for layer, field in dont_care:
        mask.set_do_not_care_packet(layer, field)
    return mask


def shim_of(data: bytes) -> NfcShim:
    """The shim of a received frame (fails the caller with ValueError when there is none)."""
    pkt = Ether(data)
    if NfcShim not in pkt:
        raise ValueError(f"frame carries no shim: {pkt.summary()}")
    shim: NfcShim = pkt[NfcShim]
    return shim
