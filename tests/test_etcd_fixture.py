"""The shared etcd fixture starts a real, healthy etcd."""

import json
import urllib.request

import pytest

from tests.support.etcd import EtcdServer


@pytest.mark.etcd
def test_etcd_fixture_answers_version(etcd_server: EtcdServer) -> None:
    with urllib.request.urlopen(f"http://{etcd_server.endpoint}/version", timeout=2) as resp:
        info = json.loads(resp.read())
    assert info["etcdserver"].count(".") == 2
