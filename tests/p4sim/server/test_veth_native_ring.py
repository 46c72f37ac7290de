"""The native ring fast path end to end (`p4sim run --io ring --engine native`, no tap, no trace:
p4sim/native/rings.py): frames forwarded veth to veth, packet-ins to the controller (outputs the C
loop leaves to Python), a packet-out through the same transmit ring, and exact port and device
counters in `/status`.

Run: sudo .venv/bin/pytest tests/p4sim/server/test_veth_native_ring.py   (needs root)
"""

from __future__ import annotations

import pytest
from finsy.proto import p4r
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from tests.p4sim.server.conftest import RealProgram
from tests.p4sim.server.entity_builders import enc, table
from tests.p4sim.server.netns import VethTopology
from tests.p4sim.server.veth_switch import p4sim_on_veths, status

pytestmark = [pytest.mark.netns, pytest.mark.slow]

N = 30


def test_native_ring_path_forwards_punts_and_counts(topo: VethTopology, real_program: RealProgram) -> None:
    h1, h2 = topo.hosts
    prog = real_program
    with p4sim_on_veths(topo, "ring") as sw:
        stream, metrics = sw.stream, sw.metrics
        sw.write([
            table(prog.route(0x0A000200, 24, "ipv4_forward", dst_addr=0x020000000002, port=2)),
            table(prog.route(0x0A000900, 24, "send_to_cpu"))])

        sniffer = topo.sniffer(h2, N + 1, 30, h2.mac)
        frames = [bytes(Ether(src=h1.mac, dst="02:00:00:00:00:fe") / IP(src="10.0.1.1", dst="10.0.2.2")
                        / UDP(sport=1000 + i, dport=53) / bytes(20)) for i in range(N)]
        punted = [bytes(Ether(src=h1.mac, dst="02:00:00:00:00:fe") / IP(src="10.0.1.1", dst="10.0.9.9")
                        / UDP(sport=7, dport=7) / bytes(20 + i)) for i in range(2)]
        topo.send(h1, frames + punted)
        ins = [stream.receive("packet", timeout=10).packet for _ in punted]
        assert sorted(len(p.payload) for p in ins) == sorted(len(p) for p in punted)
        cpm = next(c for c in prog.p4info.controller_packet_metadata if c.preamble.name == "packet_out")
        ids = {m.name: m.id for m in cpm.metadata}
        out = bytes(Ether(src="02:00:00:00:00:fe", dst=h2.mac) / IP(src="10.0.0.1", dst="10.0.2.2")
                    / UDP(sport=4242, dport=53))
        stream.send(p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=out, metadata=[
            p4r.PacketMetadata(metadata_id=ids["egress_port"], value=enc(2)),
            p4r.PacketMetadata(metadata_id=ids["_pad"], value=b"\x00")])))
        got = topo.sniffed(sniffer, 40)
        assert sorted(Ether(g)[UDP].sport for g in got) == sorted([1000 + i for i in range(N)] + [4242])
        assert all(Ether(g)[IP].ttl == 63 for g in got if Ether(g)[UDP].sport != 4242)
        doc = status(metrics)
        p1, p2, dev = doc["ports"]["1"], doc["ports"]["2"], doc["device"]
        assert (p1["rx"], p2["tx"], doc["lost"]) == (N + 2, N + 1, 0)
        assert (dev["packets_in"], dev["packet_ins"], dev["packet_outs"]) == (N + 3, 2, 1)
        assert dev["packets_out"] == N + 1
    assert "native ring fast path runs the batches" in sw.log, sw.log
