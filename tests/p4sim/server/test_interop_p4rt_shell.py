"""p4runtime-shell (run from its own venv, `make p4rt-shell-venv`) drives the server through a
scripted session (p4rt_shell_session.py): pipeline push, table insert/modify/delete, reads,
multicast groups, counters, packet-out/in on the real engine, digests on the fake one.
If p4runtime-shell and p4sim disagree, p4sim is wrong.

Run: .venv/bin/pytest tests/p4sim/server/test_interop_p4rt_shell.py
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from tests.p4sim.server import fake_switch as fk
from tests.p4sim.server.conftest import Harness, RealProgram, start_harness, stop_harness

SHELL_PYTHON = Path(__file__).resolve().parents[3] / ".venv-p4rt-shell" / "bin" / "python"
SCRIPT = Path(__file__).with_name("p4rt_shell_session.py")

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(
        not SHELL_PYTHON.exists(),
        reason=f"p4runtime-shell venv {SHELL_PYTHON.parent.parent} is absent (make p4rt-shell-venv)",
    ),
]


def _loop_port_7_to_5(h: Harness) -> list[tuple[int, bytes]]:
    """A cable from port 7 back into port 5; everything sent out is recorded."""
    sent: list[tuple[int, bytes]] = []

    def wire(port: int, data: bytes) -> None:
        sent.append((port, data))
        if port == 7:
            h.device.inject(5, data)

    h.device.port_sender = wire
    return sent


def _run_shell(mode: str, h: Harness, p4info: Path, blob: Path) -> dict[str, object]:
    proc = subprocess.run(
        [str(SHELL_PYTHON), str(SCRIPT), mode, h.address, str(p4info), str(blob)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, proc.stdout + proc.stderr
    return json.loads(lines[-1])  # type: ignore[no-any-return]


@pytest.fixture
def real_server(real_program: RealProgram) -> Iterator[Harness]:
    from p4sim.server.device import real_engine

    h = start_harness(real_engine, real_program)
    yield h
    stop_harness(h)


def test_p4runtime_shell_session_on_the_real_engine(
    real_server: Harness, real_program: RealProgram
) -> None:
    sent = _loop_port_7_to_5(real_server)
    out = _run_shell("real", real_server, real_program.p4info_path, real_program.device_config_path)
    assert out["entries"] == [
        ["0a000200", 24, ["020000000002", "03"]],
        ["0a000900", 24, []],
    ]
    assert out["after_delete"] == 1
    assert out["mcast"] == [[1, [[1, 1], [2, 1]]]]
    assert [p for p, _ in sent] == [7]
    [(payload, metadata)] = cast(list[tuple[str, dict[str, str]]], out["packet_in"])
    assert payload == sent[0][1].hex()
    assert "05" in metadata.values()
    assert out["counter"] == [[5, 1]]


def test_p4runtime_shell_digests(tmp_path: Path) -> None:
    h = start_harness()
    try:
        _loop_port_7_to_5(h)
        blob = tmp_path / "fake.bin"
        blob.write_bytes(fk.DEVICE_CONFIG)
        out = _run_shell("digest", h, fk.P4INFO_PATH, blob)
        assert out["digests"] == [[["05", "02000000000b"]]]
    finally:
        stop_harness(h)
