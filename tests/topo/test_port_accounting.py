"""The frames a switch dropped before or after its pipeline, from each port's interface counters
against the P4 program's port_rx/port_tx, on fake counter values: BMv2's silent input-buffer drops
become a number tied to the port (and leave "unaccounted"), p4sim's own counted drops are not
counted twice, and a switch restart within the window computes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controlplane.config import load_config
from topo.faults import port_accounting
from topo.faults.losses import loss_lines, where_lost
from topo.faults.port_accounting import (
    PortAccount,
    Snapshot,
    accounting,
    link_counters,
    snapshot,
    summary_line,
)

pytestmark = [pytest.mark.unit]

CONFIG = Path(__file__).resolve().parents[2] / "topo" / "nfcluster.yaml"


def link(rx: int = 0, tx: int = 0, tx_dropped: int = 0) -> dict[str, int]:
    return {"rx_packets": rx, "tx_packets": tx, "rx_dropped": 0, "tx_dropped": tx_dropped}


def test_bmv2s_silent_drops_before_and_after_the_pipeline_are_counted_per_port() -> None:
    """The measured BMv2 run: of 6,205 frames the client's side sent, 6,130 entered the pipeline;
    of the NF 1 port's 6,130 outputs, 5,793 entered it. Without the target's own counters, all of
    the difference is the switch's silent loss, named by port."""
    before = Snapshot({"1": {"rx": 100}, "3": {"rx": 50, "tx": 100}, "2": {"tx": 40}},
                      {"1": link(rx=100), "3": link(rx=50, tx=100), "2": link(tx=40)})
    after = Snapshot({"1": {"rx": 100 + 6130}, "3": {"rx": 50 + 5793, "tx": 100 + 6130},
                      "2": {"tx": 40 + 5793}},
                     {"1": link(rx=100 + 6205), "3": link(rx=50 + 6130, tx=100 + 6128),
                      "2": link(tx=40 + 5790, tx_dropped=1)})
    accounts, why = accounting(before, after)
    assert accounts is not None and why == ""
    by_port = {a.port: a for a in accounts}
    assert (by_port[1].before_uncounted, by_port[1].after_uncounted) == (75, 0)
    assert (by_port[3].before_uncounted, by_port[3].after_uncounted) == (337, 2)
    # the interface's own tx_dropped (the peer had no room) is the kernel's count, not a gap
    assert (by_port[2].transmitted, by_port[2].after_uncounted) == (5791, 2)
    assert summary_line(accounts).startswith(
        "switch ports (interfaces against port_rx/port_tx): dropped by the target before its "
        "pipeline 412, after it 4, counted by no switch counter (port 1: 75 in, 0 out, port 2: "
        "0 in, 2 out, port 3: 337 in, 2 out)")

    cfg = load_config(CONFIG)
    nfs = [{"id": 1, "role": "primary", "losses": {}}, {"id": 5, "role": "backup", "losses": {}}]
    sites = where_lost(cfg, None, {}, nfs, {}, None, accounts)
    assert {(s.where, s.packets, s.loss) for s in sites} == {
        ("switch port 1 (client)", 75, True), ("switch port 3 (NF 1)", 337, True),
        ("switch port 3 (NF 1)", 2, True), ("switch port 2 (server)", 2, True)}
    assert "the interface received 6205, port_rx counted 6130" in sites[0].why
    lines = loss_lines(420, sites)
    assert lines[-1] == "  unaccounted: 4 lost packets no counter on the path saw"
    assert not any("unaccounted" in ln for ln in loss_lines(416, sites))


def test_a_copy_toward_a_backups_port_dropped_after_the_pipeline_is_not_a_loss() -> None:
    before = Snapshot({"7": {"tx": 0}}, {"7": link()})
    after = Snapshot({"7": {"tx": 10}}, {"7": link(tx=7)})
    accounts, _ = accounting(before, after)
    nfs = [{"id": 5, "role": "backup", "losses": {}}]  # NF 5 is on port 7
    sites = where_lost(load_config(CONFIG), None, {}, nfs, {}, None, accounts)
    assert [(s.where, s.packets, s.loss) for s in sites] == [("switch port 7 (NF 5)", 3, False)]


def test_p4sims_own_port_counters_are_not_counted_twice() -> None:
    """p4sim counts the frames the kernel dropped before it read them (kernel_drops), its full
    transmit ring and its impairment; those are the whole gap at its ports, so nothing more is
    listed, and its impairment's duplicates are not taken for frames it did not send."""
    t0 = {"1": {"kernel_drops": 3, "rx_truncated": 0}, "3": {"tx_overflows": 1}}
    t1 = {"1": {"kernel_drops": 43, "rx_truncated": 2},
          "3": {"tx_overflows": 5, "impair_dropped": 6, "impair_duplicated": 4}}
    before = Snapshot({"1": {"rx": 10}, "3": {"tx": 10}}, {"1": link(rx=13), "3": link(tx=5)}, t0)
    after = Snapshot({"1": {"rx": 1010}, "3": {"tx": 1010}},
                     {"1": link(rx=13 + 1042), "3": link(tx=5 + 994)}, t1)
    accounts, _ = accounting(before, after)
    assert accounts is not None
    by_port = {a.port: a for a in accounts}
    assert (by_port[1].before, by_port[1].before_counted, by_port[1].before_uncounted) == (42, 42, 0)
    # sent 1000 + 4 duplicates, 4 + 6 dropped by p4sim, 994 on the wire
    assert (by_port[3].after, by_port[3].after_counted, by_port[3].after_uncounted) == (10, 10, 0)
    switch = {"ports": {"1": {"kernel_drops": 43, "rx_truncated": 2}}}
    sites = where_lost(load_config(CONFIG), switch, {}, [], {}, None, accounts)
    assert {(s.where, s.packets) for s in sites} == {("switch port 1 (client)", 43),
                                                     ("switch port 1 (client)", 2)}
    assert "counted by no switch counter (port" not in summary_line(accounts)
    assert "dropped by the target before its pipeline 0, after it 0" in summary_line(accounts)


def test_in_flight_frames_and_the_kernels_own_frames_never_count_as_drops() -> None:
    before = Snapshot({"1": {"rx": 10, "tx": 0}}, {"1": link(rx=9, tx=0)})
    after = Snapshot({"1": {"rx": 20, "tx": 5}}, {"1": link(rx=19, tx=8)})
    accounts, _ = accounting(before, after)
    assert accounts == [PortAccount(1, 10, 10, 5, 8, 0, 0, 0, 0)]


def test_a_switch_restart_within_the_window_computes_nothing() -> None:
    before = Snapshot({"1": {"rx": 500}}, {"1": link(rx=500)})
    after = Snapshot({"1": {"rx": 20}}, {"1": link(rx=800)})
    accounts, why = accounting(before, after)
    assert accounts is None and "went down" in why
    assert summary_line(None, why).endswith(why)


RECORDED_LINKS = json.dumps([
    {"ifindex": 1, "ifname": "lo", "stats64": {"rx": {"packets": 9}, "tx": {"packets": 9}}},
    {"ifindex": 7, "ifname": "s1-eth1",
     "stats64": {"rx": {"bytes": 900, "packets": 6205, "errors": 0, "dropped": 0},
                 "tx": {"bytes": 800, "packets": 5793, "errors": 0, "dropped": 3}}},
    {"ifindex": 8, "ifname": "s1-eth3",
     "stats64": {"rx": {"bytes": 9, "packets": 6130, "dropped": 1},
                 "tx": {"bytes": 9, "packets": 12260}}},
])


def test_link_counters_parses_ip_s_link_json() -> None:
    assert link_counters(RECORDED_LINKS) == {
        "s1-eth1": {"rx_packets": 6205, "tx_packets": 5793, "rx_dropped": 0, "tx_dropped": 3},
        "s1-eth3": {"rx_packets": 6130, "tx_packets": 12260, "rx_dropped": 1, "tx_dropped": 0}}
    assert link_counters("") == {}


class Intf:
    def __init__(self, name: str) -> None:
        self.name = name


class FakeSwitch:
    """A Mininet switch: its ports' interfaces, and a shell that answers `ip -j -s link`."""

    def __init__(self, calls: list[str]) -> None:
        self.intfs = {0: Intf("lo"), 1: Intf("s1-eth1"), 3: Intf("s1-eth3")}
        self.calls = calls

    def cmd(self, command: str) -> str:
        self.calls.append("interfaces")
        assert command == "ip -j -s link show"
        return RECORDED_LINKS


def test_snapshots_are_read_in_the_order_that_can_only_understate_a_drop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def p4_ports(api: str) -> dict[str, dict[str, int]] | None:
        calls.append("p4")
        return {"1": {"rx": 6130}}

    monkeypatch.setattr(port_accounting, "p4_ports", p4_ports)
    status: dict[str, Any] = {"ports": {"1": {"kernel_drops": 0}}}
    first = snapshot("http://ctl", FakeSwitch(calls), lambda: status, first="p4")
    assert calls == ["p4", "interfaces"] and first is not None
    assert first.interfaces == {"1": link_counters(RECORDED_LINKS)["s1-eth1"],
                                "3": link_counters(RECORDED_LINKS)["s1-eth3"]}
    assert first.target == status["ports"] and first.p4 == {"1": {"rx": 6130}}
    calls.clear()
    assert snapshot("http://ctl", FakeSwitch(calls), lambda: None, first="interfaces") is not None
    assert calls == ["interfaces", "p4"]
    monkeypatch.setattr(port_accounting, "p4_ports", lambda api: None)
    assert snapshot("http://ctl", FakeSwitch([]), lambda: None, first="p4") is None


def test_a_run_with_a_switch_fault_or_without_p4_counters_computes_nothing() -> None:
    from topo.faults.disturbances import Disturbances
    from topo.launch.scenario import port_window

    snap = Snapshot({"1": {"rx": 1}}, {"1": link(rx=1)})
    assert port_window(snap, snap, None) == ([PortAccount(1, 0, 0, 0, 0, 0, 0, 0, 0)], "")
    assert port_window(None, snap, None)[0] is None
    dist = Disturbances()
    dist.faults.append(type("Fault", (), {"kind": "switch"})())
    accounts, why = port_window(snap, snap, dist)
    assert accounts is None and "restarted" in why
