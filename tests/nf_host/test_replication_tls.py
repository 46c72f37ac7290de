"""Replication links over mutual TLS (nf_host/tls_streams.py `TlsStreams`, docs/security.md): a peer
with the CA's certificate gets through; a peer in plaintext, without a certificate or with one of
another CA is refused in the handshake, counted, and never reaches the replication server's code;
a link to a server with a certificate of another CA is refused by the client."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

import pytest

from contract.replication import Hello, encode
from mgmt import pki
from mgmt.pki import local_pki
from mgmt.tls import Identity, nf_identity
from nf_host.peer_policy import hello
from nf_host.replication import read_message
from nf_host.tls_streams import TlsStreams
from tests.support.procs import free_port

pytestmark = pytest.mark.unit


def run(body: Any) -> None:
    asyncio.run(asyncio.wait_for(body(), 30))


async def until(cond: Any, what: str, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


class Echo:
    """A replication server's callback: answers each message with itself, counts connections."""

    def __init__(self) -> None:
        self.connections = 0

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                writer.write(encode(await read_message(reader)))
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()


def test_a_peer_with_a_certificate_of_the_ca_gets_through() -> None:
    async def body() -> None:
        port, echo = free_port(), Echo()
        server_side = TlsStreams(nf_identity(local_pki(), 2))
        server = await server_side.start_server(echo, "127.0.0.1", port)
        try:
            reader, writer = await TlsStreams(nf_identity(local_pki(), 1)).open_connection(
                "127.0.0.1", port)
            writer.write(encode(Hello(1, 0, 1)))
            assert await read_message(reader) == Hello(1, 0, 1)
            assert writer.get_extra_info("ssl_object").version() == "TLSv1.3"
            writer.close()
            assert echo.connections == 1 and server_side.refused == 0
        finally:
            server.close()

    run(body)


def test_peers_without_a_valid_certificate_are_refused_and_counted(tmp_path: Path) -> None:
    other = pki.ensure(tmp_path / "other", [], [1])  # another CA, same NF names

    async def body() -> None:
        port, echo = free_port(), Echo()
        server_side = TlsStreams(nf_identity(local_pki(), 2), handshake_timeout=1.0)
        server = await server_side.start_server(echo, "127.0.0.1", port)
        try:
            # plaintext: a hello as the replication protocol sends it, then nothing
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(encode(Hello(1, 0, 1)))
            with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
                await reader.readexactly(1)
            writer.close()
            await until(lambda: server_side.refused == 1, "the plaintext peer refused")
            # TLS without a client certificate
            no_cert = ssl.create_default_context(cafile=str(local_pki() / "ca.crt"))
            no_cert.check_hostname = False
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=no_cert)
            writer.write(encode(Hello(1, 0, 1)))
            with pytest.raises((asyncio.IncompleteReadError, ConnectionError, ssl.SSLError)):
                await reader.readexactly(1)
            writer.close()
            await until(lambda: server_side.refused == 2, "the peer without a certificate")
            # a certificate of another CA (the server's CA trusted, so the client goes on)
            wrong = ssl.create_default_context(cafile=str(local_pki() / "ca.crt"))
            wrong.check_hostname = False
            forged = Identity(other, "nf-1")
            wrong.load_cert_chain(str(forged.cert), str(forged.key))
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=wrong)
                writer.write(encode(Hello(1, 0, 1)))
                with pytest.raises((asyncio.IncompleteReadError, ConnectionError, ssl.SSLError)):
                    await reader.readexactly(1)
                writer.close()
            except (ssl.SSLError, ConnectionError):
                pass  # (refused already in the handshake)
            await until(lambda: server_side.refused == 3, "the peer of another CA")
            assert echo.connections == 0  # none reached the replication server
        finally:
            server.close()

    run(body)


def test_a_hello_that_names_another_nf_than_the_certificate_is_refused() -> None:
    """NF 1's key cannot open NF 9's links: its hello claiming NF 9 is refused before the
    replication code reads it, and counted; its own hello goes through."""
    async def body() -> None:
        port, echo = free_port(), Echo()
        server_side = TlsStreams(nf_identity(local_pki(), 2))
        server = await server_side.start_server(echo, "127.0.0.1", port)
        nf1 = TlsStreams(nf_identity(local_pki(), 1))
        try:
            reader, writer = await nf1.open_connection("127.0.0.1", port)
            writer.write(encode(hello(9, 0, 1)))
            with pytest.raises((asyncio.IncompleteReadError, ConnectionError, ssl.SSLError)):
                await reader.readexactly(1)
            writer.close()
            await until(lambda: server_side.refused == 1, "the impostor's hello refused")
            reader, writer = await nf1.open_connection("127.0.0.1", port)
            writer.write(encode(hello(1, 0, 1)))
            echoed = await read_message(reader)
            assert isinstance(echoed, Hello) and echoed.nf == 1  # (it got through)
            writer.close()
            assert server_side.refused == 1
        finally:
            server.close()

    run(body)


def test_a_link_refuses_a_server_with_a_certificate_of_another_ca(tmp_path: Path) -> None:
    other = pki.ensure(tmp_path / "other", [], [2])

    async def body() -> None:
        port, echo = free_port(), Echo()
        impostor = TlsStreams(Identity(other, "nf-2"))
        server = await impostor.start_server(echo, "127.0.0.1", port)
        try:
            with pytest.raises(ConnectionRefusedError):
                await TlsStreams(nf_identity(local_pki(), 1)).open_connection("127.0.0.1", port)
            assert echo.connections == 0
        finally:
            server.close()

    run(body)
