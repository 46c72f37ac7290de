"""An adopter's backup holds a moved slot's state before the old owner forgets it
(nf_host/adopt_commit.py, docs/protocols.md §5): in process, with real replication links."""

from __future__ import annotations

import pytest

from contract.results import FenceResult
from contract.roles import SlotRole
from nf_host.harness import checker_frame
from tests.nf_host.inprocess import SLOT, Node, owner_of_slot, run, until

pytestmark = pytest.mark.unit


def test_the_adopters_backup_holds_the_state_when_the_release_returns() -> None:
    """A owns SLOT (4 packets processed); B, backed up by C, adopts it. When A's release
    returns, A has forgotten the slot: C must already hold its flows and last number, so that
    B dying now loses nothing (the simulation's seed 48 lost the state here)."""
    async def body() -> None:
        a, b, c = Node(1), Node(2), Node(3)
        for n in (a, b, c):
            await n.w.start()
        try:
            owner_of_slot(a, 4)
            c.w.assign([(SLOT, 2, None)], as_backup=True)
            b.w.set_backup(3, c.addr)
            await until(lambda: 3 in b.w.links and b.w.links[3].writer is not None, "B's backup")
            b.w.adopt(SLOT, 2)
            res = await a.w.release(SLOT, 2, b.addr, same_cluster=False)
            assert res.last_seq == 4
            rep = c.w.replicas[SLOT]
            assert rep.last_seq == 4 and len(rep.flows) == 1
            await until(lambda: b.w.slots[SLOT].role == SlotRole.PRIMARY, "B started")
            assert b.w.adopt_commit.refused == 0
        finally:
            for n in (a, b, c):
                await n.w.stop()

    run(body)


def test_a_transfer_is_refused_when_the_adopters_backup_does_not_answer() -> None:
    """B's backup is set but unreachable: B refuses the transfer (after half the transfer
    timeout) rather than accept state nobody else holds; A keeps the slot and processes on."""
    async def body() -> None:
        a, b = Node(1), Node(2)
        for n in (a, b):
            await n.w.start()
        try:
            sw = owner_of_slot(a, 4)
            b.w.cfg.transfer_timeout = 0.4
            b.w.adopt_commit.timeout = 0.2
            b.w.set_backup(9, "127.0.0.1:9")  # nothing listens there
            b.w.adopt(SLOT, 2)
            with pytest.raises(Exception, match="backup"):
                await a.w.release(SLOT, 2, b.addr, same_cluster=False)
            assert a.w.slots[SLOT].role == SlotRole.PRIMARY
            a.w.on_frame(sw.stamp(SLOT, checker_frame(1, 5), 1)[0])
            assert a.w.slots[SLOT].state.last_seq == 5
            assert b.w.slots[SLOT].role == SlotRole.ADOPTING and b.w.adopt_commit.refused == 1
        finally:
            for n in (a, b):
                await n.w.stop()

    run(body)


def test_a_cancelled_adoption_tells_the_adopters_backup_to_stop_backing_up_the_slot() -> None:
    """The move did not start (the controller cancels B's adoption) after B's backup C was told
    it backs up the slot: C forgets it, or it would promote the slot with nothing when B dies
    (the simulation's seed 9: two NFs then held the slot as primary)."""
    async def body() -> None:
        b, c = Node(2), Node(3)
        for n in (b, c):
            await n.w.start()
        try:
            c.w.assign([(SLOT, 2, None)], as_backup=True)
            b.w.set_backup(3, c.addr)
            await until(lambda: 3 in b.w.links and b.w.links[3].writer is not None, "B's backup")
            b.w.adopt(SLOT, 2)
            assert SLOT in c.w.backed_up
            assert await b.w.command("cancel_adopt", {"slot": SLOT, "epoch": 2}) == FenceResult(
                started=False, held=True)  # (held: B had the adoption, M14)
            await until(lambda: SLOT not in c.w.backed_up, "C forgets the slot")
            # and the empty replica its assignment made at the move's epoch: kept, it refused
            # the old owner's deltas of the slot (epoch 1) as a stale sender's and closed their
            # link, with another slot's transfer on it (the simulation's seed 18)
            assert SLOT not in c.w.replicas
        finally:
            for n in (b, c):
                await n.w.stop()

    run(body)
