"""PTF cases: packet-out and packet-in through the CPU port.

Run one case:  make ptf TARGET=p4sim PTF_TESTS=test_packetio.PacketOut
Run the group: make ptf TARGET=p4sim PTF_TESTS=packetio
"""

from __future__ import annotations

import ptf.testutils as testutils
from ptf.testutils import group
from scapy.layers.l2 import ARP, Ether

from nf_host.shim import Kind
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


@group("packetio")
class PacketInFromEdge(NfcTest):
    """Non-IPv4 traffic from an edge port (ARP) reaches the controller with its ingress port."""

    def runTest(self) -> None:
        arp = Ether(src="00:00:00:00:00:01", dst="ff:ff:ff:ff:ff:ff") / ARP(
            psrc="10.0.1.10", pdst="10.0.1.1"
        )
        testutils.send_packet(self, EDGE_CLIENT_PORT, arp)
        _payload, meta = self.get_packet_in(lambda p: p == bytes(arp))
        self.assertEqual(meta["ingress_port"], EDGE_CLIENT_PORT)
        testutils.verify_no_other_packets(self)
