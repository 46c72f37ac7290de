"""``p4sim check``: the front end alone, for a program p4sim checks but does not run (TNA).

Preprocesses, parses and checks a program as ``p4sim compile`` does (names, types and widths,
calls with their argument counts, types and directions, the blocks given to the architecture's
package against its parser/control types, abstract method implementations), then looks for
``out`` parameters that may be left unwritten (``p4sim.frontend.outparams``). ``--arch`` names the
architecture the program must be written for: its ``main`` must be an instance of that
architecture's top-level package. Warnings are printed; ``--Werror`` makes them failures.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from p4sim.frontend import types as T
from p4sim.frontend.checker import check
from p4sim.frontend.diagnostics import CompileError, Warning_
from p4sim.frontend.outparams import out_param_warnings
from p4sim.frontend.parser import parse
from p4sim.frontend.preprocess import preprocess

# architecture -> (its top-level package, what p4c/bf-p4c define for it)
ARCHES: dict[str, tuple[str, dict[str, str]]] = {
    "v1model": ("V1Switch", {}),
    "tna": ("Switch", {"__TARGET_TOFINO__": "1"}),
}


@dataclass
class CheckResult:
    """A program that passed the checks; what p4c would warn about."""

    warnings: list[Warning_] = field(default_factory=list)


def check_file(path: str, arch: str = "v1model", include_dirs: Sequence[str] = (),
               defines: Mapping[str, str] | None = None) -> CheckResult:
    """Check ``path`` for ``arch``; raises ``CompileError`` on the first error."""
    top, arch_defines = ARCHES[arch]
    text, lines = preprocess(path, include_dirs, {**arch_defines, **(defines or {})})
    ck = check(parse(text, lines))
    main = ck.main
    assert main is not None
    if not (isinstance(main.type, T.Block) and main.type.decl.name == top):
        raise CompileError(main.loc, f"main is a {main.type}, not {arch}'s top-level package {top}")
    return CheckResult(out_param_warnings(ck.prog))


def add_check(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "check", help="check a P4_16 program (v1model or TNA) without compiling it",
        description="Check a P4_16 program as p4c's front end does (types, calls, directions, "
        "package blocks, uninitialised out parameters) without compiling it: the way p4sim "
        "checks programs it does not run, such as nfcluster's TNA program.")
    p.add_argument("program", help="the P4_16 source file")
    p.add_argument("--arch", default="v1model", choices=sorted(ARCHES), help="architecture")
    p.add_argument("-I", dest="include", action="append", default=[], metavar="DIR", help="include directory")
    p.add_argument("-D", dest="define", action="append", default=[], type=parse_define, metavar="NAME[=VAL]",
                   help="preprocessor define")
    p.add_argument("--Werror", action="store_true", help="treat warnings as errors (exit status 1)")
    p.set_defaults(func=check_cmd)


def parse_define(text: str) -> tuple[str, str]:
    """``-D NAME[=VALUE]`` (VALUE defaults to 1)."""
    name, _, value = text.partition("=")
    if not name:
        raise argparse.ArgumentTypeError(f"define must be NAME[=VALUE], got {text!r}")
    return name, value or "1"


def check_cmd(args: argparse.Namespace) -> int:
    try:
        result = check_file(args.program, args.arch, args.include, dict(args.define))
    except CompileError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    for w in result.warnings:
        print(w, file=sys.stderr)
    if result.warnings and args.Werror:
        print(f"{args.program}: {len(result.warnings)} warning(s), treated as errors (--Werror)", file=sys.stderr)
        return 1
    print(f"{args.program}: checked for {args.arch}: {len(result.warnings)} warning(s)")
    return 0
