"""A move's fence and the idempotent ownership commands, in process (docs/protocols.md §5, "When
a move is decided"): the adopter's `cancel_adopt` answers whether it started the slot, a
release without an answer stays undecided, and `assign`/`adopt`/`release` told again keep a
slot's state, numbering and waiting packets. Each test is a reviewer's reproduction of issue
#30 (items 1 and 2) turned into assertions."""

from __future__ import annotations

import asyncio

import pytest

from contract.replication import Message, Transfer, TransferAck
from contract.results import FenceResult, ReleaseResult
from contract.roles import SlotRole
from contract.shim import Kind
from nf_host.harness import CheckerSink, Switch, checker_frame, read_checker, strip_shim
from nf_host.replication import Reply
from nf_host.worker import CommandError
from tests.nf_host.inprocess import (
    SLOT,
    Node,
    owner_of_slot,
    primary_with_backup,
    run,
    to_primary_and_backup,
    until,
)

pytestmark = pytest.mark.unit


def counts(frames: list[bytes | bytearray]) -> list[int]:
    """The checker counts of `frames` (outputs of flow 1), in order."""
    out = []
    for f in frames:
        rec = read_checker(strip_shim(f)[1])
        assert rec is not None
        out.append(rec[2])
    return out


def test_a_started_adopter_answers_the_fence_started_and_a_late_assignment_resets_nothing() -> None:
    """The Release reply is lost after the adopter started (repro test_undo_alive): the fence
    says `started`, the adopter keeps the slot; an assignment of the released slot to the old
    owner (what the old undo sent, without next_seq) neither builds an empty slot there nor
    takes the slot back: packets reaching it are forwarded and the counts go on."""
    async def body() -> None:
        a, b, p = Node(1), Node(2), Node(3, batch=1)
        for n in (a, b, p):
            await n.w.start()
        try:
            await primary_with_backup(a, b)
            sw = Switch()
            to_primary_and_backup(sw, a, b, range(1, 5))
            await until(lambda: len(a.out) == 4, "A's output")
            p.w.adopt(SLOT, 2)
            res = await a.w.release(SLOT, 3, p.addr, same_cluster=False)
            await until(lambda: p.w.slots[SLOT].role == SlotRole.PRIMARY, "the adopter started")
            assert await p.w.command("cancel_adopt", {"slot": SLOT, "epoch": 2}) == FenceResult(
                started=True)
            assert p.w.slots[SLOT].role == SlotRole.PRIMARY and p.w.c.cancelled == 0
            p.w.adopt(SLOT, 2)  # a new leader finishing the move tells it again: nothing changes
            assert p.w.slots[SLOT].role == SlotRole.PRIMARY and p.w.slots[SLOT].state.last_seq == 4
            # a Release told again (a new leader finishing the move) answers the same
            assert await a.w.command("release", {"slot": SLOT, "to_nf": 3, "to_address": p.addr,
                                                 "same_cluster": False}) == res
            a.w.assign([(SLOT, 3, None)], as_backup=False)
            rt = a.w.slots[SLOT]
            assert rt.role == SlotRole.RELEASED and rt.forward is not None
            assert rt.state.last_seq == 4 and len(rt.state.flows) == 1  # nothing reset
            pr, _c = sw.stamp(SLOT, checker_frame(1, 5), 1, 2)
            a.w.on_frame(pr)  # the old owner forwards it to the adopter
            await until(lambda: len(p.out) == 1, "the adopter's output")
            assert counts(a.out + p.out) == [1, 2, 3, 4, 5]
        finally:
            for n in (a, b, p):
                await n.w.stop()

    run(body)


def test_a_fenced_adoption_refuses_the_transfer_and_the_old_owner_keeps_its_parked_packets() -> None:
    """The fence comes first: the adoption is cancelled (`started` False) and the old owner's
    transfer is refused; the old owner owns the slot again, processes the packets that waited
    while it was released, and an assignment of the next epoch without next_seq keeps its
    state and numbering (the counts run on, no empty slot)."""
    async def body() -> None:
        a, b, p = Node(1, batch=1), Node(2), Node(3)
        for n in (a, b, p):
            await n.w.start()
        try:
            await primary_with_backup(a, b)
            sw = Switch()
            to_primary_and_backup(sw, a, b, range(1, 5))
            await until(lambda: len(a.out) == 4, "A's output")
            p.w.adopt(SLOT, 2)
            p.w.on_frame(sw.stamp(SLOT, checker_frame(1, 5), 3)[0])  # B buffers it
            assert await p.w.command("cancel_adopt", {"slot": SLOT, "epoch": 2}) == FenceResult(
                started=False, held=True)
            assert SLOT not in p.w.slots and p.w.c.cancelled == 1  # counted, not silent
            # A releases (its Release was sent before the fence); packets that reach it while
            # it is released (here: as it sends its marker) wait there for the answer
            tx = a.w.tx
            parked = [sw.copies(SLOT, no, checker_frame(1, no), 1)[0] for no in (5, 6)]

            def tx_then_packets(frame: bytes | bytearray) -> None:
                tx(frame)
                if frame[14] == Kind.MARKER:
                    assert a.w.slots[SLOT].role == SlotRole.RELEASED
                    for f in parked:
                        a.w.on_frame(f)
                    assert len(a.w.slots[SLOT].pending) == 2

            a.w.tx = tx_then_packets
            with pytest.raises(CommandError, match="refused"):
                await a.w.release(SLOT, 3, p.addr, same_cluster=False)
            assert a.w.slots[SLOT].role == SlotRole.PRIMARY and a.w.slots[SLOT].release is None
            a.w.assign([(SLOT, 3, None)], as_backup=False)  # the undo: epoch e+2
            assert a.w.slots[SLOT].epoch == 3 and a.w.slots[SLOT].role == SlotRole.PRIMARY
            sw.epochs[SLOT] = 3
            sw.next_seq[SLOT] = 7
            pr, c = sw.stamp(SLOT, checker_frame(1, 7), 1, 2)
            assert c is not None
            a.w.on_frame(pr)
            b.w.on_frame(c)
            await until(lambda: len(a.out) == 7, "A's output after the undo")
            sink = CheckerSink()
            for f in a.out:
                sink.feed(f)
            assert sink.errors == [] and sink.last_count == {1: 7}
            assert strip_shim(a.out[-1])[0].epoch == 3
        finally:
            for n in (a, b, p):
                await n.w.stop()

    run(body)


def test_a_release_without_an_answer_stays_undecided_until_the_answer_decides_it() -> None:
    """The adopter's answer is late: the old owner does not take the slot back by itself (the
    adopter may have accepted); its packets wait. A Release told again resends the transfer,
    which the adopter, having accepted it already, answers ok again; the late answer forwards
    what waited, and the counts run on at the adopter."""
    async def body() -> None:
        a, p = Node(1), Node(3, batch=1)
        a.w.cfg.transfer_timeout = 0.2
        for n in (a, p):
            await n.w.start()
        try:
            sw = owner_of_slot(a, 4)
            a.w.close_batch()
            await until(lambda: len(a.out) == 4, "A's output")
            held: list[Transfer] = []
            answer = p.w.on_replication

            def delayed(msg: Message) -> Reply:
                if isinstance(msg, Transfer):
                    held.append(msg)  # the answer is late: kept back here
                    return None
                return answer(msg)

            assert p.w.server is not None
            p.w.server.handler = delayed
            p.w.adopt(SLOT, 2)
            sw.epochs[SLOT] = 2
            with pytest.raises(CommandError, match="undecided"):
                await a.w.release(SLOT, 3, p.addr, same_cluster=False)
            rt = a.w.slots[SLOT]
            assert rt.role == SlotRole.RELEASED and rt.forward is None  # not taken back
            a.w.on_frame(sw.stamp(SLOT, checker_frame(1, 5), 1)[0])  # in flight to A: waits
            assert len(rt.pending) == 1 and len(held) == 1
            with pytest.raises(CommandError, match="undecided"):
                await a.w.command("release", {"slot": SLOT, "to_nf": 3, "to_address": p.addr,
                                              "same_cluster": False})
            await until(lambda: len(held) == 2, "the transfer sent again")
            assert held[0].id == held[1].id
            # (p has no backup: its answers come at once, not deferred: nf_host/adopt_commit.py)
            first, again = (p.w.on_replication(m) for m in held)
            assert isinstance(first, TransferAck) and isinstance(again, TransferAck)
            assert first.ok and again.ok  # accepted once, and the same again
            a.w.linkset.on_message(a.w.links[3], first)  # the late answer reaches A
            assert rt.forward is not None and rt.pending == []
            for no in (6, 7):
                p.w.on_frame(sw.stamp(SLOT, checker_frame(1, no), 3)[0])
            await until(lambda: len(p.out) == 3, "the adopter's output")
            assert counts(a.out + p.out) == [1, 2, 3, 4, 5, 6, 7]
        finally:
            for n in (a, p):
                await n.w.stop()

    run(body)


def test_an_adopter_told_its_slot_again_keeps_the_adoption_and_its_buffered_packets() -> None:
    """A new leader mid-move (repro test_leader_dies_mid_move): `AssignSlots` with next_seq and
    `Adopt` again, for a slot being adopted, keep the adoption and what it buffered; the
    transfer then completes it and the counts run on (not from 1)."""
    async def body() -> None:
        a, p = Node(1), Node(3)
        for n in (a, p):
            await n.w.start()
        try:
            sw = owner_of_slot(a, 4)
            a.w.close_batch()
            await until(lambda: len(a.out) == 4, "A's output")
            p.w.adopt(SLOT, 2)
            sw.epochs[SLOT] = 2
            for no in range(5, 8):
                p.w.on_frame(sw.stamp(SLOT, checker_frame(1, no), 3)[0])
            p.w.assign([(SLOT, 2, 8)], as_backup=False)
            p.w.adopt(SLOT, 2)
            rt = p.w.slots[SLOT]
            assert rt.role == SlotRole.ADOPTING and len(rt.pending) == 3 and p.w.c.cancelled == 0
            await a.w.release(SLOT, 3, p.addr, same_cluster=False)
            p.w.on_frame(sw.stamp(SLOT, checker_frame(1, 8), 3)[0])
            await until(lambda: rt.role == SlotRole.PRIMARY, "the adopter started")
            p.w.close_batch()
            await until(lambda: len(p.out) == 4, "the adopter's output")
            assert counts(a.out + p.out) == list(range(1, 9))
        finally:
            for n in (a, p):
                await n.w.stop()

    run(body)


def test_a_release_told_again_while_it_runs_waits_for_it_and_sends_one_transfer() -> None:
    """A new leader's Release while its predecessor's still runs (waiting for the adopter's
    link): one release, one transfer, the same answer twice."""
    async def body() -> None:
        a, p = Node(1), Node(3)
        for n in (a, p):
            await n.w.start()
        try:
            owner_of_slot(a, 4)
            a.w.close_batch()
            await until(lambda: len(a.out) == 4, "A's output")
            p.w.adopt(SLOT, 2)
            args = {"slot": SLOT, "to_nf": 3, "to_address": p.addr, "same_cluster": False}
            first, second = await asyncio.gather(a.w.command("release", args),
                                                 a.w.command("release", args))
            assert isinstance(first, ReleaseResult) and first == second and first.last_seq == 4
            assert a.w.c.transfer_bytes == first.bytes_shipped and len(a.markers) == 1
            await until(lambda: p.w.slots[SLOT].role == SlotRole.PRIMARY, "the adopter started")
        finally:
            for n in (a, p):
                await n.w.stop()

    run(body)


def test_a_release_of_a_slot_not_held_says_so() -> None:
    async def body() -> None:
        a = Node(1)
        await a.w.start()
        try:
            with pytest.raises(CommandError, match="not held here"):
                await a.w.release(SLOT, 3, "127.0.0.1:1", same_cluster=False)
        finally:
            await a.w.stop()

    run(body)

