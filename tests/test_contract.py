"""The contract package (`contract/`) imports nothing of the project outside it, and the
repository has no import circle at all (hidden ones included: tools/import_cycles.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.cross_imports import cross_edges
from tools.import_cycles import import_edges, report

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent


def test_contract_imports_only_itself() -> None:
    outside = [(e.src, e.dst, f"{e.path.name}:{e.line}") for e in import_edges(ROOT, True)
               if e.src.split(".")[0] == "contract" and e.dst.split(".")[0] != "contract"]
    assert outside == []


def test_the_repository_has_no_import_circle() -> None:
    n, text = report(ROOT, (), type_checking=False)
    assert n == 0, text


def test_the_processes_share_the_shim_and_the_wire_formats_only_through_contract() -> None:
    """No part reaches into nf_host for what the processes agree on (issue #35)."""
    shared = {"nf_host.shim", "nf_host.timing", "nf_host.proto", "nf_host.reorder",
              "nf_host.liveness", "ptf_tests.lib.slot_hash", "topo.records"}
    reached = [(src, mod, f"{path.name}:{line}") for src, _dst, mod, path, line in cross_edges(ROOT)
               if any(mod == s or mod.startswith(s + ".") for s in shared)]
    assert reached == []
