"""No import circle anywhere in the repository, hidden ones included: an import inside a function
counts (tools/import_cycles.py), and so does one under ``if TYPE_CHECKING:`` (a part that needs
another's type takes a narrow Protocol instead, issue #35)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.import_cycles import cycles, import_edges, report

pytestmark = pytest.mark.unit


def test_the_repository_has_no_import_circle_even_counting_type_checking_imports() -> None:
    n, text = report(Path(__file__).resolve().parent.parent, (), type_checking=True)
    assert n == 0, text


def test_controlplane_has_none_even_counting_type_checking_imports() -> None:
    """The protocols take narrow Protocols, not the controller (docs/architecture.md, "Inside
    the controller"): none imports the controller back, not even for its type hints."""
    n, text = report(Path(__file__).resolve().parent.parent, ("controlplane",), type_checking=True)
    assert n == 0, text


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_circle_hidden_in_a_function_is_found(tmp_path: Path) -> None:
    root = write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import f\n",
        "pkg/b.py": "def f():\n    from pkg import a\n    return a\n",
        "pkg/c.py": "import pkg.a\n",
    })
    assert cycles(import_edges(root)) == [["pkg.a", "pkg.b"]]


def test_type_checking_imports_count_only_when_asked(tmp_path: Path) -> None:
    root = write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import f\n",
        "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import g\n"
                    "def f(): ...\n",
    })
    assert cycles(import_edges(root)) == []
    assert cycles(import_edges(root, type_checking=True)) == [["pkg.a", "pkg.b"]]


def test_relative_imports_and_package_inits_are_edges(tmp_path: Path) -> None:
    root = write(tmp_path, {
        "pkg/__init__.py": "from .sub import x\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/x.py": "from ..other import y\n",
        "pkg/other.py": "import pkg.sub.x\ny = 1\n",
    })
    comps = cycles(import_edges(root))
    assert comps == [["pkg.other", "pkg.sub.x"]]
