"""The replication channel under bad input, in-process (workers on one loop, real loopback TCP):
a delta that cannot be applied, and what the server refuses (docs/protocols.md §6)."""

from __future__ import annotations

import errno

import pytest

from nf_host.harness import Switch, checker_frame, read_checker, strip_shim
from nf_host.replication import Link, Message, ReplicationServer
from nf_host.worker_process import FrameSender
from tests.nf_host.test_worker_inprocess import SLOT, Node, run, until
from tests.support.procs import free_port

pytestmark = pytest.mark.unit


def test_a_delta_that_cannot_be_applied_breaks_the_link_and_no_later_ack_covers_it() -> None:
    """A bad delta followed by a good one: the good one's (cumulative) ack must not release the
    bad one's output. The link breaks instead, and the snapshot after reconnection releases it."""

    async def body() -> None:
        a, b = Node(1), Node(2)
        for n in (a, b):
            await n.w.start()
        try:
            a.w.assign([(SLOT, 1, 1)], as_backup=False)
            b.w.assign([(SLOT, 1, 1)], as_backup=True)
            a.w.set_backup(2, b.addr)
            await until(lambda: a.w.links[2].writer is not None and not a.w.commit.inflight,
                        "backup link synchronised")
            assert b.w.server is not None
            apply = b.w.server.handler
            refused: list[int] = []

            def handler(msg: Message) -> Message | None:
                if msg["t"] == "d" and not msg.get("full") and not refused:
                    refused.append(msg["b"])
                    raise ValueError("injected: this delta cannot be applied")
                return apply(msg)

            b.w.server.handler = handler
            unprotected: list[str] = []

            def tx(frame: bytes | bytearray) -> None:
                # at release, the backup must hold the state that produced the frame
                rec = read_checker(strip_shim(frame)[1])
                assert rec is not None
                flow, _no, count = rec
                rep = b.w.replicas.get(SLOT)
                state = rep.to_slot_state()[0].flows if rep is not None else {}
                held = [s["count"] for k, s in state.items() if k and 1000 + flow in (k[2], k[3])]
                if not held or held[0] < count:
                    unprotected.append(f"flow {flow} count {count} released, backup holds {held}")
                a.out.append(frame)

            a.w.tx = tx
            sw = Switch()
            for flow in range(1, 9):  # two batches of 4 (flows 1-4, then 5-8)
                a.w.on_frame(sw.stamp(SLOT, checker_frame(flow, 1), 1)[0])
            await until(lambda: len(a.out) == 8, "all output released after the resync")
            assert refused and b.w.server.errors == 1
            assert unprotected == []
            rep = b.w.replicas[SLOT]
            assert rep.last_seq == 8 and len(rep.flows) == 8
        finally:
            for n in (a, b):
                await n.w.stop()

    run(body)


class FlakySocket:
    """A data socket whose interface goes down for a while: sends number `down` fail."""

    def __init__(self, down: set[int], err: int) -> None:
        self.down, self.err = down, err
        self.calls = 0
        self.sent: list[bytes | bytearray] = []

    def send(self, data: bytes | bytearray, /) -> int:
        self.calls += 1
        if self.calls in self.down:
            raise OSError(self.err, "injected")
        self.sent.append(data)
        return len(data)


@pytest.mark.parametrize("err", [errno.ENETDOWN, errno.ENOBUFS])
def test_a_transmit_error_in_the_ack_handler_is_counted_and_the_link_survives(err: int) -> None:
    async def body() -> None:
        a, b = Node(1), Node(2)
        sock = FlakySocket({3, 4}, err)
        sender = FrameSender(sock)
        a.w.tx = sender
        for n in (a, b):
            await n.w.start()
        try:
            a.w.assign([(SLOT, 1, 1)], as_backup=False)
            b.w.assign([(SLOT, 1, 1)], as_backup=True)
            a.w.set_backup(2, b.addr)
            await until(lambda: a.w.links[2].writer is not None and not a.w.commit.inflight,
                        "backup link synchronised")
            sw = Switch()
            for flow in range(1, 9):  # two batches of 4; outputs 3 and 4 meet a down interface
                a.w.on_frame(sw.stamp(SLOT, checker_frame(flow, 1), 1)[0])
            await until(lambda: sock.calls == 8, "8 outputs released")
            # the link (and its task) still works: later batches are acknowledged and released
            for flow in range(1, 5):
                a.w.on_frame(sw.stamp(SLOT, checker_frame(flow, 2), 1)[0])
            await until(lambda: sock.calls == 12, "4 more outputs released")
            assert len(sock.sent) == 10 and sender.errors == 2 and sender.errnos == {err: 2}
            status = a.w.status()
            drops = status["drops"]
            sender.report(status)
            assert status["tx_lost"] == 2 and status["tx_errors"] == 2
            assert status["drops"] == drops + 2
        finally:
            for n in (a, b):
                await n.w.stop()

    run(body)


def test_a_link_whose_handler_fails_reconnects_instead_of_dying() -> None:
    async def body() -> None:
        port = free_port()
        server = ReplicationServer("127.0.0.1", port, lambda m: {"t": "a", "b": m["b"]})
        await server.start()
        got: list[int] = []
        connects = 0

        def on_message(_link: Link, msg: Message) -> None:
            if not got:
                got.append(-1)
                raise OSError(errno.ENETDOWN, "injected")
            got.append(int(msg["b"]))

        def on_connected(link: Link) -> None:
            nonlocal connects
            connects += 1
            link.send({"t": "d", "b": connects, "s": [], "full": True})

        link = Link(9, f"127.0.0.1:{port}", on_message, on_connected)
        try:
            await until(lambda: connects == 2 and got == [-1, 2], "reconnected, handled again")
            assert link.errors == 1 and not link._task.done()
        finally:
            await link.close()
            await server.close()

    run(body)
