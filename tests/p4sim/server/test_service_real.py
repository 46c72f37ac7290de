"""P4Runtime conformance against the real engine running tests/p4sim/programs/ipv4_forward.p4:
pipeline push and get, LPM routes that forward packets, default action, packet-out/in, counters,
multicast groups, and rollback — checked on the packets the engine emits.

Run one: .venv/bin/pytest tests/p4sim/server/test_service_real.py -k packet_in
"""

from __future__ import annotations

import grpc
import pytest
from finsy.proto import p4r, rpc_code
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from tests.p4sim.server.conftest import Harness, RealProgram
from tests.p4sim.server.entity_builders import DELETE, INSERT, MODIFY, enc, mc_group, update
from tests.p4sim.server.p4rt_client import StreamClient, status_details
from tests.support.procs import wait_for

pytestmark = pytest.mark.unit

Real = tuple[Harness, StreamClient, RealProgram]
H2_MAC = 0x020000000002


def _packet(dst: str = "10.0.2.2", ttl: int = 64) -> bytes:
    return bytes(
        Ether(dst="02:00:00:00:00:aa", src="02:00:00:00:00:01")
        / IP(src="10.0.1.1", dst=dst, ttl=ttl)
        / UDP(sport=1234, dport=80)
        / (b"x" * 32)
    )


def _capture(h: Harness) -> list[tuple[int, bytes]]:
    sent: list[tuple[int, bytes]] = []
    h.device.port_sender = lambda port, data: sent.append((port, data))
    return sent


def test_pipeline_get_returns_what_was_pushed(real: Real) -> None:
    h, _, prog = real
    R = p4r.GetForwardingPipelineConfigRequest
    got = h.stub.GetForwardingPipelineConfig(R(device_id=1, response_type=R.ALL)).config
    assert got.p4info == prog.p4info
    assert got.p4_device_config == prog.device_config


def test_lpm_route_forwards_and_rewrites(real: Real) -> None:
    h, _, prog = real
    sent = _capture(h)
    h.write(
        10,
        update(
            INSERT,
            table_entry=prog.route(0x0A000200, 24, "ipv4_forward", dst_addr=H2_MAC, port=2),
        ),
    )
    h.device.inject(1, _packet())
    h.device.inject(1, _packet(dst="10.0.3.3"))  # no route: the default action drops
    [(port, data)] = sent
    assert port == 2
    out = Ether(data)
    assert out.dst == "02:00:00:00:00:02" and out.src == "02:00:00:00:00:aa"
    assert out[IP].ttl == 63
    recomputed = Ether(data)
    del recomputed[IP].chksum
    assert Ether(bytes(recomputed))[IP].chksum == out[IP].chksum


def test_modify_delete_and_read_back(real: Real) -> None:
    h, _, prog = real
    sent = _capture(h)
    te = prog.route(0x0A000200, 24, "ipv4_forward", dst_addr=H2_MAC, port=2)
    h.write(10, update(INSERT, table_entry=te))
    te2 = prog.route(0x0A000200, 24, "ipv4_forward", dst_addr=H2_MAC, port=3)
    h.write(10, update(MODIFY, table_entry=te2))
    [got] = h.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=te.table_id)))
    assert got.table_entry.match == te2.match and got.table_entry.action == te2.action
    h.device.inject(1, _packet())
    assert [p for p, _ in sent] == [3]
    h.write(10, update(DELETE, table_entry=te2))
    assert h.read(p4r.Entity(table_entry=p4r.TableEntry())) == []
    h.device.inject(1, _packet())
    assert len(sent) == 1


def test_default_action_to_cpu_gives_packet_in(real: Real) -> None:
    h, s, prog = real
    te = p4r.TableEntry(table_id=prog.id_of("tables", "ipv4_lpm"), is_default_action=True)
    te.action.action.CopyFrom(prog.action("send_to_cpu"))
    h.write(10, update(MODIFY, table_entry=te))
    frame = _packet(dst="192.168.0.1")
    h.device.inject(7, frame)
    pin = s.receive("packet").packet
    assert pin.payload == frame  # unchanged: send_to_cpu rewrites nothing
    md = {m.metadata_id: m.value for m in pin.metadata}
    cpm = next(c for c in prog.p4info.controller_packet_metadata if c.preamble.name == "packet_in")
    port_id = next(m.id for m in cpm.metadata if m.name == "ingress_port")
    assert md[port_id] == b"\x07"
    reset = p4r.TableEntry(table_id=prog.id_of("tables", "ipv4_lpm"), is_default_action=True)
    h.write(10, update(MODIFY, table_entry=reset))  # no action: back to the program's drop()
    [d] = h.read(p4r.Entity(table_entry=reset))
    assert d.table_entry.action.action.action_id == prog.id_of("actions", "drop")
    sent = _capture(h)
    packet_ins = h.device.stats.packet_ins
    h.device.inject(7, frame)
    assert sent == [] and h.device.stats.packet_ins == packet_ins


def test_packet_out_leaves_the_named_port(real: Real) -> None:
    h, s, prog = real
    sent = _capture(h)
    cpm = next(c for c in prog.p4info.controller_packet_metadata if c.preamble.name == "packet_out")
    ids = {m.name: m.id for m in cpm.metadata}
    frame = _packet()
    s.send(
        p4r.StreamMessageRequest(
            packet=p4r.PacketOut(
                payload=frame,
                metadata=[
                    p4r.PacketMetadata(metadata_id=ids["egress_port"], value=enc(4)),
                    p4r.PacketMetadata(metadata_id=ids["_pad"], value=b"\x00"),
                ],
            )
        )
    )
    wait_for(lambda: sent, what="packet-out on port 4")
    assert sent == [(4, frame)]


def test_port_counter_counts(real: Real) -> None:
    h, _, prog = real
    for _ in range(3):
        h.device.inject(5, _packet())
    cid = prog.id_of("counters", "port_packets")
    [c] = h.read(
        p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=cid, index=p4r.Index(index=5)))
    )
    assert c.counter_entry.data.packet_count == 3
    assert c.counter_entry.data.byte_count == 3 * len(_packet())
    h.write(
        10, update(MODIFY, counter_entry=p4r.CounterEntry(counter_id=cid, index=p4r.Index(index=5)))
    )
    [c] = h.read(
        p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=cid, index=p4r.Index(index=5)))
    )
    assert c.counter_entry.data.packet_count == 0


def test_multicast_group_in_the_engine(real: Real) -> None:
    h, _, _ = real
    h.write(10, mc_group(1, [(1, 1), (2, 1)]))
    h.write(10, mc_group(1, [(3, 1)], MODIFY))
    got = h.read(
        p4r.Entity(
            packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                multicast_group_entry=p4r.MulticastGroupEntry(multicast_group_id=1)
            )
        )
    )
    assert [
        (r.egress_port, r.instance)
        for r in got[0].packet_replication_engine_entry.multicast_group_entry.replicas
    ] == [(3, 1)]
    h.write(10, mc_group(1, [], DELETE))
    with pytest.raises(grpc.RpcError) as exc:
        h.write(10, mc_group(1, [], DELETE))
    assert status_details(exc.value)[0].canonical_code == rpc_code.NOT_FOUND


def test_rollback_leaves_the_engine_unchanged(real: Real) -> None:
    h, _, prog = real
    a = prog.route(0x0A000100, 24, "ipv4_forward", dst_addr=1, port=1)
    b = prog.route(0x0A000200, 24, "ipv4_forward", dst_addr=2, port=2)
    h.write(10, update(INSERT, table_entry=a))
    with pytest.raises(grpc.RpcError):
        h.write(
            10,
            update(INSERT, table_entry=b),
            update(DELETE, table_entry=a),
            update(INSERT, table_entry=b),
            atomicity=p4r.WriteRequest.ROLLBACK_ON_ERROR,
        )
    [got] = h.read(p4r.Entity(table_entry=p4r.TableEntry()))
    assert got.table_entry.match == a.match


def test_engine_errors_keep_their_codes(real: Real) -> None:
    h, _, prog = real
    full = [
        update(INSERT, table_entry=prog.route(0x0B000000 + (i << 8), 24, "drop"))
        for i in range(1024)
    ]
    h.write(10, *full)
    extra = prog.route(0x0C000000, 24, "drop")
    dup = prog.route(0x0B000000, 24, "drop")
    with pytest.raises(grpc.RpcError) as exc:
        h.write(10, update(INSERT, table_entry=extra), update(INSERT, table_entry=dup))
    codes = [e.canonical_code for e in status_details(exc.value)]
    assert codes == [rpc_code.RESOURCE_EXHAUSTED, rpc_code.ALREADY_EXISTS]
    assert len(h.read(p4r.Entity(table_entry=p4r.TableEntry()))) == 1024
