"""PTF cases: a slot move's marker (shim kind MARKER) from the old owner's port.

The NF that releases a slot sends a marker after its last output, on the same port; the switch
passes it, unstamped and with its kind kept, to the slot's current primary only (the adopter),
which starts on the slot once it has it (nf_host/move_marker.py, docs/protocols.md §5 P6).

Run one case:  make ptf TARGET=p4sim PTF_TESTS=test_move_marker.MarkerGoesToTheSlotsPrimaryOnly
Run the group: make ptf TARGET=p4sim PTF_TESTS=move_marker
"""

from __future__ import annotations

import ptf.testutils as testutils
from ptf.testutils import group
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw

from contract.shim import ETHERTYPE_NFC, Kind
from ptf_tests.lib.nfc_test import (
    EDGE_CLIENT_PORT,
    NF1_ID,
    NF1_MAC,
    NF1_PORT,
    NF2_ID,
    NF2_MAC,
    NF2_PORT,
    SLOT_BITS,
    NfcTest,
    fresh_epoch,
)
from ptf_tests.lib.packets import NfcShim, set_field, udp_packet

OUTPUT_DROP_WRONG_STAGE = 3


def marker(slot: int, epoch: int, seq: int, stage: int = 0, nf_id: int = NF1_ID) -> Packet:
    """The marker NF `nf_id` sends (as nf_host.move_marker.marker_frame builds it)."""
    shim = NfcShim(kind=int(Kind.MARKER), stage=stage, slot=slot, epoch=epoch, nf_id=nf_id,
                   seq=seq, ether_type=0)
    pkt = Ether(src=NF1_MAC, dst="ff:ff:ff:ff:ff:ff", type=ETHERTYPE_NFC) / shim
    return Ether(bytes(pkt / Raw(bytes(60 - len(pkt)))))


@group("move_marker")
class MarkerGoesToTheSlotsPrimaryOnly(NfcTest):
    """A marker from the old owner's port reaches the slot's new primary (not its backup, not an
    edge port) with its kind, slot, epoch and seq as sent, and takes no sequence number."""

    def runTest(self) -> None:
        pkt = udp_packet("10.0.1.31", "10.0.2.31", 31000, 53)
        slot, epoch = self.own_slot(pkt, primary=NF2_ID)  # moved to NF 2 (group: NF2, backup NF1)
        before, _ = self.send_and_receive_copies(EDGE_CLIENT_PORT, pkt, slot, epoch, NF2_ID,
                                                 flags=None)
        sent = marker(slot, epoch - 1, seq=77)
        expected = set_field(set_field(sent, NfcShim, "nf_id", NF2_ID), Ether, "dst", NF2_MAC)
        testutils.send_packet(self, NF1_PORT, sent)
        testutils.verify_packet(self, expected, NF2_PORT)
        after, _ = self.send_and_receive_copies(EDGE_CLIENT_PORT, pkt, slot, epoch, NF2_ID,
                                                flags=None)
        # the marker took no number: the slot's next packet has the one after the packet before
        self.assertEqual(Ether(after)[NfcShim].seq, Ether(before)[NfcShim].seq + 1)
        testutils.verify_no_other_packets(self)


@group("move_marker")
class MarkerOfAnotherStageDropped(NfcTest):
    """A marker claiming a stage its port's NF is not in is dropped and counted like such output
    (nf_output_drops[wrong stage]); one for a slot without owner in unowned_drops."""

    def runTest(self) -> None:
        pkt = udp_packet("10.0.1.32", "10.0.2.32", 32000, 53)
        slot, epoch = self.own_slot(pkt, primary=NF2_ID)
        wrong = self.read_counter("nf_output_drops", OUTPUT_DROP_WRONG_STAGE)
        testutils.send_packet(self, NF1_PORT, marker(slot | (1 << SLOT_BITS), epoch, 1, stage=1))
        self.wait_counter("nf_output_drops", OUTPUT_DROP_WRONG_STAGE, wrong[0] + 1)
        unowned_slot = (slot + 1) % (1 << SLOT_BITS)  # no slot_owner entry in this case's switch
        unowned = self.read_counter("unowned_drops", unowned_slot)
        testutils.send_packet(self, NF2_PORT, marker(unowned_slot, fresh_epoch(), 1, nf_id=NF2_ID))
        self.wait_counter("unowned_drops", unowned_slot, unowned[0] + 1)
        testutils.verify_no_other_packets(self)
