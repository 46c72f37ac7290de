"""How much of the code is typed `Any`, module by module (stdlib `ast`, from the source alone).

Counts every use of the name `Any` (``Any``, ``typing.Any``) outside import statements: in
annotations, in type aliases and in casts alike, since each is a place mypy stops checking; and
every use of a type alias that contains it (``Message = dict[str, Any]``, defined in the module or
imported from another by name), which hides an `Any` at each use. Two figures: the protocol paths (the modules exactly-once depends on:
replication, ownership, the NF control commands, slot rows, and the contract package) module by
module, and the total over the repository outside ``tests/``.

    python -m tools.any_count            # protocol paths, then the repository total
    python -m tools.any_count --all      # every module with at least one Any
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

from tools.import_cycles import ROOT, module_files

# the modules on the paths exactly-once depends on (what issue #35 item 4 types)
PROTOCOL_PATHS = (
    "contract",
    "nf_host.replication", "nf_host.chunked", "nf_host.receiving", "nf_host.links",
    "nf_host.ownership", "nf_host.promotion", "nf_host.transfers", "nf_host.backup_slots",
    "nf_host.commit_pipeline", "nf_host.adopt_commit", "nf_host.peer_policy", "nf_host.death_watch",
    "nf_host.worker", "nf_host.data_path", "nf_host.worker_status", "nf_host.worker_types",
    "nf_host.control", "nf_host.worker_process", "nf_host.state_store", "nf_host.commit", "nf_host.reorder",
    "contract.shim", "contract.timing", "nf_host.liveness",
)


def _mentions_any(node: ast.AST, aliases: set[str]) -> bool:
    return any((isinstance(n, ast.Name) and (n.id == "Any" or n.id in aliases))
               or (isinstance(n, ast.Attribute) and n.attr == "Any") for n in ast.walk(node))


def any_aliases(trees: dict[str, ast.Module]) -> dict[str, set[str]]:
    """Module -> the names it defines at module level as a type alias containing `Any`
    (``Message = dict[str, Any]``), directly or through another such alias it imports."""
    out: dict[str, set[str]] = {m: set() for m in trees}
    changed = True
    while changed:
        changed = False
        for mod, tree in trees.items():
            known = visible_aliases(mod, tree, out)
            for node in tree.body:
                target = value = None
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target, value = node.targets[0], node.value
                elif isinstance(node, ast.AnnAssign) and node.value is not None \
                        and "TypeAlias" in ast.unparse(node.annotation):
                    target, value = node.target, node.value
                if isinstance(target, ast.Name) and isinstance(value, ast.Subscript | ast.BinOp) \
                        and _mentions_any(value, known) and target.id not in out[mod]:
                    out[mod].add(target.id)
                    changed = True
    return out


def visible_aliases(mod: str, tree: ast.Module, aliases: dict[str, set[str]]) -> set[str]:
    """The Any-aliases `mod` defines or imports by name."""
    seen = set(aliases.get(mod, ()))
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module in aliases and node.level == 0:
            seen |= {a.asname or a.name for a in node.names if a.name in aliases[node.module]}
    return seen


def any_uses(tree: ast.Module, aliases: set[str]) -> int:
    """Uses of `Any`, or of an alias of a type containing it, in one module, imports and the
    alias definitions themselves left out."""
    n = 0
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) else (
            node.attr if isinstance(node, ast.Attribute) and node.attr == "Any" else None)
        if name is not None and (name == "Any" or name in aliases):
            n += 1
    return n


def on_protocol_paths(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in PROTOCOL_PATHS)


def counts(root: Path = ROOT) -> dict[str, int]:
    """Module -> uses of `Any`, for every module outside tests/."""
    trees = {m: ast.parse(p.read_text(), str(p)) for m, p in module_files(root).items()
             if not m.startswith("tests.") and m != "tests"}
    aliases = any_aliases(trees)
    return {m: any_uses(t, visible_aliases(m, t, aliases)) for m, t in trees.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--all", action="store_true", help="list every module with an Any")
    args = ap.parse_args(argv)
    per = counts()
    proto = {m: n for m, n in per.items() if on_protocol_paths(m)}
    shown = per if args.all else proto
    for m in sorted(shown):
        if shown[m] or not args.all:
            print(f"  {shown[m]:5d}  {m}")
    print(f"Any on the protocol paths: {sum(proto.values())} ({len(proto)} modules)")
    print(f"Any outside tests/: {sum(per.values())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
