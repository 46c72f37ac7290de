"""Mutual TLS for the management plane: a component's identity and what is built from it.

`Identity` is a PKI directory (nf_host/pki.py's layout: `ca.crt`, `<name>.crt`, `<name>.key`)
and the component's name in it. From it come gRPC credentials (the NF control API's server,
the controller's channels, P4Runtime) and `ssl.SSLContext`s for the NF-to-NF replication links
(`TlsStreams`, put in place of `nf_host.replication.TRANSPORT` by each worker) and the death watch.
Every server requires a client certificate signed by the CA; every client checks the server's
certificate against the CA and, where it knows whom it calls (the controller calling NF n, the
switch), against that name ("nf-<n>", "switch"). Plaintext is an explicit option of each component
(`--insecure`, `tls: false`), never the default (docs/security.md).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import grpc

from contract.replication import Hello, ProtocolError, decode
from nf_host.peer_policy import HELLO_MAX_FRAME
from nf_host.pki import nf_name
from nf_host.replication import Accept

log = logging.getLogger(__name__)

DEFAULT_DIR = Path("build/pki")
HANDSHAKE_TIMEOUT = 5.0


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


class TlsStreams:
    """The replication transport over TLS (`nf_host.replication.StreamTransport`): asyncio's TCP
    streams, upgraded to TLS before the replication code sees them. The server requires a client
    certificate of the CA: a peer without one, with one of another CA, or that speaks plaintext
    fails the handshake, is counted (`refused`, part of the NF's Status `repl_refused`) and
    never reaches the replication server's code."""

    def __init__(self, identity: Identity, handshake_timeout: float = HANDSHAKE_TIMEOUT,
                 check_hello: bool = True) -> None:
        """`check_hello`: refuse a hello that names another NF than the peer's certificate (off
        only where several NFs share one process and so one certificate: in-process tests)."""
        self.check_hello = check_hello
        self.server_ctx = identity.server_context()
        self.client_ctx = identity.client_context()
        self.handshake_timeout = handshake_timeout
        self.refused = 0  # incoming connections whose TLS handshake failed
        self._logged = 0.0

    async def start_server(self, callback: Accept, host: str, port: int) -> asyncio.Server:
        loop = asyncio.get_running_loop()
        return await loop.create_server(lambda: _TlsAccept(self, callback), host, port)

    def refuse(self, transport: asyncio.BaseTransport, exc: BaseException) -> None:
        """A connection whose handshake failed, or whose hello claims another NF than its
        certificate: counted, logged at most once a second, closed."""
        self.refused += 1
        now = time.monotonic()
        if now - self._logged >= 1.0:
            self._logged = now
            log.warning("replication connection from %s refused: %r (%d refused so far)", transport.get_extra_info("peername"), exc,
                        self.refused)
        transport.abort()  # type: ignore[attr-defined]

    async def open_connection(self, host: str, port: int) -> tuple[asyncio.StreamReader,
                                                                   asyncio.StreamWriter]:
        try:
            return await asyncio.open_connection(host, port, ssl=self.client_ctx,
                                                 ssl_handshake_timeout=self.handshake_timeout)
        except ssl.SSLError as exc:  # (an OSError: the link retries as after a refusal)
            raise ConnectionRefusedError(f"TLS handshake with {host}:{port}: {exc}") from exc


class _TlsAccept(asyncio.StreamReaderProtocol):
    """One accepted replication connection: reading paused from the first moment (a client's
    hello must not be read as plaintext), upgraded to TLS (`loop.start_tls`), then handed to the
    replication server's callback as a stream pair, like `asyncio.start_server`'s."""

    def __init__(self, streams: TlsStreams, callback: Accept) -> None:
        self.reader = asyncio.StreamReader(limit=2 ** 16)  # (the protocol keeps a weak reference)
        super().__init__(self.reader)
        # always over TLS (an end of stream closes the connection: no half-close), also for an
        # end that comes between the handshake and `connection_made`
        self._over_ssl = True
        self.streams, self.callback = streams, callback
        self.task: asyncio.Task[None] | None = None
        self.transport_: asyncio.Transport | None = None  # (the TLS one)
        self.peer_name = ""  # the common name of the peer's certificate
        self.first = bytearray()  # the first frame, until checked
        self.checked = False
        self.refused = False  # (its hello named another NF than its certificate)
        self.ended: object = None  # an end that came before `_upgrade` resumed

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.pause_reading()
        self.task = asyncio.get_running_loop().create_task(self._upgrade(transport))

    async def _upgrade(self, raw: asyncio.Transport) -> None:
        loop = asyncio.get_running_loop()
        try:
            secured = await loop.start_tls(raw, self, self.streams.server_ctx, server_side=True,
                                           ssl_handshake_timeout=self.streams.handshake_timeout)
        except (OSError, TimeoutError, EOFError) as exc:  # (ssl.SSLError is an OSError)
            self.streams.refuse(raw, exc)
            return
        if secured is None:  # (the connection closed meanwhile)
            return
        cert = secured.get_extra_info("peercert") or {}
        names = [v for rdn in cert.get("subject", ()) for k, v in rdn if k == "commonName"]
        self.peer_name = names[0] if names else ""
        self.transport_ = secured
        super().connection_made(secured)
        self._check()  # (what arrived with the handshake)
        if self.ended is not None:  # (and its end: after the data, as it came)
            self._flush()
            if self.ended is not _EOF:
                super().connection_lost(self.ended if isinstance(self.ended, Exception) else None)
            else:
                super().eof_received()
        if not self.refused:
            await self.callback(self.reader, asyncio.StreamWriter(secured, self, self.reader, loop))

    def data_received(self, data: bytes) -> None:
        """Hold the first frame until it is checked: a hello must name the NF of the peer's
        certificate ("nf-<id>"), else the connection is refused before the replication code
        reads it (an NF's key cannot claim another NF's links). (Data can come before `_upgrade`
        resumes after the handshake: it waits for the certificate's name.)"""
        if self.checked or not self.streams.check_hello:
            super().data_received(data)
            return
        self.first += data
        if self.transport_ is not None:
            self._check()

    def eof_received(self) -> bool | None:
        if self._holding():
            if self.ended is None:
                self.ended = _EOF
            return None
        self._flush()
        return super().eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._holding():
            self.ended = exc if exc is not None else _LOST
            return
        self._flush()
        super().connection_lost(exc)

    def _holding(self) -> bool:
        """Whether the end of the connection must wait: `_upgrade` has not resumed yet."""
        return self.streams.check_hello and not self.refused and self.transport_ is None

    def _flush(self) -> None:
        """Pass on what is held unchecked (an incomplete first frame at the end: no hello)."""
        if not self.checked and not self.refused:
            self.checked = True
            held, self.first = bytes(self.first), bytearray()
            if held:
                super().data_received(held)

    def _check(self) -> None:
        if self.checked or not self.streams.check_hello or len(self.first) < 4:
            return
        size = int.from_bytes(self.first[:4], "big")
        if size <= HELLO_MAX_FRAME and len(self.first) < 4 + size:
            return  # (wait for the whole frame)
        self.checked = True
        held, self.first = bytes(self.first), bytearray()
        claim = _hello_nf(held[4:4 + size]) if size <= HELLO_MAX_FRAME else None
        if claim is not None and self.peer_name != nf_name(claim):
            assert self.transport_ is not None
            self.refused = True
            self.streams.refuse(self.transport_, ValueError(
                f"a hello from NF {claim} with the certificate of {self.peer_name!r}"))
            return
        super().data_received(held)


_EOF, _LOST = object(), object()  # how a connection ended before `_upgrade` resumed


def _hello_nf(body: bytes) -> int | None:
    """The NF id a hello claims, None if the frame is no hello (the peer policy judges it)."""
    try:
        msg = decode(body)
    except ProtocolError:
        return None
    return msg.nf if isinstance(msg, Hello) else None


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
