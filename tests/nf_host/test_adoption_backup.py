"""The backup of a move's adopter (docs/protocols.md §5, M14): told that its primary B adopts a
slot (`AssignSlots(as_backup, adoption)`), it never promotes that slot before B has started it
(B's SlotState), because the old owner A still holds the slot's state; asked by the controller
once B is down (`CancelAdopt`), it gives the copies it kept of the slot's packets to A, in order
and as input, and what still arrives follows them. Without M14 its promotion (by itself or by
the controller's fail-over of B) started the slot from empty state: the flow's checker counts
restarted at 1 (chaos finding 2, simulation scenario `adopter_kills`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import pytest

from contract.replication import Forward, SlotState
from contract.results import FenceResult, PromoteResult
from contract.roles import SlotRole
from contract.shim import FRAME_KIND, FRAME_SLOT, SLOT_SEQ, Kind
from nf_host.global_state import MemoryStore
from nf_host.harness import Switch, checker_frame
from nf_host.move_marker import marker_frame
from nf_host.nfs import make_nf
from nf_host.worker import Worker, WorkerConfig
from tests.nf_host.test_replica_last_seq import FakeLink, fake_links

pytestmark = pytest.mark.unit

A, B, BACKUP = 1, 2, 3
SLOT, EPOCH = 3, 2


def _backup_of_adopter() -> tuple[Worker, dict[int, FakeLink], Switch]:
    w = Worker(WorkerConfig(nf_id=BACKUP, batch_size=1, batch_time=0), make_nf("checker"),
               MemoryStore(), lambda frame: None)
    links = fake_links(w)
    w.assign([(SLOT, EPOCH, None)], as_backup=True, primary=B, adoption=True)
    switch = Switch()
    switch.next_seq[SLOT] = 11  # A processed 1..10 before the switch write
    for no in (1, 2, 3):
        _prim, copy = switch.stamp(SLOT, checker_frame(7, no), B, BACKUP)
        assert copy is not None
        w.on_frame(copy)
    return w, links, switch


async def _result(res: FenceResult | Awaitable[FenceResult]) -> FenceResult:
    return res if isinstance(res, FenceResult) else await res


def _seq_kind(frame: bytes) -> tuple[int, int]:
    _slot, seq = SLOT_SEQ.unpack_from(frame, FRAME_SLOT)
    return seq, frame[FRAME_KIND]


def test_an_adoption_not_started_is_never_promoted_and_its_copies_go_to_the_old_owner() -> None:
    async def run() -> tuple[Worker, list[Any], list[Any], FenceResult]:
        w, links, switch = _backup_of_adopter()
        # B dies before A's transfer reached it: the backup promotes what it backs up, but not
        # the slot B never started (by itself on B's death, and in the controller's fail-over)
        w.promote([], dead=B)
        w.promote([SLOT], dead=B)
        assert SLOT not in w.slots
        res = await _result(w.moves.cancel_adopt(SLOT, EPOCH, A, "10.9.0.1:7000"))
        sent = list(links[A].sent)
        # a packet the switch still sends B's group before the undo follows the copies to A
        prim, _copy = switch.stamp(SLOT, checker_frame(7, 4), BACKUP, 0)
        w.on_frame(prim)
        return w, sent, links[A].sent[len(sent):], res

    w, given, later, res = asyncio.run(run())
    assert res.started is False
    assert [type(m) for m in given] == [Forward] * 3
    assert [_seq_kind(m.frame) for m in given] == [(11, Kind.PRIMARY), (12, Kind.PRIMARY),
                                                  (13, Kind.PRIMARY)]
    assert [_seq_kind(m.frame) for m in later] == [(14, Kind.PRIMARY)]
    assert SLOT not in w.backed_up and SLOT not in w.replicas and w.inbuf.count(SLOT) == 0
    assert w.c.unowned == 0 and w.c.cancelled == 0


def test_a_copy_arriving_while_the_link_to_the_old_owner_comes_up_is_given_back_too() -> None:
    # simulation, adopter kills, seed 106: the copy that arrived while the give-back waited for
    # its link was neither kept nor followed (counted unowned), and the old owner skipped it
    async def run() -> tuple[Worker, list[Any], FenceResult]:
        w, links, switch = _backup_of_adopter()
        w.linkset.link(A, "10.9.0.1:7000")
        links[A].connected.clear()  # not up yet
        fence = asyncio.ensure_future(_result(w.moves.cancel_adopt(SLOT, EPOCH, A, "10.9.0.1:7000")))
        await asyncio.sleep(0)  # (the fence waits for the link)
        _prim, copy = switch.stamp(SLOT, checker_frame(7, 4), B, BACKUP)
        assert copy is not None
        w.on_frame(copy)
        assert not fence.done()
        links[A].connected.set()
        res = await fence
        return w, list(links[A].sent), res

    w, given, res = asyncio.run(run())
    assert res.started is False
    assert [_seq_kind(m.frame) for m in given] == [(s, Kind.PRIMARY) for s in (11, 12, 13, 14)]
    assert w.c.unowned == 0 and w.c.cancelled == 0


def test_an_adoption_its_primary_started_is_promoted_and_the_fence_answers_started() -> None:
    async def run() -> tuple[Worker, FenceResult, PromoteResult]:
        w, _links, _switch = _backup_of_adopter()
        # B accepted A's transfer: its state came first (A processed 1..10)
        w.on_replication(SlotState(1, SLOT, EPOCH, 5, 10, []))
        fenced = await _result(w.moves.cancel_adopt(SLOT, EPOCH, A, "10.9.0.1:7000"))
        promoted = w.promote([SLOT], dead=B)
        # B had not started it (no delta of it came): the slot waits for A's marker here, as
        # it would have at B (M18), then goes on from B's state
        assert w.slots[SLOT].role == SlotRole.ADOPTING and w.slots[SLOT].packets == 0
        w.on_frame(marker_frame(A, SLOT, 0, EPOCH - 1, 10))
        return w, fenced, promoted

    w, fenced, promoted = asyncio.run(run())
    assert fenced.started is True
    assert promoted.slots == [SLOT] and promoted.replayed == 3
    assert w.slots[SLOT].role == SlotRole.PRIMARY
    assert w.slots[SLOT].packets == 3 and w.slots[SLOT].state.last_seq == 13


def test_without_a_dead_primary_an_adoption_backup_keeps_its_copies_until_told() -> None:
    """Asked nothing, the backup keeps the copies (bounded by its input buffer) and stays a
    backup of the slot: a later SlotState of B makes it promotable as any other slot."""
    async def run() -> Worker:
        w, _links, _switch = _backup_of_adopter()
        w.promote([SLOT], dead=B)
        return w

    w = asyncio.run(run())
    assert SLOT not in w.slots and SLOT in w.backed_up and w.inbuf.count(SLOT) == 3


def test_the_old_owner_admits_the_copies_from_the_adopters_backup_only() -> None:
    """A's replication server (known peers only, as `nf-host run` runs) lets the adopter's
    backup in and takes its forwarded packets of the released slot, because the controller's
    `Release` named it; another NF's are refused, as before."""
    from contract.commands import Release
    from nf_host.peer_policy import PeerLimits, PeerPolicy, Refused, hello

    policy = PeerPolicy(A, 0, 1, PeerLimits(known_peers_only=True))
    frame = bytes(Switch().stamp(SLOT, checker_frame(7, 1), B, 0)[0])
    with pytest.raises(Refused):
        policy.admit(hello(BACKUP, 0, 1), "10.9.0.3")
    policy.learn(Release(SLOT, B, "10.9.0.2:7000", False, adopter_backup=BACKUP))
    assert policy.admit(hello(BACKUP, 0, 1), "10.9.0.3") == BACKUP
    assert policy.check(BACKUP, Forward(frame)) is not None
    assert policy.check(B, Forward(frame)) is not None  # (the adopter itself, M11)
    policy.learn(Release(SLOT + 8, B, "10.9.0.2:7000", False))
    with pytest.raises(Refused):
        policy.admit(hello(9, 0, 1), "10.9.0.9")


def test_after_giving_the_copies_back_the_backup_does_not_take_the_adopters_state() -> None:
    """M19 (simulation `stalls`, seed 60): B was only slow. Its backup, asked while B was taken
    for dead, gave the copies back to A and the move was undone; B went on and sent the slot's
    state to start it beside A. The backup no longer acknowledges it (no `SlotStateAck`), so
    B's transfer is refused (nf_host/adopt_commit.py) and the slot stays A's only."""
    async def run() -> tuple[Worker, Any, FenceResult]:
        w, _links, _switch = _backup_of_adopter()
        res = await _result(w.moves.cancel_adopt(SLOT, EPOCH, A, "10.9.0.1:7000"))
        reply = w.on_replication(SlotState(1, SLOT, EPOCH, 5, 10, []))
        return w, reply, res

    w, reply, res = asyncio.run(run())
    assert res.started is False and reply is None
    assert SLOT not in w.replicas and SLOT not in w.backed_up


def test_copies_given_only_to_the_old_owners_backup_follow_to_the_old_owner_later() -> None:
    """M19 (simulation `stalls`, seed 163): A was stalled too when B's backup gave the copies
    back, so only A's backup (M16) was reached within the wait. A went on, and the undo gave it
    the slot: the copies go to A once its link is up, in order, then what still arrives."""
    async def run() -> tuple[list[Any], list[Any], list[Any]]:
        w, links, switch = _backup_of_adopter()
        w.linkset.link(A, "10.9.0.1:7000")
        links[A].connected.clear()  # A stalled: its link does not come up within the wait
        copy = w.linkset.link(9, "10.9.0.9:7000")  # A's backup
        fence = asyncio.ensure_future(_result(w.moves.give_copies_back(
            SLOT, A, "10.9.0.1:7000", copy)))
        res = await fence
        assert res.started is False
        to_copy = list(links[9].sent)
        assert links[A].sent == []
        links[A].connected.set()  # A goes on
        for _ in range(3):
            await asyncio.sleep(0)
        prim, _copy = switch.stamp(SLOT, checker_frame(7, 4), BACKUP, 0)
        w.on_frame(prim)  # (what still arrives before the undo's switch write follows)
        return to_copy, list(links[A].sent), list(links[9].sent)

    to_copy, to_a, copy_after = asyncio.run(run())
    assert [_seq_kind(m.frame) for m in to_copy] == [(s, Kind.PRIMARY) for s in (11, 12, 13)]
    assert [_seq_kind(m.frame) for m in to_a] == [(s, Kind.PRIMARY) for s in (11, 12, 13, 14)]
    assert [_seq_kind(m.frame) for m in copy_after][-1] == (14, Kind.PRIMARY)
