"""The ring layouts, parsed from hand-built blocks; port counters; the stats endpoint and the
`p4sim status` command, against a fake port set (no interfaces, no namespaces)."""

from __future__ import annotations

import json
import struct
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import pytest

from p4sim.io.pktring import (
    BLOCK_DESC_LEN,
    FRAME_HDR,
    PACKET_OUTGOING,
    PKTTYPE_AT,
    TP_STATUS_SEND_REQUEST,
    TX_DATA_AT,
    RingConfig,
    block_frames,
    block_ready,
    parse_stats_v3,
    release_block,
    tx_slot_status,
    tx_write,
)
from p4sim.io.ports import PortStats
from p4sim.server.device import Device
from p4sim.server.stats import StatsServer, status

pytestmark = [pytest.mark.unit]

MAC_AT = 80  # where the kernel puts a frame after its header and sockaddr_ll (aligned)


def build_block(frames: list[tuple[bytes, int, int]], size: int = 4096) -> bytearray:
    """A retired TPACKET_V3 block holding `frames` as (data, pkttype, wire length)."""
    buf = bytearray(size)
    struct.pack_into("=III", buf, 8, 1, len(frames), BLOCK_DESC_LEN)  # TP_STATUS_USER
    off = BLOCK_DESC_LEN
    for i, (data, pkttype, length) in enumerate(frames):
        room = MAC_AT + len(data)
        nxt = 0 if i == len(frames) - 1 else (room + 15) // 16 * 16
        FRAME_HDR.pack_into(buf, off, nxt, 0, 0, len(data), length, 1, MAC_AT, MAC_AT + 14)
        buf[off + PKTTYPE_AT] = pkttype
        buf[off + MAC_AT:off + MAC_AT + len(data)] = data
        off += nxt
    return buf


def test_a_block_yields_its_frames_in_order_with_direction_and_truncation() -> None:
    frames = [(bytes([i]) * (60 + i), 0, 60 + i) for i in range(5)]
    frames.append((b"\xaa" * 64, PACKET_OUTGOING, 64))
    frames.append((b"\xbb" * 100, 0, 1500))  # snaplen < len: cut short by the ring
    buf = build_block(frames)
    assert block_ready(buf, 0)
    got = block_frames(buf, 0)
    assert [f.data for f in got] == [d for d, _, _ in frames]
    assert [f.outgoing for f in got] == [False] * 5 + [True, False]
    assert [f.truncated for f in got] == [False] * 6 + [True]
    release_block(buf, 0)
    assert not block_ready(buf, 0)


def test_an_empty_block_and_a_block_at_an_offset() -> None:
    buf = bytearray(8192)
    buf[4096:] = build_block([(b"x" * 70, 0, 70)])
    assert not block_ready(buf, 0)
    assert block_frames(buf, 0) == []
    assert [f.data for f in block_frames(buf, 4096)] == [b"x" * 70]


def test_a_transmit_slot_is_filled_then_marked_for_sending() -> None:
    buf = bytearray(2048)
    tx_write(buf, 0, b"frame-bytes")
    assert tx_slot_status(buf, 0) == TP_STATUS_SEND_REQUEST
    assert struct.unpack_from("=I", buf, 16)[0] == len(b"frame-bytes")
    assert bytes(buf[TX_DATA_AT:TX_DATA_AT + 11]) == b"frame-bytes"


def test_kernel_statistics_and_ring_sizes() -> None:
    assert parse_stats_v3(struct.pack("=III", 10, 3, 1)) == (10, 3, 1)
    cfg = RingConfig.sized(8)
    assert cfg.rx_bytes == 8 << 20 and cfg.rx_blocks == 2048
    with pytest.raises(ValueError, match="page size"):
        RingConfig(block_size=1000)
    with pytest.raises(ValueError, match="at least 2"):
        RingConfig(rx_blocks=1)


def test_port_losses_add_up() -> None:
    st = PortStats(rx=10, kernel_drops=3, tx_errors=2, tx_overflows=1, rx_truncated=1,
                   rx_errors=4, ring_freezes=9)
    assert st.lost == 7  # freezes and errors are occasions, not frames
    assert st.to_json()["lost"] == 7


@dataclass
class FakePorts:
    interfaces: dict[int, str] = field(default_factory=lambda: {1: "veth1", 3: "s1-eth3"})
    io: str = "ring"
    stats: dict[int, PortStats] = field(default_factory=lambda: {
        1: PortStats(rx=5, tx=4), 3: PortStats(rx=7, kernel_drops=11, ring_freezes=2)})

    def snapshot(self) -> dict[int, dict[str, int | bool]]:
        return {p: s.to_json() for p, s in self.stats.items()}


def test_the_endpoint_serves_json_and_prometheus_and_the_status_command_prints_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    device = Device(device_id=7)
    device.inject(1, b"\x00" * 60)  # no program yet: dropped and counted
    ports = FakePorts()
    server = StatsServer("127.0.0.1:0", ports, device)
    try:
        base = f"http://127.0.0.1:{server.port}"
        with urllib.request.urlopen(f"{base}/status", timeout=5) as resp:
            doc: dict[str, Any] = json.loads(resp.read())
        assert doc == status(ports, device)
        assert doc["ports"]["3"]["kernel_drops"] == 11 and doc["ports"]["3"]["interface"] == "s1-eth3"
        assert doc["device"]["no_pipeline"] == 1
        assert doc["lost"] == 11 + 1
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        assert 'p4sim_port_kernel_drops_total{interface="s1-eth3",port="3"} 11.0' in text
        assert 'p4sim_port_ring_freezes_total{interface="s1-eth3",port="3"} 2.0' in text
        assert "p4sim_no_pipeline_total 1.0" in text
        from p4sim.__main__ import main as p4sim_main

        assert p4sim_main(["status", "--metrics-addr", f"127.0.0.1:{server.port}"]) == 0
        out = capsys.readouterr().out
        assert "s1-eth3" in out and "lost 12" in out
        row = next(line for line in out.splitlines() if "s1-eth3" in line).split()
        assert row[:5] == ["3", "s1-eth3", "7", "0", "11"]
    finally:
        server.close()
        device.close()


def test_a_bad_metrics_address_is_named() -> None:
    device = Device()
    try:
        with pytest.raises(ValueError, match="HOST:PORT"):
            StatsServer("9560", FakePorts(), device)
    finally:
        device.close()
