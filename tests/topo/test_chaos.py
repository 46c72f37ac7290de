"""Short seeded chaos runs (`nfc-topo chaos`). One: the leading controller killed (the standby
leads) and etcd members killed, the switch restarted, netem on a primary's data link (`tc netem`
where the kernel has it, else p4sim's wire impairment of the switch port), one at a time, beside a
primary, under load; nothing lost but what netem dropped, nothing repeated or reordered, every
fault handled, and the per-kind table and the memory table printed. The other: NFs' management
links cut past the heartbeat deadline and restored (`mgmt`)."""

from __future__ import annotations

import itertools
import json
import os
import re
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
    from topo.faults.chaos import netem_available

    tc_netem = netem_available()  # else p4sim's wire impairment does the netem faults
    cmd = [sys.executable, "-m", "topo", "chaos", "--duration", "30", "--rate", "500",
           "--kill-every", "1", "--faults", "6", "--settle", "6",
           "--fault-kinds", "controller,etcd,primary,netem,switch",
           "--seed", "8", "--out-dir", str(out)]
    result = subprocess.run(cmd, cwd=REPO, text=True, capture_output=True, timeout=600,
                            env={**os.environ, "COLUMNS": "160"})
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    dist = json.loads((out / "disturbances.json").read_text())
    done = [f["kind"] for f in dist["faults"]]
    assert {"controller", "etcd", "switch", "netem"} <= set(done), done  # the seed's schedule
    assert all(f["ok"] for f in dist["faults"]), dist["faults"]
    wire = sum(f.get("wire_lost", 0) for f in dist["faults"]) + dist["losses"]["lost_in_switch_outages"]
    assert dist["losses"]["lost"] <= wire and dist["losses"]["ok"], (dist["losses"], wire)
    netem = [f for f in dist["faults"] if f["kind"] == "netem"]
    if not tc_netem:  # each fault's wire_lost is what p4sim's own log says the impairment dropped
        removed = re.findall(r"port (\d+) \(\S+\): impairment \((?:.*?)\) removed: it dropped (\d+),",
                             (out / "s1.log").read_text())
        assert [(f["mode"], f["target"]) for f in netem] == [
            ("p4sim", f"p4sim:port {port}") for port, _ in removed], (netem, removed)
        assert [f["wire_lost"] for f in netem] == [int(n) for _, n in removed]
        assert all(f["wire_lost"] == f["impair"]["impair_dropped"] for f in netem), netem
        assert sum(f["impair"]["impair_delayed"] for f in netem) > 0, netem  # it did impair
    assert "by netem on the wire" in result.stdout
    assert set(dist["rss"]) == {"start", "warm", "end"} and dist["rss"]["start"]
    assert dist["rss_series"] and dist["rss_series"][-1]["t"] > 20  # sampled through the run
    # the settle tail: the faults ended, the traffic (and the sampling) went on without them
    assert dist["rss_series"][-1]["t"] - dist["rss_settled_from"] >= 5, dist["rss_settled_from"]
    assert "judged after the faults (a settle tail from" in " ".join(result.stdout.split())
    assert "faults by kind" in result.stdout and "memory (RSS)" in result.stdout


@pytest.mark.netns
@pytest.mark.slow
def test_nfs_whose_management_link_is_cut_are_failed_over_and_come_back_as_spares(
        tmp_path: Path) -> None:
    """`mgmt` faults: each NF's management link cut past the heartbeat deadline, then restored.
    The controller acts on each (a primary failed over, a backup replaced), the NF, alive all
    along, comes back as a spare that owns nothing, and nothing is lost, repeated or reordered."""
    from topo.faults.mgmt_cut import available

    if not available():
        pytest.skip("no cgroup v2 mount or no CONFIG_CGROUP_BPF: no mgmt cut")
    if not (REPO / "build" / "nfcluster.p4info.txtpb").exists():
        subprocess.run(["make", "-C", str(REPO), "build"], check=True, capture_output=True)
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "topo", "chaos", "--duration", "20", "--rate", "500",
           "--kill-every", "1", "--faults", "4", "--fault-kinds", "mgmt", "--seed", "1",
           "--out-dir", str(out)]
    result = subprocess.run(cmd, cwd=REPO, text=True, capture_output=True, timeout=600,
                            env={**os.environ, "COLUMNS": "160"})
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    dist = json.loads((out / "disturbances.json").read_text())
    cuts = [f for f in dist["faults"] if f["kind"] == "mgmt"]
    assert len(cuts) >= 3 and all(f["ok"] for f in cuts), cuts
    assert "primary" in {f["role"] for f in cuts}, cuts  # the seed's schedule cuts a primary
    deadline_ms = 50 * 3 + 40 + 200  # topo/nfcluster.yaml's heartbeat, and the probe's default
    for f in cuts:
        assert f["cut_ms"] >= 2 * deadline_ms and f["back_ms"] is not None, f
        if f["role"] != "spare":  # the controller declared it down and acted on it
            assert any(fo["dead"] == f["nf"] and fo["ok"] for fo in dist["failovers"]), f
        if f["role"] == "primary":  # the NF itself dropped what it owned, with its held output
            assert "now IDLE: dropping" in (out / f"nf{f['nf']}.log").read_text(), f
    assert dist["losses"]["lost"] == 0 and dist["losses"]["ok"], dist["losses"]
    assert "mgmt cuts" in result.stdout


@pytest.mark.netns
@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("NFC_LONG_TESTS"), reason="a long chaos run whose open "
                    "findings make it an expected failure: `make chaos-modes-test` runs it")
@pytest.mark.xfail(strict=False, reason="an open finding of the chaos modes (docs/protocols.md, "
                   "Known limits): an adopter that dies during the old epoch's tail loses what "
                   "its old owner forwards (the other two first findings are fixed: M11, M12; "
                   "seed 1 passed on 2026-11-27)")
def test_moves_overlapping_faults_and_zombies_on_a_busy_machine_lose_nothing(
        tmp_path: Path) -> None:
    """The short "all at once" mode (docs/chaos.md, "Chaos as a user meets it"): random moves
    (2 a second), NF faults side by side (`--overlap`), some hung NFs resumed as zombies after
    their fail-over, one CPU hog. Nothing lost by the system, duplicated or reordered, no flow
    wedged, every fault handled, every zombie back in the pool owning nothing; moves and false
    fail-overs counted."""
    if not (REPO / "build" / "nfcluster.p4info.txtpb").exists():
        subprocess.run(["make", "-C", str(REPO), "build"], check=True, capture_output=True)
    from topo.faults.mgmt_cut import available

    kinds = "primary,backup,spare" + (",mgmt" if available() else "")
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "topo", "chaos", "--duration", "45", "--settle", "15",
           "--rate", "300", "--kill-every", "1", "--moves", "2", "--overlap", "--zombies", "0.4",
           "--busy", "1", "--fault-kinds", kinds, "--seed", "1", "--out-dir", str(out)]
    result = subprocess.run(cmd, cwd=REPO, text=True, capture_output=True, timeout=600,
                            env={**os.environ, "COLUMNS": "160"})
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    dist = json.loads((out / "disturbances.json").read_text())
    faults = dist["faults"]
    assert all(f["ok"] for f in faults), [f for f in faults if not f["ok"]]
    # side by side: some fault started before an earlier one was over
    spans = sorted((f["at"], f["ended"]) for f in faults if f.get("ended"))
    assert any(b0 < a1 for (_, a1), (b0, _) in itertools.pairwise(spans)), spans
    zombies = [f for f in faults if f["mode"] == "zombie"]
    assert zombies and all(f["back_ms"] is not None for f in zombies), zombies
    modes = dist["modes"]
    assert modes["moves_done"] >= 5 and modes["zombies_back"] == modes["zombies"], modes
    assert modes["state_lost"] == 0, modes
    lo = dist["losses"]
    assert lo["lost"] == 0 and lo["ok"] and lo["wedged_flows"] == 0, lo
    assert lo["lost_by_system"] == 0 and lo["duplicated"] == 0 and lo["reordered"] == 0, lo
    text = " ".join(result.stdout.split())
    assert "chaos modes: moves" in text and "false fail-overs" in text
