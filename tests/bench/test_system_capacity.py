"""`make bench-system`: the bisection over rates (unit), and the quick mode on the real system
(Mininet, p4sim with each port I/O, nf-host processes, the controller)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.system_capacity import Trial, bisect_capacity

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.unit
def test_bisection_finds_the_threshold_within_its_resolution() -> None:
    tried: list[float] = []

    def ok(rate: float) -> bool:
        tried.append(rate)
        return rate <= 5000

    cap = bisect_capacity(ok, 1000, 16000, 6)
    assert tried[:2] == [1000, 16000] and len(tried) == 8
    assert cap <= 5000 and cap >= 5000 / (16 ** (1 / 64)) * 0.99  # 6 halvings of a 16x interval
    assert bisect_capacity(lambda r: False, 1000, 16000, 6) == 0.0
    assert bisect_capacity(lambda r: True, 1000, 16000, 6) == 16000


@pytest.mark.unit
def test_a_failed_round_says_where_its_packets_went_or_that_none_were_lost() -> None:
    slow = Trial(16000, False, 96000, 0, 10.0, drain_s=4.0)
    assert slow.where() == "nothing lost; the backlog took 4.00 s to drain"
    lossy = Trial(30000, False, 162976, 17030, 10.0, drain_s=3.0, counted=17024,
                  sites=["switch port 1 (client): 17024 dropped by the kernel"])
    assert lossy.unaccounted == 6
    assert lossy.where() == ("lost 17030, counted 17024: switch port 1 (client): 17024 dropped "
                             "by the kernel; unaccounted: 6")


@pytest.mark.netns
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (Mininet)")
@pytest.mark.skipif(not (REPO / "build" / "nfcluster.p4info.txtpb").exists(),
                    reason="run `make build` first")
def test_quick_mode_compares_both_io_variants(tmp_path: Path) -> None:
    from topo.launch.switches import p4sim_engines

    # the default engine (native, with its C ring loop) where p4sim offers it
    engine = "native" if "native" in (p4sim_engines() or []) else "python"
    proc = subprocess.run([sys.executable, "-m", "bench.system_capacity", "--quick", "--lo", "300",
                           "--hi", "3000", "--io", "socket,ring", "--engine", engine, "--out",
                           str(tmp_path)], capture_output=True, text=True,
                          cwd=REPO, timeout=880, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((tmp_path / "capacity.json").read_text())
    assert set(result["capacity"]) == {f"socket/{engine}", f"ring/{engine}"}
    for variant, caps in result["capacity"].items():
        assert len(caps) == 1
        assert caps[0] >= 300, f"{variant} lost packets at 300 client pkt/s: {proc.stdout[-3000:]}"
    for run in result["runs"]:
        assert len(run["trials"]) in (2, 3)  # lo, hi, and one step unless hi passed
    assert "zero-loss capacity" in proc.stdout and "ratio" in proc.stdout


@pytest.mark.unit
def test_the_ring_pyloop_variant_runs_ring_io_with_the_native_loop_off(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import argparse
    import contextlib

    from rich.console import Console

    import topo.launch.bringup
    from bench import system_capacity as sc

    seen: list[tuple[str | None, str | None]] = []

    @contextlib.contextmanager
    def fake_system(opts, console):
        seen.append((opts.io, os.environ.get("P4SIM_NATIVE_RING")))
        yield None

    monkeypatch.setattr(topo.launch.bringup, "system", fake_system)
    monkeypatch.setattr(sc, "bisect_capacity", lambda ok, lo, hi, steps: 1000.0)
    monkeypatch.delenv("P4SIM_NATIVE_RING", raising=False)
    args = argparse.Namespace(flows=4, lo=100.0, hi=200.0, steps=1, seconds=1.0, drain=1.0)
    for io in ("ring-pyloop", "ring"):
        sc.capacity_of(sc.Variant(io, "native"), args, tmp_path, Console(quiet=True), True)
    assert seen == [("ring", "0"), ("ring", "1")]
    assert "P4SIM_NATIVE_RING" not in os.environ  # put back as it was


@pytest.mark.unit
def test_an_unknown_io_variant_is_refused_before_anything_starts(
        capsys: pytest.CaptureFixture[str]) -> None:
    from bench.system_capacity import main

    with pytest.raises(SystemExit) as exc:
        main(["--io", "socket,bogus", "--engine", "python"])
    assert exc.value.code == 2
    assert "--io socket,bogus: choose among socket,ring,ring-pyloop" in capsys.readouterr().err
