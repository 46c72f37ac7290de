"""The fail-over measurements of topo/faults.py from the promoted NF's log: the first output a
promotion released after each fault, matched by time, never an earlier promotion's."""

from __future__ import annotations

from pathlib import Path

import pytest

from topo.faults import FaultRecord, first_output_times

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
