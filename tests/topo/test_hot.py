"""The `--hot` scenario's pieces: skewed source ports and its configuration."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from controlplane.config import parse_config
from topo.launch.hot import (
    HOT_SHARE,
    HotWatch,
    apply_config,
    hot_flows,
    latency,
    skewed_ports,
    slot_of,
)

pytestmark = pytest.mark.unit

EXAMPLE = Path(__file__).resolve().parents[2] / "topo" / "nfcluster.yaml"


def test_skewed_ports_put_the_share_of_flows_in_the_hot_slots_each_in_its_own_slot():
    hot = set(range(0, 4096, 4))  # a quarter of the slots
    ports = skewed_ports(hot, "10.0.0.1", "10.0.0.2", 9000, 30, 4096)
    slots = [slot_of("10.0.0.1", "10.0.0.2", p, 9000, 17, 4096) for p in ports]
    assert len(ports) == 30 and len(set(slots)) == 30
    assert sum(s in hot for s in slots) == round(30 * HOT_SHARE)
    assert any(s not in hot for s in slots[:5])  # interleaved, not all hot flows first


def test_the_hot_configuration_is_valid_and_turns_the_balancer_on():
    data = yaml.safe_load(EXAMPLE.read_text())
    apply_config(data)
    cfg = parse_config(data)
    assert cfg.load_balancer.enabled and cfg.load_balancer.period_s == 0.4
    # a load report per round: the relief shows one report after the moves
    assert cfg.load_balancer.report_s == cfg.load_balancer.period_s
    assert {nf.capacity_pps for nf in cfg.nfs} == {400.0}


def test_relief_is_the_time_from_first_overload_to_first_report_below_the_high_mark():
    w = HotWatch("http://unused")
    w.samples = [(10.0, {"1": 0.2}), (11.0, {"1": 1.6}), (12.0, {"1": 1.1}), (13.5, {"1": 0.7}),
                 (14.0, {"1": 0.9})]
    assert w.relief() == {"nf": 1, "peak": 1.6, "onset": 11.0, "relieved": 13.5, "seconds": 2.5}
    w.samples = [(10.0, {"1": 1.6})]
    assert w.relief()["seconds"] is None


def test_hot_flows_and_their_latency_before_the_first_move_and_after_relief():
    hot = set(range(0, 4096, 4))
    ports = skewed_ports(hot, "10.0.0.1", "10.0.0.2", 9000, 10, 4096)
    ids = hot_flows(ports, hot, "10.0.0.1", "10.0.0.2", 9000, 4096)
    assert len(ids) == 8
    rtt = {ids[0]: [(1.0, 50.0), (2.0, 40.0), (5.0, 2.0)], ids[1]: [(1.5, 30.0), (6.0, 1.0)],
           next(i for i in range(10) if i not in ids): [(1.0, 900.0)]}  # a cold flow: not counted
    lat = latency(rtt, ids, before=3.0, after=4.0)
    assert lat["before"] == {"n": 3, "p50": 40.0, "p99": 50.0}
    assert lat["after"] == {"n": 2, "p50": 1.0, "p99": 2.0}
    assert latency(rtt, ids, None, None)["before"] == {"n": 0, "p50": None, "p99": None}
