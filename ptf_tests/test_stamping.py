"""PTF cases: per-slot sequence numbers and the first-of-epoch flag.

Run one case:  make ptf TARGET=p4sim PTF_TESTS=test_stamping.SequencePerSlot
Run the group: make ptf TARGET=p4sim PTF_TESTS=stamping
"""

from __future__ import annotations

import ptf.testutils as testutils
from ptf.testutils import group

from ptf_tests.lib.nfc_test import EDGE_CLIENT_PORT, NF1_ID, NfcTest, fresh_epoch, packet_slot
from ptf_tests.lib.packets import FLAG_FIRST_OF_EPOCH, shim_of, udp_packet

SEQ_MASK = 0xFFFFFFFF


@group("stamping")
class SequencePerSlot(NfcTest):
    """Sequence numbers go up by one per packet in a slot, independently in each slot."""

    def runTest(self) -> None:
        flow_a = udp_packet("10.0.1.1", "10.0.2.1", 1111, 2222)
        port = 3000
        flow_b = udp_packet("10.0.1.1", "10.0.2.1", 1111, port)
        while packet_slot(flow_b) == packet_slot(flow_a):
            port += 1
            flow_b = udp_packet("10.0.1.1", "10.0.2.1", 1111, port)
        slot_a, epoch_a = self.own_slot(flow_a)
        slot_b, epoch_b = self.own_slot(flow_b)

        seqs: dict[str, list[int]] = {"a": [], "b": []}
        for name in ("a", "a", "b", "a", "b", "b", "a"):
            pkt, slot, epoch = (flow_a, slot_a, epoch_a) if name == "a" else (flow_b, slot_b, epoch_b)
            primary, backup = self.send_and_receive_copies(
                EDGE_CLIENT_PORT, pkt, slot, epoch, flags=None
            )
            self.assertEqual(shim_of(primary).seq, shim_of(backup).seq)
            seqs[name].append(shim_of(primary).seq)
        testutils.verify_no_other_packets(self)
        for name, numbers in seqs.items():
            start = numbers[0]
            self.assertEqual(numbers, list(range(start, start + len(numbers))), f"slot of flow {name}")


@group("stamping")
class EpochChangeFlagsOnce(NfcTest):
    """After an ownership change (new epoch) exactly the first packet carries first-of-epoch."""

    def runTest(self) -> None:
        pkt = udp_packet("10.0.1.5", "10.0.2.5", 4321, 1234)
        slot, epoch = self.own_slot(pkt)
        # the first packet of this epoch in the slot is flagged; the next is not
        primary, _ = self.send_and_receive_copies(EDGE_CLIENT_PORT, pkt, slot, epoch, flags=None)
        self.assertEqual(shim_of(primary).flags & FLAG_FIRST_OF_EPOCH, FLAG_FIRST_OF_EPOCH)
        self.send_and_receive_copies(EDGE_CLIENT_PORT, pkt, slot, epoch, flags=0)

        new_epoch = fresh_epoch()
        self.modify_slot_owner_entry(slot, group=NF1_ID, epoch=new_epoch, primary=NF1_ID)
        primary, backup = self.send_and_receive_copies(
            EDGE_CLIENT_PORT, pkt, slot, new_epoch, flags=FLAG_FIRST_OF_EPOCH
        )
        self.assertEqual(shim_of(backup).flags, FLAG_FIRST_OF_EPOCH)
        for _ in range(3):
            self.send_and_receive_copies(EDGE_CLIENT_PORT, pkt, slot, new_epoch, flags=0)
        testutils.verify_no_other_packets(self)


@group("stamping")
class SeqBaseShiftsTheNumbering(NfcTest):
    """A packet's number is its slot_owner entry's seq_base + the packets stamped in its slot
    (`slot_traffic`), mod 2^32: the controller resumes the numbering after a switch restart by
    writing the base (a table entry, which BMv2 serves; its P4Runtime serves no register)."""

    def runTest(self) -> None:
        pkt = udp_packet("10.0.1.6", "10.0.2.6", 5432, 2345)
        slot, epoch = self.own_slot(pkt)
        for _ in range(2):
            primary, _ = self.send_and_receive_copies(EDGE_CLIENT_PORT, pkt, slot, epoch, flags=None)
        stamped, _ = self.read_counter("slot_traffic", slot)
        self.assertEqual(shim_of(primary).seq, stamped & SEQ_MASK)  # base 0

        base = 1_000_000
        self.modify_slot_owner_entry(slot, group=NF1_ID, epoch=epoch, primary=NF1_ID, seq_base=base)
        primary, _ = self.send_and_receive_copies(EDGE_CLIENT_PORT, pkt, slot, epoch, flags=0)
        self.assertEqual(shim_of(primary).seq, (base + stamped + 1) & SEQ_MASK)

        # a base that takes the numbering over 2^32: it wraps, as the 32-bit count does
        base = (SEQ_MASK - (stamped + 2)) & SEQ_MASK  # the next (the slot's stamped + 2nd) gets 2^32 - 1
        self.modify_slot_owner_entry(slot, group=NF1_ID, epoch=epoch, primary=NF1_ID, seq_base=base)
        seqs = []
        for _ in range(2):
            primary, _ = self.send_and_receive_copies(EDGE_CLIENT_PORT, pkt, slot, epoch, flags=0)
            seqs.append(shim_of(primary).seq)
        self.assertEqual(seqs, [SEQ_MASK, 0])
        testutils.verify_no_other_packets(self)
