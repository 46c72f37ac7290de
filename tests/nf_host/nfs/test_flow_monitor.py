"""The flow monitor counts packets and bytes per connection and direction, with first/last times."""

from __future__ import annotations

import pytest

from nf_host.nf_api import Verdict
from nf_host.nfs import make_nf
from tests.nf_host.nfs.packets import FlowTable, udp

pytestmark = pytest.mark.unit


def test_counts_and_timestamps() -> None:
    table = FlowTable(make_nf("flow_monitor"))
    a = udp("10.0.0.1", "10.0.0.2", 1, 2, b"x" * 10)
    b = udp("10.0.0.2", "10.0.0.1", 2, 1, b"y" * 30)
    start = table.now
    for pkt in (a, a, b):
        verdict, out, state = table.send(pkt)
        assert verdict == Verdict.FORWARD and out == bytes(pkt)
    size_a, size_b = len(bytes(a)), len(bytes(b))
    assert state["packets"] == 3 and state["bytes"] == 2 * size_a + size_b
    assert state["packets_rev"] == 1 and state["bytes_rev"] == size_b
    assert state["first"] == start + 0.5 and state["last"] == start + 1.5
    other = table.send(udp("10.0.0.1", "10.0.0.3", 1, 2))[2]
    assert other["packets"] == 1 and other["packets_rev"] == 0
