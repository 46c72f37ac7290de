"""topo.procs: free ports for listeners."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from topo import procs

pytestmark = pytest.mark.unit


def test_free_ports_are_below_the_ephemeral_range_and_bindable() -> None:
    low = procs._ephemeral_low()
    for _ in range(20):
        port = procs.free_port()
        if low > procs.LISTEN_PORTS_FROM:
            assert procs.LISTEN_PORTS_FROM <= port < low
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", port))


def test_a_taken_port_is_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        picks = iter([busy, busy, busy + 1 if busy + 1 != 65536 else busy - 1])
        monkeypatch.setattr(procs, "_ephemeral_low", lambda: 65535)
        monkeypatch.setattr(procs._PICK, "randrange", lambda a, b: next(picks))
        assert procs.free_port() != busy


def test_a_port_is_not_handed_out_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Callers pick several ports before any is bound (an etcd cluster's peer ports): a second
    pick of the same port must not be handed out again."""
    first = procs.free_port()
    picks = iter([first, first, first])
    monkeypatch.setattr(procs._PICK, "randrange", lambda a, b: next(picks, first + 1))
    monkeypatch.setattr(procs, "_ephemeral_low", lambda: 65535)
    assert procs.free_port() != first


@pytest.mark.skipif(not Path("/proc/self/autogroup").exists(), reason="no scheduler autogroups")
def test_a_session_gets_its_priority_as_a_scheduling_group() -> None:
    """With autogroups, the niceness of a process started in a session of its own counts only
    inside that session: `prioritize_session` gives the whole session (its autogroup) the
    priority, or says it could not."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                            start_new_session=True)
    try:
        group = Path(f"/proc/{proc.pid}/autogroup")
        assert group.read_text().split()[-1] == "0"
        privileged = os.geteuid() == 0
        assert procs.prioritize_session(proc.pid, -5) is privileged
        assert group.read_text().split()[-1] == ("-5" if privileged else "0")
    finally:
        procs.stop_process(proc)
    assert not procs.prioritize_session(proc.pid, -5)  # gone: nothing to prioritize
