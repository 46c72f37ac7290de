"""The firewall tracks TCP connections: inside may open, outside may not; RST/FIN close."""

from __future__ import annotations

import pytest
from scapy.layers.inet import ICMP, IP
from scapy.layers.l2 import ARP
from scapy.packet import Packet as ScapyPacket

from nf_host.nf_api import Verdict
from nf_host.nfs import make_nf
from tests.nf_host.nfs.packets import FlowTable, eth, packet_of, tcp, udp

pytestmark = pytest.mark.unit

IN, OUT = "10.0.0.5", "198.51.100.9"
F, D, X = Verdict.FORWARD, Verdict.DROP, Verdict.DROP_FORGET  # X: dropped, no state kept


def out_(flags: str, payload: bytes = b"") -> ScapyPacket:
    return tcp(IN, OUT, 40000, 443, flags, payload)


def in_(flags: str, payload: bytes = b"") -> ScapyPacket:
    return tcp(OUT, IN, 443, 40000, flags, payload)


def run(table: FlowTable, steps: list[tuple[ScapyPacket | bytes, Verdict]]) -> None:
    for i, (pkt, expected) in enumerate(steps):
        verdict, _, _ = table.send(pkt)
        assert verdict == expected, f"step {i}: {pkt!r}"


def test_handshake_data_and_fin_from_inside() -> None:
    table = FlowTable(make_nf("firewall", {"inside": "10.0.0.0/8"}))
    run(table, [(out_("S"), F), (in_("SA"), F), (out_("A"), F)])
    assert table.state_of(out_("A"))["state"] == "ESTABLISHED"
    run(table, [(in_("PA", b"data"), F), (out_("PA", b"more"), F)])
    run(table, [(out_("FA"), F), (in_("FA"), F), (out_("A"), F)])
    state = table.state_of(out_("A"))
    assert state["state"] == "CLOSING"
    assert (state["allowed"], state["dropped"]) == (8, 0)


def test_unsolicited_from_outside_is_dropped_and_keeps_no_state() -> None:
    table = FlowTable(make_nf("firewall", {"inside": ["10.0.0.0/8"]}))
    run(table, [(in_("S"), X), (in_("A", b"x"), X), (in_("SA"), X)])
    assert table.states == {}
    keeping = FlowTable(make_nf("firewall", {"inside": ["10.0.0.0/8"], "keep_refused": True}))
    run(keeping, [(in_("S"), D), (in_("A", b"x"), D), (in_("SA"), D)])
    state = keeping.state_of(in_("S"))
    assert state["state"] == "NONE" and state["dropped"] == 3


def test_idle_classes_tcp_open_closed_and_udp() -> None:
    nf = make_nf("firewall", {"closed_timeout": 5, "udp_timeout": 30})
    table = FlowTable(nf)
    run(table, [(out_("S"), F), (in_("SA"), F), (out_("A"), F)])
    flow = packet_of(out_("A")).flow
    assert nf.flow_timeout(table.state_of(out_("A")), flow) == ("idle", 3600.0)
    run(table, [(in_("R"), F)])
    assert nf.flow_timeout(table.state_of(out_("A")), flow) == ("closed", 5.0)
    run(table, [(udp(IN, OUT, 5000, 53), F)])
    assert nf.flow_timeout(table.state_of(udp(IN, OUT, 5000, 53)),
                           packet_of(udp(IN, OUT, 5000, 53)).flow) == ("udp", 30.0)


def test_inbound_to_allowed_port() -> None:
    table = FlowTable(make_nf("firewall", {"allow_inbound_ports": [443]}))
    srv = [
        tcp(OUT, IN, 5555, 443, "S"),
        tcp(IN, OUT, 443, 5555, "SA"),
        tcp(OUT, IN, 5555, 443, "A"),
    ]
    run(table, [(srv[0], F), (srv[1], F), (srv[2], F)])
    assert table.state_of(srv[0])["state"] == "ESTABLISHED"
    run(table, [(tcp(OUT, IN, 5556, 22, "S"), X)])


def test_out_of_order_handshake_is_dropped() -> None:
    table = FlowTable(make_nf("firewall"))
    run(table, [(out_("S"), F), (out_("A"), D), (in_("PA", b"early"), D), (in_("SA"), F)])
    run(table, [(in_("PA", b"still early"), D), (out_("A"), F), (in_("PA", b"ok"), F)])


def test_rst_closes_and_later_packets_drop() -> None:
    table = FlowTable(make_nf("firewall"))
    run(table, [(out_("S"), F), (in_("SA"), F), (out_("A"), F), (in_("R"), F)])
    assert table.state_of(out_("A"))["state"] == "CLOSED"
    run(table, [(in_("PA", b"after rst"), D), (out_("PA", b"x"), D), (out_("S"), F)])
    assert table.state_of(out_("S"))["state"] == "SYN_SENT"


def test_state_survives_a_move() -> None:
    table = FlowTable(make_nf("firewall"))
    run(table, [(out_("S"), F), (in_("SA"), F)])
    table.move_states()
    run(table, [(out_("A"), F), (in_("PA", b"x"), F)])


def test_udp_icmp_and_non_ip() -> None:
    table = FlowTable(make_nf("firewall"))
    run(
        table,
        [(udp(OUT, IN, 53, 5000), X), (udp(IN, OUT, 5000, 53), F), (udp(OUT, IN, 53, 5000), F)],
    )
    run(
        table,
        [(eth() / IP(src=OUT, dst=IN) / ICMP(), X), (eth() / IP(src=IN, dst=OUT) / ICMP(), F)],
    )
    verdict, _, _ = table.send(eth() / ARP())
    assert verdict == F
    strict = FlowTable(make_nf("firewall", {"allow_non_ip": False}))
    assert strict.send(eth() / ARP())[0] == X


def test_truncated_tcp_is_dropped() -> None:
    table = FlowTable(make_nf("firewall"))
    verdict, _, _ = table.send(bytes(out_("S"))[:40])
    assert verdict == X


def test_bad_parameters_are_reported() -> None:
    with pytest.raises(ValueError, match="inside"):
        make_nf("firewall", {"inside": "not-a-prefix"})
