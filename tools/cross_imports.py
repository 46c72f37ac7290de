"""Imports from one of the project's top-level packages into another (stdlib `ast`).

The processes (`controlplane`, `nf_host`, `topo`) and their tests and tools (`ptf_tests`, `bench`,
`sim`, `prism`) should share only `contract` (what they agree on) and `mgmt` (the management
network's shared infrastructure: etcd endpoints, the PKI, TLS), the packages meant to be shared;
every other import across packages reaches into another part's internals. The tool prints, for
each (importing package, imported package) pair, the number of import statements and the modules
imported, then the total that is not of a shared package. Tests (`tests/`) are left out.

    python -m tools.cross_imports             # the table
    python -m tools.cross_imports --from controlplane --to nf_host   # one pair, line by line
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from tools.import_cycles import ROOT, import_edges

# top-level directories that are not a part of the system: their imports are not counted
LEFT_OUT = frozenset({"tests", "tools", "experiments"})
# the packages meant to be shared by the others: imports of them reach into no part's internals
SHARED = ("contract", "mgmt")


def cross_edges(root: Path = ROOT) -> list[tuple[str, str, str, Path, int]]:
    """(importing package, imported package, imported module, file, line) per import statement
    from one top-level package into another."""
    out: list[tuple[str, str, str, Path, int]] = []
    seen: set[tuple[Path, int, str]] = set()
    for e in import_edges(root, type_checking=True):
        src, dst = e.src.split(".")[0], e.dst.split(".")[0]
        if src == dst or src in LEFT_OUT:
            continue
        if e.dst == dst:  # the package itself (its __init__), implied by the module's import
            continue
        key = (e.path, e.line, e.dst)
        if key not in seen:
            seen.add(key)
            out.append((src, dst, e.dst, e.path, e.line))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="src", help="only imports from this package, line by line")
    ap.add_argument("--to", dest="dst", help="only imports of this package, line by line")
    args = ap.parse_args(argv)
    edges = cross_edges()
    if args.src or args.dst:
        for src, dst, mod, path, line in sorted(edges, key=lambda e: (str(e[3]), e[4])):
            if (args.src in (None, src)) and (args.dst in (None, dst)):
                print(f"  {path.relative_to(ROOT)}:{line}  {src} -> {mod}")
        return 0
    pairs: dict[tuple[str, str], list[str]] = defaultdict(list)
    for src, dst, mod, _path, _line in edges:
        pairs[(src, dst)].append(mod)
    for (src, dst), mods in sorted(pairs.items()):
        names = ", ".join(sorted({m.removeprefix(dst + ".") for m in mods}))
        print(f"  {src:>13} -> {dst:<13} {len(mods):4d}  {names}")
    internal = sum(len(m) for (_s, d), m in pairs.items() if d not in SHARED)
    print(f"imports across packages, not of a shared package ({', '.join(SHARED)}): {internal}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
