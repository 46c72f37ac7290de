"""PTF cases: the per-slot traffic counter and the per-port counters at both ends.

Run one case:  make ptf TARGET=p4sim PTF_TESTS=test_counters.PortCountersBothEnds
Run the group: make ptf TARGET=p4sim PTF_TESTS=counters
"""

from __future__ import annotations

import ptf.testutils as testutils
from ptf.testutils import group
from scapy.layers.l2 import Ether

from contract.shim import Kind
from ptf_tests.lib.nfc_test import (
    EDGE_CLIENT_PORT,
    EDGE_SERVER_PORT,
    NF1_ID,
    NF1_MAC,
    NF1_PORT,
    NF2_PORT,
    RID_BACKUP,
    RID_PRIMARY,
    SERVER_MAC,
    NfcTest,
    fresh_epoch,
    packet_slot,
)
from ptf_tests.lib.packets import push_shim, set_field, strip_shim, udp_packet


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


@group("counters")
class PortCountersBothEnds(NfcTest):
    """port_rx counts every packet that entered the pipeline by ingress port, dropped or not;
    port_tx every packet that left by egress port, and nothing a pipeline dropped: an owned edge
    packet (in on 1, out on both NF ports with the shim), an unowned one (in on 1, out nowhere),
    an NF's output (in on 3 with the shim, out on 2 without it) and a copy egress drops (a
    replica to a port without an nf_port entry: in, and out on the primary's port only)."""

    def runTest(self) -> None:
        ports = (EDGE_CLIENT_PORT, EDGE_SERVER_PORT, NF1_PORT, NF2_PORT)
        before = {p: (self.read_counter("port_rx", p), self.read_counter("port_tx", p))
                  for p in ports}
        owned = udp_packet("10.0.1.60", "10.0.2.60", 7100, 7101, length=200)
        slot, epoch = self.own_slot(owned)
        self.send_and_receive_copies(EDGE_CLIENT_PORT, owned, slot, epoch, flags=None)
        unowned = udp_packet("10.0.1.61", "10.0.2.61", 7102, 7103, length=120)
        testutils.send_packet(self, EDGE_CLIENT_PORT, unowned)
        inner = udp_packet("10.0.1.62", "10.0.2.62", 7104, 7105, eth_src=NF1_MAC, length=150)
        output = push_shim(inner, int(Kind.OUTPUT), slot=23, epoch=fresh_epoch(), nf_id=1, seq=5)
        testutils.send_packet(self, NF1_PORT, output)
        testutils.verify_packet(self, set_field(strip_shim(output), Ether, "dst", SERVER_MAC),
                                EDGE_SERVER_PORT)
        # group 9: the primary's copy to NF 1, the backup's toward edge port 2, which has no
        # nf_port entry: egress drops it
        self.add_replica_group(9, [(NF1_PORT, RID_PRIMARY), (EDGE_SERVER_PORT, RID_BACKUP)])
        lone = udp_packet("10.0.1.63", "10.0.2.63", 7106, 7107, length=90)
        lone_slot = packet_slot(lone)
        lone_epoch = fresh_epoch()
        self.add_slot_owner_entry(lone_slot, group=9, epoch=lone_epoch, primary=NF1_ID)
        expected = self.expected_copies(lone, lone_slot, lone_epoch, NF1_ID, flags=None)[NF1_PORT]
        testutils.send_packet(self, EDGE_CLIENT_PORT, lone)
        self.receive(NF1_PORT, expected)
        testutils.verify_no_other_packets(self)
        # v1model's counters count a packet's bytes as it entered the switch (BMv2's ingress
        # length), at egress too: the copies without their shim, the output with it
        want_rx = {EDGE_CLIENT_PORT: (3, len(owned) + len(unowned) + len(lone)),
                   NF1_PORT: (1, len(output))}
        want_tx = {EDGE_SERVER_PORT: (1, len(output)),
                   NF1_PORT: (2, len(owned) + len(lone)),
                   NF2_PORT: (1, len(owned))}
        for port in ports:
            rx0, tx0 = before[port]
            rx = self.wait_counter("port_rx", port, rx0[0] + want_rx.get(port, (0, 0))[0])
            tx = self.wait_counter("port_tx", port, tx0[0] + want_tx.get(port, (0, 0))[0])
            self.assertEqual((rx[0] - rx0[0], rx[1] - rx0[1]), want_rx.get(port, (0, 0)),
                             f"port_rx[{port}]")
            self.assertEqual((tx[0] - tx0[0], tx[1] - tx0[1]), want_tx.get(port, (0, 0)),
                             f"port_tx[{port}]")
