"""`make bench-failover`'s report and exit status (bench/failover.py), from recorded runs: the
headline is the time to the first delivered packet after the fault, and a false fail-over that
lost anything fails the bench, in a comparison run too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import failover

pytestmark = pytest.mark.unit


def _dist(delivered: list[float], lost: int = 0, false_fo: int = 0,
          verified: bool = True) -> dict[str, Any]:
    faults = [{"detection_ms": 10.0, "takeover_ms": ms, "first_output_ms": ms - 5, "ok": True}
              for ms in delivered]
    failovers = [{"kind": "primary", "ok": True}] * (len(faults) + false_fo)
    return {"faults": faults, "failovers": failovers, "verified": verified, "seconds": 1.0,
            "losses": {"lost": lost, "lost_by_system": lost, "duplicated": 0, "reordered": 0}}


def test_the_headline_pools_the_delivered_times_of_the_judged_runs() -> None:
    rows = [failover.row("kill", _dist([10.0, 20.0, 30.0])),
            failover.row("hang (realtime echo)", _dist([100.0, 200.0]))]
    assert failover.headline(rows) == (
        "time to the first delivered packet after the fault: p50 30.0 ms, p99 200.0 ms over 5 "
        "faults (kill, hang (realtime echo))")


def test_a_false_fail_over_that_lost_anything_fails_even_a_comparison_run() -> None:
    clean = failover.row("kill", _dist([20.0]))
    alarm = failover.row("hang (loop echo)", _dist([20.0], false_fo=3))  # false f-o, no loss
    lossy = failover.row("hang (loop echo)", _dist([20.0], lost=7, false_fo=1, verified=False))
    assert [failover.verdict(r) for r in (clean, alarm, lossy)] == [
        "ok", "ok", "FAILED: 1 false f-o, 7 lost"]
    assert failover.passed([clean, alarm], [clean])
    assert not failover.passed([clean, lossy], [clean])


def test_a_failed_verdict_says_what_the_switch_lost_at_its_ports(tmp_path: Path) -> None:
    switch = tmp_path / "switch.json"
    switch.write_text(json.dumps({"p4sim": {"ports": {"1": {"lost": 18652, "kernel_drops": 18652},
                                                      "2": {"lost": 0}}}}))
    assert failover.switch_port_losses(switch) == {"1": 18652}
    assert failover.switch_port_losses(tmp_path / "none.json") == {}
    dist = _dist([20.0], lost=18652, false_fo=2, verified=False)
    dist["switch_port_losses"] = failover.switch_port_losses(switch)
    starved = failover.row("hang (realtime echo)", dist)
    assert failover.verdict(starved) == (
        "FAILED: 2 false f-o, 18652 lost (18652 at the switch's ports)")
    no_alarm = {**dist, "failovers": [{"kind": "primary", "ok": True}]}  # the fault's own
    assert failover.verdict(failover.row("kill", no_alarm)) == (
        "FAILED (18652 at the switch's ports)")


def test_main_exits_non_zero_on_a_false_fail_over_that_lost_packets(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
        ) -> None:
    runs: list[tuple[str, str, int]] = []

    def run(kind: str, faults: int, rate: int, heartbeat_ms: int, confirm_ms: int, out: Path,
            seed: int, self_takeover: bool = True, echo: str = "", misses: int = 0,
            busy: int = 0) -> dict[str, Any]:
        runs.append((kind, echo, busy))
        return _dist([25.0], lost=2, false_fo=1, verified=False) if echo == "loop" \
            else _dist([25.0])

    monkeypatch.setattr(failover, "run", run)
    rc = failover.main(["--kills", "1", "--hangs", "1", "--kill-variants", "self",
                        "--out-dir", str(tmp_path), "--busy", "2"])
    out = " ".join(capsys.readouterr().out.split())
    assert rc == 1 and "FAILED" in out
    assert "time to the first delivered packet after the fault: p50 25.0 ms" in out
    doc = json.loads((tmp_path / "failover.json").read_text())
    assert doc["busy"] == 2 and doc["headline"].endswith("over 2 faults (kill, hang (realtime echo))")
    assert [r["verdict"] for r in doc["runs"]] == ["ok", "ok", "FAILED: 1 false f-o, 2 lost"]
    assert runs == [("kill", "", 2), ("hang", "realtime", 2), ("hang", "loop", 2)]


def test_a_run_without_its_verdict_and_with_false_fail_overs_fails() -> None:
    """A run whose losses were not recorded (it ended without its verdict: no fault could be
    injected on a host too loaded to settle) had false fail-overs all the same: what it lost is
    unknown, never taken for nothing (one such run had lost 5,015 packets)."""
    dist = _dist([], false_fo=6, verified=False)
    del dist["losses"]
    r = failover.row("hang (loop echo)", dist)
    assert r["false_failover_lost"] and failover.verdict(r) == "FAILED: 6 false f-o, losses not known"
    assert not failover.passed([r], [])
