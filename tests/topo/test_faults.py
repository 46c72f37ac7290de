"""topo/faults/injector.py: the fail-over measurements from the promoted NF's log (the first output a
promotion released after each fault, matched by time, never an earlier promotion's), and the
`mgmt` fault's course against a fake controller API (cut, acted on, restored, back as a spare;
a cut that cuts nothing is a fault not handled)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from topo.faults import injector as faults
from topo.faults.injector import FaultInjector, FaultRecord, first_output_times, primary_fault

pytestmark = pytest.mark.unit


def test_first_output_is_the_promoted_nfs_first_takeover_line_after_the_signal(tmp_path: Path) -> None:
    line = ("2026-11-23 09:28:25,824 nf5.w0 INFO takeover: first output of the promoted slots "
            "released 2.1 ms after the promotion, at {:.6f}\n")
    (tmp_path / "nf5.log").write_text(
        "2026-11-23 09:28:20,000 nf5 INFO NF 5 (checker) up\n"
        + line.format(1000.010)  # an earlier promotion of the same NF
        + line.format(1010.0315) + line.format(1020.5))
    killed = FaultRecord("primary", "kill", 1, at=1010.0, promoted=5)
    spare = FaultRecord("spare", "kill", 9, at=1010.0)
    no_line = FaultRecord("primary", "kill", 2, at=1030.0, promoted=5)
    unknown = FaultRecord("primary", "kill", 3, at=1010.0, promoted=6)  # no nf6.log
    first_output_times([killed, spare, no_line, unknown], tmp_path)
    assert killed.first_output_ms == pytest.approx(31.5)
    assert spare.first_output_ms is None and no_line.first_output_ms is None
    assert unknown.first_output_ms is None


def _no_restart(nf: int) -> subprocess.Popen[bytes]:
    raise AssertionError(f"NF {nf} restarted: a cut NF lives on")


class FakeController:
    """The controller's HTTP API as `FaultInjector.cut_mgmt` reads it, acting on a cut NF the
    way the real one does: a cut primary (silent for a few polls) is failed over; once its link
    is back it answers again and is reconfigured as an idle spare, taken at once as NF 5's
    backup."""

    def __init__(self, cut_really_cuts: bool = True) -> None:
        self.cut_really_cuts = cut_really_cuts
        self.rows: dict[int, dict[str, Any]] = {
            1: {"id": 1, "alive": True, "role": "primary", "backup": 5, "slots": 3},
            5: {"id": 5, "alive": True, "role": "backup", "slots": 0}}
        self.failovers: list[dict[str, object]] = []
        self.cut_off: set[int] = set()
        self.polls = 0
        self.events: list[tuple[str, int]] = []

    def cut(self, nf: int, on: bool) -> None:
        self.events.append(("cut" if on else "restore", nf))
        if not self.cut_really_cuts:
            return
        if on:
            self.cut_off.add(nf)
        else:
            self.cut_off.discard(nf)

    def get(self, url: str) -> object:
        self.polls += 1
        row = self.rows[1]
        if 1 in self.cut_off and row["alive"] and self.polls > 5:  # heartbeats missed: fail over
            row["alive"] = False
            self.failovers.append({"dead": 1, "at": time.time(), "promoted": 5, "new_backup": 9,
                                   "ok": True, "error": ""})
            self.rows[5]["role"] = "primary"
        elif 1 not in self.cut_off and not row["alive"]:  # answers again: made a spare, and
            row.update(alive=True, role="backup", slots=0)  # at once the new backup of NF 5
        if url.endswith("/nfs"):
            return list(self.rows.values())
        if "/slots?nf=" in url:
            return [{"slot": s} for s in range(int(self.rows[1]["slots"]))]
        return {"failovers": self.failovers}


def test_a_cut_primary_is_failed_over_restored_and_back_in_the_pool_as_an_idle_spare(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ctl = FakeController()
    monkeypatch.setattr(faults, "_get", ctl.get)
    inj = FaultInjector("http://ctl", {}, _no_restart, kinds=("mgmt",), cut=ctl.cut,
                        cut_s=0.05)
    assert inj.pick() in {("mgmt", 1), ("mgmt", 5)}
    rec = inj.cut_mgmt(1, timeout=5)
    assert rec.ok, rec.error
    assert (rec.kind, rec.mode, rec.role, len(rec.slots), rec.promoted) == ("mgmt", "cut",
                                                                            "primary", 3, 5)
    assert rec.detection_ms is not None and rec.back_ms is not None
    assert rec.cut_ms is not None and rec.cut_ms >= 50
    assert ctl.events == [("cut", 1), ("restore", 1)]
    assert primary_fault(rec) and inj.records == [rec]


def test_a_cut_that_cuts_nothing_is_reported_not_handled_and_the_link_restored(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ctl = FakeController(cut_really_cuts=False)  # the controller keeps hearing the NF
    monkeypatch.setattr(faults, "_get", ctl.get)
    inj = FaultInjector("http://ctl", {}, _no_restart, cut=ctl.cut)
    rec = inj.cut_mgmt(1, timeout=0.3)
    assert not rec.ok and "controller acting on NF 1" in rec.error
    assert ctl.events == [("cut", 1), ("restore", 1)]  # never left cut


def test_mgmt_picks_a_primary_only_while_its_backup_lives(monkeypatch: pytest.MonkeyPatch) -> None:
    ctl = FakeController()
    ctl.rows[5]["alive"] = False
    monkeypatch.setattr(faults, "_get", ctl.get)
    inj = FaultInjector("http://ctl", {}, _no_restart, kinds=("mgmt",),
                        cut=ctl.cut)
    assert {inj.pick() for _ in range(20)} == {None}


def test_netem_picks_a_primary_that_carries_traffic_if_any_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ctl = FakeController()
    ctl.rows[3] = {"id": 3, "alive": True, "role": "primary", "backup": 5, "slots": 3,
                   "packet_rate": 120.0}
    ctl.rows[1]["packet_rate"] = 0.0
    monkeypatch.setattr(faults, "_get", ctl.get)
    inj = FaultInjector("http://ctl", {}, _no_restart, kinds=("netem",),
                        control=lambda kind, nf: None)
    assert {inj.pick() for _ in range(20)} == {("netem", 3)}
    ctl.rows[3]["packet_rate"] = 0.0  # none does: any primary
    assert {inj.pick() for _ in range(40)} == {("netem", 1), ("netem", 3)}


def test_the_next_fault_waits_until_every_primary_is_protected_and_every_backup_armed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault starts from a settled system, not during the last one's recovery (a restarted
    victim alive but not yet configured, a primary a spare could protect still without a backup,
    a backup not yet armed for its primary)."""
    rows = [{"id": 1, "alive": True, "role": "primary", "cluster": "c1", "node": "n1"},
            {"id": 2, "alive": True, "role": "backup", "cluster": "c1", "node": "n2"},
            {"id": 3, "alive": True, "role": "primary", "cluster": "c1", "node": "n2"},
            {"id": 4, "alive": True, "role": "spare", "cluster": "c1", "node": "n2"}]
    status: dict[str, Any] = {"nfs": {"total": 4, "configured": 4}, "pairs": {"1": 2, "3": None},
                              "self_takeover": True, "armed": {"2": {"primary": 1}}}

    def get(url: str) -> object:
        return rows if url.endswith("/nfs") else status

    monkeypatch.setattr(faults, "_get", get)
    inj = FaultInjector("http://ctl", {}, _no_restart)
    assert inj.settled()  # NF 3's only spare is on its own node: none can protect it
    rows[3]["node"] = "n1"
    assert not inj.settled()  # now one can: wait for it
    status["pairs"]["3"] = 4
    rows[3]["role"] = "backup"
    assert not inj.settled()  # NF 4 not armed yet
    status["armed"]["4"] = {"primary": 3}
    assert inj.settled()
    status["nfs"]["configured"] = 3
    assert not inj.settled()  # a restarted NF not configured yet
    status["nfs"]["configured"] = 4
    rows[1]["alive"] = False
    assert not inj.settled()
    rows[1]["alive"] = True
    status.update(self_takeover=False, armed={})
    assert inj.settled()  # no arming without self-takeover
