"""The launcher behind `make run` names a missing prerequisite and how to get it, and starts
nothing without it."""

from __future__ import annotations

import pytest

from topo import __main__ as launcher
from topo.__main__ import Prerequisite, main, prerequisites


@pytest.mark.unit
def test_prerequisites_by_target() -> None:
    assert {p.name for p in prerequisites("p4sim")} == {"etcd", "mininet"}
    assert "BMv2" in {p.name for p in prerequisites("bmv2")}


@pytest.mark.unit
def test_run_with_a_missing_prerequisite_names_it_and_starts_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(launcher, "prerequisites", lambda target: [
        Prerequisite("etcd", True, "x"), Prerequisite("BMv2", False, "build it")])
    assert main(["run", "--target", "bmv2"]) == 1
    err = capsys.readouterr().err
    assert "BMv2 is missing: build it" in err and "Nothing was started" in err and "etcd" not in err
