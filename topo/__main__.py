"""`python -m topo` (console script `nfc-topo`): the launcher behind `make run`.

`run` brings the whole system up on the chosen target. Until every part exists it reports, part by
part, what is built and what is not, and exits non-zero only when asked to run something missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Part:
    name: str
    present: bool
    detail: str


def _module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def survey(target: str) -> list[Part]:
    """What of the system exists in this checkout and on this machine."""
    program = REPO / "p4src" / "v1model" / "nfcluster.p4"
    parts = [
        Part("p4sim engine", _module("p4sim.switch"), "p4sim/switch.py (front end, interpreter, P4Info)"),
        Part("p4sim P4Runtime server", _module("p4sim.server.service"), "p4sim/server/ (p4sim run)"),
        Part("data-plane program", program.exists(), str(program.relative_to(REPO))),
        Part("NF runtime", _module("nf_host.worker"), "nf_host/ (nf-host run)"),
        Part("controller", _module("controlplane.switch_session"), "controlplane/ (nfc-controller)"),
        Part("etcd", shutil.which("etcd") is not None, "Debian etcd-server"),
        Part("mininet", _module("mininet"), "Debian mininet"),
    ]
    if target == "bmv2":
        parts.append(
            Part("BMv2", shutil.which("simple_switch_grpc") is not None, "simple_switch_grpc on PATH")
        )
    return parts


def cmd_run(args: argparse.Namespace) -> int:
    parts = survey(args.target)
    missing = [p for p in parts if not p.present]
    if missing:
        width = max(len(p.name) for p in parts)
        print(f"nfcluster on {args.target}: status of the parts")
        for p in parts:
            mark = "ready  " if p.present else "missing"
            print(f"  {p.name:<{width}}  {mark}  {p.detail}")
        print(f"\nCannot run: {', '.join(p.name for p in missing)} missing. Nothing was started.")
        return 1
    from topo import scenario

    return scenario.main(args)


def build_parser() -> argparse.ArgumentParser:
    from topo import scenario

    parser = argparse.ArgumentParser(
        prog="nfc-topo", description="Bring the nfcluster system up in Mininet and run its scenario."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the main scenario (what `make run` does)",
                         description=scenario.__doc__)
    run.add_argument(
        "--target", choices=["p4sim", "bmv2"], default="p4sim", help="switch target (default p4sim)"
    )
    scenario.add_arguments(run)
    run.set_defaults(func=cmd_run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
