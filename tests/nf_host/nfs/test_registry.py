"""Every example NF is registered by name and keeps plain, serialisable per-flow state."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from scapy.packet import Packet as ScapyPacket

from contract.checker_record import RECORD
from nf_host.nf_api import NF_TYPES, Verdict
from nf_host.nfs import make_nf
from tests.nf_host.nfs.packets import FlowTable, tcp, udp

pytestmark = pytest.mark.unit

PARAMS: dict[str, dict[str, Any]] = {
    "passthrough": {},
    "firewall": {},
    "nat": {"public_ip": "203.0.113.1"},
    "flow_monitor": {},
    "ids": {"patterns": ["EVIL"]},
    "l4lb": {"vip": "192.0.2.10", "backends": ["10.1.0.1"]},
    "generic": {"global_update_rate": 0.5, "state_bytes": 16},
    "checker": {},
}


def test_all_names_registered() -> None:
    make_nf("passthrough")
    assert set(PARAMS) <= set(NF_TYPES)
    with pytest.raises(ValueError, match="unknown NF type 'nope'"):
        make_nf("nope")


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_state_is_plain_data_and_garbage_does_not_crash(name: str) -> None:
    table = FlowTable(make_nf(name, PARAMS[name]))
    payload = RECORD.pack(1, 1, 0) + b"payload"
    frames: list[ScapyPacket | bytes] = [
        tcp("10.0.0.1", "192.0.2.10", 1000, 80, "S", payload),
        tcp("192.0.2.10", "10.0.0.1", 80, 1000, "SA", payload),
        udp("10.0.0.1", "198.51.100.1", 5, 6, payload),
        b"\x00" * 10,
        bytes(udp("10.0.0.1", "198.51.100.1", 5, 6, payload))[:30],
        bytes(tcp("10.0.0.1", "198.51.100.1", 5, 6, "S"))[:40],
    ]
    for frame in frames:
        verdict, _, state = table.send(frame)
        assert verdict in (Verdict.FORWARD, Verdict.DROP, Verdict.DROP_FORGET)
        assert msgpack.unpackb(msgpack.packb(state)) == state
    table.move_states()
    for frame in frames:
        table.send(frame)
