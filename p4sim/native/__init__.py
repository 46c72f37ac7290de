"""The native engine: the program compiled to C, the same semantics as the Python engine, faster.

`native_switch` builds it for a checked program (C code generation in `ccompiler`/`cexpr`, the
shared library in `build`, the Python binding in `engine`); when the program uses something the
C form does not run, or there is no C compiler or no cffi, it says why and the caller runs the
Python engine instead.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from p4sim.frontend.checker import Checker
from p4sim.frontend.diagnostics import NOWHERE
from p4sim.runtime.model import Program

if TYPE_CHECKING:
    from finsy.proto import p4i

    from p4sim.runtime.switch import Switch

LOG = logging.getLogger("p4sim.native")


def native_switch(ck: Checker, prog: Program, config: bytes, p4info: p4i.P4Info | None,
                  cpu_port: int | None) -> tuple[Switch | None, str]:
    """The native engine for a program, or None and the reason it cannot run natively."""
    try:
        import cffi  # noqa: F401
    except ImportError:
        return None, "cffi is not installed"
    from p4sim.native.build import NativeBuildError, build_library
    from p4sim.native.ccompiler import compile_c
    from p4sim.native.cexpr import NativeUnsupported
    from p4sim.native.engine import NativeSwitch

    try:
        cprog = compile_c(ck)
    except NativeUnsupported as exc:
        return None, exc.message if exc.loc is NOWHERE else str(exc)
    except Exception as exc:  # a bug in the C code generator must never stop the program from running
        LOG.exception("native engine: code generation failed")
        return None, f"C code generation failed: {exc!r}"
    try:
        lib: Path = build_library(cprog.source)
    except NativeBuildError as exc:
        return None, str(exc)
    return NativeSwitch(prog, config, p4info, cpu_port, cprog, lib), ""
