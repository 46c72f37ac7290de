"""Every console script the project declares starts and prints its help."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPTS: dict[str, str] = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_console_script_prints_help(name: str) -> None:
    module, _, func = SCRIPTS[name].partition(":")
    code = f"import sys, {module} as m; sys.exit(m.{func}(['--help']))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout.lower()


@pytest.mark.unit
def test_every_package_says_what_it_owns() -> None:
    for package in ("p4sim", "controlplane", "nf_host", "topo"):
        doc = __import__(package).__doc__
        assert doc and len(doc.split()) > 10, f"{package} lacks a module docstring"
