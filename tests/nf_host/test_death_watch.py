"""The heartbeat responder's watch on each worker's backup (nf_host/death_watch.py): killed, the
responder ends it without a goodbye and an armed backup takes over though its primary's data
connection is still open; stopped on purpose, it says goodbye; a new backup gets the watch.
In-process workers (test_takeover_inprocess) and the real responder process."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

import pytest

from contract.replication import Hello, Released, encode
from contract.roles import SlotRole
from mgmt.pki import local_pki
from mgmt.tls import Identity, nf_identity
from nf_host import liveness, replication
from nf_host.replication import ReplicationServer
from nf_host.tls_streams import TlsStreams
from tests.nf_host.inprocess import SLOT, Node, run, until
from tests.nf_host.test_takeover_inprocess import _delivered, _feed, armed
from tests.support.procs import free_port

pytestmark = pytest.mark.unit


@asynccontextmanager
async def responder(tls: Identity | None = None) -> AsyncIterator[tuple[BaseProcess, Connection]]:
    """NF 1's heartbeat responder (one worker: this process) as `nf-host` starts it, and the pipe
    through which its worker names its backup (its watches over TLS with `tls`)."""
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    names, named = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=liveness.responder_main,
                       args=("127.0.0.1", free_port(), 1, [(os.getpid(), ctx.RawValue("d", 0.0))],
                             os.getpid(), time.monotonic(), 1e9, False, ctx.RawArray("Q", 2),
                             there, [names], None, tls))
    proc.start()
    there.close()
    names.close()
    try:
        ready = await asyncio.get_running_loop().run_in_executor(None, here.poll, 30)
        assert ready and str(here.recv()).startswith("ok")
        yield proc, named
    finally:
        proc.kill()
        proc.join(10)


def server(node: Node) -> ReplicationServer:
    assert node.w.server is not None
    return node.w.server


def watched(node: Node) -> Callable[[], bool]:
    """Whether `node` holds a watch from NF 1."""
    return lambda: 1 in server(node)._watchers


def test_a_killed_responder_makes_the_armed_backup_take_over_before_the_data_link_closes() -> None:
    async def body() -> None:
        async with armed() as (a, b, _c, sw), responder() as (proc, named):
            named.send((2, b.addr))  # A's worker 0: my backup is NF 2
            await until(watched(b), "the watch on B", timeout=10)
            await _feed(a, b, sw, range(5, 9))  # the watch supersedes nothing: A goes on
            await until(lambda: len(a.out) == 8, "A's output released")
            proc.kill()  # SIGKILL
            await until(lambda: SLOT in b.w.slots and b.w.slots[SLOT].role == SlotRole.PRIMARY,
                        "B promoted itself")
            assert a.w.links[2].writer is not None  # A's data connection had not closed
            assert b.w.status().took_over_from == [1] and server(b).watch_losses == 1
            await _feed(None, b, sw, range(9, 13))
            await until(lambda: _delivered(a, b).received == 12, "every packet delivered")
            sink = _delivered(a, b)
            assert sink.errors == [] and sink.last_count == {1: 12}

    run(body)


def test_over_tls_a_killed_responder_still_makes_the_armed_backup_take_over() -> None:
    """The watch is a TLS connection like the data links (the default): its handshake runs in
    the responder's selector loop, and its end without a goodbye is still a loss."""
    async def body() -> None:
        saved = replication.TRANSPORT
        # (every in-process NF shares this process's transport, so one certificate: the hello's
        # NF id cannot match it)
        tls = TlsStreams(nf_identity(local_pki(), 2), check_hello=False)
        replication.TRANSPORT = tls
        try:
            async with armed() as (_a, b, _c, _sw), \
                    responder(nf_identity(local_pki(), 1)) as (proc, named):
                named.send((2, b.addr))
                await until(watched(b), "the watch on B (TLS)", timeout=10)
                assert tls.refused == 0
                proc.kill()  # SIGKILL
                await until(lambda: SLOT in b.w.slots and b.w.slots[SLOT].role == SlotRole.PRIMARY,
                            "B promoted itself")
                assert server(b).watch_losses == 1
        finally:
            replication.TRANSPORT = saved

    run(body)


def test_a_responder_stopped_on_purpose_says_goodbye() -> None:
    async def body() -> None:
        async with armed() as (_a, b, _c, _sw), responder() as (proc, named):
            named.send((2, b.addr))
            await until(watched(b), "the watch on B", timeout=10)
            proc.terminate()  # SIGTERM: what nf-host does when it stops
            await until(lambda: not watched(b)(), "the watch ended")
            await asyncio.sleep(0.05)  # (time for a wrong takeover; nothing waits on this)
            assert server(b).watch_losses == 0 and b.w.c.self_promotions == 0

    run(body)


def test_a_new_backup_gets_the_watch_once_it_listens_and_the_old_one_a_goodbye() -> None:
    async def body() -> None:
        async with armed(start_successor=False) as (_a, b, c, _sw), \
                responder() as (proc, named):
            named.send((2, b.addr))
            await until(watched(b), "the watch on B", timeout=10)
            named.send((3, c.addr))  # C does not listen yet: the watch is tried again
            await until(lambda: not watched(b)(), "B's watch ended")
            await c.w.start()
            await until(watched(c), "the watch on C, once it listens", timeout=10)
            proc.kill()  # SIGKILL
            await until(lambda: server(c).watch_losses == 1, "C saw the watch end")
            assert server(b).watch_losses == 0 and b.w.c.self_promotions == 0
            assert c.w.c.self_promotions == 0  # (C is not armed for NF 1)

    run(body)


def test_a_watch_carries_nothing_but_its_goodbye() -> None:
    async def body() -> None:
        async with armed() as (_a, b, _c, _sw):
            _r, writer = await asyncio.open_connection("127.0.0.1", b.port)
            writer.write(encode(Hello(1, 0, 1, watch=True)) + encode(Released(SLOT)))
            await until(lambda: server(b).errors == 1, "the message refused")
            assert not watched(b)() and server(b).watch_losses == 0
            assert SLOT in b.w.backed_up  # not applied
            writer.close()
            assert b.w.c.self_promotions == 0

    run(body)
