"""Builds the native engine's shared library with the system C compiler, cached by content hash.

The cache key is the SHA-256 of the whole C source (generated program, runtime.h and pipeline.c)
plus the compiler command, so a changed program, runtime or compiler flag builds again and an
unchanged one loads at once. The cache directory is ``$P4SIM_NATIVE_CACHE``, else
``$XDG_CACHE_HOME/p4sim/native``, else ``~/.cache/p4sim/native``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

CFLAGS = ["-O2", "-fPIC", "-shared", "-fno-strict-aliasing", "-w"]


class NativeBuildError(Exception):
    """The C compiler is missing or refused the generated program."""


def cache_dir() -> Path:
    env = os.environ.get("P4SIM_NATIVE_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "p4sim" / "native"


def find_cc() -> str | None:
    """The C compiler: ``$CC``, else gcc, else cc (None when there is none)."""
    for name in (os.environ.get("CC"), "gcc", "cc"):
        if name:
            path = shutil.which(name)
            if path:
                return path
    return None


def build_library(source: str) -> Path:
    """The shared library of ``source``, compiled on first use; raises NativeBuildError."""
    cc = find_cc()
    if cc is None:
        raise NativeBuildError("no C compiler found (install gcc, or set CC)")
    key = hashlib.sha256("\0".join([source, cc, *CFLAGS]).encode()).hexdigest()[:32]
    out_dir = cache_dir()
    lib = out_dir / f"p4sim-{key}.so"
    if lib.exists():
        return lib
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        src = Path(tmp) / "program.c"
        src.write_text(source)
        tmp_lib = Path(tmp) / "program.so"
        proc = subprocess.run([cc, *CFLAGS, "-o", str(tmp_lib), str(src)], capture_output=True, text=True,
                              check=False)
        if proc.returncode != 0:
            kept = out_dir / f"p4sim-{key}-failed.c"
            kept.write_text(source)
            raise NativeBuildError(f"{cc} failed on the generated program (kept as {kept}): "
                                   f"{proc.stderr.strip()[:2000]}")
        os.replace(tmp_lib, lib)  # atomic: a concurrent build of the same program is harmless
    return lib
