"""Slot moves in-process (scaffolding in tests/nf_host/inprocess.py): a release ships exactly the
flows changed since the peer's version, a slot moves there and back within a cluster, a refused
release or a cancelled adoption leaves the slot with its owner, the backup stops keeping copies,
a release's own output leaves before the adopter starts, which waits for the old owner's marker,
and a peer that falls behind is resynchronised."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from contract.replication import Message, TransferAck
from contract.roles import SlotRole
from contract.shim import Kind
from nf_host.harness import CheckerSink, Switch, checker_frame, strip_shim
from nf_host.replication import Link
from nf_host.state_store import Replica
from nf_host.worker import CommandError
from tests.nf_host.inprocess import (
    SLOT,
    HeldAcks,
    Node,
    owner_of_slot,
    primary_with_backup,
    run,
    running,
    to_primary_and_backup,
    until,
)

pytestmark = pytest.mark.unit


def test_intra_cluster_release_ships_exactly_the_flows_changed_since_the_peer_version() -> None:
    async def body() -> None:
        a, p = Node(1), Node(3)
        async with running(a, p):
            a.w.assign([(SLOT, 1, 1)], as_backup=False)
            a.w.set_peers([(3, p.addr)])
            await until(lambda: a.w.links[3].writer is not None, "peer link")
            sw = Switch()
            for flow in range(1, 21):
                a.w.on_frame(sw.stamp(SLOT, checker_frame(flow, 1), 1)[0])
            a.w.close_batch()
            version = a.w.slots[SLOT].state.version
            await until(lambda: a.w.acked_versions.get(3, {}).get(SLOT) == version, "peer ack")
            assert len(a.out) == 20, "without a backup output is released at once"
            # two flows change; their delta is on its way but not yet acknowledged by the peer
            a.w.on_frame(sw.stamp(SLOT, checker_frame(1, 2), 1)[0])
            a.w.on_frame(sw.stamp(SLOT, checker_frame(2, 2), 1)[0])
            p.w.adopt(SLOT, 2)
            res = await a.w.release(SLOT, 3, p.addr, same_cluster=True)
            assert res.delta and res.flows_shipped == 2 and res.last_seq == 22
            full = await full_release_bytes()
            assert res.bytes_shipped * 4 < full
            st = p.w.slots[SLOT]
            assert st.role == SlotRole.PRIMARY and st.seq.next_expected == 23
            assert (
                len(st.state.flows) == 20
                and st.state.flows[next(iter(st.state.flows))]["count"] >= 1
            )
            # a late packet reaching the old owner is forwarded and processed by the new one
            a.w.on_frame(sw.stamp(SLOT, checker_frame(3, 2), 1)[0])
            await until(lambda: p.w.c.packets == 1, "forwarded packet processed")
            assert a.w.c.forwarded == 1

    async def full_release_bytes() -> int:
        a, q = Node(4), Node(5)
        async with running(a, q):
            a.w.assign([(SLOT, 1, 1)], as_backup=False)
            sw = Switch()
            for flow in range(1, 21):
                a.w.on_frame(sw.stamp(SLOT, checker_frame(flow, 1), 1)[0])
            q.w.adopt(SLOT, 2)
            res = await a.w.release(SLOT, 5, q.addr, same_cluster=False)
            assert not res.delta and res.flows_shipped == 20
            return int(res.bytes_shipped)

    run(body)


def test_slot_moves_there_and_back_within_a_cluster_without_losing_state() -> None:
    async def body() -> None:
        a, p = Node(1), Node(3)
        async with running(a, p):
            a.w.assign([(SLOT, 1, 1)], as_backup=False)
            a.w.set_peers([(3, p.addr)])
            p.w.set_peers([(1, a.addr)])
            await until(
                lambda: a.w.links[3].writer is not None and p.w.links[1].writer is not None,
                "peer links",
            )
            sw = Switch()
            for flow in range(1, 11):
                a.w.on_frame(sw.stamp(SLOT, checker_frame(flow, 1), 1)[0])
            a.w.close_batch()
            await until(lambda: SLOT in a.w.acked_versions.get(3, {}), "peer ack")
            p.w.adopt(SLOT, 2)
            await a.w.release(SLOT, 3, p.addr, same_cluster=True)
            # at the new owner: packets of flows 1..5; its deltas reach the old owner as a peer
            for flow in range(1, 6):
                p.w.on_frame(sw.stamp(SLOT, checker_frame(flow, 2), 3)[0])
            p.w.close_batch()
            await until(lambda: SLOT in p.w.acked_versions.get(1, {}), "old owner acked as a peer")
            # the old owner adopts back while the new owner's last delta is still in flight
            a.w.adopt(SLOT, 3)
            for flow in range(6, 8):
                p.w.on_frame(sw.stamp(SLOT, checker_frame(flow, 2), 3)[0])
            res = await p.w.release(SLOT, 1, a.addr, same_cluster=True)
            assert res.delta and res.flows_shipped == 2
            counts = {k[0]: s["count"] for k, s in a.w.slots[SLOT].state.flows.items() if k}
            assert sorted(counts.values()) == [1, 1, 1] + [2] * 7
            a.w.on_frame(sw.stamp(SLOT, checker_frame(1, 3), 1)[0])
            a.w.close_batch()
            sink = CheckerSink()
            for f in sorted(a.out + p.out, key=lambda f: strip_shim(f)[0].seq):  # stamp order
                sink.feed(f)
            assert sink.errors == [] and sink.last_count[1] == 3

    run(body)


def test_release_tells_the_backup_to_stop_keeping_copies_and_assign_keeps_a_replica() -> None:
    async def body() -> None:
        a, b, p = Node(1), Node(2), Node(3)
        async with running(a, b, p):
            a.w.assign([(SLOT, 1, 1), (SLOT + 16, 1, 1)], as_backup=False)
            b.w.assign([(SLOT, 1, 1), (SLOT + 16, 1, 1)], as_backup=True)
            a.w.set_backup(2, b.addr)
            await until(lambda: a.w.links[2].writer is not None, "backup link")
            sw = Switch()
            for slot in (SLOT, SLOT + 16):
                to_primary_and_backup(sw, a, b, range(1, 5), slot, flow=slot)
            await until(lambda: len(a.out) == 8, "committed output")
            # a copy the backup holds beyond the last commit (its primary has not seen it yet)
            _pr, c = sw.stamp(SLOT, checker_frame(SLOT, 5), 1, 2)
            assert c is not None
            b.w.on_frame(c)
            assert b.w.inbuf.count(SLOT) == 1
            p.w.adopt(SLOT, 2)
            await a.w.release(SLOT, 3, p.addr, same_cluster=False)
            await until(lambda: SLOT not in b.w.backed_up, "backup told of the release")
            assert b.w.inbuf.count(SLOT) == 0 and SLOT + 16 in b.w.backed_up
            # the controller makes the backup the owner of the other slot by AssignSlots
            b.w.assign([(SLOT + 16, 2, None)], as_backup=False)
            st = b.w.slots[SLOT + 16]
            assert st.role == SlotRole.PRIMARY and st.seq.next_expected == 5
            assert [s["count"] for s in st.state.flows.values()] == [4]

    run(body)


def test_a_refused_release_leaves_the_slot_with_its_owner() -> None:
    async def body() -> None:
        a, q = Node(1), Node(4)
        async with running(a, q):
            sw = owner_of_slot(a, 4)
            assert len(a.out) == 4
            late = sw.stamp(SLOT, checker_frame(1, 5), 1)[0]
            original = a.w.linkset.on_message
            seen: list[SlotRole] = []

            def answer_arrives(link: Link, msg: Message) -> None:
                if isinstance(msg, TransferAck):  # a packet arrives just before the adopter's answer
                    seen.append(a.w.slots[SLOT].role)
                    a.w.on_frame(late)
                original(link, msg)

            a.w.linkset.on_message = answer_arrives  # type: ignore[method-assign]
            with pytest.raises(CommandError, match="not being adopted"):
                await a.w.release(SLOT, 4, q.addr, same_cluster=False)  # q never adopted it
            assert seen == [SlotRole.RELEASED], "stopped while the transfer was unanswered"
            rt = a.w.slots[SLOT]
            assert rt.role == SlotRole.PRIMARY and rt.packets == 5 and rt.seq.next_expected == 6
            a.w.close_batch()
            sink = CheckerSink()
            for f in a.out:
                sink.feed(f)
            assert sink.errors == [] and sink.last_count == {1: 5}
            assert SLOT not in q.w.slots

    run(body)


def test_a_peer_that_falls_behind_is_resynchronised_not_buffered_for() -> None:
    async def body() -> None:
        a, p = Node(1), Node(3)
        a.w.cfg.peer_backlog_bytes = -1  # every peer counts as too far behind
        async with running(a, p):
            a.w.assign([(SLOT, 1, 1)], as_backup=False)
            a.w.set_peers([(3, p.addr)])
            link = a.w.links[3]
            await until(lambda: link.writer is not None, "peer link")
            sw = Switch()
            for flow in range(1, 11):
                a.w.on_frame(sw.stamp(SLOT, checker_frame(flow, 1), 1)[0])
            a.w.close_batch()  # the delta is not queued: the link is reset instead
            await until(lambda: len(p.w.replicas.get(SLOT, Replica(SLOT)).flows) == 10,
                        "full snapshot after the reconnection")
            assert p.w.replicas[SLOT].last_seq == 10

    run(body)


def test_a_cancelled_adoption_forgets_the_slot_and_counts_what_it_buffered() -> None:
    async def body() -> None:
        b = Node(2)
        await b.w.start()
        try:
            b.w.adopt(SLOT, 2)
            sw = Switch()
            sw.epochs[SLOT] = 2
            for no in range(1, 4):
                p, _c = sw.stamp(SLOT, checker_frame(1, no), 2, 0)
                b.w.on_frame(p)
            assert b.w.slots[SLOT].role == SlotRole.ADOPTING and len(b.w.slots[SLOT].pending) == 3
            await b.w.command("cancel_adopt", {"slot": SLOT, "epoch": 1})  # another epoch's: kept
            assert SLOT in b.w.slots
            await b.w.command("cancel_adopt", {"slot": SLOT, "epoch": 2})
            assert SLOT not in b.w.slots and b.w.c.cancelled == 3
            assert b.w.status().drops == 3 and b.out == []
        finally:
            await b.w.stop()

    run(body)


def test_a_release_lets_its_own_output_leave_before_the_adopter_starts() -> None:
    """The switch accepts output of the slot's old and new epoch, so their order at the sink is the
    order they reach it: the old owner's output of its last batch (held for its backup's ack)
    must leave before the adopter can process anything (it waits for the transfer)."""
    async def body() -> None:
        a, b, p = Node(1), Node(2), Node(3, batch=2)  # p: its 2 packets close a batch at once
        acks = HeldAcks(a, p)
        wire, held = acks.wire, acks.held
        async with running(a, b, p):
            await primary_with_backup(a, b)
            sw = Switch()
            to_primary_and_backup(sw, a, b, range(1, 5))  # one batch, its output held: the backup's ack does not come
            await until(lambda: len(held) >= 1, "the backup's ack (held)")
            p.w.adopt(SLOT, 2)
            sw.epochs[SLOT] = 2
            for no in range(5, 7):  # the new owner's first packets: buffered until the transfer
                p.w.on_frame(sw.stamp(SLOT, checker_frame(1, no), 3)[0])
            release = asyncio.create_task(a.w.release(SLOT, 3, p.addr, same_cluster=False))
            with contextlib.suppress(AssertionError):  # no output while the old owner's is held
                await until(lambda: bool(wire), "output", timeout=0.5)
            assert wire == [], "the adopter's output left before the old owner's"
            acks.let_go()
            await release
            await until(lambda: len(wire) == 6, f"every output (so far {wire})")
            assert wire == [(1, 1), (1, 2), (1, 3), (1, 4), (3, 5), (3, 6)]
            assert (p.w.markers.markers, p.w.markers.timeouts) == (1, 0)

    run(body)


@pytest.mark.parametrize("marker", ["delivered", "lost"])
def test_an_adopter_starts_only_once_the_old_owners_marker_has_come(marker: str) -> None:
    """The old owner's last output may still wait in the switch's queue for its port after the
    transfer (P6, docs/protocols.md §5): the adopter, holding the transfer, processes nothing of
    the slot until the old owner's marker, sent after that output on the same port, has come
    through the switch. A marker that never comes (the old owner died mid-move) holds the slot
    for `marker_wait` at most, counted in `marker_timeouts`."""
    async def body() -> None:
        a, p = Node(1), Node(3, batch=2, marker_wait=0.3)
        sent: list[bytes] = []  # a's marker, held back by the test ("the switch's queue")
        a.w.tx = lambda f: sent.append(bytes(f)) if f[14] == Kind.MARKER else a.out.append(f)
        async with running(a, p):
            sw = owner_of_slot(a, 4)
            p.w.adopt(SLOT, 2)
            sw.epochs[SLOT] = 2
            for no in range(5, 7):
                p.w.on_frame(sw.stamp(SLOT, checker_frame(1, no), 3)[0])
            res = await a.w.release(SLOT, 3, p.addr, same_cluster=False)
            assert res.last_seq == 4 and len(sent) == 1 and len(a.out) == 4
            marker_shim = strip_shim(sent[0])[0]
            assert (marker_shim.kind, marker_shim.slot, marker_shim.epoch, marker_shim.seq) == \
                (Kind.MARKER, SLOT, 1, 4)
            assert p.w.slots[SLOT].role == SlotRole.ADOPTING and p.out == []
            assert p.w.status().queue_depth == 2  # the two packets wait, counted
            if marker == "delivered":
                p.w.on_frame(sent[0])
                assert p.w.slots[SLOT].role == SlotRole.PRIMARY
            await until(lambda: len(p.out) == 2, "the adopter's output")
            sink = CheckerSink()
            for f in a.out + p.out:
                sink.feed(f)
            assert sink.errors == [] and sink.last_count == {1: 6}
            st = p.w.status()
            assert (st.markers, st.marker_timeouts) == \
                ((1, 0) if marker == "delivered" else (0, 1))

    run(body)
