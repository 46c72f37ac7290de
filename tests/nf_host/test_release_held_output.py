"""A finding of the chaos harness's overlap mode (docs/chaos.md, "Findings"), fixed: a `Release`
whose own output stayed held longer than `transfer_timeout` (its backup hung and not yet
replaced) sent the transfer and the move marker anyway, ahead of that output; the adopter
started and its output overtook the old owner's (P5, docs/protocols.md §5). Now such a
`Release` sends nothing and keeps the slot (the controller's fence then undoes the move). Seen in `nfc-topo
chaos --duration 60 --settle 10 --rate 500 --moves 2 --overlap --zombies 0.3 --busy 1
--fault-kinds primary,backup,spare,mgmt --seed 1`: slot 1438 moved 8 -> 5 while NF 8's backup
was a zombie (hung), 99 packets of a flow delivered 8 s late, after the adopter's."""

from __future__ import annotations

import asyncio

import pytest

from contract.results import FenceResult
from contract.roles import SlotRole
from nf_host.harness import Switch, checker_frame
from nf_host.worker import CommandError
from tests.nf_host.inprocess import (
    SLOT,
    HeldAcks,
    Node,
    primary_with_backup,
    run,
    to_primary_and_backup,
    until,
)

pytestmark = pytest.mark.unit


def test_an_adopter_never_overtakes_output_the_old_owners_backup_holds_past_the_timeout() -> None:
    async def body() -> None:
        a, b, p = Node(1), Node(2), Node(3, batch=2, marker_wait=0.1)
        a.w.cfg.transfer_timeout = 0.3  # the backup's acks are held longer than this
        acks = HeldAcks(a, p)
        wire, held = acks.wire, acks.held
        for n in (a, b, p):
            await n.w.start()
        try:
            await primary_with_backup(a, b)
            sw = Switch()
            to_primary_and_backup(sw, a, b, range(1, 5))  # one batch, its output held: the backup is hung
            await until(lambda: len(held) >= 1, "the backup's ack (held)")
            p.w.adopt(SLOT, 2)
            sw.epochs[SLOT] = 2
            for no in range(5, 7):
                p.w.on_frame(sw.stamp(SLOT, checker_frame(1, no), 3)[0])
            with pytest.raises(CommandError, match="the slot stays owned here"):
                await a.w.release(SLOT, 3, p.addr, same_cluster=False)
            assert a.w.slots[SLOT].role == SlotRole.PRIMARY, "A keeps the slot it could not release"
            await asyncio.sleep(0.5)  # the time the adopter would need to start and send
            acks.let_go()  # the backup answers again (replaced, or resumed)
            await until(lambda: sum(nf == 1 for nf, _ in wire) == 4, f"a's output ({wire})")
            first_of_p = min((i for i, (nf, _) in enumerate(wire) if nf == 3), default=len(wire))
            last_of_a = max(i for i, (nf, _) in enumerate(wire) if nf == 1)
            assert last_of_a < first_of_p, f"the adopter's output overtook the old owner's: {wire}"
        finally:
            for n in (a, b, p):
                await n.w.stop()

    run(body)


def test_a_cancelled_adoption_gives_its_buffered_packets_back_and_nothing_is_lost() -> None:
    """The whole undo of that move (M11, docs/protocols.md §5): A's `Release` keeps the slot
    (its output is held past the timeout); the controller's fence cancels P's adoption and names
    A, so P gives the packet it buffered back to A and forwards to A what still reaches it at
    the adoption's epoch; the undo's next epoch goes to A. Every count comes out once, in order,
    all from A, and nothing is counted `cancelled`."""
    async def body() -> None:
        a, b, p = Node(1), Node(2), Node(3, batch=2, marker_wait=0.1)
        a.w.cfg.transfer_timeout = 0.3
        acks = HeldAcks(a, p)
        wire = acks.wire
        for n in (a, b, p):
            await n.w.start()
        try:
            await primary_with_backup(a, b)
            sw = Switch()
            to_primary_and_backup(sw, a, b, range(1, 5))
            await until(lambda: len(acks.held) >= 1, "the backup's ack (held)")
            p.w.adopt(SLOT, 2)
            sw.epochs[SLOT] = 2
            p.w.on_frame(sw.stamp(SLOT, checker_frame(1, 5), 3)[0])  # buffered by the adopter
            with pytest.raises(CommandError, match="the slot stays owned here"):
                await a.w.command("release", {"slot": SLOT, "to_nf": 3, "to_address": p.addr,
                                              "same_cluster": False})
            fence = {"slot": SLOT, "epoch": 2, "from_nf": 1, "from_address": a.addr}
            assert await p.w.command("cancel_adopt", fence) == FenceResult(started=False, held=True)
            assert await p.w.command("cancel_adopt", fence) == FenceResult(
                started=False, held=True)  # asked again
            p.w.on_frame(sw.stamp(SLOT, checker_frame(1, 6), 3)[0])  # still in flight to P
            a.w.assign([(SLOT, 3, None)], as_backup=False)  # the undo: epoch e+2, at A
            sw.epochs[SLOT] = 3
            prim, copy = sw.stamp(SLOT, checker_frame(1, 7), 1, 2)
            assert copy is not None
            await until(lambda: a.w.slots[SLOT].seq.next_expected == 7, "the given-back packets")
            a.w.on_frame(prim)
            b.w.on_frame(copy)
            await until(lambda: a.w.slots[SLOT].seq.next_expected == 8, "packet 7 processed")
            a.w.close_batch()  # (5 to 7 fill three quarters of a batch)
            acks.let_go()
            await until(lambda: len(wire) == 7, f"every output ({wire})")
            assert wire == [(1, no) for no in range(1, 8)]
            assert p.w.c.cancelled == 0 and a.w.c.duplicates == 0
        finally:
            for n in (a, b, p):
                await n.w.stop()

    run(body)
