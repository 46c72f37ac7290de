"""C preprocessing of P4 sources (#include, #define, #ifdef) with a map back to original lines.

The system ``cpp`` is used when present (it is what p4c itself runs); pcpp, a pure-Python
preprocessor, is the fallback so p4sim also works without a C toolchain.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from p4sim.frontend.diagnostics import CompileError, LineMap, Loc

P4INCLUDE = str(Path(__file__).parent / "p4include")
_MARKER = re.compile(r'^#(?:line)?\s*(\d+)\s+"((?:[^"\\]|\\.)*)"')


def preprocess(
    path: str, include_dirs: Sequence[str] = (), defines: Mapping[str, str] | None = None
) -> tuple[str, LineMap]:
    """Preprocess ``path``; return the text (markers removed) and its line map."""
    if not os.path.isfile(path):
        raise CompileError(Loc(path, 0, 0), f"cannot open {path}")
    incs = [P4INCLUDE, *include_dirs]
    defs = dict(defines or {})
    cpp = shutil.which("cpp")
    raw = _run_cpp(cpp, path, incs, defs) if cpp else _run_pcpp(path, incs, defs)
    return _strip_markers(raw, path)


def _run_cpp(cpp: str, path: str, incs: list[str], defs: dict[str, str]) -> str:
    cmd = [cpp, "-E", "-x", "c", "-undef", "-nostdinc", "-w"]
    for d in incs:
        cmd += ["-I", d]
    for k, v in defs.items():
        cmd.append(f"-D{k}={v}" if v != "" else f"-D{k}")
    cmd.append(path)
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        msg = proc.stderr.strip().splitlines()
        first = msg[0] if msg else "preprocessor failed"
        m = re.match(r"^(.*?):(\d+):(\d+): (?:fatal )?error: (.*)$", first)
        if m:
            raise CompileError(Loc(m.group(1), int(m.group(2)), int(m.group(3))), m.group(4))
        raise CompileError(Loc(path, 0, 0), first)
    return proc.stdout


def _run_pcpp(path: str, incs: list[str], defs: dict[str, str]) -> str:
    from pcpp import Preprocessor

    class _Pre(Preprocessor):  # type: ignore[misc]
        def on_error(self, file: str, line: int, msg: str) -> None:
            raise CompileError(Loc(file, line, 1), msg)

    pre = _Pre()
    pre.line_directive = "#line"
    for d in incs:
        pre.add_path(d)
    for k, v in defs.items():
        pre.define(f"{k} {v}")
    with open(path, encoding="utf-8") as f:
        pre.parse(f.read(), path)
    out = io.StringIO()
    pre.write(out)
    return out.getvalue()


def _strip_markers(raw: str, path: str) -> tuple[str, LineMap]:
    lm = LineMap()
    lines: list[str] = []
    cur_file, cur_line = path, 1
    for line in raw.split("\n"):
        m = _MARKER.match(line)
        if m:
            cur_line = int(m.group(1))
            cur_file = m.group(2)
            lines.append("")
            lm.add(cur_file, 0)
            continue
        if line.startswith("#pragma"):
            line = ""
        lines.append(line)
        lm.add(cur_file, cur_line)
        cur_line += 1
    return "\n".join(lines), lm
