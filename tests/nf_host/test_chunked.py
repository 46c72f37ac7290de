"""Replication of any amount of state (nf_host/chunked.py): a snapshot and a move's transfer far
over the receiver's frame limit go through in fragments, whole, with the deltas that follow in
order; a stalled receiver holds the sender to about one fragment in flight. The frame limit is
made small (256 KiB) so the state that exceeds it stays small enough for a fast test: the code
path is the one a 64 MiB limit and a million flows take."""

from __future__ import annotations

import asyncio

import pytest

from contract.replication import Delta, Fragment, SlotRow, decode, encode
from nf_host.chunked import FragmentError, Pacer, Reassembly, fragments
from nf_host.global_state import MemoryStore
from nf_host.harness import Switch, checker_frame
from nf_host.nfs import make_nf
from nf_host.peer_policy import PeerLimits
from nf_host.state_store import SlotState
from nf_host.worker import Worker, WorkerConfig
from tests.nf_host.raw_frames import raw_frame
from tests.nf_host.test_flow_bounds import run, until
from tests.support.procs import free_port

pytestmark = pytest.mark.unit
SLOT = 7
FRAME = 256 * 1024  # the receivers' frame limit here
CHUNK = 32 * 1024


class Node:
    def __init__(self, nf_id: int, chunk: int = CHUNK) -> None:
        self.out: list[bytes | bytearray] = []
        self.port = free_port()
        self.w = Worker(
            WorkerConfig(nf_id=nf_id, batch_size=4, batch_time=0, repl_port=self.port,
                         repl_chunk=chunk, limits=PeerLimits(max_frame=FRAME)),
            make_nf("checker"), MemoryStore(), self.out.append)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"


def fill(st: SlotState, flows: int, pad: int = 200) -> None:
    """`flows` flows of about `pad` bytes of state each, as if processed and sealed."""
    for i in range(flows):
        key = (0x0A000000 + i, 0x0B000000 + i, 1000 + (i & 0x7FFF), 80, 17)
        st.flows[key] = {"count": i, "pad": bytes(pad)}
        st.dirty.add(key)
    st.seal()
    st.last_seq = 0


def fragment(frame: bytes) -> Fragment:
    msg = decode(frame[4:])
    assert isinstance(msg, Fragment)
    return msg


def test_fragments_reassemble_to_the_message_and_the_limit_holds() -> None:
    msg = Delta(1, [SlotRow(1, 1, 1, 1, [[b"k" * 13, {"p": bytes(5000)}]])])
    frame = encode(msg)
    parts = list(fragments(frame, 1000))
    assert len(parts) == (len(frame) - 4 + 999) // 1000 and all(len(p) < 1100 for p in parts)
    r = Reassembly()
    bodies = [r.add(fragment(p)) for p in parts]
    assert bodies[:-1] == [None] * (len(parts) - 1) and decode(bodies[-1] or b"") == msg
    small = Reassembly(limit=2500)
    with pytest.raises(FragmentError, match="exceeds 2500"):
        for p in parts:
            small.add(fragment(p))


def test_a_snapshot_over_the_frame_limit_syncs_a_new_backup_and_deltas_follow_it() -> None:
    async def body() -> None:
        a, b = Node(1), Node(2)
        for n in (a, b):
            await n.w.start()
        try:
            a.w.assign([(SLOT, 1, 1)], as_backup=False)
            b.w.assign([(SLOT, 1, 1)], as_backup=True)
            fill(a.w.slots[SLOT].state, 20_000)  # about 4.6 MB: 17 times the frame limit
            a.w.set_backup(2, b.addr)
            link = a.w.links[2]
            await until(lambda: link.pacer is not None and link.pacer.active, "the stream")
            # packets while the snapshot streams: their deltas queue behind it, in order
            sw = Switch()
            for no in range(1, 9):
                p, c = sw.stamp(SLOT, checker_frame(1, no), 1, 2)
                assert c is not None
                a.w.on_frame(p)
                b.w.on_frame(c)
            await until(lambda: len(a.out) == 8, "output released after the backup's ack")
            rep = b.w.replicas[SLOT]
            assert len(rep.flows) == 20_001 and rep.last_seq == 8
            assert link.streams == 1 and link.bytes_sent > 17 * FRAME
            st = b.w.status()
            assert st.repl_errors == 0 and st.repl_refused == 0
            # the same without fragments: refused whole, on every retry (the bug of issue #32)
            c_ = Node(3, chunk=1 << 30)
            await c_.w.start()
            try:
                c_.w.assign([(SLOT + 1, 1, 1)], as_backup=False)
                b.w.assign([(SLOT + 1, 1, 1)], as_backup=True)
                fill(c_.w.slots[SLOT + 1].state, 20_000)
                c_.w.set_backup(2, b.addr)
                await until(lambda: b.w.status().repl_refusals.get("frame", 0) >= 2,
                            "the unfragmented snapshot refused, twice")
                assert not b.w.replicas[SLOT + 1].flows
            finally:
                await c_.w.stop()
        finally:
            for n in (a, b):
                await n.w.stop()

    run(body)


def test_a_move_of_a_slot_over_the_frame_limit() -> None:
    async def body() -> None:
        a, q = Node(4), Node(5)
        for n in (a, q):
            await n.w.start()
        try:
            a.w.assign([(SLOT, 1, 1)], as_backup=False)
            fill(a.w.slots[SLOT].state, 20_000)
            a.w.slots[SLOT].state.last_seq = None
            q.w.adopt(SLOT, 2)
            res = await a.w.release(SLOT, 5, q.addr, same_cluster=False)
            assert not res.delta and res.flows_shipped == 20_000
            assert res.bytes_shipped > 17 * FRAME
            await until(lambda: SLOT in q.w.slots and len(q.w.slots[SLOT].state.flows) == 20_000,
                        "the adopted state")
            assert q.w.status().repl_refused == 0
        finally:
            for n in (a, q):
                await n.w.stop()

    run(body)


def test_a_stalled_receiver_holds_the_sender_to_about_one_fragment_in_flight() -> None:
    async def body() -> None:
        stalled = asyncio.Event()
        got = bytearray()

        async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            got.extend(await reader.readexactly(64 * 1024))
            await stalled.wait()  # then reads nothing more until told
            while len(got) < total:
                got.extend(await reader.read(1 << 20))
            writer.close()

        frame = raw_frame({"t": "x", "flows": bytes(32 << 20)})  # 32 MiB
        total = sum(len(p) for p in fragments(frame, CHUNK))
        server = await asyncio.start_server(slow, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        _r, w = await asyncio.open_connection("127.0.0.1", port)
        pacer = Pacer(w, CHUNK)
        pacer.push(frame)
        # the kernel's buffers fill, then the pacer waits: its own buffer stays about a fragment
        await until(lambda: w.transport.get_write_buffer_size() > 0, "the socket buffers full")
        for _ in range(50):
            await asyncio.sleep(0)
            assert w.transport.get_write_buffer_size() <= CHUNK + 64 * 1024
        assert pacer.active
        stalled.set()
        await pacer.done()
        await until(lambda: len(got) == total, "every fragment received")
        w.close()
        server.close()

    run(body)
