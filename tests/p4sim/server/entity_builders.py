"""Short builders of P4Runtime entities for the fake P4Info, used by the server tests."""

from __future__ import annotations

from finsy.proto import p4d, p4r

from tests.p4sim.server import fake_switch as fk

INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE


def enc(value: int, width_bytes: int = 0) -> bytes:
    n = max(1, (value.bit_length() + 7) // 8, width_bytes)
    return value.to_bytes(n, "big")


def update(kind: int, **entity: object) -> p4r.Update:
    return p4r.Update(type=kind, entity=p4r.Entity(**entity))  # type: ignore[arg-type]


def set_egress(port: int) -> p4r.Action:
    return p4r.Action(
        action_id=fk.SET_EGRESS, params=[p4r.Action.Param(param_id=1, value=enc(port))]
    )


def forward_entry(
    in_port: int, action: p4r.Action | None = None, *, pad: int = 0
) -> p4r.TableEntry:
    te = p4r.TableEntry(
        table_id=fk.FORWARD,
        match=[p4r.FieldMatch(field_id=1, exact=p4r.FieldMatch.Exact(value=enc(in_port, pad)))],
    )
    if action is not None:
        te.action.action.CopyFrom(action)
    return te


def route_entry(prefix: int, plen: int, port: int) -> p4r.TableEntry:
    te = p4r.TableEntry(
        table_id=fk.ROUTES,
        match=[
            p4r.FieldMatch(field_id=1, lpm=p4r.FieldMatch.LPM(value=enc(prefix), prefix_len=plen))
        ],
    )
    te.action.action.CopyFrom(set_egress(port))
    return te


def acl_entry(ether_type: int, mask: int, priority: int) -> p4r.TableEntry:
    te = p4r.TableEntry(
        table_id=fk.ACL,
        priority=priority,
        match=[
            p4r.FieldMatch(
                field_id=1, ternary=p4r.FieldMatch.Ternary(value=enc(ether_type), mask=enc(mask))
            )
        ],
    )
    te.action.action.action_id = fk.DROP
    return te


def table(te: p4r.TableEntry, kind: int = INSERT) -> p4r.Update:
    return update(kind, table_entry=te)


def mc_group(gid: int, replicas: list[tuple[int, int]], kind: int = INSERT) -> p4r.Update:
    return update(
        kind,
        packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
            multicast_group_entry=p4r.MulticastGroupEntry(
                multicast_group_id=gid,
                replicas=[p4r.Replica(egress_port=p, instance=i) for p, i in replicas],
            )
        ),
    )


def register(index: int, value: int) -> p4r.Update:
    return update(
        MODIFY,
        register_entry=p4r.RegisterEntry(
            register_id=fk.REG, index=p4r.Index(index=index), data=p4d.P4Data(bitstring=enc(value))
        ),
    )


def digest_config(
    max_timeout_ns: int = 0, max_list_size: int = 1, ack_timeout_ns: int = 0, kind: int = INSERT
) -> p4r.Update:
    return update(
        kind,
        digest_entry=p4r.DigestEntry(
            digest_id=fk.LEARN,
            config=p4r.DigestEntry.Config(
                max_timeout_ns=max_timeout_ns,
                max_list_size=max_list_size,
                ack_timeout_ns=ack_timeout_ns,
            ),
        ),
    )
