"""The run's controllers (topo/launch/controllers.py): at the end of a run, a leader that stopped
by itself (its lease lost on a starved machine) is started again before the final counts are
read, and the run falls back to the given API, instead of crashing, when none leads."""

from __future__ import annotations

import subprocess

import pytest

from topo.launch.controllers import Controllers
from topo.procs import free_port

pytestmark = pytest.mark.unit


def test_the_final_counts_start_a_stopped_controller_again_and_fall_back_when_none_leads() -> None:
    started: list[str] = []
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str) -> subprocess.Popen[bytes]:
        started.append(name)
        procs.append(subprocess.Popen(["sleep", "30"]))
        return procs[-1]

    stopped = subprocess.Popen(["true"])
    stopped.wait()
    nobody = f"http://127.0.0.1:{free_port()}"  # no controller answers there
    ctls = Controllers(start, {"controller": nobody}, {"controller": stopped})
    try:
        assert ctls.settled_leader_api("http://fallback", timeout=0.5) == "http://fallback"
        assert started == ["controller"] and ctls.revived == ["controller"]
    finally:
        for p in procs:
            p.kill()
            p.wait()
