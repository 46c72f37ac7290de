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


def test_a_port_is_not_handed_out_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Callers pick several ports before any is bound (an etcd cluster's peer ports): a second
    pick of the same port must not be handed out again."""
    first = procs.free_port()
    picks = iter([first, first, first])
    monkeypatch.setattr(procs._PICK, "randrange", lambda a, b: next(picks, first + 1))
    monkeypatch.setattr(procs, "_ephemeral_low", lambda: 65535)
    assert procs.free_port() != first
