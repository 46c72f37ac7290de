"""A promoted slot owns at least the epoch the controller's `Promote` gives (docs/protocols.md §4, "A
promoted slot owns at least the switch's epoch"): a backup whose replica of a slot is gone must not
own it at epoch 0.

The CI run it reproduces (the `packet-rate` experiment, 12 NFs starting at once on 2 cores): NF 8,
NF 2's backup, was promoted late; a reconfiguration made it a backup again, which dropped the slots
and their (empty) replicas; the repeated `Promote` then made it their primary at epoch 0,
generation 1, while its new backup NF 6 had been told the slots at epoch 1 by `AssignSlots` and
refused every delta of NF 8 as a former owner's (`StaleSender`): NF 8's output was held for good.
In-process workers over loopback TCP, as in test_worker_inprocess."""

from __future__ import annotations

from typing import Any

import pytest

from contract.results import PromoteResult
from contract.roles import Role
from nf_host.harness import CheckerSink, Switch, checker_frame
from tests.nf_host.inprocess import SLOT, Node, run, until

pytestmark = pytest.mark.unit

DEAD, PROMOTED, NEW_BACKUP = 2, 8, 6
EPOCH = 1


def _promote(epochs: dict[int, int], backup: Node) -> dict[str, Any]:
    return {"slots": [SLOT], "dead": DEAD, "backup": NEW_BACKUP, "address": backup.addr,
            "epochs": epochs}


@pytest.mark.parametrize("told", [True, False], ids=["epochs-told", "epochs-not-told"])
def test_a_slot_promoted_without_its_replica_owns_the_epoch_the_promote_gives(told: bool) -> None:
    async def body() -> None:
        b, c = Node(PROMOTED), Node(NEW_BACKUP)
        b.w.cfg.promote_wait = 0.0  # (NF 2 is dead: nothing to wait for)
        for n in (b, c):
            await n.w.start()
        try:
            # B backs up NF 2's slot, is promoted, then a reconfiguration makes it a backup again
            b.w.assign([(SLOT, EPOCH, 1)], as_backup=True)
            b.w.promote([SLOT], dead=DEAD)
            b.w.set_role(Role.BACKUP)
            assert SLOT not in b.w.slots and SLOT not in b.w.replicas
            # C is made the new backup (AssignSlots at the slot's epoch), then B promoted again
            await c.w.command("assign", {"slots": [(SLOT, EPOCH, None)], "as_backup": True,
                                         "primary": PROMOTED})
            res = await b.w.command("promote", _promote({SLOT: EPOCH} if told else {}, c))
            assert isinstance(res, PromoteResult) and res.slots == [SLOT]
            sw = Switch()
            for no in range(1, 5):  # a batch: its output waits for C's ack
                prim, copy = sw.stamp(SLOT, checker_frame(1, no), PROMOTED, NEW_BACKUP)
                assert copy is not None
                c.w.on_frame(copy)
                b.w.on_frame(prim)
            if not told:  # the CI run: C refuses B's deltas, the output stays held
                await until(lambda: c.w.server is not None and c.w.server.errors > 0,
                            "C refusing B's delta")
                assert b.out == [] and b.w.slots[SLOT].epoch == 0
                return
            await until(lambda: len(b.out) == 4, "B's output released on C's ack")
            assert b.w.slots[SLOT].epoch == EPOCH and b.w.slots[SLOT].state.gen == 1
            sink = CheckerSink()
            for f in b.out:
                sink.feed(f)
            assert sink.errors == [] and sink.last_count == {1: 4}
            assert c.w.replicas[SLOT].epoch == EPOCH and c.w.replicas[SLOT].gen == 1
        finally:
            for n in (b, c):
                await n.w.stop()

    run(body)
