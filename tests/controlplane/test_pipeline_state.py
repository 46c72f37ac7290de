"""Desired switch state from config + slot map, name resolution by suffix, and the reconcile diff."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from finsy import P4MulticastGroupEntry, P4Schema, P4TableEntry

from controlplane.config import load_config
from controlplane.p4names import P4NameError, P4Names, resolve_suffix
from controlplane.pipeline_state import (
    ROLE_CPU,
    ROLE_EDGE,
    ROLE_NF,
    EntityBuilder,
    diff,
    entry_args,
    entry_match,
    replica_pairs,
)
from controlplane.slot_map import SlotMap

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
P4INFO = Path(__file__).parent / "data" / "nfcluster.p4info.txtpb"


@pytest.fixture(scope="module")
def schema() -> P4Schema:
    return P4Schema(P4INFO)


@pytest.fixture(scope="module")
def cfg():
    return load_config(ROOT / "topo" / "nfcluster.yaml")


def pairs_of(cfg: Any) -> dict[int, int | None]:
    return {p.id: p.backup for p in cfg.primaries()}


def roundtrip(entities: list[Any], schema: P4Schema) -> list[Any]:
    """What a switch would hand back on a read: decode(encode(x))."""
    out = []
    for e in entities:
        out.append(type(e).decode(e.encode(schema), schema))
    return out


def test_resolve_suffix():
    names = ["NfcIngress.a.slot_owner", "NfcIngress.a.port_role", "NfcEgress.b.port_role"]
    assert resolve_suffix("table", "slot_owner", names) == "NfcIngress.a.slot_owner"
    assert resolve_suffix("table", "a.port_role", names) == "NfcIngress.a.port_role"
    with pytest.raises(P4NameError, match="ambiguous"):
        resolve_suffix("table", "port_role", names)
    with pytest.raises(P4NameError, match="no table named 'nope'"):
        resolve_suffix("table", "nope", names)
    with pytest.raises(P4NameError):
        resolve_suffix("table", "owner", names)  # a suffix must start at a dot


def test_names_resolve_against_p4info(schema):
    n = P4Names(schema)
    assert n.table("slot_owner") == "NfcIngress.slot_map.slot_owner"
    assert n.counter("slot_traffic") == "NfcIngress.stamping.slot_traffic"
    assert n.register("slot_epoch") == "NfcIngress.stamping.slot_epoch"
    assert n.digest("new_flow_t") == "new_flow_t"
    t = n.table_action("nf_port", ["port"], "set_nf_target", ["nf_id", "nf_mac"])
    assert t.action == "NfcEgress.nf_target.set_nf_target"
    with pytest.raises(P4NameError, match="param"):
        n.table_action("nf_port", ["port"], "set_nf_target", ["colour"])


def test_desired_state_from_example_config(schema, cfg):
    builder = EntityBuilder(P4Names(schema), 4096)
    slot_map = SlotMap.build([p.id for p in cfg.primaries()], cfg.switch.slot_count)
    state = builder.desired(cfg, pairs_of(cfg), slot_map)
    by_table: dict[str, list[P4TableEntry]] = {}
    for e in state.tables:
        by_table.setdefault(e.table_id.rsplit(".", 1)[1], []).append(e)
    roles = {entry_match(e)["port"]: entry_args(e)["role"] for e in by_table["port_role"]}
    assert roles == {1: ROLE_EDGE, 2: ROLE_EDGE, **{p: ROLE_NF for p in range(3, 13)}, 510: ROLE_CPU}
    targets = {entry_match(e)["port"]: entry_args(e)["nf_id"] for e in by_table["nf_port"]}
    assert targets == {nf.port: nf.id for nf in cfg.nfs}
    assert entry_args(by_table["nf_port"][0])["nf_mac"] == 0x020000000101
    assert len(by_table["edge_forward"]) == 2
    assert len(by_table["slot_owner"]) == 4096
    owners = {entry_match(e)["slot"]: entry_args(e)["group"] for e in by_table["slot_owner"]}
    assert [owners[s] for s in range(4096)] == slot_map.owners()
    groups = {g.multicast_group_id: replica_pairs(g) for g in state.groups}
    assert groups == {1: [(3, 1), (7, 2)], 2: [(4, 1), (8, 2)], 3: [(5, 1), (9, 2)], 4: [(6, 1), (10, 2)]}
    # everything encodes against the P4Info (names, widths)
    for entity in [*state.tables, *state.groups]:
        entity.encode(schema)


def test_diff_of_empty_switch_inserts_everything(schema, cfg):
    builder = EntityBuilder(P4Names(schema), 4096)
    slot_map = SlotMap.build([1, 2, 3, 4], 4096)
    state = builder.desired(cfg, pairs_of(cfg), slot_map)
    changes = diff(state, [], [], schema)
    assert changes.counts() == {"insert": len(state.tables) + 4, "modify": 0, "delete": 0}


def test_diff_after_readback_is_empty_and_finds_each_difference(schema, cfg):
    builder = EntityBuilder(P4Names(schema), 4096)
    slot_map = SlotMap.build([1, 2, 3, 4], 4096)
    state = builder.desired(cfg, pairs_of(cfg), slot_map)
    tables = roundtrip(state.tables, schema)
    groups = roundtrip(state.groups, schema)
    assert not diff(state, tables, groups, schema)

    # the switch lost one slot entry, holds a stale epoch for another, and has a stray entry
    lost = next(e for e in tables if entry_match(e).get("slot") == 10)
    tables.remove(lost)
    moved = slot_map.copy()
    moved.move(11, 2 if slot_map.owner(11) != 2 else 3)
    stale = builder.desired(cfg, pairs_of(cfg), moved)
    stray = builder.port_role(99, ROLE_EDGE)
    groups[0] = P4MulticastGroupEntry(1, replicas=[(3, 1)])
    groups.append(P4MulticastGroupEntry(77, replicas=[(9, 1)]))
    changes = diff(stale, [*tables, *roundtrip([stray], schema)], groups, schema)
    assert changes.counts() == {"insert": 1, "modify": 2, "delete": 2}
    assert entry_match(changes.insert[0])["slot"] == 10
    modified_slot = next(e for e in changes.modify if isinstance(e, P4TableEntry))
    assert entry_match(modified_slot)["slot"] == 11 and entry_args(modified_slot)["epoch"] == 2
    assert any(isinstance(e, P4MulticastGroupEntry) and e.multicast_group_id == 1 for e in changes.modify)
    deleted = {getattr(e, "multicast_group_id", None) or entry_match(e)["port"] for e in changes.delete}
    assert deleted == {77, 99}
