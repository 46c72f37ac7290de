"""PTF cases: traffic arriving from NF ports.

Run one case:  make ptf TARGET=p4sim PTF_TESTS=test_nf_output.OutputStrippedAndForwarded
Run the group: make ptf TARGET=p4sim PTF_TESTS=nf_output
"""

from __future__ import annotations

import ptf.testutils as testutils
from ptf.testutils import group
from scapy.layers.l2 import ARP, Ether

from contract.shim import Kind
from ptf_tests.lib.nfc_test import (
    CLIENT_MAC,
    EDGE_CLIENT_PORT,
    EDGE_SERVER_PORT,
    NF1_MAC,
    NF1_PORT,
    NF2_PORT,
    SERVER_MAC,
    NfcTest,
    fresh_epoch,
)
from ptf_tests.lib.packets import push_shim, set_field, strip_shim, tcp_packet, udp_packet


@group("nf_output")
class OutputStrippedAndForwarded(NfcTest):
    """Output from an NF loses its shim and goes to the edge port of its destination."""

    def runTest(self) -> None:
        cases = [
            (NF1_PORT, udp_packet("10.0.2.20", "10.0.1.10", 53, 40000, eth_src=NF1_MAC), EDGE_CLIENT_PORT, CLIENT_MAC),
            (NF2_PORT, tcp_packet("10.0.1.10", "10.0.2.20", 40000, 80, eth_src=NF1_MAC), EDGE_SERVER_PORT, SERVER_MAC),
        ]
        for i, (nf_port, inner, edge_port, edge_mac) in enumerate(cases):
            # distinct slots: the switch forwards one output per (slot, epoch, seq)
            out = push_shim(inner, int(Kind.OUTPUT), slot=17 + i, epoch=3, nf_id=1, seq=99)
            expected = set_field(strip_shim(out), Ether, "dst", edge_mac)
            testutils.send_packet(self, nf_port, out)
            testutils.verify_packet(self, expected, edge_port)
        testutils.verify_no_other_packets(self)


@group("nf_output")
class NonOutputFromNfDropped(NfcTest):
    """Anything but shim OUTPUT from an NF port is dropped and counted in nf_port_drops; output
    with no route in no_route_drops."""

    def runTest(self) -> None:
        plain = udp_packet("10.0.2.20", "10.0.1.10", 53, 40000)
        bad = [
            plain,                                                   # no shim
            push_shim(plain, int(Kind.PRIMARY), slot=1, epoch=1),    # a copy sent back
            push_shim(plain, int(Kind.BACKUP), slot=1, epoch=1),
            push_shim(plain, int(Kind.CONTROL), slot=1, epoch=1),
            Ether(src=NF1_MAC, dst="ff:ff:ff:ff:ff:ff") / ARP(psrc="10.0.9.1", pdst="10.0.9.2"),
        ]
        no_route = push_shim(udp_packet("192.168.7.1", "192.168.7.2", 1, 2), int(Kind.OUTPUT),
                             slot=19, epoch=fresh_epoch(), seq=1)
        before = self.read_counter("nf_port_drops", NF1_PORT)
        other_before = self.read_counter("nf_port_drops", NF2_PORT)
        route_before = self.read_counter("no_route_drops", NF1_PORT)
        for pkt in bad:
            testutils.send_packet(self, NF1_PORT, pkt)
        testutils.send_packet(self, NF1_PORT, no_route)
        testutils.verify_no_other_packets(self)
        self.wait_counter("no_route_drops", NF1_PORT, route_before[0] + 1)
        after = self.wait_counter("nf_port_drops", NF1_PORT, before[0] + len(bad))
        self.assertEqual(after[0] - before[0], len(bad))
        self.assertEqual(after[1] - before[1], sum(len(bytes(p)) for p in bad))
        self.assertEqual(self.read_counter("nf_port_drops", NF2_PORT), other_before)
