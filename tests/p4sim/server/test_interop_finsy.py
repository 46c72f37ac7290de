"""finsy (an independent, maintained P4Runtime client) drives the server through scripted sessions:
pipeline push, table insert/modify/delete, reads, multicast groups, counters, packet-out/in on the
real engine (ipv4_forward.p4); the same plus digests and packet-in on the fake engine.
If finsy and p4sim disagree, p4sim is wrong.

Run: .venv/bin/pytest tests/p4sim/server/test_interop_finsy.py
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

import finsy as fy
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from tests.p4sim.server import fake_switch as fk
from tests.p4sim.server.conftest import Harness, RealProgram, start_harness, stop_harness

pytestmark = pytest.mark.unit


def _read(sw: fy.Switch, entity: Any) -> AsyncIterator[Any]:
    """finsy's `Switch.read` is an async generator; its overloads are typed as coroutines."""
    return cast(AsyncIterator[Any], sw.read(entity))


@pytest.fixture
def fake_server() -> Iterator[Harness]:
    h = start_harness()
    yield h
    stop_harness(h)


async def _fake_session(h: Harness) -> dict[str, object]:
    """The scripted session; returns what it observed."""
    seen: dict[str, object] = {}
    sent: list[tuple[int, bytes]] = []
    h.device.port_sender = lambda port, data: sent.append((port, data))
    opts = fy.SwitchOptions(p4info=fk.P4INFO_PATH, p4blob=fk.DEVICE_CONFIG)
    sw = fy.Switch("p4sim", h.address, opts)
    async with sw:
        assert sw.is_primary
        fwd = "ingress.forward"
        await sw.insert(
            [
                fy.P4TableEntry(
                    fwd,
                    match=fy.P4TableMatch({"standard_metadata.ingress_port": 1}),
                    action=fy.P4TableAction("set_egress", port=2),
                ),
                fy.P4TableEntry(
                    fwd,
                    match=fy.P4TableMatch({"standard_metadata.ingress_port": 5}),
                    action=fy.P4TableAction("send_to_cpu"),
                ),
                fy.P4TableEntry(
                    "ingress.routes",
                    match=fy.P4TableMatch({"hdr.ipv4.dst_addr": "10.0.0.0/8"}),
                    action=fy.P4TableAction("set_egress", port=3),
                ),
            ]
        )
        await sw.modify(
            [
                fy.P4TableEntry(
                    fwd,
                    match=fy.P4TableMatch({"standard_metadata.ingress_port": 1}),
                    action=fy.P4TableAction("set_egress", port=4),
                ),
            ]
        )
        entries = [e async for e in _read(sw, fy.P4TableEntry(fwd))]
        seen["forward"] = sorted(
            (str(e.match_dict(sw.p4info)), e.action_str(sw.p4info)) for e in entries
        )
        await sw.delete(
            [
                fy.P4TableEntry(
                    "ingress.routes", match=fy.P4TableMatch({"hdr.ipv4.dst_addr": "10.0.0.0/8"})
                )
            ]
        )
        seen["routes"] = [e async for e in _read(sw, fy.P4TableEntry("ingress.routes"))]
        await sw.insert([fy.P4MulticastGroupEntry(1, replicas=[(1, 1), (2, 2)])])
        groups = [g async for g in _read(sw, fy.P4MulticastGroupEntry())]
        seen["mcast"] = [
            (g.multicast_group_id, [(r.port, r.instance) for r in g.replicas]) for g in groups
        ]
        # data plane: counters
        frame = bytes.fromhex("ffffffffffff02000000000a0800") + bytes(50)
        for _ in range(2):
            h.device.inject(1, frame)
        [counter] = [c async for c in _read(sw, fy.P4CounterEntry("ingress.port_counter", index=1))]
        seen["counter"] = (counter.packet_count, counter.byte_count)
        # packet-out, packet-in
        await sw.write([fy.P4PacketOut(b"\x01" * 60, egress_port=7, _pad=0)])
        async with asyncio.timeout(5):
            while not [p for p, _ in sent if p == 7]:
                await asyncio.sleep(0.01)
        async with asyncio.timeout(5):
            packets = sw.read_packets()
            h.device.inject(5, frame)
            pkt = await anext(packets)
            seen["packet_in"] = (pkt.metadata["ingress_port"], pkt.payload == frame)
        # digests
        await sw.insert(
            [fy.P4DigestEntry("learn_t", max_list_size=1, max_timeout_ns=0, ack_timeout_ns=10**9)]
        )
        async with asyncio.timeout(5):
            digests = sw.read_digests("learn_t")
            h.device.inject(3, frame)
            dl = await anext(digests)
            seen["digest"] = [dict(d) for d in dl.data]
            await sw.write([dl.ack()])
        await sw.delete_all()
        seen["after_delete_all"] = [e async for e in _read(sw, fy.P4TableEntry())]
    seen["sent"] = sent
    return seen


def test_finsy_session_with_the_fake_engine(fake_server: Harness) -> None:
    seen = asyncio.run(_fake_session(fake_server))
    assert seen["forward"] == [
        ("{'ingress_port': '0x1'}", "set_egress(port=0x4)"),
        ("{'ingress_port': '0x5'}", "send_to_cpu()"),
    ]
    assert seen["routes"] == []
    assert seen["mcast"] == [(1, [(1, 1), (2, 2)])]
    assert seen["counter"] == (2, 128)
    assert (7, b"\x01" * 60) in seen["sent"]  # type: ignore[operator]
    assert seen["packet_in"] == (5, True)
    assert seen["digest"] == [{"port": 3, "src_addr": 0x02000000000A}]
    assert seen["after_delete_all"] == []


@pytest.fixture
def real_server(real_program: RealProgram) -> Iterator[Harness]:
    from p4sim.server.device import real_engine

    h = start_harness(real_engine, real_program)
    yield h
    stop_harness(h)


async def _real_session(h: Harness, prog: RealProgram) -> dict[str, object]:
    """Pipeline push, LPM writes, reads, multicast, counters, packet-out/in on ipv4_forward.p4.

    The harness wires port 7 back into port 5, so a packet-out to port 7 returns as a packet-in.
    """
    seen: dict[str, object] = {}
    sent: list[tuple[int, bytes]] = []

    def wire(port: int, data: bytes) -> None:
        sent.append((port, data))
        if port == 7:
            h.device.inject(5, data)

    h.device.port_sender = wire
    opts = fy.SwitchOptions(p4info=prog.p4info_path, p4blob=prog.device_config_path.read_bytes())
    sw = fy.Switch("p4sim", h.address, opts)
    lpm = "MyIngress.ipv4_lpm"
    async with sw:
        await sw.insert(
            [
                fy.P4TableEntry(
                    lpm,
                    match=fy.P4TableMatch(dst_addr="10.0.2.0/24"),
                    action=fy.P4TableAction("ipv4_forward", dst_addr=0x020000000002, port=2),
                ),
                fy.P4TableEntry(
                    lpm,
                    match=fy.P4TableMatch(dst_addr="10.0.9.0/24"),
                    action=fy.P4TableAction("send_to_cpu"),
                ),
            ]
        )
        await sw.modify(
            [
                fy.P4TableEntry(
                    lpm,
                    match=fy.P4TableMatch(dst_addr="10.0.2.0/24"),
                    action=fy.P4TableAction("ipv4_forward", dst_addr=0x020000000002, port=3),
                )
            ]
        )
        routes = [e async for e in _read(sw, fy.P4TableEntry(lpm))]
        seen["routes"] = sorted(
            (str(e.match_dict(sw.p4info)), e.action_str(sw.p4info)) for e in routes
        )
        await sw.insert([fy.P4MulticastGroupEntry(1, replicas=[(1, 1), (2, 1)])])
        groups = [g async for g in _read(sw, fy.P4MulticastGroupEntry())]
        seen["mcast"] = [
            (g.multicast_group_id, [(r.port, r.instance) for r in g.replicas]) for g in groups
        ]
        frame = bytes(
            Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:aa")
            / IP(src="10.0.1.1", dst="10.0.2.2")
            / UDP(sport=5, dport=6)
        )
        h.device.inject(1, frame)
        [counter] = [
            c async for c in _read(sw, fy.P4CounterEntry("MyIngress.port_packets", index=1))
        ]
        seen["counter"] = (counter.packet_count, counter.byte_count)
        to_cpu = bytes(
            Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:aa")
            / IP(src="10.0.1.1", dst="10.0.9.9")
            / UDP(sport=5, dport=6)
        )
        async with asyncio.timeout(5):
            packets = sw.read_packets()
            await sw.write([fy.P4PacketOut(to_cpu, egress_port=7, _pad=0)])
            pkt = await anext(packets)
            seen["packet_in"] = (pkt.metadata["ingress_port"], pkt.payload == to_cpu)
        await sw.delete([fy.P4TableEntry(lpm, match=fy.P4TableMatch(dst_addr="10.0.2.0/24"))])
        await sw.delete_all()
        seen["after_delete_all"] = [e async for e in _read(sw, fy.P4TableEntry())]
        seen["mcast_after"] = [g async for g in _read(sw, fy.P4MulticastGroupEntry())]
    seen["sent"] = sent
    return seen


def test_finsy_session_with_the_real_engine(
    real_server: Harness, real_program: RealProgram
) -> None:
    seen = asyncio.run(_real_session(real_server, real_program))
    assert seen["routes"] == [
        ("{'dst_addr': '0xa000200/24'}", "ipv4_forward(dst_addr=0x20000000002, port=0x3)"),
        ("{'dst_addr': '0xa000900/24'}", "send_to_cpu()"),
    ]
    assert seen["mcast"] == [(1, [(1, 1), (2, 1)])]
    sent = cast(list[tuple[int, bytes]], seen["sent"])
    assert sent[0][0] == 3 and Ether(sent[0][1])[IP].ttl == 63
    assert seen["counter"][0] == 1  # type: ignore[index]
    assert seen["packet_in"] == (5, True)
    assert seen["after_delete_all"] == [] and seen["mcast_after"] == []
