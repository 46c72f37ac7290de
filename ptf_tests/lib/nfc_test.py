"""nfcluster table helpers and the standard test topology, on top of the generic base test.

Ports of the topology (the runner wires one veth pair per port, ptf port N = switch port N):

    1  edge, client side (10.0.1.0/24)     3  NF 1 (MAC NF1_MAC)
    2  edge, server side (10.0.2.0/24)     4  NF 2 (MAC NF2_MAC)

Multicast groups: group 1 (primary NF 1) = {(3, rid 1), (4, rid 2)}; group 2 (primary NF 2)
= {(4, rid 1), (3, rid 2)}. `NfcTest.setUp` writes all of that; tests add `slot_owner` entries
for the slots they use. Every write is undone in tearDown.
"""

from __future__ import annotations

import itertools
import time

import ptf.testutils as testutils
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet

from contract.shim import Kind
from contract.slot_hash import slot_of
from ptf_tests.lib.base_test import P4RuntimeTest
from ptf_tests.lib.packets import NfcShim, masked, push_shim, set_field

ROLE_EDGE = 1
ROLE_NF = 2
ROLE_CPU = 3

EDGE_CLIENT_PORT = 1
EDGE_SERVER_PORT = 2
NF1_PORT = 3
NF2_PORT = 4
NF1_ID = 1
NF2_ID = 2
NF1_MAC = "02:00:00:00:01:01"
NF2_MAC = "02:00:00:00:01:02"
CLIENT_MAC = "00:00:00:00:00:01"
SERVER_MAC = "00:00:00:00:00:02"
SLOT_BITS = 12  # the program's SLOT_BITS: a slot index is stage << SLOT_BITS | slot
CLIENT_NET = ("10.0.1.0", 24)
SERVER_NET = ("10.0.2.0", 24)

RID_PRIMARY = 1
RID_BACKUP = 2

NF_PORTS = {NF1_ID: (NF1_PORT, NF1_MAC), NF2_ID: (NF2_PORT, NF2_MAC)}
# group id = primary's nf_id; the backup is the other NF
GROUP_BACKUP = {NF1_ID: NF2_ID, NF2_ID: NF1_ID}

_EPOCHS = itertools.count(int(time.time() * 10) % 50000 + 1)


def fresh_epoch() -> int:
    """An epoch value no earlier test of this run used (epochs are 16 bits, never 0)."""
    return next(_EPOCHS) % 0xFFFF + 1


def mac_to_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


def ip_to_int(addr: str) -> int:
    parts = [int(p) for p in addr.split(".")]
    return (parts[0] << 24) | (parts[1] << 16) | (parts[2] << 8) | parts[3]


def packet_slot(pkt: Packet) -> int:
    """The slot the switch gives `pkt` (model in slot_hash.py).

    A later fragment (offset > 0) takes its first fragment's slot, which this function cannot
    know: pass the first fragment (or the unfragmented packet) instead.
    """
    ip = pkt[IP]
    sport = dport = 0
    if ip.frag > 0:
        raise ValueError("a later fragment's slot is its first fragment's: pass that one")
    if TCP in pkt:
        sport, dport = pkt[TCP].sport, pkt[TCP].dport
    elif UDP in pkt:
        sport, dport = pkt[UDP].sport, pkt[UDP].dport
    return slot_of(ip.src, ip.dst, sport, dport, ip.proto)


class NfcTest(P4RuntimeTest):
    """Base of the nfcluster cases: per-table helpers and the standard topology."""

    # the edge ports setUp classifies (a case may leave one unclassified)
    edge_ports: tuple[int, ...] = (EDGE_CLIENT_PORT, EDGE_SERVER_PORT)

    def setUp(self) -> None:
        super().setUp()
        for port in self.edge_ports:
            self.add_port_role_entry(port, ROLE_EDGE)
        for port in (NF1_PORT, NF2_PORT):
            self.add_port_role_entry(port, ROLE_NF)
        self.add_port_role_entry(self.cpu_port, ROLE_CPU)
        for nf_id, (port, mac) in NF_PORTS.items():
            self.add_nf_port_entry(port, nf_id, mac)
            backup_port = NF_PORTS[GROUP_BACKUP[nf_id]][0]
            self.add_replica_group(nf_id, [(port, RID_PRIMARY), (backup_port, RID_BACKUP)])
        self.add_edge_forward_entry(CLIENT_NET, EDGE_CLIENT_PORT, CLIENT_MAC)
        self.add_edge_forward_entry(SERVER_NET, EDGE_SERVER_PORT, SERVER_MAC)

    # -- one helper per table --------------------------------------------------------------

    def add_port_role_entry(self, port: int, role: int) -> None:
        self.insert_table_entry("port_role", {"port": port}, "set_port_role", {"role": role})

    def add_slot_owner_entry(self, slot: int, group: int, epoch: int, primary: int,
                             stage: int = 0, seq_base: int = 0) -> None:
        self.insert_table_entry(
            "slot_owner",
            {"stage": stage, "slot": slot},
            "set_replica_group",
            {"group": group, "epoch": epoch, "primary": primary, "seq_base": seq_base},
        )

    def modify_slot_owner_entry(self, slot: int, group: int, epoch: int, primary: int,
                                stage: int = 0, seq_base: int = 0) -> None:
        self.modify_table_entry(
            "slot_owner",
            {"stage": stage, "slot": slot},
            "set_replica_group",
            {"group": group, "epoch": epoch, "primary": primary, "seq_base": seq_base},
        )

    # service chains (tables nf_stage, edge_chain, stage_next)
    def add_nf_stage_entry(self, port: int, stage: int) -> None:
        self.insert_table_entry("nf_stage", {"port": port}, "set_nf_stage", {"stage": stage})

    def add_edge_chain_entry(self, port: int, stage: int, reverse: bool) -> None:
        self.insert_table_entry("edge_chain", {"port": port}, "enter_chain",
                                {"stage": stage, "reverse": int(reverse)})

    def add_stage_next_entry(self, stage: int, reverse: bool, to: int, rehash: bool = False) -> None:
        self.insert_table_entry("stage_next", {"stage": stage, "reverse": int(reverse)}, "to_stage",
                                {"stage": to, "rehash": int(rehash)})

    def add_nf_port_entry(self, port: int, nf_id: int, nf_mac: str) -> None:
        self.insert_table_entry(
            "nf_port", {"port": port}, "set_nf_target", {"nf_id": nf_id, "nf_mac": mac_to_int(nf_mac)}
        )

    def add_edge_forward_entry(self, prefix: tuple[str, int], port: int, dst_mac: str) -> None:
        self.insert_table_entry(
            "edge_forward",
            {"dst_addr": (ip_to_int(prefix[0]), prefix[1])},
            "forward_to_edge",
            {"port": port, "dst_mac": mac_to_int(dst_mac)},
        )

    def add_replica_group(self, group: int, replicas: list[tuple[int, int]]) -> None:
        self.insert_mc_group(group, replicas)

    def own_slot(self, pkt: Packet, primary: int = NF1_ID, epoch: int | None = None) -> tuple[int, int]:
        """Give the slot of `pkt` to `primary` (its group); returns (slot, epoch)."""
        slot = packet_slot(pkt)
        epoch = fresh_epoch() if epoch is None else epoch
        self.add_slot_owner_entry(slot, group=primary, epoch=epoch, primary=primary)
        return slot, epoch

    # -- expectations ----------------------------------------------------------------------

    def expected_copies(
        self, pkt: Packet, slot: int, epoch: int, primary: int, flags: int | None = 0
    ) -> dict[int, object]:
        """Masks of the primary and backup copies of `pkt` by port (seq masked, flags if None)."""
        out: dict[int, object] = {}
        for kind, nf_id in ((Kind.PRIMARY, primary), (Kind.BACKUP, GROUP_BACKUP[primary])):
            port, mac = NF_PORTS[nf_id]
            exp = push_shim(pkt, int(kind), slot=slot, epoch=epoch, nf_id=nf_id, flags=flags or 0,
                            stage=slot >> SLOT_BITS)
            exp = set_field(exp, Ether, "dst", mac)
            dont_care: list[tuple[type[Packet], str]] = [(NfcShim, "seq")]
            if flags is None:
                dont_care.append((NfcShim, "flags"))
            out[port] = masked(exp, dont_care)
        return out

    def send_and_receive_copies(
        self, port: int, pkt: Packet, slot: int, epoch: int, primary: int = NF1_ID,
        flags: int | None = 0,
    ) -> tuple[bytes, bytes]:
        """Send `pkt` on `port`; return the (primary, backup) copies received on the NF ports."""
        expected = self.expected_copies(pkt, slot, epoch, primary, flags)
        testutils.send_packet(self, port, pkt)
        primary_port = NF_PORTS[primary][0]
        backup_port = NF_PORTS[GROUP_BACKUP[primary]][0]
        first = self.receive(primary_port, expected[primary_port])
        second = self.receive(backup_port, expected[backup_port])
        return first, second

    def nothing_else_after_marker(self, marker: Packet, slot: int, epoch: int,
                                  primary: int = NF1_ID) -> None:
        """Prove that what was sent before produced nothing more, without waiting a fixed time:
        `marker` (a packet of an owned slot, sent from the client edge port after the packets
        that must be dropped) must come out on both NF ports; once it has, anything the earlier
        packets produced would have come out before it, so nothing else may be waiting."""
        self.send_and_receive_copies(EDGE_CLIENT_PORT, marker, slot, epoch, primary, flags=None)
        testutils.verify_no_other_packets(self, timeout=0)
