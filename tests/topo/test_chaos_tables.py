"""topo/faults/chaos.py's and topo/faults/memory.py's summary tables: the memory table tells a process alive throughout (growth)
from a part restarted meanwhile (judged over its longest incarnation's own life, if one lived
long enough, or, in a run with a settle tail, over the tail's second half), and names the
largest growth in its caption; the per-kind table's caption sums up the `mgmt` cuts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from topo.faults.chaos import kind_table
from topo.faults.injector import FaultRecord
from topo.faults.memory import (
    RssLife,
    RssSampler,
    incarnations,
    long_enough,
    plot_lines,
    rss_table,
    trend,
)

pytestmark = pytest.mark.unit

MIB = 2**20


def _text(table: object) -> str:
    console = Console(width=200, record=True)
    console.print(table)
    return console.export_text()


def test_the_memory_table_shows_growth_of_survivors_and_marks_restarted_parts() -> None:
    rss = {"start": {"etcd m0 [10]": 40 * MIB, "p4sim [11]": 100 * MIB, "nf-host 1 [12]": 50 * MIB,
                     "python [13]": MIB, "python [14]": MIB},
           "end": {"etcd m0 [20]": 60 * MIB, "p4sim [11]": 110 * MIB, "nf-host 1 [12]": 50 * MIB,
                   "python [23]": MIB, "python [24]": MIB}}
    text = _text(rss_table(rss))
    assert "p4sim [11]" in text and "+10.0 %" in text and "+0.0 %" in text
    row = next(line for line in text.splitlines() if "etcd m0 (restarted)" in line)
    assert "40.0" in row and "60.0" in row and "%" not in row
    assert "python" not in text  # several processes of one name: not matched across pids


def test_the_kind_table_caption_sums_up_the_mgmt_cuts() -> None:
    cuts = [FaultRecord("mgmt", "cut", 1, 0.0, [1, 2], detection_ms=200.0, takeover_ms=250.0,
                        ok=True, role="primary", cut_ms=780.0, back_ms=900.0),
            FaultRecord("mgmt", "cut", 6, 5.0, detection_ms=210.0, ok=True, role="backup",
                        cut_ms=781.0, back_ms=40.0)]
    text = _text(kind_table(cuts, {"lost": 0}, 0))
    assert "mgmt cuts (primary 1, backup 1, spare 0)" in text
    row = next(line for line in text.splitlines() if "│" in line and " mgmt " in line)
    assert " 2 " in row and "250.0" in row


def test_the_kind_table_caption_counts_losses_after_processing_as_the_systems() -> None:
    """The "lost by the system" words include the count gaps no wire fault explains and the
    switch's duplicate drops of output never delivered, not only the packets lost before any NF;
    an end host's own socket drop (after the NFs) is told apart."""
    faults = [FaultRecord("primary", "kill", 1, 0.0, [1], detection_ms=5.0, ok=True)]
    losses = {"lost": 4, "lost_by_system_before_processing": 1,
              "lost_after_processing_by_system": 3, "duplicate_drops_undelivered": 2,
              "lost_in_switch_outages": 0, "lost_on_the_wire": 0}
    text = " ".join(_text(kind_table(faults, losses, 1)).split())
    assert "lost by the system 3 (before any NF processed them 1; after," in text
    assert "explains 2, of them output the switch dropped as a duplicate and never delivered: " \
           "at most 2)" in text
    assert "by the end hosts' sockets 1" in text


def test_growth_is_judged_from_the_warm_snapshot_and_shown_from_the_start() -> None:
    rss = {"start": {"etcd m0 [10]": 40 * MIB}, "warm": {"etcd m0 [10]": 50 * MIB},
           "end": {"etcd m0 [10]": 51 * MIB}}
    row = next(line for line in _text(rss_table(rss)).splitlines() if "etcd m0 [10]" in line)
    assert "50.0" in row and "+2.0 %" in row and "+27.5 %" in row


def test_an_nf_hosts_children_are_named_by_their_process_name() -> None:
    """Workers and heartbeat responders are forked by multiprocessing (their command line is the
    nf-host's, or a spawned child's): their process name (nf_host/child_process.become_child)
    tells them apart."""
    from topo.faults.memory import _name

    spawn = ["/venv/bin/python", "-c", "from multiprocessing.spawn import spawn_main"]
    forked = ["/venv/bin/python", "-m", "nf_host", "run", "--nf-id", "3"]
    assert _name(forked, "nf3.w1") == "nf-host 3 worker 1"
    assert _name(forked, "nf3.hb") == "nf-host 3 responder"
    assert _name(spawn, "nf3.w1") == "nf-host 3 worker 1"
    assert _name(spawn, "nf12.hb") == "nf-host 12 responder"
    assert _name(["/venv/bin/python", "-m", "nf_host", "run", "--nf-id", "3"], "python") \
        == "nf-host 3"
    assert _name(spawn, "python") == "/venv/bin/python"
    assert _name(["/venv/bin/python", "-B", "-c", "from multiprocessing.resource_tracker import main;"
                  "main(9)"], "python") == "resource tracker"
    # by the program or module, not by an argument that happens to name another part
    assert _name(["/venv/bin/python", "-m", "topo.traffic", "send", "--out",
                  "/tmp/etcdlife/client.json"], "python") == "traffic"
    assert _name(["/usr/bin/etcd", "--name", "m1", "--data-dir", "/tmp/x"], "etcd") == "etcd m1"
    assert _name(["/venv/bin/python", "/venv/bin/p4sim", "run", "--p4info", "x"], "p4sim") == "p4sim"
    assert _name(["/venv/bin/python", "-m", "p4sim.server.cli", "run"], "python") == "p4sim"
    assert _name(["/venv/bin/python", "-m", "controlplane", "run", "--name", "standby"],
                 "python") == "nfc-controller standby"


def test_the_sampler_takes_start_warm_and_end_snapshots_of_child_processes() -> None:
    import os
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        sampler = RssSampler(os.getpid(), interval=0.05, warmup=0.1)
        # a condition with a deadline (the test's timeout): samples over more than 2 * warmup,
        # so that the child's life is judged (4 samples can come faster on a busy machine)
        while len(sampler.series) < 4 or sampler.series[-1][0] < 0.3:
            sampler._stop.wait(0.05)
        sampler.stop()
        sampler.stop()  # idempotent
        snaps = sampler.snapshots()
        assert set(snaps) == {"start", "warm", "end"}
        name = next(k for k in snaps["start"] if k.endswith(f"[{child.pid}]"))
        assert snaps["warm"][name] > 0 and snaps["end"][name] > 0
        assert sampler.series_json()[0]["t"] == 0.0
        assert snaps["warm"] is not snaps["start"]  # taken at >= 0.1 s, not the start's
        life = next(x for x in sampler.incarnations() if x.key == name)
        assert life.samples == len(sampler.series) and life.first_t == 0.0
        assert life.warm is not None  # sampled over more than 2 * 0.1 s: judged
    finally:
        child.kill()
        child.wait()


def test_the_memory_plot_draws_the_processes_alive_throughout(tmp_path) -> None:
    from topo.faults.memory import plot

    series = [{"t": 0.0, "rss": {"etcd m0 [1]": 40 * MIB, "bash [2]": MIB, "nf-host 1 [3]": MIB}},
              {"t": 10.0, "rss": {"etcd m0 [1]": 41 * MIB, "bash [2]": MIB, "nf-host 1 [9]": MIB}}]
    out = plot(series, tmp_path / "rss.png")
    assert out is not None and out.read_bytes()[:4] == b"\x89PNG"
    assert plot(series[:1], tmp_path / "none.png") is None


def _series(lives: dict[str, tuple[int, int, Callable[[int], float]]], until: int = 600
            ) -> list[tuple[float, dict[str, int]]]:
    """A sample every 10 s from 0 to `until`: key -> (first t, last t, MiB at t)."""
    return [(float(t), {key: int(mib(t) * MIB) for key, (a, b, mib) in lives.items() if a <= t <= b})
            for t in range(0, until + 1, 10)]


def _snapshots(series: list[tuple[float, dict[str, int]]]) -> dict[str, dict[str, int]]:
    return {"start": series[0][1], "warm": next(s for t, s in series if t >= series[-1][0] / 2),
            "end": series[-1][1]}


def _row(text: str, part: str) -> str:
    return next(line for line in text.splitlines() if part in line)


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.split("│")]


def test_a_life_is_judged_from_twice_the_warmup_on() -> None:
    assert long_enough(30.0, 150.0, warmup=60.0) and not long_enough(30.0, 149.9, warmup=60.0)


def test_a_part_restarted_early_is_judged_over_its_own_long_life() -> None:
    # etcd m1 killed at 20 s, back at 30 s: 40 MiB until 310 s, 50 MiB at its own warm sample
    # (the first at least half-way through its life from 30 to 600 s: 320 s), 51 at the end
    series = _series({"etcd m1 [1]": (0, 20, lambda t: 40), "etcd m1 [2]": (30, 600, lambda t:
                      40 if t < 320 else 50 + (t - 320) / 280)})
    lives = incarnations(series, warmup=60.0)
    late = next(x for x in lives if x.key == "etcd m1 [2]")
    assert (late.warm_t, late.warm, late.growth) == (320.0, 50 * MIB, 2.0)
    row = _row(_text(rss_table(_snapshots(series), lives)), "etcd m1")
    assert "(restarted; longest life 570 s)" in row
    assert "50.0" in row and "+2.0 %" in row and "+27.5 %" in row  # not +27.5 % from 300 s


def test_growth_is_read_off_the_trend_not_two_samples() -> None:
    """A process whose RSS swings by a few MiB and does not grow is not judged by a swing at the
    end; a leak, linear, keeps its whole growth (`trend`)."""
    swings = [65.0, 65.3, 64.1, 63.9, 67.3, 66.2]  # the soak of 2026-11-28, a minute apart
    flat = _series({"nf-host 7 [1]": (0, 600, lambda t: 64 + (2 if int(t) % 20 else -1)
                                                         + (3 if t >= 590 else 0)),
                    "nf-host 8 [2]": (0, 600, lambda t: 60 + t / 100)})
    lives = {x.key: x for x in incarnations(flat, warmup=60.0)}
    swung = lives["nf-host 7 [1]"]
    assert swung.growth is not None and swung.growth < 2.0
    two_samples = (flat[-1][1]["nf-host 7 [1]"] / flat[30][1]["nf-host 7 [1]"] - 1) * 100
    assert flat[30][0] == swung.warm_t and two_samples > 4.5  # what two samples made of it
    assert lives["nf-host 8 [2]"].growth == pytest.approx(100 * 3 / 63, abs=0.01)  # a leak
    assert trend([(0.0, 1), (10.0, 2)], 0.0, 10.0) == (1, 2)  # too few points: as they are
    assert max(swings) - min(swings) > 0.05 * 64  # (the swing alone was over the target)


def test_a_short_lived_incarnation_is_not_judged() -> None:
    # p4sim restarted every 100 s: no life of 120 s
    series = _series({f"p4sim [{i}]": (i * 100, i * 100 + 90, lambda t: 100 + t / 10)
                      for i in range(6)}, until=590)
    lives = incarnations(series, warmup=60.0)
    assert all(x.warm is None and x.growth is None for x in lives)
    text = _text(rss_table(_snapshots(series), lives))
    row = _row(text, "p4sim")
    assert "(restarted; no life ≥ 120 s)" in row and "%" not in row
    assert "no growth judged" in " ".join(text.split())


def test_a_process_alive_throughout_keeps_its_numbers_beside_incarnations() -> None:
    series = _series({"etcd m0 [10]": (0, 600, lambda t: 40 + t / 100),
                      "p4sim [11]": (0, 200, lambda t: 100), "p4sim [12]": (210, 600, lambda t: 100)})
    snaps = _snapshots(series)
    before = _row(_text(rss_table(snaps)), "etcd m0 [10]")
    after = _row(_text(rss_table(snaps, incarnations(series, warmup=60.0))), "etcd m0 [10]")
    assert _cells(after) == _cells(before)
    assert "40.0" in after and "43.0" in after and "46.0" in after  # start, warm (300 s), end
    assert "+7.0 %" in after and "+15.0 %" in after


def test_the_caption_names_the_largest_growth_of_all_incarnations() -> None:
    series = _series({"etcd m0 [10]": (0, 600, lambda t: 40 + t / 100),  # +7.0 % from 300 s
                      "nf-host 2 [20]": (0, 150, lambda t: 50 + t / 10),  # 58 -> 65: +12.1 %
                      "nf-host 2 [21]": (160, 600, lambda t: 50)})
    text = " ".join(_text(rss_table(_snapshots(series), incarnations(series, warmup=60.0))).split())
    assert "largest growth of 3 judged incarnations: +12.1 %, nf-host 2 [20] (life 150 s): " \
        "NOT under the 5 % target" in text


def test_the_end_hosts_traffic_tools_and_shells_are_not_judged() -> None:
    """The traffic sender and sink keep every packet's times (their memory grows by design) and
    Mininet's shells are not the system: neither is the caption's largest growth."""
    series = _series({"traffic [30]": (0, 600, lambda t: 20 + t / 10),  # +75 % from 300 s
                      "bash [31]": (0, 600, lambda t: 3 + t / 100),
                      "etcd m0 [10]": (0, 600, lambda t: 40 + t / 100)})  # +7.0 %
    text = " ".join(_text(rss_table(_snapshots(series), incarnations(series, warmup=60.0))).split())
    assert "largest growth of 1 judged incarnation: +7.0 %, etcd m0 [10]" in text


def test_the_disturbances_keep_the_incarnations_through_json() -> None:
    import json
    from dataclasses import asdict

    from topo.faults.disturbances import Disturbances

    assert Disturbances().rss_lives == []  # a report without them still builds
    lives = [RssLife("etcd m1 [2]", 30.0, 600.0, 58, 40 * MIB, 51 * MIB, 320.0, 50 * MIB),
             RssLife("p4sim [3]", 0.0, 90.0, 10, MIB, MIB)]
    doc = json.loads(json.dumps(asdict(Disturbances(rss_lives=lives))))
    assert [RssLife(**d) for d in doc["rss_lives"]] == lives


def test_the_memory_plot_draws_every_incarnation_when_all_were_restarted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import warnings

    from matplotlib.axes import Axes

    from topo.faults.memory import plot

    legends: list[list[str]] = []
    real = Axes.legend

    def legend(self: Axes, *args: Any, **kwargs: Any) -> Any:
        legends.append(self.get_legend_handles_labels()[1])
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Axes, "legend", legend)

    series = [{"t": t, "rss": s} for t, s in _series({
        "etcd m0 [1]": (0, 200, lambda t: 40), "etcd m0 [2]": (210, 600, lambda t: 41),
        "p4sim [3]": (0, 400, lambda t: 100), "p4sim [4]": (410, 600, lambda t: 101),
        "nf-host 1 [5]": (0, 590, lambda t: 50), "nf-host 1 [6]": (600, 600, lambda t: 50),
        "bash [7]": (0, 600, lambda t: 1), "traffic [8]": (0, 600, lambda t: 20 + t)})]
    assert [k for k, _, _ in plot_lines(series)] == \
        ["etcd m0 [1]", "etcd m0 [2]", "nf-host 1 [5]", "p4sim [3]", "p4sim [4]"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib's "No artists with labels found" among them
        out = plot(series, tmp_path / "rss.png")
    assert out == tmp_path / "rss.png" and out.read_bytes()[:4] == b"\x89PNG"
    assert legends == [["etcd m0", "nf-host 1", "p4sim"]]  # each name once


# -- a run with a settle tail (nfc-topo chaos --settle; make soak): faults until 600 s, quiet to 900

def _settled_run() -> list[tuple[float, dict[str, int]]]:
    return _series({
        "etcd m0 [10]": (0, 900, lambda t: 40 + t / 300),            # alive throughout: +3.3 %
        # restarted at 100 s: grows with its peers' faults until 600 s (+7.1 % over its own
        # second half, from 500 s), level in the tail
        "etcd m1 [11]": (0, 90, lambda t: 40),
        "etcd m1 [12]": (100, 900, lambda t: 30 + min(t, 600) / 30),
        # a life a fault ended: +16.7 % over its second half, shown but not judged
        "p4sim [20]": (0, 400, lambda t: 100 + t / 10),
        "p4sim [21]": (410, 900, lambda t: 100 if t < 750 else 100 + (t - 750) / 75)},
        until=900)  # +2.0 % over the tail's second half


def test_with_a_settle_tail_a_restarted_process_is_judged_over_the_tails_second_half() -> None:
    lives = {x.key: x for x in incarnations(_settled_run(), warmup=60.0, settled_from=600.0)}
    m1 = lives["etcd m1 [12]"]
    assert m1.judged and m1.warm_t == 750.0 and m1.growth == 0.0  # not +7.1 % from 500 s
    assert lives["p4sim [21]"].judged and lives["p4sim [21]"].growth == pytest.approx(2.0)
    # alive throughout: over the run's second half, as without a tail
    m0 = lives["etcd m0 [10]"]
    assert m0.judged and m0.warm_t == 450.0 and m0.growth == pytest.approx(100 * 1.5 / 41.5)
    # ended by a fault: its own growth kept, not judged
    p4 = lives["p4sim [20]"]
    assert not p4.judged and p4.growth == pytest.approx(100 * 20 / 120)
    assert not lives["etcd m1 [11]"].judged


def test_without_a_settle_tail_the_same_run_is_judged_life_by_life() -> None:
    lives = {x.key: x for x in incarnations(_settled_run(), warmup=60.0)}
    assert all(x.judged for x in lives.values())
    assert lives["etcd m1 [12]"].warm_t == 500.0 and lives["p4sim [20]"].growth is not None


def test_the_caption_of_a_settled_run_names_the_lives_it_did_not_judge() -> None:
    series = _settled_run()
    lives = incarnations(series, warmup=60.0, settled_from=600.0)
    snaps = {"start": series[0][1], "warm": next(s for t, s in series if t >= 450),
             "end": series[-1][1]}
    text = " ".join(_text(rss_table(snaps, lives, warmup=60.0, settled_from=600.0)).split())
    assert "largest growth of 3 judged incarnations: +3.6 %, etcd m0 [10] (life 900 s): under " \
        "the 5 % target; judged after the faults (a settle tail from 600 s)" in text
    assert "1 life ended by a fault, not judged (a warm-up among faults): largest +16.7 %, " \
        "p4sim [20] (life 400 s)" in text
    assert "etcd m1 (restarted; life 800 s to the end, judged after the faults)" in text
    # the same lives judged one by one (no tail): the restarted member's steps count
    plain = " ".join(_text(rss_table(snaps, incarnations(series, warmup=60.0))).split())
    assert "largest growth of 4 judged incarnations: +16.7 %, p4sim [20]" in plain


def test_a_settled_run_keeps_its_tail_and_unjudged_lives_through_json() -> None:
    import json
    from dataclasses import asdict

    from topo.faults.disturbances import Disturbances

    lives = incarnations(_settled_run(), warmup=60.0, settled_from=600.0)
    doc = json.loads(json.dumps(asdict(Disturbances(rss_lives=lives, rss_settled_from=600.0))))
    assert [RssLife(**d) for d in doc["rss_lives"]] == lives and doc["rss_settled_from"] == 600.0


def test_the_memory_plot_marks_where_the_faults_end(tmp_path: Path) -> None:
    from topo.faults.memory import plot

    series = [{"t": float(t), "rss": {"etcd m0 [1]": 40 * MIB}} for t in range(0, 40, 10)]
    out = plot(series, tmp_path / "rss.png", settled_from=20.0)
    assert out is not None and out.read_bytes()[:4] == b"\x89PNG"
