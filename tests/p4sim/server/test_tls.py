"""p4sim's P4Runtime server over mutual TLS (`p4sim run --tls-dir`, docs/security.md): a client
with a certificate of the CA is served; one in plaintext or without a certificate is refused."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from finsy.proto import p4r, p4r_grpc

from mgmt.pki import local_pki
from mgmt.tls import Identity, channel_options
from p4sim.server.device import Device
from p4sim.server.service import Server, serve, tls_credentials

pytestmark = pytest.mark.unit


@pytest.fixture
def switch() -> Iterator[Server]:
    server = serve(Device(device_id=1, cpu_port=510), "127.0.0.1:0",
                   tls=tls_credentials(local_pki()))
    try:
        yield server
    finally:
        server.stop(None)


def capabilities(channel: grpc.Channel) -> str:
    with channel:
        stub = p4r_grpc.P4RuntimeStub(channel)
        try:
            reply = stub.Capabilities(p4r.CapabilitiesRequest(), timeout=3)
        except grpc.RpcError as exc:
            return str(exc.code().name)
        return str(reply.p4runtime_api_version) and "served"


def test_only_clients_with_a_certificate_of_the_ca_are_served(switch: Server) -> None:
    address = f"127.0.0.1:{switch.port}"
    ca = (local_pki() / "ca.crt").read_bytes()
    ctl = Identity(local_pki(), "controller")
    assert capabilities(grpc.secure_channel(
        address, ctl.grpc_channel(), options=channel_options("switch"))) == "served"
    assert capabilities(grpc.insecure_channel(address)) == "UNAVAILABLE"
    assert capabilities(grpc.secure_channel(
        address, grpc.ssl_channel_credentials(root_certificates=ca),
        options=channel_options("switch"))) == "UNAVAILABLE"
    # a client that expects another name than the switch's certificate refuses it
    assert capabilities(grpc.secure_channel(
        address, ctl.grpc_channel(), options=channel_options("nf-1"))) == "UNAVAILABLE"
