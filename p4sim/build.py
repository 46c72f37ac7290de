"""The whole front end in one call: preprocess, parse, check and compile a P4 file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from p4sim.backend.compiler import compile_program
from p4sim.frontend.checker import Checker, check
from p4sim.frontend.outparams import out_param_warnings
from p4sim.frontend.parser import parse
from p4sim.frontend.preprocess import preprocess
from p4sim.runtime.model import Program


def build(path: str, include_dirs: Sequence[str] = (), defines: Mapping[str, str] | None = None) -> Program:
    """Compile ``path``; raises ``CompileError`` (``file:line:col: error: ...``) on a bad program."""
    text, lines = preprocess(path, include_dirs, defines)
    return build_text(text, lines)


def build_text(text: str, lines: object) -> Program:
    return build_checked(text, lines)[0]


def build_checked(text: str, lines: object) -> tuple[Program, Checker]:
    """The compiled program and the checked one (which the native engine's compiler compiles again)."""
    from p4sim.frontend.diagnostics import LineMap

    assert isinstance(lines, LineMap)
    ck = check(parse(text, lines))
    prog = compile_program(ck)
    prog.warnings.extend(out_param_warnings(ck.prog))  # p4c's uninitialized_out_param
    return prog, ck
