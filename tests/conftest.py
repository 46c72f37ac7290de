"""Fixtures shared by every test package."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.etcd import EtcdCluster, EtcdServer, etcd_binary, run_etcd, run_etcd_cluster


def _is_root() -> bool:
    return os.geteuid() == 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Namespace tests need root; etcd tests need the etcd binary. Say so instead of failing."""
    skip_root = pytest.mark.skip(reason="needs root for network namespaces")
    skip_etcd = pytest.mark.skip(reason="needs etcd (apt-get install etcd-server / make setup)")
    for item in items:
        if "netns" in item.keywords and not _is_root():
            item.add_marker(skip_root)
        if "etcd" in item.keywords and etcd_binary() is None:
            item.add_marker(skip_etcd)


@pytest.fixture(scope="session")
def etcd_server() -> Iterator[EtcdServer]:
    """One real etcd for the whole test session (tests use distinct key prefixes). Plaintext,
    explicitly (`pki=None`): its tests' clients and controller configurations say so
    (`security.etcd_tls: false`, `--etcd-insecure`); tests/test_etcd_fixture.py and
    tests/mgmt/test_etcd_tls.py cover etcd over mutual TLS, the default."""
    with run_etcd(pki=None) as server:
        yield server


@pytest.fixture
def etcd_cluster() -> Iterator[EtcdCluster]:
    """A real three-member etcd cluster of the test's own (it may kill and restart members)."""
    with run_etcd_cluster(3, pki=None) as cluster:  # (plaintext: see etcd_server)
        yield cluster
