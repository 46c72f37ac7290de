"""Mutual TLS for the management plane: a component's identity and what is built from it.

`Identity` is a PKI directory (mgmt/pki.py's layout: `ca.crt`, `<name>.crt`, `<name>.key`)
and the component's name in it. From it come gRPC credentials (the NF control API's server,
the controller's channels, P4Runtime, etcd) and `ssl.SSLContext`s for the NF-to-NF replication
links (nf_host/tls_streams.py's `TlsStreams`, put in place of `nf_host.replication.TRANSPORT` by
each worker) and the death watch.
Every server requires a client certificate signed by the CA; every client checks the server's
certificate against the CA and, where it knows whom it calls (the controller calling NF n, the
switch), against that name ("nf-<n>", "switch"). Plaintext is an explicit option of each component
(`--insecure`, `tls: false`), never the default (docs/security.md).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import grpc

from mgmt.pki import nf_name

DEFAULT_DIR = Path("build/pki")


class TlsConfigError(ValueError):
    """A certificate, key or CA file that is missing or unusable (the message names it)."""


@dataclass(frozen=True)
class Identity:
    """A component's certificate and key, and the CA it trusts, in `directory`."""

    directory: Path
    name: str

    @property
    def ca(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def cert(self) -> Path:
        return self.directory / f"{self.name}.crt"

    @property
    def key(self) -> Path:
        return self.directory / f"{self.name}.key"

    def check(self) -> Identity:
        """Raise TlsConfigError unless every file is readable."""
        for path in (self.ca, self.cert, self.key):
            if not path.is_file():
                raise TlsConfigError(
                    f"{path} is missing: create the PKI (`make pki`, docs/security.md) or run "
                    f"with --insecure (plaintext, for debugging only)")
        return self

    def _read(self) -> tuple[bytes, bytes, bytes]:
        self.check()
        return self.ca.read_bytes(), self.key.read_bytes(), self.cert.read_bytes()

    # -- gRPC -------------------------------------------------------------------------------------
    def grpc_server(self) -> grpc.ServerCredentials:
        ca, key, cert = self._read()
        return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca,
                                           require_client_auth=True)

    def grpc_channel(self) -> grpc.ChannelCredentials:
        ca, key, cert = self._read()
        return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key,
                                            certificate_chain=cert)

    # -- TLS streams ------------------------------------------------------------------------------
    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(self.check().ca))
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_cert_chain(str(self.cert), str(self.key))
        return ctx

    def client_context(self) -> ssl.SSLContext:
        """A client context that checks the server's chain against the CA. The replication
        transport does not know which NF it calls, so any certificate of the CA is accepted
        (docs/security.md: what this does not stop)."""
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(self.check().ca))
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_cert_chain(str(self.cert), str(self.key))
        return ctx


def nf_identity(directory: str | Path, nf_id: int) -> Identity:
    return Identity(Path(directory), nf_name(nf_id))


def channel_options(target_name: str) -> list[tuple[str, Any]]:
    """gRPC options that check the server's certificate against `target_name` (its component
    name) whatever address it is reached at."""
    return [("grpc.ssl_target_name_override", target_name)]


class _NfSecurity(Protocol):
    nf_id: int
    tls: bool
    pki_dir: str


def check_nf_files(cfg: _NfSecurity) -> None:
    """Raise TlsConfigError unless an NF with TLS on finds its certificate, key, CA and heartbeat
    key (nothing is checked with `tls: false`)."""
    if not cfg.tls:
        return
    nf_identity(cfg.pki_dir, cfg.nf_id).check()
    hbkey = heartbeat_key_path(cfg.pki_dir, cfg.nf_id)
    if not hbkey.is_file():
        raise TlsConfigError(f"{hbkey} is missing: create the PKI (`make pki`, docs/security.md)")


def heartbeat_key_path(directory: str | Path, nf_id: int) -> Path:
    return Path(directory) / f"{nf_name(nf_id)}.hbkey"


def nf_heartbeat_key(cfg: _NfSecurity) -> bytes | None:
    """The NF's heartbeat key (None with `tls: false`: heartbeats unauthenticated)."""
    return heartbeat_key_path(cfg.pki_dir, cfg.nf_id).read_bytes() if cfg.tls else None


def control_channel(address: str, nf_id: int, pki_dir: str | Path = DEFAULT_DIR,
                    tls: bool = True, name: str = "controller") -> grpc.Channel:
    """A blocking gRPC channel to NF `nf_id`'s control API as `name` (the controller's
    certificate by default): for tools, tests and experiments (the controller's own channels are
    asyncio ones, controlplane/nf_registry.py)."""
    if not tls:
        return grpc.insecure_channel(address)
    return grpc.secure_channel(address, Identity(Path(pki_dir), name).grpc_channel(),
                               options=channel_options(nf_name(nf_id)))
