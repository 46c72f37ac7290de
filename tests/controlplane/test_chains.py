"""Service chains in the controller: the configuration's chains and their errors, the switch
entries that steer between stages, slot indexes per stage, and moves kept within a stage."""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from finsy import P4Schema

from controlplane.cluster_state import ClusterState, NfPhase
from controlplane.config import ConfigError, load_config, parse_config
from controlplane.migration import MoveError, check_move
from controlplane.p4names import P4Names
from controlplane.pipeline_state import EntityBuilder, entry_args, entry_match
from controlplane.slot_map import SlotMap

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
CHAIN = ROOT / "topo" / "chain.yaml"
P4INFO = Path(__file__).resolve().parent / "data" / "nfcluster.p4info.txtpb"


def chain_data() -> dict[str, Any]:
    data = yaml.safe_load(CHAIN.read_text())
    assert isinstance(data, dict)
    return data


def test_the_example_chain_is_valid_and_numbered_in_order():
    cfg = load_config(CHAIN)
    assert [(s.id, s.name, s.position, s.last) for s in cfg.stages()] == [
        (0, "firewall", 0, False), (1, "nat", 1, False), (2, "monitor", 2, True)]
    assert {nf.id: cfg.stage_of(nf.id) for nf in cfg.nfs} == {
        1: 0, 4: 0, 9: 0, 2: 1, 3: 1, 5: 1, 6: 1, 7: 2, 8: 2, 10: 2}
    assert cfg.slot_space == 3 * 4096
    assert cfg.stage_slots(1) == range(4096, 8192)
    assert cfg.stage_of_slot(4096 + 7) == 1


def test_without_chains_one_stage_zero():
    cfg = load_config(ROOT / "topo" / "nfcluster.yaml")
    assert [(s.id, s.name) for s in cfg.stages()] == [(0, "main")]
    assert cfg.slot_space == cfg.switch.slot_count


def _problems(mutate: Any) -> list[tuple[str, str]]:
    data = copy.deepcopy(chain_data())
    mutate(data)
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    return info.value.problems


@pytest.mark.parametrize(("mutate", "path", "words"), [
    (lambda d: d["clusters"][1].__setitem__("stage", "dpi"), "clusters[1].stage", "in no chain"),
    (lambda d: d["clusters"][1].pop("stage"), "clusters[1].stage", "needs a stage"),
    (lambda d: d["chains"][0]["inside"].__setitem__(0, "laptop"), "chains[0].inside[0]", "not in edge"),
    (lambda d: d["chains"][0]["outside"].append("client"), "chains[0].outside[1]", "already enters"),
    (lambda d: d["chains"][0]["outside"].clear(), "edge[1]", "enters no chain"),
    (lambda d: d["chains"][0]["stages"].append({"name": "nat"}), "chains[0].stages[3].name",
     "already a stage"),
    (lambda d: d["chains"][0]["stages"].extend([{"name": "a"}, {"name": "b"}]), "chains",
     "room for 4"),
    (lambda d: d["chains"][0]["stages"].append({"name": "ids"}), "chains[0].stages[3]",
     "no primary"),
    (lambda d: d["chains"][0].__setitem__("stages", []), "chains[0].stages", "at least 1"),
    (lambda d: d["switch"].__setitem__("slot_bits", 15), "switch.slot_bits", "no room"),
    (lambda d: (d.pop("chains"), None), "clusters[0].stage", "no chains are declared"),
])
def test_bad_chains_name_the_field(mutate: Any, path: str, words: str) -> None:
    problems = _problems(mutate)
    assert any(p == path and words in why for p, why in problems), problems


@pytest.fixture(scope="module")
def schema() -> P4Schema:
    return P4Schema(P4INFO)


def test_chain_entries_steer_both_directions(schema: P4Schema) -> None:
    cfg = load_config(CHAIN)
    builder = EntityBuilder(P4Names(schema), cfg.switch.slot_count)
    by_table: dict[str, list[Any]] = {}
    for e in builder.chain_entries(cfg):
        by_table.setdefault(e.table_id.rsplit(".", 1)[1], []).append(e)
        e.encode(schema)
    stages = {entry_match(e)["port"]: entry_args(e)["stage"] for e in by_table["nf_stage"]}
    assert stages == {nf.port: cfg.stage_of(nf.id) for nf in cfg.nfs}
    enter = {entry_match(e)["port"]: (entry_args(e)["stage"], entry_args(e)["reverse"])
             for e in by_table["edge_chain"]}
    assert enter == {1: (0, 0), 2: (2, 1)}  # client: first stage; server: last, in reverse
    nxt = {(entry_match(e)["stage"], entry_match(e)["reverse"]):
           (entry_args(e)["stage"], entry_args(e)["rehash"]) for e in by_table["stage_next"]}
    # leaving the NAT (stage 1) in either direction, the slot is computed again
    assert nxt == {(0, 0): (1, 0), (1, 0): (2, 1), (2, 1): (1, 0), (1, 1): (0, 1)}


def test_no_chain_entries_without_chains(schema: P4Schema) -> None:
    cfg = load_config(ROOT / "topo" / "nfcluster.yaml")
    assert EntityBuilder(P4Names(schema), cfg.switch.slot_count).chain_entries(cfg) == []


def test_slot_owner_keys_are_stage_and_slot(schema: P4Schema) -> None:
    cfg = load_config(CHAIN)
    builder = EntityBuilder(P4Names(schema), cfg.switch.slot_count)
    m = SlotMap.build_staged([[1], [2, 3], [7]], cfg.switch.slot_count)
    state = builder.desired(cfg, {1: 4, 2: 5, 3: 6, 7: 8}, m)
    owners = {(entry_match(e)["stage"], entry_match(e)["slot"]): entry_args(e)["primary"]
              for e in state.tables if e.table_id.endswith("slot_owner")}
    assert len(owners) == 3 * 4096
    assert {o for (stage, _), o in owners.items() if stage == 0} == {1}
    assert {o for (stage, _), o in owners.items() if stage == 1} == {2, 3}
    assert owners[(2, 5)] == 7 == m.owner(2 * 4096 + 5)


def test_staged_map_spreads_each_stage_over_its_own_primaries():
    m = SlotMap.build_staged([[1, 2], [3]], 64)
    assert m.slot_count == 128
    assert set(m.owners()[:64]) == {1, 2} and set(m.owners()[64:]) == {3}
    assert m.counts() == {1: 32, 2: 32, 3: 64}


def _ctl(cfg: Any) -> Any:
    """Just what check_move reads: a primary session, the map, pairs and registry states."""
    m = SlotMap.build_staged([[1], [2, 3], [7]], cfg.switch.slot_count)
    nfs = {nf.id: SimpleNamespace(declared_down=False) for nf in cfg.nfs}
    state = ClusterState({1: 4, 2: 5, 3: 6, 7: 8}, strict=True)
    for nf in nfs:
        state.nfs.to(nf, NfPhase.CONFIGURED)
    return SimpleNamespace(cfg=cfg, session=SimpleNamespace(is_primary=True), slot_map=m,
                           pairs=state.pairs, registry=SimpleNamespace(nfs=nfs),
                           open_moves={}, moved_at={}, state=state, urgent=0)


def test_a_slot_moves_within_its_stage_only():
    cfg = load_config(CHAIN)
    ctl = _ctl(cfg)
    nat_slot = next(s for s in cfg.stage_slots(1) if ctl.slot_map.owner(s) == 2)
    assert check_move(ctl, nat_slot, 3) == 2
    with pytest.raises(MoveError, match="stage 'nat'; NF 7 serves stage 'monitor'"):
        check_move(ctl, nat_slot, 7)
    with pytest.raises(MoveError, match="outside"):
        check_move(ctl, cfg.slot_space, 3)
