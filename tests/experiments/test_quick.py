"""Each experiment's quick mode on the real system (Mininet, p4sim, nf-host processes): its CSVs and
plots are written, and its figure's sanity properties hold (e.g. an intra-cluster move ships fewer
bytes than an inter-cluster one; the unclustered system sends more replication bytes per batch).

Every experiment's quick mode runs here (a few minutes in all on 2 cores; `targets` draws p4sim
only unless BMv2 is installed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.__main__ import EXPERIMENTS
from experiments.beyond import bmv2_available
from experiments.common import REPO

# experiments that read another's output run after it, in the same directory (and its outcome
# is checked there too: it does not run again on its own)
RUN_AFTER = {"prism-scale": ["prism"]}
QUICK_IN_TESTS = [e for e in EXPERIMENTS if not any(e in before for before in RUN_AFTER.values())
                  # without BMv2, `targets` is one more p4sim run of what the others run (CI time)
                  and (e != "targets" or bmv2_available())]

pytestmark = [
    pytest.mark.netns,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (Mininet)"),
    pytest.mark.skipif(not (REPO / "build" / "nfcluster.p4info.txtpb").exists(),
                       reason="run `make build` first"),
]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", QUICK_IN_TESTS)
def test_quick_mode_writes_its_csvs_and_plots_and_keeps_its_sanity_checks(
        name: str, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "experiments", "--quick", "--seed", "1",
                           "--out-dir", str(tmp_path), *RUN_AFTER.get(name, []), name],
                          capture_output=True, text=True, cwd=REPO, timeout=580, check=False)
    for each in [*RUN_AFTER.get(name, []), name]:
        check_outcome(each, tmp_path, proc)
    assert proc.returncode == 0, proc.stdout[-3000:]


def check_outcome(name: str, tmp_path: Path, proc: subprocess.CompletedProcess[str]) -> None:
    """Experiment `name`'s outcome in `tmp_path`: no error, CSVs with data, PNG plots, its sanity
    checks passed, its section in the report."""
    outcome_path = tmp_path / f"outcome-{name}.json"
    assert outcome_path.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    outcome = json.loads(outcome_path.read_text())
    assert not outcome["error"], outcome["error"]
    assert outcome["csvs"] and outcome["plots"]
    for f in outcome["csvs"]:
        lines = (tmp_path / f).read_text().splitlines()
        assert len(lines) >= 2, f"{f} has no data row"
    for f in outcome["plots"]:
        assert (tmp_path / f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    failing = [c for c in outcome["checks"] if not c["ok"]]
    assert outcome["checks"] and not failing, failing
    report = (tmp_path / "report.md").read_text()
    assert f"## {name}" in report
