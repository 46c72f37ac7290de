"""The generic NF: busy work, a deterministic rate of global updates, and a per-flow blob."""

from __future__ import annotations

import time

import pytest

from nf_host.nfs import make_nf
from tests.nf_host.nfs.packets import FlowTable, udp

pytestmark = pytest.mark.unit


def test_global_update_rate_is_exact_and_deterministic() -> None:
    table = FlowTable(make_nf("generic", {"global_update_rate": 0.25}))
    for _ in range(100):
        table.send(udp("10.0.0.1", "10.0.0.2", 1, 2))
    assert table.store.get("generic/updates") == b"25"


def test_blob_is_updated_every_packet_and_survives_a_move() -> None:
    table = FlowTable(make_nf("generic", {"state_bytes": 64}))
    pkt = udp("10.0.0.1", "10.0.0.2", 1, 2)
    blobs = []
    for _ in range(3):
        _, _, state = table.send(pkt)
        blobs.append(bytes(state["blob"]))
    assert len(blobs[0]) == 64 and len(set(blobs)) == 3
    table.move_states()
    _, _, state = table.send(pkt)
    assert isinstance(state["blob"], bytearray) and int.from_bytes(state["blob"][24:32], "big") == 4
    small = FlowTable(make_nf("generic", {"state_bytes": 3}))
    assert small.send(pkt)[2]["blob"] == bytearray(b"\x01\x00\x00")


def test_work_us_costs_time() -> None:
    table = FlowTable(make_nf("generic", {"work_us": 2000}))
    t0 = time.perf_counter()
    for _ in range(5):
        table.send(udp("10.0.0.1", "10.0.0.2", 1, 2))
    assert time.perf_counter() - t0 >= 0.01


def test_bad_parameters() -> None:
    for params in ({"global_update_rate": 2}, {"work_us": -1}, {"state_bytes": -5}):
        with pytest.raises(ValueError):
            make_nf("generic", params)
