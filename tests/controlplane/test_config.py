"""Configuration loading: the example file is valid, and every bad field is named with a reason."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.config import ConfigError, load_config, parse_config

pytestmark = pytest.mark.unit

EXAMPLE = Path(__file__).resolve().parents[2] / "topo" / "nfcluster.yaml"


def example() -> dict[str, Any]:
    data = yaml.safe_load(EXAMPLE.read_text())
    assert isinstance(data, dict)
    return data


def problems_of(data: Any) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    return info.value.problems


def test_example_topology_is_valid():
    cfg = load_config(EXAMPLE)
    assert [nf.id for nf in cfg.primaries()] == [1, 2, 3, 4]
    assert {c.name for c in cfg.clusters} == {"c1", "c2"}
    for primary in cfg.primaries():
        backup = cfg.backup_of(primary.id)
        assert backup is not None
        assert backup.node != primary.node
        assert backup.cluster == primary.cluster
    assert sorted(nf.port for nf in cfg.nfs) == list(range(3, 13))
    assert [h.port for h in cfg.edge] == [1, 2]
    assert cfg.switch.cpu_port == 510
    assert cfg.switch.slot_count == 4096
    assert all(nf.mgmt.startswith("10.99.0.") for nf in cfg.nfs)


@pytest.mark.parametrize(
    ("mutate", "path", "words"),
    [
        (lambda d: d["nfs"][2].__setitem__("mac", "zz:00"), "nfs[2].mac", "MAC"),
        (lambda d: d["nfs"][0].__setitem__("port", 600), "nfs[0].port", "510"),
        (lambda d: d["nfs"][1].__setitem__("mgmt", "10.99.0.1"), "nfs[1].mgmt", "HOST:PORT"),
        (lambda d: d["nfs"][1].__setitem__("colour", "red"), "nfs[1].colour", "unknown field"),
        (lambda d: d["nfs"][0].pop("node"), "nfs[0].node", "required"),
        (lambda d: d["nfs"][0].__setitem__("role", "leader"), "nfs[0].role", "primary"),
        (lambda d: d["switch"].__setitem__("target", "x"), "switch.target", "p4sim"),
        (lambda d: d["switch"].__setitem__("slot_bits", 20), "switch.slot_bits", "16"),
        (lambda d: d["edge"][0].__setitem__("prefixes", ["10.0.0.300/32"]), "edge[0].prefixes", "IPv4"),
        (lambda d: d["nfs"][3].__setitem__("id", 0), "nfs[3].id", "1"),
    ],
)
def test_field_errors_name_the_field(mutate, path, words):
    data = example()
    mutate(data)
    problems = problems_of(data)
    paths = [p for p, _ in problems]
    assert path in paths, problems
    why = dict(problems)[path]
    assert words.lower() in why.lower(), problems


def _with(data: dict[str, Any], index: int, **fields: Any) -> dict[str, Any]:
    data = copy.deepcopy(data)
    data["nfs"][index].update(fields)
    return data


@pytest.mark.parametrize(
    ("fields", "index", "path", "words"),
    [
        ({"id": 2}, 0, "nfs[1].id", "already used by nfs[0]"),
        ({"port": 3}, 1, "nfs[1].port", "already used"),
        ({"mac": "02:00:00:00:01:01"}, 1, "nfs[1].mac", "already used"),
        ({"node": "n1"}, 4, "nfs[0].backup", "same node"),
        ({"backup": 42}, 0, "nfs[0].backup", "does not exist"),
        ({"backup": 2}, 0, "nfs[0].backup", "not backup"),
        ({"backup": 1}, 0, "nfs[0].backup", "itself"),
        ({"backup": None}, 0, "nfs[0].backup", "needs a backup"),
        ({"cluster": "c9"}, 0, "nfs[0].cluster", "not in clusters"),
        ({"cluster": "c2"}, 4, "nfs[0].backup", "cluster"),
        ({"backup": 1}, 4, "nfs[4].backup", "only a primary"),
        ({"port": 510}, 0, "nfs[0].port", "CPU port"),
        ({"port": 1}, 0, "edge[0].port", "also nfs[0].port"),
    ],
)
def test_cross_field_errors_name_the_field(fields, index, path, words):
    problems = problems_of(_with(example(), index, **fields))
    assert any(p == path and words in why for p, why in problems), problems


def test_backup_shared_by_two_primaries_is_rejected():
    data = _with(_with(example(), 4, node="n3"), 1, backup=5)
    problems = problems_of(data)
    assert ("nfs[1].backup", "NF 5 already backs up NF 1") in problems
    assert any(p == "nfs[5].role" and "no primary's backup" in why for p, why in problems)


def test_thresholds_must_be_ordered():
    data = example()
    data["thresholds"] = {"low_water": 0.9, "high_water": 0.5}
    problems = problems_of(data)
    assert any(p == "thresholds.low_water" and "not below high_water" in w for p, w in problems)


def test_udp_heartbeats_need_ipv4_replication_addresses():
    """The controller's heartbeat socket is IPv4: an NF it could never reach over UDP would be
    declared dead at once, so the configuration says so instead."""
    data = example()
    assert data["heartbeat"]["transport"] == "udp"
    data["nfs"][2]["replication"] = "[fd00::13]:7203"
    problems = problems_of(data)
    assert any(p == "nfs[2].replication" and "IPv6" in why for p, why in problems)
    data["heartbeat"]["transport"] = "grpc"
    parse_config(data)


def test_bad_yaml_and_non_mapping(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("switch: [unclosed\n")
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    assert info.value.problems[0][0] == "(yaml)"
    assert str(bad) in str(info.value)
    assert problems_of(["a", "list"])[0][0] == "(top level)"


def test_error_message_lists_every_problem():
    data = _with(example(), 0, mac="nope", port=999)
    with pytest.raises(ConfigError) as info:
        parse_config(data, "x.yaml")
    text = str(info.value)
    assert "x.yaml" in text and "nfs[0].mac" in text and "nfs[0].port" in text


def test_defaults_by_target():
    data = example()
    data["switch"]["target"] = "bmv2"
    cfg = parse_config(data)
    assert cfg.switch.device_config_path() == Path("build/bmv2/nfcluster.json")
    data["switch"]["target"] = "p4sim"
    assert parse_config(data).switch.device_config_path() == Path("build/nfcluster.p4sim")
    assert cfg.nf(1).replication_address() == "10.99.0.11:7201"
