"""Load signals: slot rates from counter reads, capacity learnt from queue growth, the snapshot."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.config import parse_config
from controlplane.load_signals import CapacityTracker, SlotRates, SnapshotBuilder, nf_load_fraction
from controlplane.nf_state import NfLoad

pytestmark = pytest.mark.unit


def config(**lb: Any) -> Any:
    def nf(i: int, cluster: str, role: str, backup: int | None = None,
           **extra: Any) -> dict[str, Any]:
        return {"id": i, "name": f"nf{i}", "node": f"n{i}", "cluster": cluster, "role": role,
                "backup": backup, "port": 2 + i, "mac": f"02:00:00:00:01:0{i}",
                "mgmt": f"127.0.0.1:{7100 + i}", **extra}
    return parse_config({
        "clusters": [{"name": "c1"}, {"name": "c2"}],
        "nfs": [nf(1, "c1", "primary", 3, capacity_pps=1000), nf(2, "c2", "primary", 4),
                nf(3, "c1", "backup"), nf(4, "c2", "backup")],
        "load_balancer": lb,
    })


def test_slot_rates_from_successive_reads_and_a_counter_reset():
    rates = SlotRates()
    assert rates.update({1: (100, 6400), 2: (10, 640)}, 10.0) == {}  # the first read: no rates
    assert rates.update({1: (300, 19200), 2: (10, 640), 3: (50, 3200)}, 12.0) == {
        1: (100.0, 6400.0), 3: (25.0, 1600.0)}  # slot 2 idle: no entry
    assert rates.update({1: (20, 1280)}, 13.0) == {1: (20.0, 1280.0)}  # went backwards: from 0


def test_capacity_is_configured_or_learnt_where_the_queue_starts_to_grow():
    cap = CapacityTracker({1: 1000.0}, queue_growth=100)
    assert cap.update(1, NfLoad(packet_rate=500, queue_depth=5, at=1)) == 1000.0
    assert cap.update(1, NfLoad(packet_rate=600, queue_depth=150, at=2)) == 600.0  # grows
    assert cap.update(1, NfLoad(packet_rate=640, queue_depth=400, at=3)) == 620.0  # EWMA
    assert cap.update(1, NfLoad(packet_rate=700, queue_depth=10, at=4)) == 700.0  # more, no queue
    # overload drops teach it too, even with a short queue
    assert cap.update(1, NfLoad(packet_rate=300, overload_drops=50, at=5)) == 500.0
    assert cap.drop_rates[1] == 50.0
    # never above the configured value
    assert cap.update(1, NfLoad(packet_rate=5000, overload_drops=50, at=6)) == 1000.0


def test_load_is_the_larger_of_rate_and_cpu_against_their_capacities():
    assert nf_load_fraction(NfLoad(packet_rate=500, cpu_percent=20, workers=1), 1000, None) == 0.5
    assert nf_load_fraction(NfLoad(packet_rate=100, cpu_percent=180, workers=2), 1000, None) == 0.9
    assert nf_load_fraction(NfLoad(packet_rate=100, cpu_percent=80), 1000, 50.0) == 1.6


def test_snapshot_slots_rates_state_sizes_and_memory():
    cfg = config(idle_floor=0.05, nf_settle_s=2.0, slot_cooldown_s=5.0, bytes_per_flow=100)
    b = SnapshotBuilder(cfg)
    owners = [(0, 1), (1, 1), (2, 2), (3, 2)]
    loads = {1: NfLoad(packet_rate=900, slot_flows={0: 2, 1: 1}, slots_behind=frozenset({1}), at=1),
             2: NfLoad(packet_rate=10, at=1), 3: NfLoad(at=1)}
    b.build(0.0, loads, [1, 2], owners, {0: (0, 0), 1: (0, 0), 2: (0, 0)})
    snap = b.build(1.0, loads, [1, 2], owners, {0: (600, 60000), 1: (300, 30000), 2: (10, 0)})
    assert set(snap.nfs) == {1, 2}  # primaries only
    one = snap.nfs[1]
    assert one.load == pytest.approx(0.9) and one.capacity_pps == 1000.0 and one.cluster == "c1"
    assert one.hot_since == 0.0 and one.idle_since is None and one.traffic_pps == 900.0
    s0, s1 = one.slots
    assert (s0.slot, s0.pps, s0.bps, s0.state_bytes, s0.delta_bytes) == (0, 600.0, 60000.0, 200, 0)
    assert (s1.state_bytes, s1.delta_bytes) == (100, 100)  # a peer lags: the delta is the state
    assert one.share(s0) == pytest.approx(0.6)
    assert snap.nfs[2].idle_since == 0.0  # 10 pps of 10000, since the first report
    b.note_move(0, 1, 2, 1.5)
    b.note_shipped(1000, 5)  # learn 200 bytes per flow -> EWMA 150
    snap = b.build(2.0, loads, [1, 2], owners, None)
    assert not snap.nfs[1].settled and snap.slot_moved_at == {0: 1.5}
    assert snap.nfs[2].idle_since == 2.0  # a move touched it: idle counted again from now
    assert snap.nfs[1].slots[0].state_bytes == 300 and snap.nfs[1].slots[0].pps == 600.0
    snap = b.build(7.0, loads, [1, 2], owners, None)
    assert snap.nfs[1].settled and snap.slot_moved_at == {}  # cooldown over: forgotten


def test_load_balancer_knobs_are_checked_with_the_field_named():
    from controlplane.config import ConfigError
    with pytest.raises(ConfigError) as info:
        config(target_margin=0.6)
    assert any(p == "load_balancer.target_margin" and "no room" in w for p, w in info.value.problems)
    with pytest.raises(ConfigError) as info:
        config(idle_floor=0.4, period_s=0)
    paths = {p for p, _ in info.value.problems}
    assert "load_balancer.period_s" in paths
    with pytest.raises(ConfigError) as info:
        config(idle_floor=0.4)
    assert [p for p, _ in info.value.problems] == ["load_balancer.idle_floor"]
    with pytest.raises(ConfigError) as info:
        config(bogus=1)
    assert info.value.problems == [("load_balancer.bogus", "unknown field")]


def test_load_reports_come_every_report_s_unless_the_controller_is_told_otherwise():
    from controlplane.config import ConfigError
    from controlplane.controller import Controller
    assert Controller(config(report_s=0.25), use_etcd=False).load_interval == 0.25
    assert Controller(config(report_s=0.25), use_etcd=False, load_interval=2.0).load_interval == 2.0
    assert Controller(config(), use_etcd=False).load_interval == 1.0
    with pytest.raises(ConfigError) as info:
        config(report_s=0.01)
    assert [p for p, _ in info.value.problems] == ["load_balancer.report_s"]
