"""The checker NF stamps a running per-connection count into the payload, checksums kept valid."""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether

from contract.checker_record import RECORD
from nf_host.nf_api import Verdict
from nf_host.nfs import make_nf
from tests.nf_host.nfs.packets import FlowTable, checksums_valid, eth, tcp, udp

pytestmark = pytest.mark.unit


def record(flow_id: int, pkt_no: int) -> bytes:
    return RECORD.pack(flow_id, pkt_no, 0) + b"rest-of-payload"


def stamped(frame: bytes) -> tuple[int, int, int]:
    pkt = Ether(frame)
    layer = UDP if UDP in pkt else TCP
    flow_id, pkt_no, count = RECORD.unpack(bytes(pkt[layer].payload)[: RECORD.size])
    return flow_id, pkt_no, count


def test_counts_both_directions_and_stays_valid() -> None:
    table = FlowTable(make_nf("checker"))
    counts = []
    for i in range(1, 6):
        fwd = udp("10.0.0.1", "10.0.0.2", 1000, 2000, record(7, i))
        verdict, out, _ = table.send(fwd)
        assert verdict == Verdict.FORWARD and checksums_valid(out)
        counts.append(stamped(out)[2])
        rev = udp("10.0.0.2", "10.0.0.1", 2000, 1000, record(8, i))
        verdict, out, state = table.send(rev)
        assert checksums_valid(out)
        assert stamped(out)[:2] == (8, i)
        counts.append(stamped(out)[2])
    assert counts == list(range(1, 11))
    assert state == {"count": 10, "short": 0}


def test_flows_are_independent_and_survive_a_move() -> None:
    table = FlowTable(make_nf("checker"))
    for i in range(1, 4):
        table.send(udp("10.0.0.1", "10.0.0.2", 1, 2, record(1, i)))
    table.send(tcp("10.0.0.3", "10.0.0.4", 5, 6, "PA", record(2, 1)))
    table.move_states()
    _, out, _ = table.send(udp("10.0.0.1", "10.0.0.2", 1, 2, record(1, 4)))
    assert stamped(out)[2] == 4
    _, out, _ = table.send(tcp("10.0.0.3", "10.0.0.4", 5, 6, "PA", record(2, 2)))
    assert stamped(out)[2] == 2 and checksums_valid(out)


def test_short_payload_forwarded_untouched_and_counted() -> None:
    table = FlowTable(make_nf("checker"))
    pkt = tcp("10.0.0.1", "10.0.0.2", 1, 2, "A", b"short")
    verdict, out, state = table.send(pkt)
    assert verdict == Verdict.FORWARD and out == bytes(pkt)
    assert state == {"count": 0, "short": 1}


def test_udp_without_checksum_stays_without() -> None:
    table = FlowTable(make_nf("checker"))
    pkt = (
        eth() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=1, dport=2, chksum=0) / record(3, 1)
    )
    _, out, _ = table.send(pkt)
    assert Ether(out)[UDP].chksum == 0
    assert stamped(out)[2] == 1


def test_work_us_costs_cpu_per_packet_and_a_negative_value_is_refused() -> None:
    import time

    table = FlowTable(make_nf("checker", {"work_us": 2000}))
    cpu = time.process_time()
    for i in range(1, 11):
        table.send(udp("10.0.0.1", "10.0.0.2", 1000, 2000, record(7, i)))
    assert time.process_time() - cpu >= 0.015  # 10 packets x 2 ms of spinning (CPU, not sleep)
    with pytest.raises(ValueError, match="work_us must be >= 0"):
        make_nf("checker", {"work_us": -1})
