"""The launcher behind `make run` reports every part's status, and refuses to run without them."""

from __future__ import annotations

import pytest

from topo import __main__ as launcher
from topo.__main__ import Part, main, survey


@pytest.mark.unit
def test_survey_names_every_part() -> None:
    names = {p.name for p in survey("p4sim")}
    assert {"p4sim engine", "data-plane program", "NF runtime", "controller", "etcd"} <= names
    assert "BMv2" in {p.name for p in survey("bmv2")}


@pytest.mark.unit
def test_run_with_a_missing_part_prints_status_and_starts_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = survey("p4sim")
    fake = [*real[:-1], Part(real[-1].name, False, real[-1].detail)]
    monkeypatch.setattr(launcher, "survey", lambda target: fake)
    assert main(["run", "--target", "p4sim"]) == 1
    out = capsys.readouterr().out
    for p in fake:
        assert p.name in out
    assert f"Cannot run: {real[-1].name} missing" in out
