"""`run_etcd_cluster` when a port it found free is taken before etcd binds it (another process
picked it meanwhile, e.g. tests running side by side): it starts again on new ports."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

import topo.etcd as etcd_mod
from topo.etcd import etcd_binary, run_etcd_cluster

pytestmark = [pytest.mark.unit,
              pytest.mark.skipif(etcd_binary() is None, reason="etcd is not installed")]


def test_a_port_taken_before_etcd_binds_it_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    real = etcd_mod.free_port  # type: ignore[attr-defined]
    ports: Iterator[int] = iter([taken.getsockname()[1]])

    def first_taken() -> int:
        return next(ports, None) or real()

    monkeypatch.setattr(etcd_mod, "free_port", first_taken)
    try:
        with run_etcd_cluster(1, timeout=20) as cluster:
            assert cluster.healthy(0)
            assert cluster.members[0].client_port != taken.getsockname()[1]
    finally:
        taken.close()
