"""topo/chaos.py's and topo/memory.py's summary tables: the memory table tells a process alive throughout (growth)
from a part restarted meanwhile (no growth: a fresh process), and the per-kind table's caption
sums up the `mgmt` cuts."""

from __future__ import annotations

import pytest
from rich.console import Console

from topo.chaos import kind_table
from topo.faults import FaultRecord
from topo.memory import RssSampler, rss_table

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


def test_growth_is_judged_from_the_warm_snapshot_and_shown_from_the_start() -> None:
    rss = {"start": {"etcd m0 [10]": 40 * MIB}, "warm": {"etcd m0 [10]": 50 * MIB},
           "end": {"etcd m0 [10]": 51 * MIB}}
    row = next(line for line in _text(rss_table(rss)).splitlines() if "etcd m0 [10]" in line)
    assert "50.0" in row and "+2.0 %" in row and "+27.5 %" in row


def test_the_sampler_takes_start_warm_and_end_snapshots_of_child_processes() -> None:
    import os
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        sampler = RssSampler(os.getpid(), interval=0.05, warmup=0.1)
        while len(sampler.series) < 4:  # a condition with a deadline (the test's timeout)
            sampler._stop.wait(0.05)
        sampler.stop()
        sampler.stop()  # idempotent
        snaps = sampler.snapshots()
        assert set(snaps) == {"start", "warm", "end"}
        name = next(k for k in snaps["start"] if k.endswith(f"[{child.pid}]"))
        assert snaps["warm"][name] > 0 and snaps["end"][name] > 0
        assert sampler.series_json()[0]["t"] == 0.0
        assert snaps["warm"] is not snaps["start"]  # taken at >= 0.1 s, not the start's
    finally:
        child.kill()
        child.wait()


def test_the_memory_plot_draws_the_processes_alive_throughout(tmp_path) -> None:
    from topo.memory import plot

    series = [{"t": 0.0, "rss": {"etcd m0 [1]": 40 * MIB, "bash [2]": MIB, "nf-host 1 [3]": MIB}},
              {"t": 10.0, "rss": {"etcd m0 [1]": 41 * MIB, "bash [2]": MIB, "nf-host 1 [9]": MIB}}]
    out = plot(series, tmp_path / "rss.png")
    assert out is not None and out.read_bytes()[:4] == b"\x89PNG"
    assert plot(series[:1], tmp_path / "none.png") is None
