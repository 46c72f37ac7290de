"""The replication channel under bad input, in-process (workers on one loop, real loopback TCP):
a delta that cannot be applied, and what the server refuses (docs/protocols.md §6)."""

from __future__ import annotations

import asyncio
import errno
from typing import Any

import pytest

from contract.replication import Ack, Delta, Forward, Message, SlotRow, encode
from contract.roles import SlotRole
from nf_host.harness import Switch, checker_frame, read_checker, strip_shim
from nf_host.peer_policy import PeerLimits, PeerPolicy, hello
from nf_host.replication import Link, ReplicationServer, Reply, read_message
from nf_host.worker_process import FrameSender
from nf_host.worker_types import CommandError
from tests.nf_host.inprocess import SLOT, Node, run, running, until
from tests.nf_host.raw_frames import raw_frame
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

            def handler(msg: Message) -> Reply:
                if isinstance(msg, Delta) and not msg.full and not refused:
                    refused.append(msg.batch)
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


def test_a_full_transmit_queue_is_waited_out_in_order_not_lost() -> None:
    """EAGAIN/ENOBUFS (a burst, e.g. a promoted backup's replay) delays a frame; it is sent, in
    order: dropping it would lose output whose state the backup already holds."""
    for err in (errno.EAGAIN, errno.ENOBUFS):
        sock = FlakySocket({2, 3, 4}, err)
        sender = FrameSender(sock)
        for i in range(5):
            sender(bytes([i]))
        assert sock.sent == [bytes([i]) for i in range(5)]
        assert (sender.waits, sender.queue_full, sender.errors) == (1, 0, 0)
    stuck = FlakySocket(set(range(2, 10**6)), errno.EAGAIN)
    sender = FrameSender(stuck, patience=0.01)
    sender(b"a")
    sender(b"b")  # the queue stays full: lost after its patience, counted
    assert stuck.sent == [b"a"] and sender.queue_full == 1


@pytest.mark.parametrize("err", [errno.ENETDOWN, errno.ENXIO])
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
            drops = status.drops
            status = sender.report(status)
            assert status.tx_lost == 2 and status.tx_errors == 2
            assert status.drops == drops + 2
        finally:
            for n in (a, b):
                await n.w.stop()

    run(body)


def test_a_link_whose_handler_fails_reconnects_instead_of_dying() -> None:
    async def body() -> None:
        port = free_port()
        server = ReplicationServer("127.0.0.1", port,
                                   lambda m: Ack(m.batch) if isinstance(m, Delta) else None)
        await server.start()
        got: list[int] = []
        connects = 0

        def on_message(_link: Link, msg: Message) -> None:
            if not got:
                got.append(-1)
                raise OSError(errno.ENETDOWN, "injected")
            assert isinstance(msg, Ack)
            got.append(msg.batch)

        def on_connected(link: Link) -> None:
            nonlocal connects
            connects += 1
            link.send(Delta(connects, [], full=True))

        link = Link(9, f"127.0.0.1:{port}", on_message, on_connected)
        try:
            await until(lambda: connects == 2 and got == [-1, 2], "reconnected, handled again")
            assert link.errors == 1 and not link._task.done()
        finally:
            await link.close()
            await server.close()

    run(body)


# ---------------------------------------------------------------------- what the server accepts

def guarded(nf_id: int, workers: int = 1, index: int = 0, **limits: Any) -> Node:
    """A node whose replication server admits known peers only (as `nf-host run` does)."""
    node = Node(nf_id)
    node.w.cfg.workers, node.w.cfg.index = workers, index
    node.w.cfg.limits = PeerLimits(known_peers_only=True, **limits)
    node.w.policy = PeerPolicy(nf_id, index, workers, node.w.cfg.limits)
    return node


async def raw(port: int, *frames: bytes) -> bytes:
    """Write `frames` on a fresh connection; return what comes back until the server closes it."""
    r, w = await asyncio.open_connection("127.0.0.1", port)
    try:
        w.write(b"".join(frames))
        await w.drain()
        return await asyncio.wait_for(r.read(), 5)
    except ConnectionResetError:  # closed with our frames unread
        return b""
    finally:
        w.close()


def delta(slot: int, b: int = 1) -> bytes:
    flow: list[object] = [b"\x0a\x00\x00\x01\x0a\x01\x00\x01\x03\xe9\x00\x50\x11", {"count": 1}]
    return encode(Delta(b, [SlotRow(slot, 1, 1, 1, [flow])]))


def test_an_unknown_sender_creates_no_replica_and_is_counted() -> None:
    async def body() -> None:
        x = guarded(1)
        await x.w.start()
        try:
            # no hello: refused; a hello from an NF that is no peer, primary or adopt source: refused
            assert await raw(x.port, delta(5)) == b""
            assert await raw(x.port, encode(hello(9, 0, 1)), delta(5)) == b""
            assert x.w.replicas == {}
            st = x.w.status()
            assert st.repl_refusals == {"no_hello": 1, "unknown_peer": 1}
            assert st.repl_refused == 2
            # once NF 9 is a cluster peer, the same messages are applied and acknowledged
            await x.w.command("set_peers", {"peers": [[9, "127.0.0.1:1"]]})
            reply = await raw_until_ack(x.port, encode(hello(9, 0, 1)), delta(5))
            assert reply == Ack(1) and 5 in x.w.replicas
        finally:
            await x.w.stop()

    run(body)


async def raw_until_ack(port: int, *frames: bytes) -> Message:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    try:
        w.write(b"".join(frames))
        return await asyncio.wait_for(read_message(r), 5)
    finally:
        w.close()


def test_senders_are_bounded_by_address_workers_and_slots() -> None:
    async def body() -> None:
        x = guarded(1, workers=2, index=0)
        await x.w.start()
        try:
            await x.w.command("set_peers", {"peers": [[3, "127.0.0.1:1"], [4, "10.9.9.9:1"]]})
            # NF 4's replication host is 10.9.9.9: a connection from loopback is not NF 4
            assert await raw(x.port, encode(hello(4, 0, 2)), delta(4)) == b""
            # a sender running another number of workers (slot -> worker maps disagree)
            assert await raw(x.port, encode(hello(3, 0, 1)), delta(4)) == b""
            # a delta of a slot of worker 1 (odd) on worker 0: the connection is refused (the
            # delta is never skipped, for a later ack would cover it)
            assert await raw(x.port, encode(hello(3, 0, 2)), delta(4), delta(5, 2)) == b""
            assert 5 not in x.w.replicas and 4 in x.w.replicas
            assert x.w.status().repl_refusals == {"wrong_address": 1, "workers": 1, "slot": 1}
        finally:
            await x.w.stop()

    run(body)


def test_frames_and_connections_are_bounded() -> None:
    async def body() -> None:
        x = guarded(1, max_frame=4096, max_connections=2)
        await x.w.start()
        try:
            await x.w.command("set_peers", {"peers": [[3, "127.0.0.1:1"]]})
            big = raw_frame({"t": "d", "b": 1, "s": [], "full": False, "pad": bytes(5000)})
            # before the hello only a small frame is read; after it, the configured limit
            assert await raw(x.port, big) == b""
            assert await raw(x.port, encode(hello(3, 0, 1)), big) == b""
            assert x.w.status().repl_refusals == {"frame": 2}
            held = [await asyncio.open_connection("127.0.0.1", x.port) for _ in range(2)]
            await until(lambda: x.w.server is not None and len(x.w.server._conns) == 2, "2 open")
            assert await raw(x.port, encode(hello(3, 0, 1))) == b""  # the third is refused
            assert x.w.status().repl_refusals["connections"] == 1
            for _r, w in held:
                w.close()
        finally:
            await x.w.stop()

    run(body)


def test_a_move_partner_installs_only_the_adopted_slot() -> None:
    """Inter-cluster move: the releasing NF sends the adopter, neither its backup nor a cluster
    peer, no snapshot of its slots on connecting (only the move's messages); the adopter keeps
    the adopted slot's entries only (no replicas of the others), and refuses a forwarded packet
    of a slot it does not adopt from that NF."""

    async def body() -> None:
        a, c = guarded(1), guarded(3)
        for n in (a, c):
            await n.w.start()
        try:
            a.w.assign([(SLOT, 1, 1), (7, 1, 1)], as_backup=False)
            sw = Switch()
            for slot in (SLOT, 7):
                a.w.on_frame(sw.stamp(slot, checker_frame(slot, 1), 1)[0])
            await c.w.command("adopt", {"slot": SLOT, "epoch": 2, "from_nf": 1,
                                        "from_address": a.addr})
            res = await a.w.release(SLOT, 3, c.addr, same_cluster=False)
            assert res.flows_shipped == 1 and c.w.slots[SLOT].role == SlotRole.PRIMARY
            assert 7 not in c.w.replicas and 7 not in c.w.slots
            # a packet of slot 7 forwarded by NF 1: not a slot adopted from it
            a.w.links[3].send(Forward(bytes(sw.stamp(7, checker_frame(7, 2), 1)[0])))
            a.w.on_frame(sw.stamp(SLOT, checker_frame(SLOT, 2), 1)[0])  # forwarded: adopted
            await until(lambda: c.w.c.packets == 1, "the adopted slot's packet processed")
            await until(lambda: c.w.policy.refused.get("slot", 0) == 1, "the refusal counted")
            assert c.w.c.unowned == 0  # refused before reaching the data path
            assert not a.w.linkset.pending_versions.get(3)  # no snapshot waits for its ack
        finally:
            for n in (a, c):
                await n.w.stop()

    run(body)


def test_a_backup_admits_the_primary_it_was_assigned() -> None:
    async def body() -> None:
        a, b = guarded(1), guarded(2)
        for n in (a, b):
            await n.w.start()
        try:
            a.w.assign([(SLOT, 1, 1)], as_backup=False)
            await b.w.command("assign", {"slots": [[SLOT, 1, 1]], "as_backup": True, "primary": 1})
            a.w.set_backup(2, b.addr)
            sw = Switch()
            for flow in range(1, 5):
                p, c = sw.stamp(SLOT, checker_frame(flow, 1), 1, 2)
                assert c is not None
                a.w.on_frame(p)
                b.w.on_frame(c)
            await until(lambda: len(a.out) == 4, "output released on the backup's ack")
            assert b.w.replicas[SLOT].last_seq == 4 and b.w.status().repl_refused == 0
        finally:
            for n in (a, b):
                await n.w.stop()

    run(body)


def test_a_refused_link_backs_off_instead_of_reconnecting_every_50_ms() -> None:
    async def body() -> None:
        x = guarded(1)
        await x.w.start()
        connects = 0

        def on_connected(_link: Link) -> None:
            nonlocal connects
            connects += 1

        link = Link(9, x.addr, lambda _l, _m: None, on_connected, hello=hello(9, 0, 1))
        try:
            await until(lambda: x.w.policy.refused.get("unknown_peer") == 4, "four refusals")
            assert connects == 4 and link.delay >= 0.05 * 2**3  # 50 ms doubled after each
            # once the receiver knows the sender, the link stays up and the delay is reset later
            await x.w.command("set_peers", {"peers": [[9, "127.0.0.1:1"]]})
            await until(lambda: link.connected.is_set() and connects == 5, "admitted", 10)
        finally:
            await link.close()
            await x.w.stop()

    run(body)


def test_a_peer_that_keeps_refusing_leaves_one_snapshot_waiting_not_one_per_reconnection() -> None:
    """NF 1 takes NF 3 for a cluster peer; NF 3 does not know NF 1 and refuses each connection.
    Each reconnection sends a snapshot whose versions wait for an ack: one snapshot's, not one
    per reconnection (the soak of 2026-11-27: a worker refused once a second grew by 44 MiB
    in 10 minutes, a dict of 1,012 slots' versions per reconnection)."""

    async def body() -> None:
        a, c = guarded(1), guarded(3)
        async with running(a, c):
            a.w.assign([(SLOT, 1, 1), (7, 1, 1)], as_backup=False)
            a.w.set_peers([(3, c.addr)])
            await until(lambda: c.w.policy.refused.get("unknown_peer", 0) >= 3, "three refusals")
            waiting = a.w.linkset.pending_versions.get(3, {})
            assert len(waiting) == 1 and set(next(iter(waiting.values()))) == {SLOT, 7}

    run(body)


def test_a_delta_move_against_a_replica_that_lost_rows_is_refused() -> None:
    """NF 3, NF 1's cluster peer, holds a whole replica of SLOT. Its view of the cluster drops
    NF 1 for a while (NF 1 stays known: NF 3 adopts slot 7 from it), so NF 1's rows of SLOT are
    dropped; back as a peer, NF 1's later deltas raise the replica's version over the hole. A
    delta move of SLOT against it would ship only the flows changed since that version: it is
    refused, and the whole state goes instead (simulation `ADOPTER_KILLS_STALLED` seed 80)."""

    async def body() -> None:
        a, p = guarded(1), guarded(3)
        async with running(a, p):
            a.w.assign([(SLOT, 1, 1), (7, 1, 1)], as_backup=False)
            a.w.set_peers([(3, p.addr)])
            await p.w.command("set_peers", {"peers": [[1, a.addr]]})
            sw = Switch()
            for flow in (1, 2):
                a.w.on_frame(sw.stamp(SLOT, checker_frame(flow, 1), 1)[0])
            a.w.close_batch()
            await until(lambda: SLOT in p.w.replicas and SLOT not in p.w.backups.holes
                        and a.w.acked_versions.get(3, {}).get(SLOT) == a.w.slots[SLOT].state.version,
                        "NF 3's whole replica acknowledged")
            await p.w.command("adopt", {"slot": 7, "epoch": 2, "from_nf": 1,
                                        "from_address": a.addr})
            await p.w.command("set_peers", {"peers": []})
            a.w.on_frame(sw.stamp(SLOT, checker_frame(1, 2), 1)[0])  # flow 1's row: dropped
            a.w.close_batch()
            await until(lambda: p.w.policy.refused.get("slot", 0) >= 1, "the row dropped")
            assert SLOT in p.w.backups.holes
            await p.w.command("set_peers", {"peers": [[1, a.addr]]})
            a.w.on_frame(sw.stamp(SLOT, checker_frame(2, 2), 1)[0])  # flow 2's row: applied
            a.w.close_batch()
            await until(lambda: p.w.replicas[SLOT].version == a.w.slots[SLOT].state.version,
                        "the replica's version past the hole")
            await p.w.command("adopt", {"slot": SLOT, "epoch": 2, "from_nf": 1,
                                        "from_address": a.addr})
            with pytest.raises(CommandError, match="of some flows only"):
                await a.w.release(SLOT, 3, p.addr, same_cluster=True)

    run(body)


def test_a_peer_replica_begun_by_deltas_takes_a_delta_move() -> None:
    """NF 1's link to its peer NF 3 came up before NF 1 owned SLOT: its snapshot had no row of
    it, and NF 3's replica of SLOT was begun by NF 1's deltas, on the same connection, from the
    slot's empty start. Nothing of it is missing: a move of SLOT to NF 3 is a delta (a first
    version of the hole check refused it and sent the whole state: the migration-bytes
    experiment's intra-cluster move was no longer a delta)."""

    async def body() -> None:
        a, p = guarded(1), guarded(3)
        async with running(a, p):
            await p.w.command("set_peers", {"peers": [[1, a.addr]]})
            a.w.set_peers([(3, p.addr)])
            await until(lambda: a.w.links[3].writer is not None and 3 in a.w.acked_versions,
                        "the snapshot without SLOT acknowledged")
            a.w.assign([(SLOT, 1, 1)], as_backup=False)
            sw = Switch()
            for flow in (1, 2):
                a.w.on_frame(sw.stamp(SLOT, checker_frame(flow, 1), 1)[0])
            a.w.close_batch()
            await until(lambda: a.w.acked_versions.get(3, {}).get(SLOT)
                        == a.w.slots[SLOT].state.version, "NF 3's replica acknowledged")
            await p.w.command("adopt", {"slot": SLOT, "epoch": 2, "from_nf": 1,
                                        "from_address": a.addr})
            res = await a.w.release(SLOT, 3, p.addr, same_cluster=True)
            assert res.delta and res.flows_shipped == 0
    run(body)
