"""P4Runtime conformance of the server, with the fake engine as the oracle (arbitration, pipeline
life cycle, every entity kind, atomicity, packet-in/out, digests).

Run one: .venv/bin/pytest tests/p4sim/server/test_service_fake.py -k arbitration
"""

from __future__ import annotations

import grpc
import pytest
from finsy.proto import U128, p4i, p4r, rpc_code

from tests.p4sim.server import fake_switch as fk
from tests.p4sim.server.conftest import Harness
from tests.p4sim.server.entity_builders import (
    DELETE,
    INSERT,
    MODIFY,
    acl_entry,
    digest_config,
    enc,
    forward_entry,
    mc_group,
    register,
    route_entry,
    set_egress,
    table,
    update,
)
from tests.p4sim.server.p4rt_client import StreamClient, status_details
from tests.support.procs import wait_for

pytestmark = pytest.mark.unit

Primary = tuple[Harness, StreamClient]


def _status(s: StreamClient) -> tuple[int, int]:
    a = s.receive("arbitration").arbitration
    return a.status.code, U128.decode(a.election_id)


def test_capabilities(harness: Harness) -> None:
    resp = harness.stub.Capabilities(p4r.CapabilitiesRequest())
    assert resp.p4runtime_api_version.startswith("1.")


def test_arbitration_primary_backup_takeover_and_disconnect(harness: Harness) -> None:
    a = harness.stream(5)
    assert _status(a) == (rpc_code.OK, 5)
    b = harness.stream(3)
    assert _status(b) == (rpc_code.ALREADY_EXISTS, 5)
    c = harness.stream(9)  # higher id: everyone is told
    assert _status(c) == (rpc_code.OK, 9)
    assert _status(a) == (rpc_code.ALREADY_EXISTS, 9)
    assert _status(b) == (rpc_code.ALREADY_EXISTS, 9)
    c.close()  # the primary leaves: no primary until someone claims the highest id
    assert _status(a) == (rpc_code.NOT_FOUND, 9)
    assert _status(b) == (rpc_code.NOT_FOUND, 9)
    b.arbitrate(9)
    assert _status(b) == (rpc_code.OK, 9)
    assert _status(a) == (rpc_code.ALREADY_EXISTS, 9)


def test_roles_arbitrate_separately_and_no_election_id_is_a_backup(harness: Harness) -> None:
    a = harness.stream(5)
    assert _status(a) == (rpc_code.OK, 5)
    r = harness.stream(2, role="monitor")
    assert _status(r) == (rpc_code.OK, 2)  # primary of its own role
    n = harness.stream(None)
    assert _status(n) == (rpc_code.ALREADY_EXISTS, 5)
    assert harness.device.arbiter.is_primary("monitor", 2)
    assert harness.device.arbiter.is_primary("", 5)
    assert not harness.device.arbiter.is_primary("", None)


def test_duplicate_election_id_ends_the_stream(harness: Harness) -> None:
    a = harness.stream(5)
    _status(a)
    b = harness.stream(5)
    assert b.done.wait(5)
    assert b.error is not None and b.error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "already exists" in (b.error.details() or "")


def test_wrong_device_id_ends_the_stream(harness: Harness) -> None:
    s = StreamClient(harness.channel)
    harness.streams.append(s)
    s.arbitrate(1, device_id=77)
    assert s.done.wait(5)
    assert s.error is not None and s.error.code() == grpc.StatusCode.NOT_FOUND


def test_pipeline_life_cycle(harness: Harness) -> None:
    R = p4r.GetForwardingPipelineConfigRequest
    with pytest.raises(grpc.RpcError) as exc:
        harness.stub.GetForwardingPipelineConfig(R(device_id=1))
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "forwarding pipeline config" in (exc.value.details() or "")
    s = harness.stream(1)
    _status(s)
    harness.push(1, action=p4r.SetForwardingPipelineConfigRequest.VERIFY)
    assert harness.device.pipeline is None
    harness.push(1, action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_SAVE)
    assert harness.device.pipeline is None
    req = p4r.SetForwardingPipelineConfigRequest(
        device_id=1,
        action=p4r.SetForwardingPipelineConfigRequest.COMMIT,
        election_id=U128.encode(1),
    )
    harness.stub.SetForwardingPipelineConfig(req)
    assert harness.device.pipeline is not None
    got = harness.stub.GetForwardingPipelineConfig(R(device_id=1, response_type=R.ALL)).config
    assert got.cookie.cookie == 0xC00C1E
    assert got.p4info == fk.load_p4info()
    assert got.p4_device_config == fk.DEVICE_CONFIG
    cookie = harness.stub.GetForwardingPipelineConfig(
        R(device_id=1, response_type=R.COOKIE_ONLY)
    ).config
    assert not cookie.HasField("p4info") and cookie.cookie.cookie == 0xC00C1E
    with pytest.raises(grpc.RpcError) as exc:
        harness.stub.SetForwardingPipelineConfig(req)  # nothing saved any more
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_recommit_clears_state_and_reconcile_keeps_it(primary: Primary) -> None:
    h, _ = primary
    h.write(10, table(forward_entry(1, set_egress(2))))
    h.push(10, action=p4r.SetForwardingPipelineConfigRequest.RECONCILE_AND_COMMIT)
    assert len(h.read(p4r.Entity(table_entry=p4r.TableEntry()))) == 1
    h.push(10)
    assert h.read(p4r.Entity(table_entry=p4r.TableEntry())) == []


def test_table_insert_read_modify_delete(primary: Primary) -> None:
    h, _ = primary
    h.write(10, table(forward_entry(1, set_egress(2))), table(route_entry(0x0A000000, 8, 3)))
    h.write(10, table(acl_entry(0x0800, 0xFFFF, priority=5)))
    everything = h.read(p4r.Entity(table_entry=p4r.TableEntry()))
    assert {e.table_entry.table_id for e in everything} == {fk.FORWARD, fk.ROUTES, fk.ACL}
    one = h.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=fk.FORWARD)))
    assert one[0].table_entry.action.action == set_egress(2)
    h.write(10, table(forward_entry(1, set_egress(7)), MODIFY))
    [got] = h.read(p4r.Entity(table_entry=forward_entry(1)))
    assert got.table_entry.action.action.params[0].value == b"\x07"
    h.write(10, table(forward_entry(1), DELETE))
    assert h.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=fk.FORWARD))) == []


def test_entry_metadata_is_kept_and_returned(primary: Primary) -> None:
    h, _ = primary
    te = forward_entry(1, set_egress(2))
    te.metadata = b"cookie-1"
    h.write(10, table(te))
    [got] = h.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=fk.FORWARD)))
    assert got.table_entry.metadata == b"cookie-1"
    te.metadata = b"cookie-2"
    h.write(10, table(te, MODIFY))
    [got] = h.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=fk.FORWARD)))
    assert got.table_entry.metadata == b"cookie-2"
    h.write(10, table(forward_entry(1), DELETE), table(forward_entry(1, set_egress(2))))
    [got] = h.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=fk.FORWARD)))
    assert got.table_entry.metadata == b""


def test_non_canonical_bytestrings_are_normalised(primary: Primary) -> None:
    h, _ = primary
    h.write(10, table(forward_entry(1, set_egress(2), pad=2)))
    [got] = h.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=fk.FORWARD)))
    assert got.table_entry.match[0].exact.value == b"\x01"
    h.write(10, table(forward_entry(1), DELETE))  # the canonical key names the same entry


def test_default_entry_modify_read_and_reset(primary: Primary) -> None:
    h, _ = primary
    te = p4r.TableEntry(table_id=fk.FORWARD, is_default_action=True)
    te.action.action.action_id = fk.SEND_TO_CPU
    h.write(10, table(te, MODIFY))
    [got] = h.read(
        p4r.Entity(table_entry=p4r.TableEntry(table_id=fk.FORWARD, is_default_action=True))
    )
    assert got.table_entry.action.action.action_id == fk.SEND_TO_CPU
    h.write(10, table(p4r.TableEntry(table_id=fk.FORWARD, is_default_action=True), MODIFY))
    [got] = h.read(
        p4r.Entity(table_entry=p4r.TableEntry(table_id=fk.FORWARD, is_default_action=True))
    )
    assert got.table_entry.action.action.action_id == fk.DROP


def test_counters_direct_counters_and_registers(primary: Primary) -> None:
    h, _ = primary
    h.write(10, table(forward_entry(3, set_egress(4))))
    sent: list[tuple[int, bytes]] = []
    h.device.port_sender = lambda port, data: sent.append((port, data))
    frame = bytes(range(64))
    for _ in range(3):
        h.device.inject(3, frame)
    assert sent == [(4, frame)] * 3
    [c] = h.read(
        p4r.Entity(
            counter_entry=p4r.CounterEntry(counter_id=fk.PORT_COUNTER, index=p4r.Index(index=3))
        )
    )
    assert (c.counter_entry.data.packet_count, c.counter_entry.data.byte_count) == (3, 192)
    assert (
        len(h.read(p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=fk.PORT_COUNTER)))) == 512
    )
    probe = forward_entry(3)
    probe.counter_data.SetInParent()
    [e] = h.read(p4r.Entity(table_entry=probe))
    assert e.table_entry.counter_data.packet_count == 3
    [d] = h.read(
        p4r.Entity(direct_counter_entry=p4r.DirectCounterEntry(table_entry=forward_entry(3)))
    )
    assert d.direct_counter_entry.data.byte_count == 192
    h.write(
        10,
        update(MODIFY, direct_counter_entry=p4r.DirectCounterEntry(table_entry=forward_entry(3))),
    )
    [d] = h.read(
        p4r.Entity(direct_counter_entry=p4r.DirectCounterEntry(table_entry=forward_entry(3)))
    )
    assert d.direct_counter_entry.data.packet_count == 0
    h.write(10, register(5, 0xDEADBEEF))
    [r] = h.read(
        p4r.Entity(register_entry=p4r.RegisterEntry(register_id=fk.REG, index=p4r.Index(index=5)))
    )
    assert r.register_entry.data.bitstring == bytes.fromhex("deadbeef")


def test_action_profile_members_groups_and_indirect_entries(primary: Primary) -> None:
    h, _ = primary
    members = [
        update(
            INSERT,
            action_profile_member=p4r.ActionProfileMember(
                action_profile_id=fk.SELECTOR, member_id=m, action=set_egress(m)
            ),
        )
        for m in (1, 2)
    ]
    group = p4r.ActionProfileGroup(
        action_profile_id=fk.SELECTOR,
        group_id=7,
        max_size=4,
        members=[p4r.ActionProfileGroup.Member(member_id=m, weight=1) for m in (1, 2)],
    )
    h.write(10, *members, update(INSERT, action_profile_group=group))
    te = p4r.TableEntry(
        table_id=fk.ECMP,
        match=[p4r.FieldMatch(field_id=1, exact=p4r.FieldMatch.Exact(value=enc(0x0A000001)))],
    )
    te.action.action_profile_group_id = 7
    h.write(10, table(te))
    [g] = h.read(p4r.Entity(action_profile_group=p4r.ActionProfileGroup()))
    assert g.action_profile_group == group
    assert len(h.read(p4r.Entity(action_profile_member=p4r.ActionProfileMember()))) == 2
    [e] = h.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=fk.ECMP)))
    assert e.table_entry.action.action_profile_group_id == 7


def test_multicast_groups_and_clone_sessions(primary: Primary) -> None:
    h, _ = primary
    h.write(10, mc_group(1, [(1, 1), (2, 2)]))
    h.write(10, mc_group(1, [(3, 1)], MODIFY))
    clone = p4r.CloneSessionEntry(
        session_id=5, replicas=[p4r.Replica(port=b"\x01\xfe", instance=0)]
    )
    h.write(
        10,
        update(
            INSERT,
            packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                clone_session_entry=clone
            ),
        ),
    )
    assert h.device.pipeline is not None
    assert h.device.pipeline.switch.mc_groups() == {1: [(3, 1)]}
    assert h.device.pipeline.switch.clone_sessions() == {5: [(510, 0)]}
    got = h.read(
        p4r.Entity(
            packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                multicast_group_entry=p4r.MulticastGroupEntry()
            )
        ),
        p4r.Entity(
            packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                clone_session_entry=p4r.CloneSessionEntry()
            )
        ),
    )
    assert got[0].packet_replication_engine_entry.multicast_group_entry.replicas[0].egress_port == 3
    assert got[1].packet_replication_engine_entry.clone_session_entry == clone
    h.write(10, mc_group(1, [], DELETE))
    assert h.device.pipeline.switch.mc_groups() == {}


def test_packet_out_and_packet_in(primary: Primary) -> None:
    h, s = primary
    sent: list[tuple[int, bytes]] = []
    h.device.port_sender = lambda port, data: sent.append((port, data))
    payload = bytes(60)
    s.send(
        p4r.StreamMessageRequest(
            packet=p4r.PacketOut(
                payload=payload, metadata=[p4r.PacketMetadata(metadata_id=1, value=enc(4))]
            )
        )
    )
    wait_for(lambda: sent, what="packet-out leaves port 4")
    assert sent == [(4, payload)]
    h.write(10, table(forward_entry(2, p4r.Action(action_id=fk.SEND_TO_CPU))))
    frame = bytes.fromhex("ffffffffffff020000000001") + b"\x08\x00" + bytes(50)
    h.device.inject(2, frame)
    pin = s.receive("packet").packet
    assert pin.payload == frame
    assert {m.metadata_id: m.value for m in pin.metadata} == {1: b"\x02", 2: b"\x00"}


def test_packet_out_from_a_backup_is_refused(primary: Primary) -> None:
    h, _ = primary
    b = h.stream(2)
    _status(b)
    b.send(p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=bytes(20))))
    err = b.receive("error").error
    assert err.canonical_code == rpc_code.PERMISSION_DENIED
    assert err.packet_out.packet_out.payload == bytes(20)


def test_digests_batch_ack_and_suppression(primary: Primary) -> None:
    h, s = primary

    def frame(mac: int) -> bytes:
        return bytes(6) + mac.to_bytes(6, "big") + bytes(50)

    h.device.inject(1, frame(0xA))  # not configured: nothing
    h.write(10, digest_config(max_timeout_ns=10**9, max_list_size=2, ack_timeout_ns=10**10))
    h.device.inject(1, frame(0xA))
    h.device.inject(1, frame(0xA))  # duplicate within the list
    h.device.inject(2, frame(0xB))
    dl = s.receive("digest").digest
    assert dl.digest_id == fk.LEARN
    assert [[m.bitstring for m in d.struct.members] for d in dl.data] == [
        [b"\x01", b"\x0a"],
        [b"\x02", b"\x0b"],
    ]
    h.device.inject(1, frame(0xA))  # suppressed until acked
    h.device.inject(3, frame(0xC))  # sent after max_timeout (1 s)
    late = s.receive("digest", timeout=5).digest
    assert [[m.bitstring for m in d.struct.members] for d in late.data] == [[b"\x03", b"\x0c"]]
    s.send(
        p4r.StreamMessageRequest(
            digest_ack=p4r.DigestListAck(digest_id=fk.LEARN, list_id=dl.list_id)
        )
    )
    h.write(10, digest_config(max_timeout_ns=0, max_list_size=1, ack_timeout_ns=0, kind=MODIFY))
    h.device.inject(1, frame(0xA))  # acked: no longer suppressed
    again = s.receive("digest", timeout=5).digest
    assert [[m.bitstring for m in d.struct.members] for d in again.data] == [[b"\x01", b"\x0a"]]
    [cfg] = h.read(p4r.Entity(digest_entry=p4r.DigestEntry(digest_id=fk.LEARN)))
    assert cfg.digest_entry.config.max_list_size == 1


def test_continue_on_error_applies_the_good_updates(primary: Primary) -> None:
    h, _ = primary
    h.write(10, table(forward_entry(1, set_egress(2))))
    with pytest.raises(grpc.RpcError) as exc:
        h.write(
            10,
            table(forward_entry(2, set_egress(2))),
            table(forward_entry(1, set_egress(2))),
            table(forward_entry(3, set_egress(2))),
        )
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    codes = [e.canonical_code for e in status_details(exc.value)]
    assert codes == [rpc_code.OK, rpc_code.ALREADY_EXISTS, rpc_code.OK]
    assert len(h.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=fk.FORWARD)))) == 3


@pytest.mark.parametrize(
    "atomicity", [p4r.WriteRequest.ROLLBACK_ON_ERROR, p4r.WriteRequest.DATAPLANE_ATOMIC]
)
def test_rollback_modes_undo_everything(
    primary: Primary, atomicity: p4r.WriteRequest.Atomicity.ValueType
) -> None:
    h, _ = primary
    h.write(10, table(forward_entry(1, set_egress(2))), mc_group(4, [(1, 1)]), register(1, 5))
    with pytest.raises(grpc.RpcError) as exc:
        h.write(
            10,
            table(forward_entry(1, set_egress(9)), MODIFY),
            table(forward_entry(2), DELETE),
            mc_group(4, [], DELETE),
            register(1, 6),
            table(forward_entry(5, set_egress(1))),
            table(forward_entry(1, set_egress(3))),
            atomicity=atomicity,
        )
    codes = [e.canonical_code for e in status_details(exc.value)]
    assert codes[1] == rpc_code.NOT_FOUND and codes.count(rpc_code.ABORTED) == 5
    with pytest.raises(grpc.RpcError):
        h.write(
            10,
            mc_group(4, [], DELETE),
            table(forward_entry(1), DELETE),
            table(forward_entry(1, set_egress(3))),
            register(1, 7),
            table(forward_entry(9), DELETE),
            atomicity=atomicity,
        )
    [e] = h.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=fk.FORWARD)))
    assert e.table_entry.action.action == set_egress(2)
    assert h.device.pipeline is not None and h.device.pipeline.switch.mc_groups() == {4: [(1, 1)]}
    [r] = h.read(
        p4r.Entity(register_entry=p4r.RegisterEntry(register_id=fk.REG, index=p4r.Index(index=1)))
    )
    assert r.register_entry.data.bitstring == b"\x05"


def _renumbered() -> p4i.P4Info:
    """The fake P4Info with table `forward` and action `set_egress` under new ids."""
    info = fk.load_p4info()
    for t in info.tables:
        if t.preamble.id == fk.FORWARD:
            t.preamble.id = 33554499
        for ref in t.action_refs:
            if ref.id == fk.SET_EGRESS:
                ref.id = 16777299
    for a in info.actions:
        if a.preamble.id == fk.SET_EGRESS:
            a.preamble.id = 16777299
    for dc in info.direct_counters:
        dc.direct_table_id = 33554499
    return info


def _reconcile(h: Harness, info: p4i.P4Info) -> None:
    req = p4r.SetForwardingPipelineConfigRequest(
        device_id=1,
        action=p4r.SetForwardingPipelineConfigRequest.RECONCILE_AND_COMMIT,
        election_id=U128.encode(10),
    )
    req.config.p4info.CopyFrom(info)
    req.config.p4_device_config = fk.DEVICE_CONFIG
    h.stub.SetForwardingPipelineConfig(req)


def test_reconcile_to_a_renumbered_program_carries_the_state(primary: Primary) -> None:
    h, _ = primary
    default = p4r.TableEntry(table_id=fk.FORWARD, is_default_action=True)
    default.action.action.action_id = fk.SEND_TO_CPU
    h.write(
        10, table(forward_entry(1, set_egress(2))), table(default, MODIFY), mc_group(3, [(1, 1)])
    )
    h.write(10, digest_config(max_list_size=5))
    _reconcile(h, _renumbered())
    [e] = h.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=33554499)))
    assert e.table_entry.action.action.action_id == 16777299
    assert e.table_entry.action.action.params[0].value == b"\x02"
    [d] = h.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=33554499, is_default_action=True)))
    assert d.table_entry.action.action.action_id == fk.SEND_TO_CPU
    assert h.device.pipeline is not None and h.device.pipeline.switch.mc_groups() == {3: [(1, 1)]}
    [cfg] = h.read(p4r.Entity(digest_entry=p4r.DigestEntry()))
    assert cfg.digest_entry.config.max_list_size == 5


def test_reconcile_fails_when_a_table_is_gone(primary: Primary) -> None:
    h, _ = primary
    h.write(10, table(route_entry(0x0A000000, 8, 1)))
    info = fk.load_p4info()
    keep = [t for t in info.tables if t.preamble.id != fk.ROUTES]
    del info.tables[:]
    info.tables.extend(keep)
    before = h.device.pipeline
    with pytest.raises(grpc.RpcError) as exc:
        _reconcile(h, info)
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "ingress.routes" in (exc.value.details() or "")
    assert h.device.pipeline is before


def test_without_register_access_registers_are_refused_as_bmv2_refuses_them(
    primary: Primary,
) -> None:
    """`p4sim run --no-register-access`: register reads and writes answer UNIMPLEMENTED, as
    BMv2's P4Runtime server does (p4lang/PI#376); counters and tables are served as before."""
    h, _ = primary
    h.device.require_pipeline().serve_registers = False
    with pytest.raises(grpc.RpcError) as err:
        h.write(10, register(5, 1))
    [e] = status_details(err.value)
    assert e.canonical_code == rpc_code.UNIMPLEMENTED
    assert e.message.startswith("Register writes are not supported yet")
    with pytest.raises(grpc.RpcError) as err:
        h.read(p4r.Entity(register_entry=p4r.RegisterEntry(register_id=fk.REG)))
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "--no-register-access" in str(err.value.details())
    counters = h.read(p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=fk.PORT_COUNTER)))
    assert len(counters) == 512
