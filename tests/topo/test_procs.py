"""topo.procs: free ports for listeners."""

from __future__ import annotations

import socket

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
