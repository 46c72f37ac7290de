"""The NAT translates outbound connections to public ports from a global pool and maps replies back."""

from __future__ import annotations

import pytest
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.l2 import Ether

from nf_host.global_state import MemoryStore
from nf_host.nf_api import FlowKey, Verdict
from nf_host.nfs import make_nf
from nf_host.nfs.nat import PoolExhausted, PortPool
from tests.nf_host.nfs.packets import FlowTable, checksums_valid, eth, ip2int, tcp, udp

pytestmark = pytest.mark.unit

PUB, SRV = "203.0.113.1", "198.51.100.7"
PARAMS = {"public_ip": PUB, "inside": "10.0.0.0/8", "port_min": 20000, "port_max": 20009}


def test_outbound_then_reply_round_trip() -> None:
    table = FlowTable(make_nf("nat", PARAMS))
    verdict, out, state = table.send(tcp("10.0.0.5", SRV, 3333, 80, "S", b"hi"))
    assert verdict == Verdict.FORWARD and checksums_valid(out)
    pkt = Ether(out)
    assert pkt[IP].src == PUB and pkt[IP].dst == SRV and pkt[TCP].dport == 80
    port = pkt[TCP].sport
    assert 20000 <= port <= 20009 and state["ext_port"] == port
    # the reply is addressed to the public endpoint
    verdict, back, rstate = table.send(tcp(SRV, PUB, 80, port, "SA", b"yo"))
    assert verdict == Verdict.FORWARD and checksums_valid(back)
    b = Ether(back)
    assert (b[IP].src, b[IP].dst, b[TCP].sport, b[TCP].dport) == (SRV, "10.0.0.5", 80, 3333)
    assert rstate["inside_ip"] == ip2int("10.0.0.5") and rstate["inside_port"] == 3333
    # later packets of the connection reuse the port without asking the pool again
    _, out2, _ = table.send(tcp("10.0.0.5", SRV, 3333, 80, "A"))
    assert Ether(out2)[TCP].sport == port
    assert table.store.get("nat/default/cursor") == b"1"


def test_distinct_connections_get_distinct_ports() -> None:
    table = FlowTable(make_nf("nat", PARAMS))
    ports = set()
    for i in range(10):
        _, out, _ = table.send(udp(f"10.0.0.{i + 1}", SRV, 5000, 53, b"q"))
        assert checksums_valid(out)
        ports.add(Ether(out)[UDP].sport)
    assert ports == set(range(20000, 20010))
    verdict, _, state = table.send(udp("10.0.0.99", SRV, 5000, 53, b"q"))
    assert verdict == Verdict.DROP and state["exhausted"] == 1


def test_unsolicited_and_wrong_remote_inbound_are_dropped() -> None:
    table = FlowTable(make_nf("nat", PARAMS))
    verdict, _, state = table.send(tcp(SRV, PUB, 80, 20000, "S"))
    assert verdict == Verdict.DROP and state["unsolicited"] == 1
    _, out, _ = table.send(tcp("10.0.0.5", SRV, 3333, 80, "S"))
    port = Ether(out)[TCP].sport
    verdict, _, state = table.send(tcp("192.0.2.66", PUB, 80, port, "SA"))
    assert verdict == Verdict.DROP and state["unsolicited"] == 1
    verdict, _, _ = table.send(udp(SRV, PUB, 80, port))
    assert verdict == Verdict.DROP


def test_icmp_dropped_and_other_traffic_untouched() -> None:
    table = FlowTable(make_nf("nat", PARAMS))
    verdict, _, state = table.send(eth() / IP(src="10.0.0.5", dst=SRV) / ICMP())
    assert verdict == Verdict.DROP and state["untranslatable"] == 1
    local = tcp("10.0.0.5", "10.0.0.6", 1, 2, "S")
    verdict, out, _ = table.send(local)
    assert verdict == Verdict.FORWARD and out == bytes(local)


def test_replayed_connection_reuses_its_port() -> None:
    """A backup replaying a first packet (state not yet committed) gets the same port."""
    store = MemoryStore()
    primary = FlowTable(make_nf("nat", PARAMS), store)
    backup = FlowTable(make_nf("nat", PARAMS), store)
    first = tcp("10.0.0.5", SRV, 3333, 80, "S")
    _, a, _ = primary.send(first)
    _, b, _ = backup.send(first)
    assert Ether(a)[TCP].sport == Ether(b)[TCP].sport


def test_pool_skips_claimed_ports_and_reports_exhaustion() -> None:
    store = MemoryStore()
    pool = PortPool("p", 100, 102)
    store.put(pool.port_key(100), b"taken by someone")
    nf = make_nf("nat", {**PARAMS, "pool": "p", "port_min": 100, "port_max": 102})
    table = FlowTable(nf, store)
    got = [Ether(table.send(udp(f"10.0.0.{i}", SRV, 1, 2))[1])[UDP].sport for i in (1, 2)]
    assert sorted(got) == [101, 102]
    with pytest.raises(PoolExhausted):
        pool.allocate(store, FlowKey(ip2int("10.0.0.3"), ip2int(SRV), 1, 2, 17))


def test_parameters_are_checked() -> None:
    with pytest.raises(ValueError, match="public_ip"):
        make_nf("nat", {})
    with pytest.raises(ValueError, match="port range"):
        make_nf("nat", {"public_ip": PUB, "port_min": 9, "port_max": 8})
