"""An open finding of the chaos harness's overlap mode (docs/chaos.md, "Findings"): a `Release`
whose own output stays held longer than `transfer_timeout` (its backup hung and not yet
replaced) sends the transfer and the move marker anyway, ahead of that output; the adopter
starts and its output overtakes the old owner's (P5, docs/protocols.md §5). Seen in `nfc-topo
chaos --duration 60 --settle 10 --rate 500 --moves 2 --overlap --zombies 0.3 --busy 1
--fault-kinds primary,backup,spare,mgmt --seed 1`: slot 1438 moved 8 -> 5 while NF 8's backup
was a zombie (hung), 99 packets of a flow delivered 8 s late, after the adopter's."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from nf_host.harness import Switch, checker_frame
from nf_host.worker import CommandError
from tests.nf_host.test_worker_inprocess import (
    SLOT,
    HeldAcks,
    Node,
    primary_with_backup,
    run,
    until,
)

pytestmark = pytest.mark.unit


@pytest.mark.xfail(strict=True, reason="open finding: Release gives up waiting for its held "
                                       "output after transfer_timeout and lets the adopter start")
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
            for no in range(1, 5):  # one batch, its output held: the backup is hung
                prim, copy = sw.stamp(SLOT, checker_frame(1, no), 1, 2)
                assert copy is not None
                a.w.on_frame(prim)
                b.w.on_frame(copy)
            await until(lambda: len(held) == 1, "the backup's ack (held)")
            p.w.adopt(SLOT, 2)
            sw.epochs[SLOT] = 2
            for no in range(5, 7):
                p.w.on_frame(sw.stamp(SLOT, checker_frame(1, no), 3)[0])
            with contextlib.suppress(CommandError):  # refused or undecided: also fine here
                await a.w.release(SLOT, 3, p.addr, same_cluster=False)
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
