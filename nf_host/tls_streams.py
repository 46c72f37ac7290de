"""The replication transport over mutual TLS (docs/security.md): `TlsStreams`, put in place of
`nf_host.replication.TRANSPORT` by each worker.

asyncio's TCP streams, upgraded to TLS (the NF's `mgmt.tls.Identity`) before the replication code
sees them; an accepted connection's first frame, the sender's hello, must name the NF of the
peer's certificate. Refusals are counted (the NF's Status `repl_refused`). The identities and the
credentials themselves are the management network's (mgmt/tls.py); what is checked here is the
replication channel's (its hello, `nf_host.peer_policy`'s frame limit).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time

from contract.replication import Hello, ProtocolError, decode
from mgmt.pki import nf_name
from mgmt.tls import Identity
from nf_host.peer_policy import HELLO_MAX_FRAME
from nf_host.replication import Accept

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT = 5.0


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
