"""PTF cases: service chains. Output of stage k goes on to stage k+1, restamped with that stage's
own per-slot sequence number; after the last stage it goes to its edge port; the reverse
direction enters at the last stage and walks the chain back; output claiming a stage its port's
NF is not in is dropped and counted; a stage that rewrites addresses has its output's slot
computed again.

The topology's two NFs serve as the two stages: NF 1 (port 3) is in stage 0, NF 2 (port 4) in
stage 1 (nf_stage). A slot index is stage << SLOT_BITS | slot (docs/dataplane.md, "Service
chains"). Each case uses flows and epochs of its own.

Run one case:  make ptf TARGET=p4sim PTF_TESTS=test_chain.StageOutputRestampedForTheNextStage
Run the group: make ptf TARGET=p4sim PTF_TESTS=chain
"""

from __future__ import annotations

import ptf.testutils as testutils
from ptf.testutils import group
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet

from contract.shim import Kind
from ptf_tests.lib.nfc_test import (
    CLIENT_MAC,
    EDGE_CLIENT_PORT,
    EDGE_SERVER_PORT,
    NF1_ID,
    NF1_MAC,
    NF1_PORT,
    NF2_ID,
    NF2_MAC,
    NF2_PORT,
    SERVER_MAC,
    SLOT_BITS,
    NfcTest,
    fresh_epoch,
    packet_slot,
)
from ptf_tests.lib.packets import (
    FLAG_REVERSE,
    push_shim,
    set_field,
    shim_of,
    strip_shim,
    udp_packet,
)

WRONG_STAGE = 3  # OUTPUT_DROP_WRONG_STAGE


def index(stage: int, slot: int) -> int:
    return stage << SLOT_BITS | slot


class ChainTest(NfcTest):
    """Two stages: NF 1 serves stage 0, NF 2 stage 1; forward 0 -> 1, reverse 1 -> 0."""

    REHASH = False

    def setUp(self) -> None:
        super().setUp()
        self.add_nf_stage_entry(NF2_PORT, 1)
        self.add_edge_chain_entry(EDGE_SERVER_PORT, 1, reverse=True)
        self.add_stage_next_entry(0, False, 1, rehash=self.REHASH)
        self.add_stage_next_entry(1, True, 0)

    def output(self, port: int, pkt: Packet, stage: int, slot: int, epoch: int, seq: int,
               flags: int = 0) -> Packet:
        """Send `pkt` as NF output of (stage, slot) from `port`; returns what was sent."""
        nf_id = NF1_ID if port == NF1_PORT else NF2_ID
        out = push_shim(pkt, int(Kind.OUTPUT), slot=index(stage, slot), epoch=epoch, nf_id=nf_id,
                        seq=seq, flags=flags, stage=stage)
        testutils.send_packet(self, port, out)
        return out

    def receive_copies(self, pkt: Packet, stage: int, slot: int, epoch: int,
                       primary: int, flags: int | None = None) -> tuple[bytes, bytes]:
        """The (primary, backup) copies of `pkt` entering (stage, slot), any seq and flags."""
        expected = self.expected_copies(pkt, index(stage, slot), epoch, primary, flags)
        first = self.receive(NF2_PORT if primary == NF2_ID else NF1_PORT,
                             expected[NF2_PORT if primary == NF2_ID else NF1_PORT])
        second = self.receive(NF1_PORT if primary == NF2_ID else NF2_PORT,
                              expected[NF1_PORT if primary == NF2_ID else NF2_PORT])
        return first, second


@group("chain")
class StageOutputRestampedForTheNextStage(ChainTest):
    """Output of stage 0 enters stage 1: its slot carried, stage 1's group, epoch and sequence
    (one per packet, independent of stage 0's), never reported as a new flow again."""

    def runTest(self) -> None:
        pkt = udp_packet("10.0.1.31", "10.0.2.31", 3131, 53, eth_src=NF1_MAC)
        slot = packet_slot(pkt)
        e0, e1 = fresh_epoch(), fresh_epoch()
        self.add_slot_owner_entry(slot, group=NF1_ID, epoch=e0, primary=NF1_ID, stage=0)
        self.add_slot_owner_entry(slot, group=NF2_ID, epoch=e1, primary=NF2_ID, stage=1)
        stage0_stamped = self.read_counter("slot_traffic", index(0, slot))
        seqs = []
        for seq in (7, 8, 9):
            self.output(NF1_PORT, pkt, 0, slot, e0, seq)
            primary, backup = self.receive_copies(pkt, 1, slot, e1, NF2_ID)
            self.assertEqual(shim_of(primary).seq, shim_of(backup).seq)
            seqs.append(shim_of(primary).seq)
        testutils.verify_no_other_packets(self)
        self.assertEqual(seqs, [seqs[0], seqs[0] + 1, seqs[0] + 2])
        # a packet's number is the slot's base (0 here) + the packets stamped in its slot index
        self.assertEqual(self.read_counter("slot_traffic", index(1, slot))[0], seqs[-1])
        self.assertEqual(self.read_counter("slot_traffic", index(0, slot)), stage0_stamped)

@group("chain")
class LastStageOutputGoesToTheEdge(ChainTest):
    """Output of the last stage loses its shim and leaves on the edge port of its destination."""

    def runTest(self) -> None:
        pkt = udp_packet("10.0.1.32", "10.0.2.32", 3232, 53, eth_src=NF2_MAC)
        out = self.output(NF2_PORT, pkt, 1, packet_slot(pkt), fresh_epoch(), 1)
        testutils.verify_packet(self, set_field(strip_shim(out), Ether, "dst", SERVER_MAC),
                                EDGE_SERVER_PORT)
        testutils.verify_no_other_packets(self)


@group("chain")
class ReversePathWalksTheChainBack(ChainTest):
    """From the outside edge a packet enters the last stage flagged reverse; stage 1's reverse
    output enters stage 0 (still reverse), whose output goes to the inside edge."""

    def runTest(self) -> None:
        pkt = udp_packet("10.0.2.33", "10.0.1.33", 53, 3333, eth_src=SERVER_MAC)
        slot = packet_slot(pkt)
        e0, e1 = fresh_epoch(), fresh_epoch()
        self.add_slot_owner_entry(slot, group=NF1_ID, epoch=e0, primary=NF1_ID, stage=0)
        self.add_slot_owner_entry(slot, group=NF2_ID, epoch=e1, primary=NF2_ID, stage=1)
        testutils.send_packet(self, EDGE_SERVER_PORT, pkt)
        primary, _ = self.receive_copies(pkt, 1, slot, e1, NF2_ID)
        self.assertEqual(shim_of(primary).flags & FLAG_REVERSE, FLAG_REVERSE)
        self.assertEqual(shim_of(primary).stage, 1)
        answer = set_field(pkt, Ether, "src", NF2_MAC)
        self.output(NF2_PORT, answer, 1, slot, e1, shim_of(primary).seq, flags=FLAG_REVERSE)
        primary, _ = self.receive_copies(answer, 0, slot, e0, NF1_ID)
        self.assertEqual(shim_of(primary).flags & FLAG_REVERSE, FLAG_REVERSE)
        self.assertEqual(shim_of(primary).stage, 0)
        last = self.output(NF1_PORT, answer, 0, slot, e0, shim_of(primary).seq, flags=FLAG_REVERSE)
        testutils.verify_packet(self, set_field(strip_shim(last), Ether, "dst", CLIENT_MAC),
                                EDGE_CLIENT_PORT)
        testutils.verify_no_other_packets(self)


@group("chain")
class OutputOfAnotherStageDropped(ChainTest):
    """Output claiming stage 1 from NF 1's port (stage 0) is dropped and counted; the same
    output from NF 2's port goes on."""

    def runTest(self) -> None:
        pkt = udp_packet("10.0.1.34", "10.0.2.34", 3434, 53)
        slot, epoch = packet_slot(pkt), fresh_epoch()
        before = self.read_counter("nf_output_drops", WRONG_STAGE)[0]
        self.output(NF1_PORT, pkt, 1, slot, epoch, 1)
        marker = self.output(NF2_PORT, pkt, 1, slot, epoch, 2)  # the last stage: to the edge
        testutils.verify_packet(self, set_field(strip_shim(marker), Ether, "dst", SERVER_MAC),
                                EDGE_SERVER_PORT)
        testutils.verify_no_other_packets(self)
        self.assertEqual(self.read_counter("nf_output_drops", WRONG_STAGE)[0], before + 1)


@group("chain")
class RewritingStageOutputIsSlottedAgain(ChainTest):
    """Leaving a stage that rewrites addresses (stage_next's rehash), output gets the slot of its
    rewritten headers in the next stage, so both directions of a connection meet there."""

    REHASH = True

    def runTest(self) -> None:
        inside = udp_packet("10.0.1.35", "10.0.2.35", 3535, 53)
        rewritten = set_field(inside, IP, "src", "10.0.1.200")
        rewritten = set_field(rewritten, UDP, "sport", 20000)
        old, new = packet_slot(inside), packet_slot(rewritten)
        self.assertNotEqual(old, new)
        reply = udp_packet("10.0.2.35", "10.0.1.200", 53, 20000)  # the answer the server sends
        self.assertEqual(packet_slot(reply), new)
        e1 = fresh_epoch()
        self.add_slot_owner_entry(new, group=NF2_ID, epoch=e1, primary=NF2_ID, stage=1)
        self.output(NF1_PORT, rewritten, 0, old, fresh_epoch(), 1)
        primary, _ = self.receive_copies(rewritten, 1, new, e1, NF2_ID)
        self.assertEqual(shim_of(primary).slot, index(1, new))
        testutils.verify_no_other_packets(self)
