"""PTF cases: the per-slot traffic counter.

Run one case:  make ptf TARGET=p4sim PTF_TESTS=test_counters.SlotTrafficCounter
Run the group: make ptf TARGET=p4sim PTF_TESTS=counters
"""

from __future__ import annotations

import ptf.testutils as testutils
from ptf.testutils import group

from ptf_tests.lib.nfc_test import EDGE_CLIENT_PORT, EDGE_SERVER_PORT, NfcTest
from ptf_tests.lib.packets import udp_packet


@group("counters")
class SlotTrafficCounter(NfcTest):
    """After N packets (both directions, various sizes) slot_traffic counts N packets and their bytes."""

    def runTest(self) -> None:
        sizes = [64, 100, 256, 512, 1000, 1500, 77]
        request = udp_packet("10.0.1.50", "10.0.2.50", 7000, 7001)
        slot, epoch = self.own_slot(request)
        before = self.read_counter("slot_traffic", slot)
        sent = 0
        for i, size in enumerate(sizes):
            if i % 2 == 0:
                pkt = udp_packet("10.0.1.50", "10.0.2.50", 7000, 7001, length=size)
                port = EDGE_CLIENT_PORT
            else:
                pkt = udp_packet("10.0.2.50", "10.0.1.50", 7001, 7000, length=size)
                port = EDGE_SERVER_PORT
            self.send_and_receive_copies(port, pkt, slot, epoch, flags=None)
            sent += len(bytes(pkt))
        testutils.verify_no_other_packets(self)
        after = self.wait_counter("slot_traffic", slot, before[0] + len(sizes))
        self.assertEqual(after[0] - before[0], len(sizes))
        self.assertEqual(after[1] - before[1], sent)
