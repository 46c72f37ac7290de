"""PTF cases: the switch forwards each input's output once (output dedup), and a fail-over's
one write, the replica group rewritten in place.

Per slot the switch remembers the (epoch, seq) of the last output it forwarded, for the current
and the previous epoch (docs/dataplane.md, "Output dedup"). Each case uses a slot of its own and
fresh epochs, so the register state other cases leave does not matter.

Run one case:  make ptf TARGET=p4sim PTF_TESTS=test_output_dedup.DuplicateOutputDropped
Run the group: make ptf TARGET=p4sim PTF_TESTS=output_dedup
"""

from __future__ import annotations

import ptf.testutils as testutils
from ptf.testutils import group
from scapy.layers.l2 import Ether

from contract.shim import ETHERTYPE_NFC, FLAG_WATERMARK, Kind
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
    SERVER_MAC,
    NfcTest,
    fresh_epoch,
    packet_slot,
)
from ptf_tests.lib.packets import NfcShim, push_shim, set_field, strip_shim, udp_packet

DROP_DUPLICATE, DROP_STALE_EPOCH, DROP_BAD_SLOT, DROP_WATERMARK = 0, 1, 2, 4


class DedupTest(NfcTest):
    """Send NF output for one slot and check which copies reach the edge."""

    SLOT = 0

    def output(self, epoch: int, seq: int, slot: int | None = None, port: int = NF1_PORT) -> None:
        inner = udp_packet("10.0.1.10", "10.0.2.20", 40000, 53, eth_src=NF1_MAC)
        out = push_shim(inner, int(Kind.OUTPUT), slot=self.SLOT if slot is None else slot,
                        epoch=epoch, nf_id=NF1_ID, seq=seq)
        testutils.send_packet(self, port, out)

    def forwarded(self, epoch: int, seq: int) -> None:
        """The output (epoch, seq) leaves on the server's edge port."""
        self.output(epoch, seq)
        inner = udp_packet("10.0.1.10", "10.0.2.20", 40000, 53, eth_src=NF1_MAC)
        testutils.verify_packet(self, set_field(inner, Ether, "dst", SERVER_MAC), EDGE_SERVER_PORT)

    def dropped(self, epoch: int, seq: int, reason: int, marker: tuple[int, int]) -> None:
        """The output (epoch, seq) is dropped and counted under `reason`: a `marker` output sent
        after it must come out first thing, proving the drop without waiting a fixed time."""
        before = self.read_counter("nf_output_drops", reason)[0]
        self.output(epoch, seq)
        self.forwarded(*marker)
        self.assertEqual(self.read_counter("nf_output_drops", reason)[0], before + 1)


@group("output_dedup")
class DuplicateOutputDropped(DedupTest):
    """Output of an input already answered (same or older seq) is dropped and counted."""

    SLOT = 3001

    def runTest(self) -> None:
        e = fresh_epoch()
        self.forwarded(e, 10)
        self.dropped(e, 10, DROP_DUPLICATE, marker=(e, 11))
        self.dropped(e, 9, DROP_DUPLICATE, marker=(e, 12))
        self.forwarded(e, 14)  # a hole (13: an input whose verdict was DROP) is passed over
        testutils.verify_no_other_packets(self)


@group("output_dedup")
class OldOwnersOutputAfterTheNewOwnersIsForwardedOnce(DedupTest):
    """During a move the new owner's output (epoch e+1) can arrive first; the old owner's last
    outputs (epoch e, lower seqs) still leave, once each."""

    SLOT = 3002

    def runTest(self) -> None:
        old, new = fresh_epoch(), fresh_epoch()
        self.forwarded(new, 20)   # nothing of `old` forwarded yet: the previous epoch is empty
        self.forwarded(old, 15)
        self.dropped(old, 15, DROP_DUPLICATE, marker=(old, 16))
        self.forwarded(new, 21)
        self.forwarded(old, 17)
        testutils.verify_no_other_packets(self)


@group("output_dedup")
class StaleEpochDropped(DedupTest):
    """Output of an epoch before the previous one is dropped and counted as stale."""

    SLOT = 3003

    def runTest(self) -> None:
        e1, e2, e3 = fresh_epoch(), fresh_epoch(), fresh_epoch()
        self.forwarded(e1, 5)
        self.forwarded(e2, 6)
        self.forwarded(e3, 7)
        self.dropped(e1, 8, DROP_STALE_EPOCH, marker=(e3, 9))
        self.forwarded(e2, 10)  # the previous epoch is still served
        testutils.verify_no_other_packets(self)


@group("output_dedup")
class OutOfRangeSlotDropped(DedupTest):
    """A slot number beyond the slot count never indexes a register: dropped and counted."""

    SLOT = 3004

    def runTest(self) -> None:
        e = fresh_epoch()
        before = self.read_counter("nf_output_drops", DROP_BAD_SLOT)[0]
        self.output(e, 1, slot=0xFFFF)
        self.forwarded(e, 1)
        self.assertEqual(self.read_counter("nf_output_drops", DROP_BAD_SLOT)[0], before + 1)
        testutils.verify_no_other_packets(self)


@group("output_dedup")
class SequenceWrapForwarded(DedupTest):
    """Sequence numbers wrap at 2^32: 0 comes after 0xFFFFFFFF."""

    SLOT = 3005

    def runTest(self) -> None:
        e = fresh_epoch()
        self.forwarded(e, 0xFFFFFFFF)
        self.forwarded(e, 0)
        self.dropped(e, 0xFFFFFFFF, DROP_DUPLICATE, marker=(e, 1))
        testutils.verify_no_other_packets(self)


@group("output_dedup")
class WatermarkFrameMovesTheWatermark(DedupTest):
    """An NF that drops 2^31 inputs of a slot in a row sends watermark frames on the way (shim
    kind OUTPUT, flag WATERMARK, no packet: nf_host/watermark.py): each moves the slot's dedup
    watermark like output and is never forwarded (counted in nf_output_drops[watermark]), so the
    output after them still leaves. Without them, or with a switch that ignored them, that output
    compares as older than the watermark (2^31 + 5 behind it) and is dropped as a duplicate. A
    watermark frame sent again (a promoted backup's log) is a duplicate like output."""

    SLOT = 3006

    def watermark(self, epoch: int, seq: int) -> None:
        shim = NfcShim(kind=int(Kind.OUTPUT), flags=FLAG_WATERMARK, stage=0, slot=self.SLOT,
                       epoch=epoch, nf_id=NF1_ID, seq=seq, ether_type=0)
        frame = Ether(src=NF1_MAC, dst="ff:ff:ff:ff:ff:ff", type=ETHERTYPE_NFC) / shim
        testutils.send_packet(self, NF1_PORT, Ether(bytes(frame) + bytes(30)))

    def runTest(self) -> None:
        e = fresh_epoch()
        base = 100
        self.forwarded(e, base)
        self.watermark(e, base + (1 << 30))
        self.watermark(e, base + (1 << 31))
        last = (base + (1 << 31) + 5) & 0xFFFFFFFF
        self.forwarded(e, last)  # 2^31 + 5 after the last output: only the frames let it through
        marks = self.read_counter("nf_output_drops", DROP_WATERMARK)[0]
        self.watermark(e, (last + (1 << 30)) & 0xFFFFFFFF)
        self.forwarded(e, (last + (1 << 30) + 1) & 0xFFFFFFFF)
        self.assertEqual(self.read_counter("nf_output_drops", DROP_WATERMARK)[0], marks + 1)
        dup = self.read_counter("nf_output_drops", DROP_DUPLICATE)[0]
        self.watermark(e, (last + (1 << 30)) & 0xFFFFFFFF)  # sent again: a duplicate
        self.forwarded(e, (last + (1 << 30) + 2) & 0xFFFFFFFF)
        self.assertEqual(self.read_counter("nf_output_drops", DROP_DUPLICATE)[0], dup + 1)
        testutils.verify_no_other_packets(self)


@group("output_dedup")
class GroupRewrittenInPlaceMovesEverySlotAtOnce(NfcTest):
    """A fail-over's one write: the replica group of the dead primary is rewritten in place to
    {promoted backup (rid 1), new backup (rid 2)}. The slot entry is not touched: the next packet
    reaches the promoted NF as PRIMARY with the same epoch and the next sequence number."""

    def runTest(self) -> None:
        group_id = 77
        self.add_replica_group(group_id, [(NF1_PORT, RID_PRIMARY), (NF2_PORT, RID_BACKUP)])
        pkt = udp_packet("10.0.1.77", "10.0.2.77", 47000, 9000)
        slot, epoch = packet_slot(pkt), fresh_epoch()
        self.add_slot_owner_entry(slot, group=group_id, epoch=epoch, primary=NF1_ID)
        testutils.send_packet(self, EDGE_CLIENT_PORT, pkt)
        first = Ether(self.receive(NF1_PORT, None))
        second = Ether(self.receive(NF2_PORT, None))
        self.assertEqual((first[NfcShim].kind, second[NfcShim].kind), (int(Kind.PRIMARY), int(Kind.BACKUP)))
        seq = first[NfcShim].seq
        # NF 1 dies: NF 2 is promoted, with no new backup here (only two NF ports)
        self.modify_mc_group(group_id, [(NF2_PORT, RID_PRIMARY)])
        testutils.send_packet(self, EDGE_CLIENT_PORT, pkt)
        got = Ether(self.receive(NF2_PORT, None))
        shim = got[NfcShim]
        self.assertEqual((shim.kind, shim.nf_id, shim.epoch, shim.seq, got.dst),
                         (int(Kind.PRIMARY), NF2_ID, epoch, (seq + 1) & 0xFFFFFFFF, NF2_MAC))
        self.assertEqual(bytes(strip_shim(got)), bytes(set_field(pkt, Ether, "dst", NF2_MAC)))
        testutils.verify_no_other_packets(self)
