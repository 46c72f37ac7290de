"""The experiments' pure pieces: the report's ratio table, CSV files, generated configurations,
the fallback plotter and the command line's errors."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import pytest

from controlplane.config import parse_config
from experiments import plots, report
from experiments.__main__ import EXPERIMENTS, main, unknown
from experiments.common import Check, Comparison, Outcome, Traffic, make_config, read_csv, write_csv
from experiments.thesis_data import A5_NF1, A7_NF3, MIGRATION_POINTS

pytestmark = pytest.mark.unit


def test_ratio_is_ours_over_the_thesis_and_missing_when_it_cannot_be() -> None:
    assert report.ratio(50.0, 100.0) == 2.0
    assert report.ratio(None, 1.0) is None
    assert report.ratio(0.0, 1.0) is None
    assert report.ratio(1.0, math.nan) is None


def test_comparison_table_sets_the_thesis_beside_ours() -> None:
    c = Comparison("A.1", "Latency vs threads", "workers", "ms/pkt", "ms",
                   [(1, 55.372, 11.0), (2, 52.599, None)], shape="flatter here")
    lines = report.comparison_table(c)
    assert lines[0].startswith("**Table A.1**")
    assert "| 1 | 55.4 | 11 | 0.199 |" in lines
    assert "| 2 | 52.6 | - | - |" in lines
    assert "Shape: flatter here" in lines


def test_report_lists_every_saved_outcome_with_its_checks(tmp_path: Path) -> None:
    o = Outcome("demo", checks=[Check("a property", True, "3 > 2"), Check("another", False)],
                notes=["scaled down"])
    o.plots.append(tmp_path / "demo.png")
    report.save(o, tmp_path, 1.5, {"quick": True, "seed": 3, "target": "p4sim"})
    text = report.write(tmp_path).read_text()
    assert "## demo" in text and "quick mode" in text and "seed 3" in text
    assert "- PASS: a property (3 > 2)" in text and "- FAIL: another" in text
    assert "![demo.png](demo.png)" in text and "- scaled down" in text


def test_csv_round_trip(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "x.csv", [{"a": 1, "b": 0.5, "c": None}, {"a": 2, "b": math.nan, "c": "z"}])
    assert read_csv(path) == [{"a": "1", "b": "0.5", "c": ""}, {"a": "2", "b": "", "c": "z"}]


@pytest.mark.parametrize("clusters", [[1], [2, 2], [4, 4, 4], [12], [3, 3, 3]])
def test_generated_configurations_are_valid(clusters: list[int]) -> None:
    cfg = parse_config(make_config(clusters, spares=1))
    assert [p.id for p in cfg.primaries()] == list(range(1, sum(clusters) + 1))
    assert len(cfg.clusters) == len(clusters)
    assert all(cfg.backup_of(p.id) is not None for p in cfg.primaries())


def test_traffic_measures() -> None:
    t = Traffic(sent=100, received=90, duration_s=2.0, rtt_ms=[1.0, 2.0, 3.0, 10.0])
    assert t.throughput_pps == 45.0 and t.loss == pytest.approx(0.1)
    assert t.latency() == 4.0 and t.latency(0.5) == 2.0 and t.latency(0.99) == 10.0
    assert math.isnan(Traffic(1, 0, 0.0, []).latency())


def test_thesis_tables_have_the_papers_shape() -> None:
    assert list(A5_NF1) == list(MIGRATION_POINTS)
    assert A7_NF3[165] == 16500 and A5_NF1[68] == 800


def test_plots_are_pngs_of_every_series(tmp_path: Path) -> None:
    path = plots.line(tmp_path / "l.png", "Title", "x", "y",
                      [("a", [1, 2, 3], [1.0, math.nan, 3.0]), ("b", [1, 2], [0.5, 0.7])])
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack("!II", data[16:24])
    assert w > 300 and h > 200
    bars = plots.bars(tmp_path / "b.png", "T", "x", "y", ["30", "60"], [("s", [3000.0, 0.0])])
    assert bars.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unknown_experiment_names_the_valid_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert unknown(["workers", "nope"]) == ["nope"]
    with pytest.raises(SystemExit) as exc:
        main(["nope"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unknown experiment(s): nope" in err and all(name in err for name in EXPERIMENTS)


def test_list_names_every_experiment(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in EXPERIMENTS)


def test_the_report_states_each_shape_from_the_numbers() -> None:
    assert report.trend([10, 50, 100], [100.0, 104.0, 103.0]) == "stays within 4% from 10 to 100"
    assert report.trend([1, 5], [425.0, 816.0]) == "rises 92% from 1 to 5"
    assert report.trend([25, 100], [10.0, 5.0]) == "falls 50% from 25 to 100"
    assert report.trend([1], [1.0]) is None
    line = report.shape_line([(10, 3871, 2332.0), (100, 3831, 2351.0), (200, None, 9.0)], "batch")
    assert line == ("Over batch the thesis's value stays within 1% from 10 to 100; "
                    "ours stays within 1% from 10 to 100.")
