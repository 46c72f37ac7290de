"""PTF cases: the new_flow_t digest (TCP SYN, first UDP packet of a slot's epoch).

Run one case:  make ptf TARGET=p4sim PTF_TESTS=test_digest.TcpSynDigest
Run the group: make ptf TARGET=p4sim PTF_TESTS=digest
"""

from __future__ import annotations

from ptf.testutils import group

from ptf_tests.lib.nfc_test import EDGE_CLIENT_PORT, NF1_ID, NfcTest, fresh_epoch, ip_to_int
from ptf_tests.lib.packets import tcp_packet, udp_packet

PROTO_TCP = 6
PROTO_UDP = 17


@group("digest")
class TcpSynDigest(NfcTest):
    """A SYN is reported with its slot and 5-tuple; other TCP packets (SYN-ACK included) are not."""

    def runTest(self) -> None:
        digest_id = self.insert_digest_entry("new_flow_t")
        syn = tcp_packet("10.0.1.30", "10.0.2.40", 45000, 80, flags="S")
        slot, epoch = self.own_slot(syn)
        self.send_and_receive_copies(EDGE_CLIENT_PORT, syn, slot, epoch, flags=None)
        members = self.get_digest_members(digest_id)
        self.assertEqual(
            members,
            [[slot, ip_to_int("10.0.1.30"), ip_to_int("10.0.2.40"), 45000, 80, PROTO_TCP]],
        )
        for flags in ("SA", "A", "PA", "FA"):
            pkt = tcp_packet("10.0.1.30", "10.0.2.40", 45000, 80, flags=flags)
            self.send_and_receive_copies(EDGE_CLIENT_PORT, pkt, slot, epoch, flags=None)
        self.assert_no_digest()


@group("digest")
class UdpFirstPacketDigest(NfcTest):
    """The first UDP packet of a slot's epoch is reported once; a new epoch reports again."""

    def runTest(self) -> None:
        digest_id = self.insert_digest_entry("new_flow_t")
        pkt = udp_packet("10.0.1.31", "10.0.2.41", 5353, 53)
        slot, epoch = self.own_slot(pkt)
        expected = [[slot, ip_to_int("10.0.1.31"), ip_to_int("10.0.2.41"), 5353, 53, PROTO_UDP]]
        self.send_and_receive_copies(EDGE_CLIENT_PORT, pkt, slot, epoch, flags=None)
        self.assertEqual(self.get_digest_members(digest_id), expected)
        for _ in range(3):
            self.send_and_receive_copies(EDGE_CLIENT_PORT, pkt, slot, epoch, flags=None)
        self.assert_no_digest()

        new_epoch = fresh_epoch()
        self.modify_slot_owner_entry(slot, group=NF1_ID, epoch=new_epoch, primary=NF1_ID)
        self.send_and_receive_copies(EDGE_CLIENT_PORT, pkt, slot, new_epoch, flags=None)
        self.assertEqual(self.get_digest_members(digest_id), expected)
        self.send_and_receive_copies(EDGE_CLIENT_PORT, pkt, slot, new_epoch, flags=None)
        self.assert_no_digest()
