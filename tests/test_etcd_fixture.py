"""The shared etcd fixture starts a real, healthy etcd."""

import json
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from mgmt.pki import local_pki
from mgmt.tls import Identity
from tests.support.etcd import EtcdServer
from topo import etcd as launcher_etcd


@pytest.mark.etcd
def test_etcd_fixture_answers_version(etcd_server: EtcdServer) -> None:
    with urllib.request.urlopen(f"http://{etcd_server.endpoint}/version", timeout=2) as resp:
        info = json.loads(resp.read())
    assert info["etcdserver"].count(".") == 2



@pytest.mark.etcd
def test_launcher_etcd_writes_its_output_to_a_log_file_not_an_unread_pipe(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unread stderr pipe blocks etcd once it fills; the launcher's etcd logs to a file."""
    seen: list[dict[str, Any]] = []
    real_popen = subprocess.Popen

    def spy(*args: Any, **kw: Any) -> Any:
        seen.append(kw)
        return real_popen(*args, **kw)

    monkeypatch.setattr(subprocess, "Popen", spy)  # the module topo.etcd calls
    log = tmp_path / "etcd.log"
    # (over mutual TLS, the launcher's default: asked as the controller)
    ctx = Identity(local_pki(), "controller").client_context()
    with launcher_etcd.run_etcd(log_path=log) as server, urllib.request.urlopen(
            f"https://{server.endpoint}/health", timeout=2, context=ctx) as resp:
        assert b"true" in resp.read()
    [kw] = seen
    assert kw["stderr"] == subprocess.STDOUT and kw["stdout"] not in (subprocess.PIPE, None)
    assert log.exists()
