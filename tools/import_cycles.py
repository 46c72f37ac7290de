"""Import circles between the repository's modules, found from the source alone (stdlib `ast`).

Every ``import`` and ``from ... import`` counts, wherever it is written: at module level, inside a
function or method (a "hidden" circle is still a circle: it only moves the failure to run time), or
in a ``try``. Imports under ``if TYPE_CHECKING:`` do not count by default (they never run); pass
``--type-checking`` to count them too. Importing ``a.b.c`` also imports the packages ``a`` and
``a.b`` (their ``__init__``), so those are edges as well, except packages that contain the
importing module (they are already being imported when it runs).

A circle is a strongly connected component of more than one module in that graph; the tool prints
each with one import that closes it per edge (file and line), and exits 1 when there is any.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# directories that are not the project's source
SKIP_DIRS = frozenset({".venv", "build", ".git", "__pycache__", ".mypy_cache", ".ruff_cache",
                       ".pytest_cache", "node_modules"})


@dataclass(frozen=True)
class Edge:
    """One import: `src` imports `dst`, written at `line` of `path`."""

    src: str
    dst: str
    path: Path
    line: int


def module_files(root: Path) -> dict[str, Path]:
    """Module name -> file, for every ``.py`` under `root` (generated ``_pb2`` files left out)."""
    mods: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if any(part in SKIP_DIRS or part.startswith(".") for part in rel.parts[:-1]):
            continue
        if path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if parts:
            mods[".".join(parts)] = path
    return mods


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, type_checking: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement in `tree`, at any depth, but not under ``if TYPE_CHECKING:``."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test) and not type_checking:
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _targets(node: ast.Import | ast.ImportFrom, mod: str, is_pkg: bool,
             mods: dict[str, Path]) -> Iterable[str]:
    """The repository modules one import statement of module `mod` loads."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
        return
    base = node.module or ""
    if node.level:
        pkg = mod.split(".") if is_pkg else mod.split(".")[:-1]
        pkg = pkg[:len(pkg) - (node.level - 1)]
        base = ".".join([*pkg, base] if base else pkg)
    yield base
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        if sub in mods:
            yield sub


def import_edges(root: Path = ROOT, type_checking: bool = False,
                 prefixes: tuple[str, ...] = ()) -> list[Edge]:
    """Every import between two of the repository's modules (with `prefixes`, only imports by
    modules of those top-level packages)."""
    mods = module_files(root)
    edges: list[Edge] = []
    for mod, path in mods.items():
        if prefixes and mod.split(".")[0] not in prefixes:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_pkg = path.name == "__init__.py"
        own = {".".join(mod.split(".")[:i]) for i in range(1, mod.count(".") + 2)}
        for node in _imports(tree, type_checking):
            for target in _targets(node, mod, is_pkg, mods):
                parts = target.split(".")
                # the module itself and the packages on its way that the importer is not inside
                for i in range(len(parts), 0, -1):
                    name = ".".join(parts[:i])
                    if name in mods and name != mod and (i == len(parts) or name not in own):
                        edges.append(Edge(mod, name, path, node.lineno))
    return edges


def cycles(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.src, set()).add(e.dst)
        graph.setdefault(e.dst, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0

    for start in sorted(graph):
        if start in index:
            continue
        # iterative Tarjan: (node, iterator over its successors)
        work: list[tuple[str, Iterator[str]]] = []
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        work.append((start, iter(sorted(graph[start]))))
        while work:
            node, succ = work[-1]
            advanced = False
            for nxt in succ:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp: list[str] = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return sorted(found)


def report(root: Path, prefixes: tuple[str, ...], type_checking: bool) -> tuple[int, str]:
    """(number of circles, the text describing them) among modules under the given prefixes."""
    edges = [e for e in import_edges(root, type_checking, prefixes)
             if not prefixes or (e.src.split(".")[0] in prefixes and e.dst.split(".")[0] in prefixes)]
    comps = cycles(edges)
    lines: list[str] = []
    for comp in comps:
        members = set(comp)
        lines.append("circle: " + " ".join(comp))
        for e in edges:
            if e.src in members and e.dst in members:
                lines.append(f"  {e.src} -> {e.dst}  ({e.path.relative_to(root)}:{e.line})")
    lines.append(f"{len(comps)} import circle(s)")
    return len(comps), "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("packages", nargs="*",
                    help="top-level packages to look at (default: the whole repository)")
    ap.add_argument("--type-checking", action="store_true",
                    help="count imports under `if TYPE_CHECKING:` too")
    ap.add_argument("--root", type=Path, default=ROOT, help="the repository root")
    args = ap.parse_args(argv)
    n, text = report(args.root, tuple(args.packages), args.type_checking)
    print(text)
    return 1 if n else 0


if __name__ == "__main__":
    sys.exit(main())
