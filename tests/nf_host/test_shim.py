"""contract/shim.py agrees with `header nfc_shim_h` and the shim constants in p4src/shared/*.p4.

The P4 side is read with p4sim's own front end (preprocessor and parser), so typedefs and
includes resolve exactly as they do when the switch program is compiled.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contract import shim as py_shim

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
HEADER_P4 = REPO / "p4src" / "shared" / "header.p4"

# (field, width in bits) in wire order, as contract/shim.py packs them (struct "!BBBBHHHIH").
PY_LAYOUT = [
    ("kind", 8), ("flags", 8), ("stage", 8), ("reserved", 8), ("slot", 16),
    ("epoch", 16), ("nf_id", 16), ("seq", 32), ("ether_type", 16),
]  # fmt: skip


@pytest.fixture(scope="module")
def p4_decls() -> dict[str, object]:
    from p4sim.frontend.parser import parse
    from p4sim.frontend.preprocess import preprocess

    assert HEADER_P4.exists(), f"{HEADER_P4} is missing"
    text, lines = preprocess(str(HEADER_P4), [str(HEADER_P4.parent)], {})
    return {d.name: d for d in parse(text, lines).decls}


def _width(t: object, decls: dict[str, object]) -> int:
    from p4sim.frontend import ast as A

    while isinstance(t, A.TNamed):
        typedef = decls[t.name]
        assert isinstance(typedef, A.TypedefDecl), f"{t.name} is not a typedef"
        t = typedef.type
    assert isinstance(t, A.TBits) and isinstance(t.width, A.Number), f"{t} is not bit<N>"
    return t.width.value


def _const(decls: dict[str, object], name: str) -> int:
    from p4sim.frontend import ast as A

    decl = decls[name]
    assert isinstance(decl, A.ConstDecl) and isinstance(decl.value, A.Number)
    return decl.value.value


def test_shim_fields_and_widths_match(p4_decls: dict[str, object]) -> None:
    from p4sim.frontend import ast as A

    header = p4_decls["nfc_shim_h"]
    assert isinstance(header, A.HeaderDecl) and header.kind == "header"
    p4_layout = [(f.name, _width(f.type, p4_decls)) for f in header.fields]
    assert p4_layout == PY_LAYOUT
    assert sum(w for _, w in p4_layout) == py_shim.SHIM_LEN * 8


def test_shim_constants_match(p4_decls: dict[str, object]) -> None:
    assert _const(p4_decls, "ETHERTYPE_NFC") == py_shim.ETHERTYPE_NFC
    for kind in py_shim.Kind:
        assert _const(p4_decls, f"SHIM_KIND_{kind.name}") == kind.value
    assert _const(p4_decls, "SHIM_FLAG_FIRST_OF_EPOCH") == py_shim.FLAG_FIRST_OF_EPOCH


def test_codec_packs_in_the_p4_field_order() -> None:
    s = py_shim.Shim(kind=1, flags=1, slot=0x0102, epoch=0x0304, nf_id=0x0506, seq=0x0708090A,
                     ether_type=0x0800, stage=7)  # fmt: skip
    assert s.pack() == bytes([1, 1, 7, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 8, 0])
    assert py_shim.Shim.unpack(s.pack()) == s
