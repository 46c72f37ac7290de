"""etcd over mutual TLS, the launcher's and the components' default (docs/security.md): the
controller's and an NF's certificates get in, a client without a certificate, with one of
another CA or speaking plaintext does not."""

import asyncio
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import aetcd
import grpc
import pytest

from controlplane.leader import Leadership
from controlplane.slot_store import SlotStore
from mgmt.etcd_endpoints import ETCD_NAME, _TlsClient, etcd_client
from mgmt.pki import ensure, local_pki
from mgmt.tls import Identity, nf_identity
from nf_host.global_state import GlobalStoreError, open_store
from tests.support.etcd import EtcdServer, run_etcd

pytestmark = pytest.mark.etcd


@pytest.fixture(scope="module")
def tls_etcd() -> Iterator[EtcdServer]:
    with run_etcd() as server:  # (the default: mutual TLS with the repository's PKI)
        yield server


def test_the_nfs_store_and_the_controller_reach_etcd_with_their_certificates(
        tls_etcd: EtcdServer) -> None:
    with open_store(f"etcd://{tls_etcd.endpoint}/tls-test",
                    tls=nf_identity(local_pki(), 1)) as store:  # type: ignore[attr-defined]
        store.put("k", b"v")
        assert store.get("k") == b"v"

    async def controller() -> tuple[bool, str | None]:
        me = Identity(local_pki(), "controller")
        async with SlotStore([tls_etcd.endpoint], "/tls-test-ctl", tls=me) as slots:
            await slots._client.put(b"/tls-test-ctl/x", b"1")
            value = await slots._client.get(b"/tls-test-ctl/x")
        lead = Leadership([tls_etcd.endpoint], "/tls-test-ctl", "a", ttl_s=1, tls=me)
        await lead.campaign()
        leader = lead.leader
        await lead.resign()
        await lead.close()
        return value is not None and bytes(value.value) == b"1", leader

    assert asyncio.run(controller()) == (True, "a")


def _refused(client: aetcd.Client) -> bool:
    async def attempt() -> bool:
        try:
            await client.connect()
            await client.get(b"/tls-test/k")
        except (aetcd.ClientError, TimeoutError):
            return True
        finally:
            await client.close()
        return False

    return asyncio.run(attempt())


def test_etcd_refuses_clients_without_a_certificate_of_its_ca(
        tls_etcd: EtcdServer, tmp_path: Path) -> None:
    # plaintext gRPC
    assert _refused(etcd_client(tls_etcd.endpoint, 1.0))
    # TLS that trusts etcd's certificate but presents none
    bare = _TlsClient(grpc.ssl_channel_credentials((local_pki() / "ca.crt").read_bytes()),
                      host=tls_etcd.host, port=tls_etcd.port, timeout=1.0,
                      options={"grpc.ssl_target_name_override": ETCD_NAME})
    assert _refused(bare)
    # TLS with a certificate of another CA
    other = ensure(tmp_path / "other-pki", ["controller"])
    assert _refused(etcd_client(tls_etcd.endpoint, 1.0, Identity(other, "controller")))
    # HTTPS without a client certificate (the server's checked against the CA)
    ctx = ssl.create_default_context(cafile=str(local_pki() / "ca.crt"))
    ctx.check_hostname = False
    with (pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)),
          urllib.request.urlopen(f"https://{tls_etcd.endpoint}/v3/kv/range", timeout=2,
                                 context=ctx, data=b'{"key": "eA=="}') as resp):
        resp.read()
    # the NF's store says so (counted by the runtime as global_store_errors)
    store = open_store(f"etcd://{tls_etcd.endpoint}/tls-test")
    store.timeout = 1.0  # type: ignore[attr-defined]
    with pytest.raises(GlobalStoreError):
        store.get("k")
    store.close()  # type: ignore[attr-defined]
