"""PTF cases: packet-out and packet-in through the CPU port.

Run one case:  make ptf TARGET=p4sim PTF_TESTS=test_packetio.PacketOut
Run the group: make ptf TARGET=p4sim PTF_TESTS=packetio
"""

from __future__ import annotations

import time

import ptf.testutils as testutils
from ptf.testutils import group
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Packet

from contract.shim import Kind
from ptf_tests.lib.nfc_test import EDGE_CLIENT_PORT, EDGE_SERVER_PORT, NF2_PORT, NfcTest
from ptf_tests.lib.packets import push_shim, udp_packet


@group("packetio")
class PacketOut(NfcTest):
    """A packet-out leaves on the port its metadata names, unchanged (also a CONTROL shim to an NF)."""

    def runTest(self) -> None:
        pkt = udp_packet("10.0.9.1", "10.0.1.10", 9, 9)
        self.send_packet_out(bytes(pkt), EDGE_SERVER_PORT)
        testutils.verify_packet(self, pkt, EDGE_SERVER_PORT)
        control = push_shim(pkt, int(Kind.CONTROL), slot=3, epoch=1, nf_id=2, seq=0)
        self.send_packet_out(bytes(control), NF2_PORT)
        testutils.verify_packet(self, control, NF2_PORT)
        testutils.verify_no_other_packets(self)


@group("packetio")
class PacketOutLoopbackProbe(NfcTest):
    """A packet-out to the CPU port comes back as a packet-in from the CPU port (pipeline probe)."""

    def runTest(self) -> None:
        probe = bytes(udp_packet("10.0.9.1", "10.0.9.2", 7777, 7777, length=80))
        self.send_packet_out(probe, self.cpu_port)
        _payload, meta = self.get_packet_in(lambda p: p == probe)
        self.assertEqual(meta["ingress_port"], self.cpu_port)
        testutils.verify_no_other_packets(self)


def _arp(n: int = 0) -> Packet:
    return Ether(src="00:00:00:00:00:01", dst="ff:ff:ff:ff:ff:ff") / ARP(
        psrc="10.0.1.10", pdst=f"10.0.1.{1 + n}"
    )


# indexes of counter punt_drops (p4src/shared/define.p4)
PUNT_DROP_NO_HANDLER = 0
PUNT_DROP_OVER_RATE = 1


@group("packetio")
class NonIpv4DroppedWithoutHandler(NfcTest):
    """Until a controller enables the punt, non-IPv4 edge traffic is dropped and counted."""

    def runTest(self) -> None:
        before = self.read_counter("punt_drops", PUNT_DROP_NO_HANDLER)
        arp = _arp()
        testutils.send_packet(self, EDGE_CLIENT_PORT, arp)
        after = self.wait_counter("punt_drops", PUNT_DROP_NO_HANDLER, before[0] + 1)
        self.assertEqual((after[0] - before[0], after[1] - before[1]), (1, len(arp)))
        self.assertTrue(self.client.packet_ins.empty(), "a packet-in without a handler")
        testutils.verify_no_other_packets(self)


@group("packetio")
class PuntRateLimited(NfcTest):
    """With the punt enabled and punt_meter at 1 packet/s with a burst of 2, a burst of 6 ARP
    packets gives at most 3 packet-ins (the bursts, and what refilled meanwhile); every other
    packet is counted in punt_drops[over rate]."""

    def runTest(self) -> None:
        self.set_default_action("edge_punt", "punt_to_cpu", restore="drop_non_ipv4")
        self.set_meter("punt_meter", 0, cir=1, cburst=2, pir=1, pburst=2)
        before = self.read_counter("punt_drops", PUNT_DROP_OVER_RATE)
        sent = [bytes(_arp(i)) for i in range(6)]
        for data in sent:
            testutils.send_packet(self, EDGE_CLIENT_PORT, data)
        punted = dropped = 0
        deadline = time.monotonic() + 3.0
        while punted + dropped < len(sent) and time.monotonic() < deadline:
            try:
                self.get_packet_in(lambda p: p in sent, timeout=0.1)
                punted += 1
            except AssertionError:
                pass
            dropped = self.read_counter("punt_drops", PUNT_DROP_OVER_RATE)[0] - before[0]
        self.assertEqual(punted + dropped, len(sent), f"{punted} punted, {dropped} dropped")
        self.assertGreaterEqual(punted, 1)
        self.assertLessEqual(punted, 3)
        testutils.verify_no_other_packets(self)


@group("packetio")
class PacketInFromEdge(NfcTest):
    """Non-IPv4 traffic from an edge port (ARP) reaches the controller with its ingress port
    once a controller with a packet-in handler set edge_punt to punt_to_cpu."""

    def runTest(self) -> None:
        self.set_default_action("edge_punt", "punt_to_cpu", restore="drop_non_ipv4")
        arp = _arp()
        testutils.send_packet(self, EDGE_CLIENT_PORT, arp)
        _payload, meta = self.get_packet_in(lambda p: p == bytes(arp))
        self.assertEqual(meta["ingress_port"], EDGE_CLIENT_PORT)
        testutils.verify_no_other_packets(self)
