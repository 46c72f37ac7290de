"""PTF cases: symmetric slots and the drop of packets whose slot has no owner.

Run one case:  make ptf TARGET=p4sim PTF_TESTS=test_slots.SymmetricSlot
Run the group: make ptf TARGET=p4sim PTF_TESTS=slot
"""

from __future__ import annotations

import ptf.testutils as testutils
from ptf.testutils import group
from scapy.layers.inet import IP, IPOption_NOP, fragment
from scapy.layers.l2 import Ether
from scapy.packet import Packet

from ptf_tests.lib.nfc_test import (
    EDGE_CLIENT_PORT,
    EDGE_SERVER_PORT,
    NfcTest,
    packet_slot,
)
from ptf_tests.lib.packets import shim_of, tcp_packet, udp_packet


@group("slot")
class SymmetricSlot(NfcTest):
    """A packet and its reply land in one slot and share that slot's sequence space."""

    def runTest(self) -> None:
        for make in (udp_packet, tcp_packet):
            request = make("10.0.1.10", "10.0.2.20", 40001, 8080)
            reply = make("10.0.2.20", "10.0.1.10", 8080, 40001)
            slot, epoch = self.own_slot(request)
            self.assertEqual(packet_slot(reply), slot, "the slot model is not symmetric")

            first, _ = self.send_and_receive_copies(EDGE_CLIENT_PORT, request, slot, epoch, flags=None)
            second, _ = self.send_and_receive_copies(EDGE_SERVER_PORT, reply, slot, epoch, flags=None)
            self.assertEqual(shim_of(first).slot, slot)
            self.assertEqual(shim_of(second).slot, slot)
            self.assertEqual(shim_of(second).seq, shim_of(first).seq + 1)
            testutils.verify_no_other_packets(self)


@group("slot")
class SlotModelMatchesSwitch(NfcTest):
    """The Python slot model (contract/slot_hash.py) agrees with the switch on many flows.

    Both address orders, TCP, UDP, ICMP (no ports), IPv4 with options (one word and the
    maximum of ten: the ports behind them still count), a first fragment (it has the ports)
    and DF set (ports still used).
    """

    def runTest(self) -> None:
        packets = []
        for i in range(4):
            packets.append(udp_packet(f"10.0.1.{i + 1}", f"10.0.2.{200 - i}", 1000 + 97 * i, 53))
            packets.append(tcp_packet(f"10.0.2.{i + 7}", f"10.0.1.{i + 3}", 443, 50000 + i))
        packets.append(_with_ip(udp_packet("10.0.2.1", "10.0.1.1", 7, 7), proto=1))  # "ICMP"
        packets.append(_with_ip(tcp_packet("10.0.2.2", "10.0.1.2", 80, 8080), options=1))
        packets.append(_with_ip(udp_packet("10.0.2.5", "10.0.1.5", 80, 8080), options=10))
        packets.append(_with_ip(udp_packet("10.0.2.3", "10.0.1.3", 53, 5353), ip_flags="MF"))
        packets.append(_with_ip(tcp_packet("10.0.2.4", "10.0.1.4", 22, 6000), ip_flags="DF"))
        owned: set[int] = set()
        for pkt in packets:
            slot = packet_slot(pkt)
            if slot in owned:
                continue
            owned.add(slot)
            slot, epoch = self.own_slot(pkt)
            primary, _ = self.send_and_receive_copies(
                EDGE_SERVER_PORT, pkt, slot, epoch, flags=None
            )
            self.assertEqual(shim_of(primary).slot, slot)
        testutils.verify_no_other_packets(self)


def _with_ip(pkt: Packet, proto: int | None = None, options: int = 0,
             ip_flags: str | None = None) -> Packet:
    """`pkt` with its IPv4 header changed (protocol, `options` words of NOPs, flags: MF, DF)."""
    out = pkt.copy()
    ip = out[IP]
    if proto is not None:
        ip.proto = proto
    if options:
        ip.options = [IPOption_NOP() for _ in range(4 * options)]
    if ip_flags is not None:
        ip.flags = ip_flags
    ip.len = None
    ip.ihl = None
    ip.chksum = None
    return Ether(bytes(out))


@group("slot")
class UnownedSlotDropped(NfcTest):
    """A packet whose slot has no slot_owner entry goes nowhere and is counted per slot."""

    def runTest(self) -> None:
        pkt = udp_packet("10.0.1.77", "10.0.2.77", 5555, 6666, length=120)
        slot = packet_slot(pkt)
        before = self.read_counter("unowned_drops", slot)
        traffic_before = self.read_counter("slot_traffic", slot)
        testutils.send_packet(self, EDGE_CLIENT_PORT, pkt)
        testutils.verify_no_other_packets(self)
        after = self.wait_counter("unowned_drops", slot, before[0] + 1)
        self.assertEqual(after[0] - before[0], 1)
        self.assertEqual(after[1] - before[1], len(pkt))
        self.assertEqual(self.read_counter("slot_traffic", slot), traffic_before)


@group("slot")
class OptionsKeepTheFlowsSlot(NfcTest):
    """A TCP packet with IPv4 options and the same flow's packet without share slot and sequence."""

    def runTest(self) -> None:
        plain = tcp_packet("10.0.1.31", "10.0.2.31", 41000, 443)
        slot, epoch = self.own_slot(plain)
        first, _ = self.send_and_receive_copies(EDGE_CLIENT_PORT, plain, slot, epoch, flags=None)
        with_options = _with_ip(plain, options=3)
        second, _ = self.send_and_receive_copies(EDGE_CLIENT_PORT, with_options, slot, epoch, flags=None)
        self.assertEqual(shim_of(second).seq, shim_of(first).seq + 1)
        testutils.verify_no_other_packets(self)


@group("slot")
class FragmentsFollowTheirFirstFragment(NfcTest):
    """The later fragments of a datagram (no ports) land in the slot of its first fragment,
    which is the flow's slot; a later fragment whose first was never seen is dropped and
    counted in slot_map_drops[orphan fragment]."""

    def runTest(self) -> None:
        datagram = _with_ip(udp_packet("10.0.1.41", "10.0.2.41", 42000, 5353, length=400))
        datagram[IP].id = 0x4242
        pieces = [Ether(bytes(Ether(src=datagram.src, dst=datagram.dst) / f))
                  for f in fragment(datagram[IP], fragsize=128)]  # type: ignore[no-untyped-call]
        self.assertGreaterEqual(len(pieces), 3)
        slot, epoch = self.own_slot(datagram)
        self.assertEqual(packet_slot(pieces[0]), slot, "the first fragment has the flow's ports")
        seqs = []
        for piece in pieces:
            primary, _ = self.send_and_receive_copies(EDGE_CLIENT_PORT, piece, slot, epoch, flags=None)
            seqs.append(shim_of(primary).seq)
        self.assertEqual(seqs, list(range(seqs[0], seqs[0] + len(pieces))))

        orphan = pieces[1].copy()
        orphan[IP].id = 0x4343
        orphan[IP].chksum = None
        orphan = Ether(bytes(orphan))
        before = self.read_counter("slot_map_drops", SLOT_MAP_DROP_ORPHAN_FRAGMENT)
        testutils.send_packet(self, EDGE_CLIENT_PORT, orphan)
        after = self.wait_counter("slot_map_drops", SLOT_MAP_DROP_ORPHAN_FRAGMENT, before[0] + 1)
        self.assertEqual(after[0] - before[0], 1)
        testutils.verify_no_other_packets(self)


# index of counter slot_map_drops (p4src/shared/define.p4)
SLOT_MAP_DROP_ORPHAN_FRAGMENT = 0
