"""The v1model and TNA programs use the same names for every table and action, and the same
controls apart from each architecture's own (checksums and deparsers, v1model's egress packet-in):
a controller written against one program's P4Info drives the other (docs/tofino.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

P4SRC = Path(__file__).resolve().parents[1] / "p4src"
ARCH_CONTROLS = {
    "v1model": {"NfcVerifyChecksum", "NfcComputeChecksum", "NfcDeparser", "PacketIoEgress"},
    "tna": {"NfcIngressDeparser", "NfcEgressDeparser"},
}
PATTERNS = {"table": r"\btable\s+(\w+)", "control": r"\bcontrol\s+(\w+)"}


def declared(arch: str) -> dict[str, set[str]]:
    text = "".join(p.read_text() for p in sorted((P4SRC / arch).rglob("*.p4")))
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    out = {kind: set(re.findall(pattern, text)) for kind, pattern in PATTERNS.items()}
    # the actions tables offer (a helper action one program calls from others is its own)
    out["action"] = {name for block in re.findall(r"\bactions\s*=\s*\{([^}]*)\}", text)
                     for name in re.findall(r"(\w+)\s*;", block)}
    return out


def test_tables_actions_and_controls_have_the_same_names() -> None:
    v1, tna = declared("v1model"), declared("tna")
    assert v1["table"] == tna["table"]
    assert v1["action"] == tna["action"]
    assert v1["control"] - ARCH_CONTROLS["v1model"] == tna["control"] - ARCH_CONTROLS["tna"]
    assert {"slot_owner", "nf_stage", "edge_chain", "stage_next", "edge_forward"} <= v1["table"]
