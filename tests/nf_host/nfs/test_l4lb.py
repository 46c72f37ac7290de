"""The L4 LB keeps each connection on one backend, rewrites addresses and keeps checksums valid."""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether

from nf_host.nf_api import Verdict
from nf_host.nfs import make_nf
from tests.nf_host.nfs.packets import FlowTable, checksums_valid, ip2int, tcp, udp

pytestmark = pytest.mark.unit

VIP = "192.0.2.10"
BACKENDS = ["10.1.0.1", "10.1.0.2", "10.1.0.3"]


@pytest.mark.parametrize("policy", ["hash", "round_robin"])
def test_connection_sticks_to_one_backend(policy: str) -> None:
    table = FlowTable(
        make_nf("l4lb", {"vip": VIP, "backends": BACKENDS, "vport": 80, "policy": policy})
    )
    chosen = set()
    for client_port in range(30000, 30030):
        dsts = set()
        for flags in ("S", "A", "PA"):
            verdict, out, state = table.send(tcp("172.16.0.9", VIP, client_port, 80, flags, b"get"))
            assert verdict == Verdict.FORWARD and checksums_valid(out)
            pkt = Ether(out)
            assert pkt[TCP].dport == 80 and pkt[IP].src == "172.16.0.9"
            dsts.add(pkt[IP].dst)
        assert len(dsts) == 1 and ip2int(dsts.pop()) == state["backend"]
        chosen.add(state["backend"])
    assert chosen == {ip2int(b) for b in BACKENDS}
    if policy == "round_robin":
        assert table.store.get("l4lb/default/rr") == b"30"


def test_reply_source_rewritten_to_vip() -> None:
    table = FlowTable(make_nf("l4lb", {"vip": VIP, "backends": BACKENDS, "vport": 80}))
    _, out, _ = table.send(tcp("172.16.0.9", VIP, 30000, 80, "S"))
    backend = Ether(out)[IP].dst
    verdict, back, _ = table.send(tcp(backend, "172.16.0.9", 80, 30000, "SA"))
    assert verdict == Verdict.FORWARD and checksums_valid(back)
    assert Ether(back)[IP].src == VIP


def test_choice_survives_a_move_and_other_traffic_passes() -> None:
    table = FlowTable(make_nf("l4lb", {"vip": VIP, "backends": BACKENDS, "policy": "round_robin"}))
    _, out, _ = table.send(udp("172.16.0.9", VIP, 1, 53, b"q"))
    first = Ether(out)[IP].dst
    table.move_states()
    for _ in range(3):
        _, out, _ = table.send(udp("172.16.0.9", VIP, 1, 53, b"q"))
        assert Ether(out)[IP].dst == first
    other = tcp("172.16.0.9", "192.0.2.99", 1, 80, "S")
    assert table.send(other)[1] == bytes(other)


def test_bad_parameters() -> None:
    with pytest.raises(ValueError, match="vip"):
        make_nf("l4lb", {"backends": BACKENDS})
    with pytest.raises(ValueError, match="backends"):
        make_nf("l4lb", {"vip": VIP, "backends": []})
    with pytest.raises(ValueError, match="policy"):
        make_nf("l4lb", {"vip": VIP, "backends": BACKENDS, "policy": "random"})
