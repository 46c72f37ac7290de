"""A short seeded chaos run (`nfc-topo chaos`): the leading controller killed (the standby leads)
and etcd members killed, the switch restarted, netem on a primary's data link, one at a time,
beside a primary, under load; nothing lost but what netem dropped, nothing repeated or reordered, every fault handled,
and the per-kind table and the memory table printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.netns
@pytest.mark.slow
def test_controller_etcd_and_primary_faults_under_load_lose_nothing(tmp_path: Path) -> None:
    if not (REPO / "build" / "nfcluster.p4info.txtpb").exists():
        subprocess.run(["make", "-C", str(REPO), "build"], check=True, capture_output=True)
    out = tmp_path / "run"
    from topo.chaos import netem_available

    kinds = "controller,etcd,primary,netem,switch" if netem_available() else "controller,etcd,primary,switch"
    cmd = [sys.executable, "-m", "topo", "chaos", "--duration", "30", "--rate", "500",
           "--kill-every", "1", "--faults", "6",
           "--fault-kinds", kinds,
           "--seed", "3", "--out-dir", str(out)]
    result = subprocess.run(cmd, cwd=REPO, text=True, capture_output=True, timeout=600,
                            env={**os.environ, "COLUMNS": "160"})
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    dist = json.loads((out / "disturbances.json").read_text())
    done = [f["kind"] for f in dist["faults"]]
    assert {"controller", "etcd", "switch"} <= set(done), done  # the seed's schedule has them
    assert all(f["ok"] for f in dist["faults"]), dist["faults"]
    wire = sum(f.get("wire_lost", 0) for f in dist["faults"]) + dist["losses"]["lost_in_switch_outages"]
    assert dist["losses"]["lost"] <= wire and dist["losses"]["ok"], (dist["losses"], wire)
    assert set(dist["rss"]) == {"start", "end"} and dist["rss"]["start"]
    assert "faults by kind" in result.stdout and "memory (RSS)" in result.stdout
