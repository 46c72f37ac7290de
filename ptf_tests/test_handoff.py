"""PTF cases: the Prism hand-off control (handoff_conn, handoff_route; docs/prism.md).

Run the group: make ptf TARGET=p4sim PTF_TESTS=handoff

Topology of these cases (every port an edge port):
    1  client   10.0.1.1   CLIENT_MAC        3  backend 1  10.0.3.1  BACKEND1_MAC
    2  frontend 10.0.2.1   FRONTEND_MAC      4  backend 2  10.0.3.2  BACKEND2_MAC
Each rewritten packet is compared byte for byte with the packet scapy builds with the new
addresses and freshly computed checksums, so the switch's incremental checksum updates are
checked along with the rewrite.
"""

from __future__ import annotations

import ptf.testutils as testutils
from finsy.proto import p4r
from ptf.testutils import group
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.packet import Packet

from ptf_tests.lib.base_test import MatchValue, P4RuntimeTest
from ptf_tests.lib.nfc_test import ROLE_CPU, ROLE_EDGE, ip_to_int, mac_to_int

CLIENT = ("10.0.1.1", 1, "00:00:00:00:00:01")
FRONTEND = ("10.0.2.1", 2, "00:00:00:00:00:02")
BACKEND1 = ("10.0.3.1", 3, "00:00:00:00:00:03")
BACKEND2 = ("10.0.3.2", 4, "00:00:00:00:00:04")
CLIENT_PORT_NO = 40000
FRONTEND_PORT_NO = 8080
BACKEND_PORT_NO = 9090
HANDOFF_DROP_LOCKED = 0


def segment(src: str, dst: str, sport: int, dport: int, seq: int, payload: bytes = b"x" * 64,
            eth_dst: str = FRONTEND[2]) -> Packet:
    """A TCP data segment with correct checksums (scapy computes them on build)."""
    pkt = (Ether(src="00:00:00:00:00:99", dst=eth_dst) / IP(src=src, dst=dst, ttl=64)
           / TCP(sport=sport, dport=dport, flags="PA", seq=seq, ack=1) / payload)
    return Ether(bytes(pkt))


def rewritten(pkt: Packet, **fields: object) -> Packet:
    """`pkt` with Ether/IP/TCP fields replaced and both checksums recomputed from scratch."""
    out = pkt.copy()
    for name, value in fields.items():
        layer, field = name.split("_", 1)
        setattr(out[{"eth": Ether, "ip": IP, "tcp": TCP}[layer]], field, value)
    del out[IP].chksum
    del out[TCP].chksum
    return Ether(bytes(out))


class HandOffTest(P4RuntimeTest):
    """Four edge ports and a route to each Prism host; helpers per hand-off action."""

    def setUp(self) -> None:
        super().setUp()
        for _, port, _ in (CLIENT, FRONTEND, BACKEND1, BACKEND2):
            self.insert_table_entry("port_role", {"port": port}, "set_port_role", {"role": ROLE_EDGE})
        self.insert_table_entry("port_role", {"port": self.cpu_port}, "set_port_role",
                                {"role": ROLE_CPU})
        for addr, port, mac in (CLIENT, FRONTEND, BACKEND1, BACKEND2):
            self.insert_table_entry("handoff_route", {"dst_addr": (ip_to_int(addr), 32)},
                                    "handoff_forward", {"port": port, "dst_mac": mac_to_int(mac)})

    # -- one helper per hand-off action ---------------------------------------------------

    @staticmethod
    def forward_key(client_port: int = CLIENT_PORT_NO) -> dict[str, MatchValue]:
        return {"src_addr": ip_to_int(CLIENT[0]), "dst_addr": ip_to_int(FRONTEND[0]),
                "src_port": client_port, "dst_port": FRONTEND_PORT_NO}

    @staticmethod
    def return_key(backend: tuple[str, int, str]) -> dict[str, MatchValue]:
        return {"src_addr": ip_to_int(backend[0]), "dst_addr": ip_to_int(CLIENT[0]),
                "src_port": BACKEND_PORT_NO, "dst_port": CLIENT_PORT_NO}

    @staticmethod
    def to_backend(backend: tuple[str, int, str]) -> tuple[str, dict[str, int]]:
        return "handoff_to_backend", {"port": backend[1], "dst_mac": mac_to_int(backend[2]),
                                      "dst_addr": ip_to_int(backend[0]), "dst_port": BACKEND_PORT_NO}

    @staticmethod
    def to_client() -> tuple[str, dict[str, int]]:
        return "handoff_to_client", {"port": CLIENT[1], "dst_mac": mac_to_int(CLIENT[2]),
                                     "src_addr": ip_to_int(FRONTEND[0]), "src_port": FRONTEND_PORT_NO}

    def conn_counter(self, key: dict[str, MatchValue]) -> tuple[int, int]:
        """(packets, bytes) of one handoff_conn entry's direct counter."""
        entry = self.table_entry("handoff_conn", key)
        read = p4r.Entity(direct_counter_entry=p4r.DirectCounterEntry(table_entry=entry))
        for e in self.client.read(read):
            data = e.direct_counter_entry.data
            return int(data.packet_count), int(data.byte_count)
        raise AssertionError("handoff_conn entry's counter not returned")

    def client_segment(self, seq: int) -> Packet:
        return segment(CLIENT[0], FRONTEND[0], CLIENT_PORT_NO, FRONTEND_PORT_NO, seq)

    def expect_at_backend(self, pkt: Packet, backend: tuple[str, int, str]) -> None:
        self.receive(backend[1], rewritten(pkt, eth_dst=backend[2], ip_dst=backend[0],
                                           tcp_dport=BACKEND_PORT_NO))


@group("handoff")
class RouteForwardsPrismHosts(HandOffTest):
    """Without a hand-off entry, a client's segment goes to the frontend by handoff_route,
    unchanged but for the destination MAC."""

    def runTest(self) -> None:
        pkt = self.client_segment(seq=1000)
        testutils.send_packet(self, CLIENT[1], pkt)
        self.receive(FRONTEND[1], rewritten(pkt, eth_dst=FRONTEND[2]))


@group("handoff")
class AddRewritesBothDirections(HandOffTest):
    """After add: the client's segments reach the backend with its address, port and MAC, the
    backend's reach the client as the frontend's; each entry counts its packets and bytes."""

    def runTest(self) -> None:
        action, params = self.to_backend(BACKEND1)
        self.insert_table_entry("handoff_conn", self.forward_key(), action, params)
        action, params = self.to_client()
        self.insert_table_entry("handoff_conn", self.return_key(BACKEND1), action, params)

        pkt = self.client_segment(seq=2000)
        testutils.send_packet(self, CLIENT[1], pkt)
        self.expect_at_backend(pkt, BACKEND1)

        reply = segment(BACKEND1[0], CLIENT[0], BACKEND_PORT_NO, CLIENT_PORT_NO, seq=7000,
                        payload=b"r" * 200, eth_dst=CLIENT[2])
        testutils.send_packet(self, BACKEND1[1], reply)
        self.receive(CLIENT[1], rewritten(reply, ip_src=FRONTEND[0], tcp_sport=FRONTEND_PORT_NO))

        self.assertEqual(self.conn_counter(self.forward_key()), (1, len(pkt)))
        self.assertEqual(self.conn_counter(self.return_key(BACKEND1)), (1, len(reply)))


@group("handoff")
class LockDropsUntilUnlock(HandOffTest):
    """A locked connection's segments are dropped and counted (handoff_drops[LOCKED]); after
    unlock the next segment reaches the new owner, and nothing else left for it."""

    def runTest(self) -> None:
        self.insert_table_entry("handoff_conn", self.forward_key(), "handoff_lock", {})
        drops_before = self.read_counter("handoff_drops", HANDOFF_DROP_LOCKED)[0]
        tx_before = self.read_counter("port_tx", BACKEND1[1])[0]
        held = self.client_segment(seq=3000)
        testutils.send_packet(self, CLIENT[1], held)
        # the switch takes the packet from its port asynchronously: unlock only once it has
        # been dropped (else the unlock could overtake it)
        self.wait_counter("handoff_drops", HANDOFF_DROP_LOCKED, drops_before + 1)

        action, params = self.to_backend(BACKEND1)
        self.modify_table_entry("handoff_conn", self.forward_key(), action, params)
        after = self.client_segment(seq=3064)
        testutils.send_packet(self, CLIENT[1], after)
        self.expect_at_backend(after, BACKEND1)

        self.assertEqual(self.read_counter("handoff_drops", HANDOFF_DROP_LOCKED)[0], drops_before + 1)
        self.assertEqual(self.read_counter("port_tx", BACKEND1[1])[0], tx_before + 1)
        self.assertEqual(self.conn_counter(self.forward_key())[0], 2)  # the lock's hit counts too


@group("handoff")
class ChangeOwnerMovesToOtherBackend(HandOffTest):
    """A MODIFY of the client's entry to another backend (change owner) sends the next
    segment there, rewritten to that backend's address and MAC."""

    def runTest(self) -> None:
        action, params = self.to_backend(BACKEND1)
        self.insert_table_entry("handoff_conn", self.forward_key(), action, params)
        first = self.client_segment(seq=4000)
        testutils.send_packet(self, CLIENT[1], first)
        self.expect_at_backend(first, BACKEND1)

        action, params = self.to_backend(BACKEND2)
        self.modify_table_entry("handoff_conn", self.forward_key(), action, params)
        second = self.client_segment(seq=4064)
        testutils.send_packet(self, CLIENT[1], second)
        self.expect_at_backend(second, BACKEND2)
        self.assertEqual(self.conn_counter(self.forward_key())[0], 2)


@group("handoff")
class DeleteReturnsConnectionToFrontend(HandOffTest):
    """After delete (a hand-back), the client's segments reach the frontend unchanged again;
    another connection of the same client is never rewritten."""

    def runTest(self) -> None:
        action, params = self.to_backend(BACKEND1)
        self.insert_table_entry("handoff_conn", self.forward_key(), action, params)
        other = segment(CLIENT[0], FRONTEND[0], CLIENT_PORT_NO + 1, FRONTEND_PORT_NO, seq=1)
        testutils.send_packet(self, CLIENT[1], other)
        self.receive(FRONTEND[1], rewritten(other, eth_dst=FRONTEND[2]))

        entry = self.table_entry("handoff_conn", self.forward_key())
        self.client.write_entity(p4r.Update.DELETE, p4r.Entity(table_entry=entry))
        self._undo.pop()  # the insert's undo: already deleted
        pkt = self.client_segment(seq=5000)
        testutils.send_packet(self, CLIENT[1], pkt)
        self.receive(FRONTEND[1], rewritten(pkt, eth_dst=FRONTEND[2]))
