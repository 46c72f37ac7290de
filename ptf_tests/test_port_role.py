"""PTF cases: port classification and what each role may send.

Run one case:  make ptf TARGET=p4sim PTF_TESTS=test_port_role.ForgedShimFromEdgeDropped
Run the group: make ptf TARGET=p4sim PTF_TESTS=port_role
"""

from __future__ import annotations

import ptf.testutils as testutils
from ptf.testutils import group

from contract.shim import Kind
from ptf_tests.lib.nfc_test import EDGE_CLIENT_PORT, EDGE_SERVER_PORT, NfcTest, packet_slot
from ptf_tests.lib.packets import push_shim, udp_packet


@group("port_role")
class ForgedShimFromEdgeDropped(NfcTest):
    """A packet arriving on an edge port with a shim is dropped, even when its slot is owned."""

    def runTest(self) -> None:
        inner = udp_packet("10.0.1.60", "10.0.2.60", 6000, 6001)
        slot, epoch = self.own_slot(inner)
        traffic_before = self.read_counter("slot_traffic", slot)
        for kind in (Kind.PRIMARY, Kind.OUTPUT, Kind.CONTROL):
            forged = push_shim(inner, int(kind), slot=slot, epoch=epoch, nf_id=1, seq=1)
            testutils.send_packet(self, EDGE_CLIENT_PORT, forged)
        # the same packet without a shim, after them on the same port, is stamped and copied
        self.nothing_else_after_marker(inner, slot, epoch)
        self.assertEqual(self.read_counter("slot_traffic", slot)[0], traffic_before[0] + 1)


@group("port_role")
class UnclassifiedPortDropped(NfcTest):
    """Traffic from a port without a port_role entry goes nowhere, even in an owned slot."""

    edge_ports = (EDGE_CLIENT_PORT,)

    def runTest(self) -> None:
        pkt = udp_packet("10.0.2.61", "10.0.1.61", 6001, 6000)
        slot, epoch = self.own_slot(pkt)
        self.assertEqual(slot, packet_slot(pkt))
        traffic_before = self.read_counter("slot_traffic", slot)
        testutils.send_packet(self, EDGE_SERVER_PORT, pkt)
        # the same packet from the classified client port, sent after, goes through
        self.nothing_else_after_marker(pkt, slot, epoch)
        self.assertEqual(self.read_counter("slot_traffic", slot)[0], traffic_before[0] + 1)
