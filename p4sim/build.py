"""The whole front end in one call: preprocess, parse, check and compile a P4 file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from p4sim.checker import Checker, check
from p4sim.compiler import compile_program
from p4sim.model import Program
from p4sim.outparams import out_param_warnings
from p4sim.parser import parse
from p4sim.preprocess import preprocess


def build(path: str, include_dirs: Sequence[str] = (), defines: Mapping[str, str] | None = None) -> Program:
    """Compile ``path``; raises ``CompileError`` (``file:line:col: error: ...``) on a bad program."""
    text, lines = preprocess(path, include_dirs, defines)
    return build_text(text, lines)


def build_text(text: str, lines: object) -> Program:
    return build_checked(text, lines)[0]


def build_checked(text: str, lines: object) -> tuple[Program, Checker]:
    """The compiled program and the checked one (which the native engine's compiler compiles again)."""
    from p4sim.diagnostics import LineMap

    assert isinstance(lines, LineMap)
    ck = check(parse(text, lines))
    prog = compile_program(ck)
    prog.warnings.extend(out_param_warnings(ck.prog))  # p4c's uninitialized_out_param
    return prog, ck
