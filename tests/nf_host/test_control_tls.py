"""The NF control API over mutual TLS (nf_host/control.py, mgmt/tls.py, docs/security.md): a
call without a client certificate, with one of another CA, or in plaintext is refused in the
handshake and never reaches the NF; the controller's certificate is served; a controller that
expects NF 2 refuses a server holding NF 1's certificate."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest

from contract.commands import Returns, answer
from contract.proto import nf_control_pb2 as pb
from contract.proto import nf_control_pb2_grpc as pb_grpc
from mgmt import pki
from mgmt.pki import local_pki
from mgmt.tls import Identity, channel_options, control_channel
from nf_host.config import NfHostConfig
from nf_host.control import serve
from tests.support.procs import free_port

pytestmark = pytest.mark.unit
R = TypeVar("R")


class StubPool:
    """The worker pool's surface the servicer uses; records every command that reached it."""

    procs: list[Any] = []

    def __init__(self) -> None:
        self.commands: list[str] = []

    def broadcast(self, cmd: Returns[R]) -> list[R]:
        self.commands.append(cmd.NAME)
        return []

    def request(self, worker: int, cmd: Returns[R], timeout: float = 10.0) -> R:
        self.commands.append(cmd.NAME)
        return answer(cmd, None)  # (the calls made here answer nothing: SetRole, Heartbeat)

    def alive(self) -> bool:
        return True

    def worker_of(self, slot: int) -> int:
        return 0

    def heartbeats_withheld(self) -> int:
        return 0


@pytest.fixture
def nf1() -> Iterator[tuple[str, StubPool]]:
    """NF 1's control API on loopback (TLS, the default), over a stub pool."""
    address = f"127.0.0.1:{free_port()}"
    cfg = NfHostConfig(nf_id=1, interface="lo", control=address, pki_dir=str(local_pki()))
    pool = StubPool()
    server = serve(cfg, pool)  # type: ignore[arg-type]
    try:
        yield address, pool
    finally:
        server.stop(None).wait()


def set_role(channel: grpc.Channel) -> Any:
    stub = pb_grpc.NfControlStub(channel)  # type: ignore[no-untyped-call]
    return stub.SetRole(pb.SetRoleRequest(role=pb.IDLE), timeout=3)


def refused(channel: grpc.Channel) -> bool:
    with channel:
        try:
            set_role(channel)
        except grpc.RpcError as exc:
            return bool(exc.code() == grpc.StatusCode.UNAVAILABLE)
    return False


def test_the_controllers_certificate_is_served(nf1: tuple[str, StubPool]) -> None:
    address, pool = nf1
    with control_channel(address, 1, local_pki()) as channel:
        assert set_role(channel).ok
    assert pool.commands == ["set_role"]


def test_calls_without_a_valid_client_certificate_are_refused(nf1: tuple[str, StubPool],
                                                              tmp_path: Path) -> None:
    address, pool = nf1
    ca = (local_pki() / "ca.crt").read_bytes()
    other = pki.ensure(tmp_path / "other", ["controller"])  # another CA, same names
    other_id = Identity(other, "controller")
    attempts = {
        "plaintext": grpc.insecure_channel(address),
        "TLS, no client certificate": grpc.secure_channel(
            address, grpc.ssl_channel_credentials(root_certificates=ca),
            options=channel_options("nf-1")),
        "a client certificate of another CA": grpc.secure_channel(
            address, grpc.ssl_channel_credentials(
                root_certificates=ca, private_key=other_id.key.read_bytes(),
                certificate_chain=other_id.cert.read_bytes()),
            options=channel_options("nf-1")),
    }
    for what, channel in attempts.items():
        assert refused(channel), what
    assert pool.commands == []  # (SetRole(IDLE) would have dropped every slot)


def test_a_controller_refuses_a_server_that_is_not_the_nf_it_calls(
        nf1: tuple[str, StubPool]) -> None:
    """NF 1's certificate answering at the address the controller has for NF 2 (a spoofed or
    wrong address): the handshake fails on the controller's side."""
    address, pool = nf1
    assert refused(control_channel(address, 2, local_pki()))
    assert pool.commands == []


def test_an_nfs_certificate_may_not_call_another_nfs_control_api(
        nf1: tuple[str, StubPool]) -> None:
    """Mutual TLS lets every certificate of the CA in; only the controller's may call: NF 2's
    key (stolen, or a compromised NF) is refused with PERMISSION_DENIED."""
    address, pool = nf1
    with control_channel(address, 1, local_pki(), name="nf-2") as channel, \
            pytest.raises(grpc.RpcError) as err:
        set_role(channel)
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert pool.commands == []
