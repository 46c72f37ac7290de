"""`nf-host run` with its global state in a real etcd: the generic NF increments a global counter
from a worker process (etcd runs inside the test's namespace, where the NF can reach it), over
mutual TLS, the default: the NF connects with its certificate (docs/security.md)."""

from __future__ import annotations

import base64
import json
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator

import pytest

from mgmt.pki import local_pki
from mgmt.tls import Identity
from nf_host.harness import Netns, NfProcess, RawPort, Switch, assign, checker_frame
from nf_host.port import in_netns
from tests.support.etcd import EtcdCluster, etcd_binary
from tests.support.procs import free_port, stop_process, wait_for

pytestmark = [pytest.mark.netns, pytest.mark.etcd, pytest.mark.slow]
CTX = Identity(local_pki(), "controller").client_context()  # the test asks etcd as the controller


@pytest.fixture
def ns_etcd() -> Iterator[tuple[Netns, str]]:
    binary = etcd_binary()
    assert binary is not None
    with Netns() as ns, tempfile.TemporaryDirectory(prefix="nfc-etcd-") as data:
        client, peer = f"https://127.0.0.1:{free_port()}", f"https://127.0.0.1:{free_port()}"
        proc = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                ns.name,
                binary,
                "--name",
                "t",
                "--data-dir",
                data,
                "--listen-client-urls",
                client,
                "--advertise-client-urls",
                client,
                "--listen-peer-urls",
                peer,
                "--initial-advertise-peer-urls",
                peer,
                "--initial-cluster",
                f"t={peer}",
                "--log-level",
                "error",
                *EtcdCluster(pki=local_pki()).tls_args(),  # (the launcher's TLS flags)
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:

            def healthy() -> bool:
                with urllib.request.urlopen(f"{client}/health", timeout=1, context=CTX) as resp:
                    return b'"health":"true"' in resp.read()

            wait_for(lambda: in_netns(ns.name, healthy), 20, what="etcd in the namespace")
            yield ns, client.removeprefix("https://")
        finally:
            stop_process(proc)


def test_generic_nf_updates_global_state_in_etcd(ns_etcd: tuple[Netns, str]) -> None:
    ns, endpoint = ns_etcd
    nf_side, sw_side = ns.veth()
    nf = NfProcess(
        ns.name,
        1,
        nf_side,
        free_port(),
        nf="generic",
        extra=[
            "--params",
            '{"global_update_rate": 0.5, "counter": "t1"}',
            "--global-store",
            f"etcd://{endpoint}/nfct/",
        ],
    )
    port = RawPort(ns.name, sw_side)
    try:
        nf.wait_ready()
        assign(nf, [2])
        sw = Switch()
        for no in range(1, 41):
            port.send(sw.stamp(2, checker_frame(1, no), 1)[0])
        wait_for(lambda: port.count() == 40, 15, what="40 outputs")

        def counter() -> bytes | None:
            # etcd's JSON gateway, over a socket opened in this thread (i.e. in the namespace)
            body = json.dumps({"key": base64.b64encode(b"/nfct/generic/t1").decode()}).encode()
            req = urllib.request.Request(f"https://{endpoint}/v3/kv/range", data=body,
                                         method="POST")
            with urllib.request.urlopen(req, timeout=5, context=CTX) as resp:
                kvs = json.loads(resp.read()).get("kvs", [])
            return base64.b64decode(kvs[0]["value"]) if kvs else None

        value = in_netns(ns.name, counter)
        assert value is not None and int(value) == 20
    finally:
        nf.stop()
        port.close()
