"""Every console script the project declares starts and prints its help; every command line
(console scripts, `python -m sim`, `python -m experiments`) and each of its subcommands has help
text, for itself and for every option, and none uses a term the docs removed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

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


# the packages `pip install` puts where a console script finds them (pyproject.toml)
INSTALLED = [p.rstrip("*") for p in tomllib.loads((REPO / "pyproject.toml").read_text())
             ["tool"]["setuptools"]["packages"]["find"]["include"]]


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_console_script_needs_only_installed_packages(name: str, tmp_path: Path) -> None:
    """A console script runs from anywhere: its imports are all of the installed packages, not
    of the checkout (`nfc-topo` once imported `ptf_tests` and failed outside the repository)."""
    installed = tmp_path / "installed"
    installed.mkdir()
    for package in INSTALLED:
        (installed / package).symlink_to(REPO / package)
    module, _, func = SCRIPTS[name].partition(":")
    code = f"import sys, {module} as m; sys.exit(m.{func}(['--help']))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(installed)})
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.unit
def test_every_package_says_what_it_owns() -> None:
    for package in ("contract", "mgmt", "p4sim", "controlplane", "nf_host", "topo"):
        doc = __import__(package).__doc__
        assert doc and len(doc.split()) > 10, f"{package} lacks a module docstring"


# every command line the project offers: the console scripts and the `python -m` entry points
CLIS: dict[str, str] = {**SCRIPTS, "python -m sim": "sim.__main__:main",
                        "python -m mgmt.pki": "mgmt.pki:main",
                        "python -m experiments": "experiments.__main__:main"}

# terms the help must no longer use, and why (what replaced them)
REMOVED_TERMS = {
    "known window": "docs/protocols.md has no known window any more: a promoted backup sends "
                    "again the output its dead primary may not have sent (§4, §7)",
    "documented kind": "no loss is of a documented kind: a loss is excused only by evidence "
                       "tied to it (topo/faults/loss_evidence.py)",
    "loss budget": "losses are no budget of the run (docs/chaos.md, \"What the verdict excuses\")",
}

# run in a fresh interpreter per CLI: `main([])` builds its parser, which is taken at its first
# parse (nothing runs) and walked: every (sub)command's help text, description and options
_WALK = r"""
import argparse, importlib, json, sys

class Taken(BaseException):
    pass

def take(self, args=None, namespace=None):
    raise Taken(self)

argparse.ArgumentParser.parse_known_args = take
module, _, func = sys.argv[1].partition(":")
try:
    getattr(importlib.import_module(module), func)([])
except Taken as taken:
    top = taken.args[0]
else:
    sys.exit("no parser was taken")
out = []

def walk(parser, path, summary):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    out.append({
        "path": path, "help": parser.format_help(), "about": parser.description or summary or "",
        "undocumented": [a.dest for a in parser._actions
                         if not a.help and a not in subs and a.dest != "help"],
    })
    for action in subs:
        summaries = {c.dest: c.help for c in action._choices_actions}
        for name, sub in action.choices.items():
            walk(sub, [*path, name], summaries.get(name))

walk(top, [], None)
print(json.dumps(out))
"""


def _helps(entry: str) -> list[dict[str, Any]]:
    result = subprocess.run([sys.executable, "-c", _WALK, entry], capture_output=True, text=True,
                            timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    helps: list[dict[str, Any]] = json.loads(result.stdout)
    return helps


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(CLIS))
def test_every_command_has_help_and_no_removed_term(name: str) -> None:
    helps = _helps(CLIS[name])
    assert helps and helps[0]["path"] == []
    for h in helps:
        where = " ".join([name, *h["path"]])
        assert h["about"].strip(), f"`{where}` says nothing about itself (no description or help)"
        assert h["undocumented"] == [], f"`{where}`: options without help: {h['undocumented']}"
        text = " ".join(h["help"].split()).lower()  # argparse wraps lines: one line, one case
        for term, why in REMOVED_TERMS.items():
            assert term not in text, f"`{where} --help` says {term!r}: {why}"


@pytest.mark.unit
def test_the_walk_sees_subcommands() -> None:
    paths = [h["path"] for h in _helps(CLIS["nfc-topo"])]
    assert paths == [[], ["run"], ["chaos"], ["up"], ["down"], ["exec"], ["kill"]]
    assert ["lb", "history"] in [h["path"] for h in _helps(CLIS["nfc"])]
