"""PTF cases: symmetric slots and the drop of packets whose slot has no owner.

Run one case:  make ptf TARGET=p4sim PTF_TESTS=test_slots.SymmetricSlot
Run the group: make ptf TARGET=p4sim PTF_TESTS=slot
"""

from __future__ import annotations

import ptf.testutils as testutils
from ptf.testutils import group
from scapy.layers.inet import IP, IPOption_NOP
from scapy.layers.l2 import Ether
from scapy.packet import Packet

from ptf_tests.lib.nfc_test import (
    EDGE_CLIENT_PORT,
    EDGE_SERVER_PORT,
    NfcTest,
    packet_slot,
)
from ptf_tests.lib.packets import shim_of, tcp_packet, udp_packet


@group("slot")
class SymmetricSlot(NfcTest):
    """A packet and its reply land in one slot and share that slot's sequence space."""

    def runTest(self) -> None:
        for make in (udp_packet, tcp_packet):
            request = make("10.0.1.10", "10.0.2.20", 40001, 8080)
            reply = make("10.0.2.20", "10.0.1.10", 8080, 40001)
            slot, epoch = self.own_slot(request)
            self.assertEqual(packet_slot(reply), slot, "the slot model is not symmetric")

            first, _ = self.send_and_receive_copies(EDGE_CLIENT_PORT, request, slot, epoch, flags=None)
            second, _ = self.send_and_receive_copies(EDGE_SERVER_PORT, reply, slot, epoch, flags=None)
            self.assertEqual(shim_of(first).slot, slot)
            self.assertEqual(shim_of(second).slot, slot)
            self.assertEqual(shim_of(second).seq, shim_of(first).seq + 1)
            testutils.verify_no_other_packets(self)


@group("slot")
class SlotModelMatchesSwitch(NfcTest):
    """The Python slot model (ptf_tests/lib/slot_hash.py) agrees with the switch on many flows.

    Both address orders, TCP, UDP, ICMP (no ports), IPv4 with options and a fragment (the
    switch reads no L4 ports in those two), and DF set (ports still used).
    """

    def runTest(self) -> None:
        packets = []
        for i in range(4):
            packets.append(udp_packet(f"10.0.1.{i + 1}", f"10.0.2.{200 - i}", 1000 + 97 * i, 53))
            packets.append(tcp_packet(f"10.0.2.{i + 7}", f"10.0.1.{i + 3}", 443, 50000 + i))
        packets.append(_with_ip(udp_packet("10.0.2.1", "10.0.1.1", 7, 7), proto=1))  # "ICMP"
        packets.append(_with_ip(tcp_packet("10.0.2.2", "10.0.1.2", 80, 8080), options=True))
        packets.append(_with_ip(udp_packet("10.0.2.3", "10.0.1.3", 53, 5353), ip_flags="MF"))
        packets.append(_with_ip(tcp_packet("10.0.2.4", "10.0.1.4", 22, 6000), ip_flags="DF"))
        owned: set[int] = set()
        for pkt in packets:
            slot = packet_slot(pkt)
            if slot in owned:
                continue
            owned.add(slot)
            slot, epoch = self.own_slot(pkt)
            primary, _ = self.send_and_receive_copies(
                EDGE_SERVER_PORT, pkt, slot, epoch, flags=None
            )
            self.assertEqual(shim_of(primary).slot, slot)
        testutils.verify_no_other_packets(self)


def _with_ip(pkt: Packet, proto: int | None = None, options: bool = False,
             ip_flags: str | None = None) -> Packet:
    """`pkt` with its IPv4 header changed (protocol, a 4-byte option, flags such as MF or DF)."""
    out = pkt.copy()
    ip = out[IP]
    if proto is not None:
        ip.proto = proto
    if options:
        ip.options = [IPOption_NOP(), IPOption_NOP(), IPOption_NOP(), IPOption_NOP()]
    if ip_flags is not None:
        ip.flags = ip_flags
    ip.len = None
    ip.ihl = None
    ip.chksum = None
    return Ether(bytes(out))


@group("slot")
class UnownedSlotDropped(NfcTest):
    """A packet whose slot has no slot_owner entry goes nowhere and is counted per slot."""

    def runTest(self) -> None:
        pkt = udp_packet("10.0.1.77", "10.0.2.77", 5555, 6666, length=120)
        slot = packet_slot(pkt)
        before = self.read_counter("unowned_drops", slot)
        traffic_before = self.read_counter("slot_traffic", slot)
        testutils.send_packet(self, EDGE_CLIENT_PORT, pkt)
        testutils.verify_no_other_packets(self)
        after = self.wait_counter("unowned_drops", slot, before[0] + 1)
        self.assertEqual(after[0] - before[0], 1)
        self.assertEqual(after[1] - before[1], len(pkt))
        self.assertEqual(self.read_counter("slot_traffic", slot), traffic_before)
