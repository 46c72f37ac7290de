"""An undone move whose old owner died gives the adopter's buffered packets to the NF holding the
old owner's state, not to the dead NF (docs/protocols.md §5, M15): the old owner A's backup A'
(A declared down, its fail-over still to come) keeps them among its copies, or the primary of A's
group (A failed over already, the slot held as a replica there) keeps them as input; either way
the undo's assignment promotes A's last committed state and replays them, and the counts run on.
The controller's side (which NF the fence names) is
tests/controlplane/test_move_fence.py::test_a_move_whose_old_owner_was_failed_over_gives_back_to_the_primary_of_its_group."""

from __future__ import annotations

import pytest

from contract.results import FenceResult
from contract.roles import SlotRole
from nf_host.harness import OutputDedup, Switch, checker_frame
from nf_host.peer_policy import PeerLimits, PeerPolicy
from tests.nf_host.inprocess import SLOT, Node, run, to_primary_and_backup, until
from tests.nf_host.test_move_fence_inprocess import counts

pytestmark = pytest.mark.unit


def guard(node: Node) -> None:
    """The replication server admits known peers only (as `nf-host run`)."""
    node.w.cfg.limits = PeerLimits(known_peers_only=True)
    node.w.policy = PeerPolicy(node.w.cfg.nf_id, 0, 1, node.w.cfg.limits)


async def backed_up_and_flowing(a: Node, b: Node) -> Switch:
    """A (NF 1) owns the slot at epoch 1, B (NF 2) backs it up, packets 1-4 went through A: its
    output released (B acknowledged) and B's replica at 4. The switch, for what follows."""
    a.w.assign([(SLOT, 1, 1)], as_backup=False)
    await b.w.command("assign", {"slots": [[SLOT, 1, 1]], "as_backup": True, "primary": 1})
    a.w.set_backup(2, b.addr)
    await until(lambda: 2 in a.w.links and a.w.links[2].writer is not None, "backup link")
    sw = Switch()
    to_primary_and_backup(sw, a, b, range(1, 5))
    await until(lambda: len(a.out) == 4, "A's output, acknowledged by its backup")
    await until(lambda: b.w.replicas[SLOT].last_seq == 4, "A's state at its backup")
    return sw


@pytest.mark.parametrize(("held", "policy"), [("backup", False), ("replica", False),
                                              ("backup", True), ("replica", True)])
def test_an_undone_move_gives_back_to_the_holder_of_the_dead_owners_state(
        held: str, policy: bool) -> None:
    async def body() -> None:
        a, b, p = Node(1), Node(2, batch=1), Node(3, batch=1)
        if policy:
            guard(b)
        for n in (a, b, p):
            await n.w.start()
        try:
            await b.w.command("set_peers", {"peers": [[3, p.addr]]})  # (B: a cluster peer)
            sw = await backed_up_and_flowing(a, b)
            if held == "replica":  # A' took the slot over by itself, and gave it up (§4.3)
                b.w.backups.given_up(SLOT, None)
                assert b.w.backups.role(SLOT) == SlotRole.REPLICA
            # the move: B adopts at epoch 2, the switch points at B, which buffers 5 and 6
            p.w.adopt(SLOT, 2)
            sw.epochs[SLOT] = 2
            for no in (5, 6):
                p.w.on_frame(sw.stamp(SLOT, checker_frame(1, no), 3)[0])
            await a.w.stop()  # A dies before its Release
            # the fence names the NF holding A's state: B gives what it buffered there
            assert await p.w.command("cancel_adopt", {
                "slot": SLOT, "epoch": 2, "from_nf": 2, "from_address": b.addr}) == FenceResult(
                started=False, held=True)
            await until(lambda: len(b.w.inbuf.slots.get(SLOT, {})) == 2,
                        "the packets given back, kept as input")
            assert b.w.c.unowned == 0 and b.w.policy.refused_total == 0
            # the undo: the slot is A's group's at epoch 3, owned by b from A's last state
            b.w.assign([(SLOT, 3, None)], as_backup=False)
            sw.epochs[SLOT] = 3
            b.w.on_frame(sw.stamp(SLOT, checker_frame(1, 7), 2)[0])
            # (it sends A's logged output again first: the switch forwards each input's once)
            def through_the_switch() -> list[int]:
                dedup = OutputDedup()
                return counts([f for f in a.out + b.out if dedup.offer(f)])

            await until(lambda: through_the_switch() == list(range(1, 8)),
                        "every count once, in order, across A's and the promoted NF's output")
            assert b.w.slots[SLOT].role == SlotRole.PRIMARY and b.w.status().gaps == 0
        finally:
            for n in (b, p):
                await n.w.stop()

    run(body)


@pytest.mark.parametrize("old_owner", ["alive", "dead"])
def test_a_move_undone_while_its_old_owner_is_suspected_gives_back_to_it_and_to_its_backup(
        old_owner: str) -> None:
    """M16: the fence came while the old owner A was declared down, so which NF owns the slot
    next is not known: A if the suspicion was a false alarm (the undo gives the slot to A), A's
    backup A' if A's fail-over follows (it promotes A'). The fence names both: B gives what it
    buffered to A and a copy to A'. Either way every count comes out once, in order (before,
    given to A' only, a false alarm's A skipped them as a gap: simulation, LONG_QUEUES seed
    5002)."""
    async def body() -> None:
        a, b, p = Node(1), Node(2, batch=1), Node(3, batch=1)
        p.w.cfg.transfer_timeout = 0.5  # (B's wait for a dead A's link)
        for n in (a, b, p):
            await n.w.start()
        try:
            sw = await backed_up_and_flowing(a, b)
            p.w.adopt(SLOT, 2)  # the move: B adopts at epoch 2 and buffers 5 and 6
            sw.epochs[SLOT] = 2
            for no in (5, 6):
                p.w.on_frame(sw.stamp(SLOT, checker_frame(1, no), 3)[0])
            if old_owner == "dead":
                await a.w.stop()
            assert await p.w.command("cancel_adopt", {
                "slot": SLOT, "epoch": 2, "from_nf": 1, "from_address": a.addr,
                "copy_nf": 2, "copy_address": b.addr}) == FenceResult(started=False, held=True)
            sw.epochs[SLOT] = 3  # the undo: the slot is A's group's again, at epoch 3
            if old_owner == "dead":
                await until(lambda: sorted(b.w.inbuf.slots.get(SLOT, {})) == [5, 6],
                            "the copies given to A's backup")
                b.w.assign([(SLOT, 3, None)], as_backup=False)  # A's fail-over promotes A'
                b.w.on_frame(sw.stamp(SLOT, checker_frame(1, 7), 2)[0])
            else:
                a.w.assign([(SLOT, 3, None)], as_backup=False)
                await until(lambda: a.w.slots[SLOT].seq.next_expected == 7, "given back to A")
                prim, copy = sw.stamp(SLOT, checker_frame(1, 7), 1, 2)
                assert copy is not None
                a.w.on_frame(prim)
                b.w.on_frame(copy)
                await until(lambda: a.w.slots[SLOT].seq.next_expected == 8, "packet 7 processed")
                a.w.close_batch()  # (5 to 7 fill three quarters of a batch)

            def through_the_switch() -> list[int]:
                dedup = OutputDedup()
                return counts([f for f in a.out + b.out if dedup.offer(f)])

            await until(lambda: through_the_switch() == list(range(1, 8)),
                        "every count once, in order")
            assert p.w.c.cancelled == 0 and a.w.c.duplicates == 0 and b.w.c.duplicates == 0
        finally:
            for n in (a, b, p):
                await n.w.stop()

    run(body)


@pytest.mark.parametrize("told", [True, False])
def test_an_adopter_of_another_cluster_gives_back_under_the_peer_policy_once_announced(
        told: bool) -> None:
    """The adopter B is no peer of the NF holding the old owner's state (another cluster), and
    that NF admits known peers only: told by the controller first (`ExpectGiveBack`, which the
    fence sends), it keeps what B gives back; untold, it refuses B and the packets are lost
    (simulation stalls with moves under the peer policy, seeds 44, 58, 91 and 163)."""
    async def body() -> None:
        a, b, p = Node(1), Node(2, batch=1), Node(3, batch=1)
        guard(b)
        for n in (a, b, p):
            await n.w.start()
        try:
            sw = await backed_up_and_flowing(a, b)  # (B: no peer of NF 3's)
            p.w.adopt(SLOT, 2)
            sw.epochs[SLOT] = 2
            for no in (5, 6):
                p.w.on_frame(sw.stamp(SLOT, checker_frame(1, no), 3)[0])
            await a.w.stop()
            if told:
                await b.w.command("expect_give_back", {"slot": SLOT, "from_nf": 3,
                                                       "from_address": p.addr})
            assert await p.w.command("cancel_adopt", {
                "slot": SLOT, "epoch": 2, "from_nf": 2, "from_address": b.addr}) == FenceResult(
                started=False, held=True)
            if told:
                await until(lambda: len(b.w.inbuf.slots.get(SLOT, {})) == 2,
                            "the packets given back, kept as input")
                assert b.w.policy.refused_total == 0
            else:
                await until(lambda: b.w.policy.refused_total > 0, "the adopter refused")
                assert not b.w.inbuf.slots.get(SLOT)
        finally:
            for n in (b, p):
                await n.w.stop()

    run(body)
