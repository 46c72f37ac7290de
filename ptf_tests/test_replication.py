"""PTF cases: replication of stamped packets to the primary and the backup NF.

Run one case:  make ptf TARGET=p4sim PTF_TESTS=test_replication.PrimaryAndBackupCopies
Run the group: make ptf TARGET=p4sim PTF_TESTS=replication
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
    NF2_ID,
    NF2_MAC,
    NF2_PORT,
    RID_BACKUP,
    RID_PRIMARY,
    NfcTest,
    fresh_epoch,
    packet_slot,
)
from ptf_tests.lib.packets import (
    NfcShim,
    set_field,
    shim_of,
    strip_shim,
    tcp_packet,
    udp_packet,
)


@group("replication")
class PrimaryAndBackupCopies(NfcTest):
    """Both copies carry the same stamp; they differ only in kind and target (nf_id, MAC)."""

    def runTest(self) -> None:
        for primary_id, primary_mac, backup_id, backup_mac in (
            (NF1_ID, NF1_MAC, NF2_ID, NF2_MAC),
            (NF2_ID, NF2_MAC, NF1_ID, NF1_MAC),
        ):
            pkt = tcp_packet("10.0.1.9", "10.0.2.9", 30000 + primary_id, 443, flags="PA")
            slot, epoch = self.own_slot(pkt, primary=primary_id)
            primary, backup = self.send_and_receive_copies(
                EDGE_CLIENT_PORT, pkt, slot, epoch, primary=primary_id, flags=None
            )
            p, b = Ether(primary), Ether(backup)
            self.assertEqual((p[NfcShim].kind, p[NfcShim].nf_id, p.dst), (int(Kind.PRIMARY), primary_id, primary_mac))
            self.assertEqual((b[NfcShim].kind, b[NfcShim].nf_id, b.dst), (int(Kind.BACKUP), backup_id, backup_mac))
            # normalise the three differing fields: the rest must be byte-identical
            b_as_p = set_field(set_field(b, NfcShim, "kind", int(Kind.PRIMARY)), NfcShim, "nf_id", primary_id)
            b_as_p = set_field(b_as_p, Ether, "dst", primary_mac)
            self.assertEqual(bytes(b_as_p), primary)
            # and the payload under the shim is the packet as sent, but for the NF's MAC
            self.assertEqual(bytes(strip_shim(p)), bytes(set_field(pkt, Ether, "dst", primary_mac)))
            self.assertEqual(shim_of(primary).ether_type, 0x0800)
        testutils.verify_no_other_packets(self)


@group("replication")
class CopiesWithoutTargetDropped(NfcTest):
    """A replica toward a port with no nf_port entry, or with an unknown rid, is dropped."""

    def runTest(self) -> None:
        # group 9: primary copy to NF 1, backup copy toward edge port 2 (no nf_port entry)
        # group 8: primary copy to NF 1, a third replica with rid 5 toward NF 2
        self.add_replica_group(9, [(NF1_PORT, RID_PRIMARY), (EDGE_SERVER_PORT, RID_BACKUP)])
        self.add_replica_group(8, [(NF1_PORT, RID_PRIMARY), (NF2_PORT, 5)])
        for group_id, sport in ((9, 41000), (8, 42000)):
            pkt = udp_packet("10.0.1.70", "10.0.2.70", sport, 9000)
            slot = packet_slot(pkt)
            epoch = fresh_epoch()
            self.add_slot_owner_entry(slot, group=group_id, epoch=epoch, primary=NF1_ID)
            expected = self.expected_copies(pkt, slot, epoch, NF1_ID, flags=None)
            testutils.send_packet(self, EDGE_CLIENT_PORT, pkt)
            self.receive(NF1_PORT, expected[NF1_PORT])
            # a packet of a normally replicated slot, after it: its copies, and nothing else
            marker = udp_packet("10.0.1.71", "10.0.2.71", sport + 1, 9000)
            m_slot, m_epoch = self.own_slot(marker)
            self.nothing_else_after_marker(marker, m_slot, m_epoch)
