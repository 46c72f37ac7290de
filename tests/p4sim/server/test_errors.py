"""Error codes of the server for each kind of bad request, and that a bad request changes nothing.

Run one: .venv/bin/pytest tests/p4sim/server/test_errors.py -k lpm
"""

from __future__ import annotations

import grpc
import pytest
from finsy.proto import U128, p4d, p4r, rpc_code

from tests.p4sim.server import fake_switch as fk
from tests.p4sim.server.conftest import COMMIT, Harness
from tests.p4sim.server.entity_builders import (
    DELETE,
    INSERT,
    MODIFY,
    acl_entry,
    enc,
    forward_entry,
    mc_group,
    route_entry,
    set_egress,
    table,
    update,
)
from tests.p4sim.server.p4rt_client import StreamClient, status_details
from tests.support.procs import wait_for

pytestmark = pytest.mark.unit

Primary = tuple[Harness, StreamClient]
C = rpc_code


def _te(**kw: object) -> p4r.TableEntry:
    return p4r.TableEntry(**kw)  # type: ignore[arg-type]


def _with_action(te: p4r.TableEntry, action: p4r.Action) -> p4r.TableEntry:
    te.action.action.CopyFrom(action)
    return te


def _idle(te: p4r.TableEntry) -> p4r.TableEntry:
    te.idle_timeout_ns = 10**9
    return te


def _ternary(value: int, mask: int, priority: int = 1) -> p4r.TableEntry:
    te = acl_entry(0, 0xFFFF, priority)
    te.match[0].ternary.value = enc(value)
    te.match[0].ternary.mask = enc(mask)
    return te


BAD_UPDATES: list[tuple[str, p4r.Update, int]] = [
    (
        "unknown table id",
        table(_with_action(_te(table_id=1234), set_egress(1))),
        C.INVALID_ARGUMENT,
    ),
    ("unknown action id", table(forward_entry(1, p4r.Action(action_id=99))), C.INVALID_ARGUMENT),
    (
        "action not in the table",
        table(_with_action(route_entry(0, 8, 1), p4r.Action(action_id=fk.SEND_TO_CPU))),
        C.INVALID_ARGUMENT,
    ),
    (
        "default-only action in an entry",
        table(forward_entry(1, p4r.Action(action_id=fk.MISS))),
        C.INVALID_ARGUMENT,
    ),
    (
        "missing action parameter",
        table(forward_entry(1, p4r.Action(action_id=fk.SET_EGRESS))),
        C.INVALID_ARGUMENT,
    ),
    (
        "unknown action parameter",
        table(
            forward_entry(
                1,
                p4r.Action(action_id=fk.DROP, params=[p4r.Action.Param(param_id=9, value=b"\x01")]),
            )
        ),
        C.INVALID_ARGUMENT,
    ),
    ("parameter too wide", table(forward_entry(1, set_egress(1024))), C.INVALID_ARGUMENT),
    ("match value too wide", table(forward_entry(600, set_egress(1))), C.INVALID_ARGUMENT),
    (
        "empty match value",
        table(
            _with_action(
                _te(
                    table_id=fk.FORWARD,
                    match=[p4r.FieldMatch(field_id=1, exact=p4r.FieldMatch.Exact(value=b""))],
                ),
                set_egress(1),
            )
        ),
        C.INVALID_ARGUMENT,
    ),
    (
        "unknown match field id",
        table(
            _with_action(
                _te(
                    table_id=fk.FORWARD,
                    match=[p4r.FieldMatch(field_id=7, exact=p4r.FieldMatch.Exact(value=b"\x01"))],
                ),
                set_egress(1),
            )
        ),
        C.INVALID_ARGUMENT,
    ),
    (
        "wrong match kind",
        table(
            _with_action(
                _te(
                    table_id=fk.FORWARD,
                    match=[
                        p4r.FieldMatch(
                            field_id=1, lpm=p4r.FieldMatch.LPM(value=b"\x01", prefix_len=9)
                        )
                    ],
                ),
                set_egress(1),
            )
        ),
        C.INVALID_ARGUMENT,
    ),
    (
        "missing exact field",
        table(_with_action(_te(table_id=fk.FORWARD), set_egress(1))),
        C.INVALID_ARGUMENT,
    ),
    (
        "match field twice",
        table(
            _with_action(
                _te(
                    table_id=fk.FORWARD,
                    match=[p4r.FieldMatch(field_id=1, exact=p4r.FieldMatch.Exact(value=b"\x01"))]
                    * 2,
                ),
                set_egress(1),
            )
        ),
        C.INVALID_ARGUMENT,
    ),
    ("lpm bits beyond the prefix", table(route_entry(0x0A000001, 8, 1)), C.INVALID_ARGUMENT),
    ("lpm prefix too long", table(route_entry(0x0A000000, 33, 1)), C.INVALID_ARGUMENT),
    ("ternary zero mask", table(_ternary(0, 0)), C.INVALID_ARGUMENT),
    ("ternary value outside mask", table(_ternary(0x0801, 0xFF00)), C.INVALID_ARGUMENT),
    ("ternary without priority", table(_ternary(0x0800, 0xFFFF, priority=0)), C.INVALID_ARGUMENT),
    (
        "priority on an exact table",
        table(
            _with_action(
                _te(table_id=fk.FORWARD, priority=3, match=forward_entry(1).match), set_egress(1)
            )
        ),
        C.INVALID_ARGUMENT,
    ),
    ("entry without action", table(forward_entry(1)), C.INVALID_ARGUMENT),
    (
        "direct action on a profile table",
        table(
            _with_action(
                _te(
                    table_id=fk.ECMP,
                    match=[p4r.FieldMatch(field_id=1, exact=p4r.FieldMatch.Exact(value=b"\x01"))],
                ),
                set_egress(1),
            )
        ),
        C.INVALID_ARGUMENT,
    ),
    (
        "missing profile member",
        table(
            _te(
                table_id=fk.ECMP,
                match=[p4r.FieldMatch(field_id=1, exact=p4r.FieldMatch.Exact(value=b"\x01"))],
                action=p4r.TableAction(action_profile_member_id=5),
            )
        ),
        C.NOT_FOUND,
    ),
    (
        "idle timeout on a table without it",
        table(_idle(forward_entry(1, set_egress(1)))),
        C.INVALID_ARGUMENT,
    ),
    ("modify missing entry", table(forward_entry(9, set_egress(1)), MODIFY), C.NOT_FOUND),
    ("delete missing entry", table(forward_entry(9), DELETE), C.NOT_FOUND),
    ("duplicate insert", table(forward_entry(1, set_egress(1))), C.ALREADY_EXISTS),
    (
        "insert a default entry",
        table(_with_action(_te(table_id=fk.FORWARD, is_default_action=True), set_egress(1))),
        C.INVALID_ARGUMENT,
    ),
    (
        "modify a const default",
        table(_with_action(_te(table_id=fk.ACL, is_default_action=True), set_egress(1)), MODIFY),
        C.PERMISSION_DENIED,
    ),
    (
        "insert a counter entry",
        update(
            INSERT,
            counter_entry=p4r.CounterEntry(counter_id=fk.PORT_COUNTER, index=p4r.Index(index=1)),
        ),
        C.INVALID_ARGUMENT,
    ),
    (
        "counter index out of range",
        update(
            MODIFY,
            counter_entry=p4r.CounterEntry(counter_id=fk.PORT_COUNTER, index=p4r.Index(index=512)),
        ),
        C.OUT_OF_RANGE,
    ),
    (
        "unknown counter id",
        update(MODIFY, counter_entry=p4r.CounterEntry(counter_id=5, index=p4r.Index(index=1))),
        C.INVALID_ARGUMENT,
    ),
    (
        "register value too wide",
        update(
            MODIFY,
            register_entry=p4r.RegisterEntry(
                register_id=fk.REG,
                index=p4r.Index(index=1),
                data=p4d.P4Data(bitstring=b"\x01" + bytes(4)),
            ),
        ),
        C.INVALID_ARGUMENT,
    ),
    ("multicast group 0", mc_group(0, [(1, 1)]), C.INVALID_ARGUMENT),
    ("duplicate replica", mc_group(3, [(1, 1), (1, 1)]), C.INVALID_ARGUMENT),
    ("delete missing multicast group", mc_group(3, [], DELETE), C.NOT_FOUND),
    ("unknown meter id", update(MODIFY, meter_entry=p4r.MeterEntry(meter_id=1)), C.INVALID_ARGUMENT),
    (
        "unknown digest id",
        update(INSERT, digest_entry=p4r.DigestEntry(digest_id=3)),
        C.INVALID_ARGUMENT,
    ),
    (
        "unspecified update type",
        p4r.Update(entity=p4r.Entity(table_entry=forward_entry(2, set_egress(1)))),
        C.INVALID_ARGUMENT,
    ),
    ("empty entity", p4r.Update(type=INSERT), C.INVALID_ARGUMENT),
]


@pytest.mark.parametrize(
    ("update_", "code"), [(u, c) for _, u, c in BAD_UPDATES], ids=[n for n, _, _ in BAD_UPDATES]
)
def test_bad_update_reports_its_code_and_changes_nothing(
    primary: Primary, update_: p4r.Update, code: int
) -> None:
    h, _ = primary
    h.write(10, table(forward_entry(1, set_egress(1))))
    before = h.read(p4r.Entity(table_entry=p4r.TableEntry()))
    with pytest.raises(grpc.RpcError) as exc:
        h.write(10, update_)
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    [err] = status_details(exc.value)
    assert err.canonical_code == code, err.message
    assert err.message
    assert h.read(p4r.Entity(table_entry=p4r.TableEntry())) == before
    assert h.stub.Capabilities(p4r.CapabilitiesRequest()).p4runtime_api_version  # still serving


def _raw_write(h: Harness, election_id: int | None, device_id: int = 1) -> grpc.RpcError:
    req = p4r.WriteRequest(device_id=device_id, updates=[table(forward_entry(2, set_egress(1)))])
    if election_id is not None:
        req.election_id.CopyFrom(U128.encode(election_id))
    with pytest.raises(grpc.RpcError) as exc:
        h.stub.Write(req)
    return exc.value


def test_only_the_primary_may_write(primary: Primary) -> None:
    h, _ = primary
    backup = h.stream(3)
    backup.receive("arbitration")
    assert _raw_write(h, 3).code() == grpc.StatusCode.PERMISSION_DENIED
    assert _raw_write(h, None).code() == grpc.StatusCode.PERMISSION_DENIED
    assert _raw_write(h, 11).code() == grpc.StatusCode.PERMISSION_DENIED
    req = p4r.SetForwardingPipelineConfigRequest(
        device_id=1, action=COMMIT, election_id=U128.encode(3)
    )
    with pytest.raises(grpc.RpcError) as exc:
        h.stub.SetForwardingPipelineConfig(req)
    assert exc.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert h.read(p4r.Entity(table_entry=p4r.TableEntry())) == []


def test_write_without_election_id_only_when_nobody_is_connected(harness: Harness) -> None:
    s = harness.stream(1)
    s.receive("arbitration")
    harness.push(1)
    s.close()
    wait_for(lambda: not harness.device.arbiter.primaries(), what="the controller is gone")
    harness.stub.Write(
        p4r.WriteRequest(device_id=1, updates=[table(forward_entry(2, set_egress(1)))])
    )
    assert len(harness.read(p4r.Entity(table_entry=p4r.TableEntry()))) == 1
    s2 = harness.stream(5)
    s2.receive("arbitration")
    assert _raw_write(harness, None).code() == grpc.StatusCode.PERMISSION_DENIED


def test_wrong_device_id(primary: Primary) -> None:
    h, _ = primary
    assert _raw_write(h, 10, device_id=2).code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as exc:
        list(
            h.stub.Read(
                p4r.ReadRequest(device_id=2, entities=[p4r.Entity(table_entry=p4r.TableEntry())])
            )
        )
    assert exc.value.code() == grpc.StatusCode.NOT_FOUND


def test_write_and_read_without_a_pipeline(harness: Harness) -> None:
    s = harness.stream(1)
    s.receive("arbitration")
    assert _raw_write(harness, 1).code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as exc:
        list(
            harness.stub.Read(
                p4r.ReadRequest(device_id=1, entities=[p4r.Entity(table_entry=p4r.TableEntry())])
            )
        )
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION


@pytest.mark.parametrize(
    "entity",
    [
        p4r.Entity(table_entry=p4r.TableEntry(table_id=77)),
        p4r.Entity(
            counter_entry=p4r.CounterEntry(counter_id=fk.PORT_COUNTER, index=p4r.Index(index=9999))
        ),
        p4r.Entity(meter_entry=p4r.MeterEntry(meter_id=77)),
        p4r.Entity(),
    ],
    ids=["unknown table", "index out of range", "unknown meter", "empty"],
)
def test_bad_reads(primary: Primary, entity: p4r.Entity) -> None:
    h, _ = primary
    with pytest.raises(grpc.RpcError) as exc:
        h.read(entity)
    assert exc.value.code() in (
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.UNIMPLEMENTED,
    )


def test_bad_pipeline_configs(primary: Primary) -> None:
    h, _ = primary
    with pytest.raises(grpc.RpcError) as exc:
        h.push(10, config=b"garbage")
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    req = p4r.SetForwardingPipelineConfigRequest(
        device_id=1, action=COMMIT, election_id=U128.encode(10)
    )
    req.config.p4_device_config = fk.DEVICE_CONFIG
    with pytest.raises(grpc.RpcError) as exc:
        h.stub.SetForwardingPipelineConfig(req)  # no P4Info
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    req = p4r.SetForwardingPipelineConfigRequest(device_id=1, election_id=U128.encode(10))
    with pytest.raises(grpc.RpcError) as exc:
        h.stub.SetForwardingPipelineConfig(req)  # action UNSPECIFIED
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert h.device.pipeline is not None  # the committed program is still there


def test_stream_message_before_arbitration(harness: Harness) -> None:
    s = StreamClient(harness.channel)
    harness.streams.append(s)
    s.send(p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=b"x")))
    assert s.receive("error").error.canonical_code == C.FAILED_PRECONDITION


def test_bad_packet_out_metadata(primary: Primary) -> None:
    _, s = primary
    s.send(
        p4r.StreamMessageRequest(
            packet=p4r.PacketOut(
                payload=bytes(20), metadata=[p4r.PacketMetadata(metadata_id=9, value=b"\x01")]
            )
        )
    )
    assert s.receive("error").error.canonical_code == C.INVALID_ARGUMENT
    s.send(
        p4r.StreamMessageRequest(
            packet=p4r.PacketOut(
                payload=bytes(20), metadata=[p4r.PacketMetadata(metadata_id=1, value=b"\x7f\xff")]
            )
        )
    )
    assert s.receive("error").error.canonical_code == C.INVALID_ARGUMENT
