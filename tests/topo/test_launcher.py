"""The launcher behind `make run` reports every part's status."""

from __future__ import annotations

import pytest

from topo.__main__ import main, survey


@pytest.mark.unit
def test_survey_names_every_part() -> None:
    names = {p.name for p in survey("p4sim")}
    assert {"p4sim engine", "data-plane program", "NF runtime", "controller", "etcd"} <= names
    assert "BMv2" in {p.name for p in survey("bmv2")}


@pytest.mark.unit
def test_run_prints_status_table(capsys: pytest.CaptureFixture[str]) -> None:
    parts = survey("p4sim")
    if all(p.present for p in parts):
        pytest.skip("every part is present: `run` starts the real scenario, tested elsewhere")
    assert main(["run", "--target", "p4sim"]) == 0
    out = capsys.readouterr().out
    for p in parts:
        assert p.name in out
    assert "missing" in out
