"""The one place that chooses the engine of a program: the Python `Switch` or the native one.

`load_switch` compiles a P4 file, `switch_from_device_config` a device config (what
``p4sim compile`` writes and P4Runtime's SetForwardingPipelineConfig carries), `build_switch` a
preprocessed program, on the engine asked for: "python" (the reference, `p4sim.runtime.switch`)
or "native" (the program compiled to C, `p4sim.native`; when the program or the machine cannot
run it, the Python engine, with a log line saying why: see ``Switch.native_fallback``). Neither
engine imports this module, so the Python engine and the native one do not import each other.
"""

from __future__ import annotations

import json
import logging
import os
import zlib
from collections.abc import Mapping, Sequence

from finsy.proto import p4i

from p4sim.build import build_checked
from p4sim.frontend.diagnostics import LineMap
from p4sim.frontend.preprocess import preprocess
from p4sim.native import native_switch
from p4sim.runtime.api_values import bad
from p4sim.runtime.switch import Switch

CONFIG_MAGIC = "p4sim-device-config/1"
ENGINES = ("python", "native")
LOG = logging.getLogger("p4sim")


def default_engine() -> str:
    """The engine when none is named: ``$P4SIM_ENGINE``, else native (where it builds)."""
    return os.environ.get("P4SIM_ENGINE") or "native"


def prog_name(config: bytes) -> str:
    """The source file a device config was compiled from (for log lines)."""
    try:
        return str(json.loads(zlib.decompress(config)).get("path", "program"))
    except (ValueError, zlib.error):
        return "program"


def pack_config(path: str, text: str, lines: LineMap) -> bytes:
    """The device config of a preprocessed program: its source and line map, compressed."""
    doc = {"magic": CONFIG_MAGIC, "path": path, "text": text, "lines": lines._entries}
    return zlib.compress(json.dumps(doc).encode())


def load_switch(p4_path: str, include_dirs: Sequence[str] = (), defines: Mapping[str, str] | None = None,
                cpu_port: int | None = None, engine: str | None = None) -> Switch:
    """Compile and load a program; ``engine`` as in `build_switch` (default: `default_engine`)."""
    text, lines = preprocess(p4_path, include_dirs, defines or {})
    config = pack_config(p4_path, text, lines)
    return build_switch(text, lines, config, None, cpu_port, engine)


def build_switch(text: str, lines: LineMap, config: bytes, p4info: p4i.P4Info | None,
                 cpu_port: int | None, engine: str | None = None) -> Switch:
    """The switch of a preprocessed program on ``engine``: "python" (the reference engine) or
    "native" (the program compiled to C, p4sim/native/; when the program or the machine
    cannot run it, the Python engine, with a log line saying why: see ``native_fallback``)."""
    engine = engine or default_engine()
    if engine not in ENGINES:
        raise bad(f"unknown engine {engine!r} (one of {', '.join(ENGINES)})")
    prog, ck = build_checked(text, lines)
    if engine == "native":
        sw, why = native_switch(ck, prog, config, p4info, cpu_port)
        if sw is not None:
            return sw
        LOG.warning("native engine unavailable for %s (%s): running the Python engine",
                    prog_name(config), why)
        fallback = Switch(prog, config, p4info, cpu_port)
        fallback.native_fallback = why
        return fallback
    return Switch(prog, config, p4info, cpu_port)


def switch_from_device_config(data: bytes, p4info: p4i.P4Info | None = None,
                              cpu_port: int | None = None, engine: str | None = None) -> Switch:
    """The switch of a device config (`pack_config`); ``engine`` as in `build_switch`."""
    try:
        doc = json.loads(zlib.decompress(data))
        if doc.get("magic") != CONFIG_MAGIC:
            raise ValueError("bad magic")
        lines = LineMap()
        for f, ln in doc["lines"]:
            lines.add(f, ln)
        text = doc["text"]
    except (ValueError, KeyError, TypeError, zlib.error) as exc:
        raise bad(f"device config is not a p4sim device config: {exc}") from None
    return build_switch(text, lines, data, p4info, cpu_port, engine)
