"""topo/chaos.py's summary tables: the memory table tells a process alive throughout (growth)
from a part restarted meanwhile (no growth: a fresh process), and the per-kind table's caption
sums up the `mgmt` cuts."""

from __future__ import annotations

import pytest
from rich.console import Console

from topo.chaos import kind_table, rss_table
from topo.faults import FaultRecord

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
