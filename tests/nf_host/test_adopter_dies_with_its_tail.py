"""An adopter that dies with the old owner's tail still on its way (docs/protocols.md §5, M18).

After a move's switch write, the packets of the old epoch still queued toward the old owner A
reach it after its release: A forwards them (the tail) to the adopter B, and B starts the slot
once A's marker, sent after A's last output, has passed the switch. If B dies after it accepted
A's transfer but before that, its backup C is promoted in its place: C must get the rest of the
tail (A sends C a copy of everything it forwards), wait for A's marker as B would have (A's last
outputs may still be queued at the switch), and wait for the tail before it skips a gap. Before
M18, A forwarded the tail to the dead B only, and C, promoted as an ordinary backup, skipped it
as lost and released its outputs ahead of A's (simulation, adopter kills, seeds 78, 100, 126).
"""

from __future__ import annotations

import pytest

from contract.commands import Assign
from contract.replication import Forward
from contract.roles import SlotRole
from nf_host.harness import Switch, checker_frame
from nf_host.peer_policy import PeerLimits, PeerPolicy, hello
from tests.nf_host.inprocess import NODES, SLOT, Node, run, until
from tests.nf_host.test_move_fence_inprocess import counts

pytestmark = pytest.mark.unit

A, B, C = 1, 3, 4


def test_the_adopters_backup_gets_the_tail_waits_for_the_marker_and_goes_on_in_order() -> None:
    async def body() -> None:
        a, b, c = Node(A), Node(B, batch=1), Node(C, batch=1, marker_wait=30.0)
        for n in (a, b, c):
            await n.w.start()
        try:
            a.w.assign([(SLOT, 1, 1)], as_backup=False)
            sw = Switch()
            for no in range(1, 5):
                a.w.on_frame(sw.stamp(SLOT, checker_frame(1, no), A)[0])
            await until(lambda: len(a.out) == 4, "A's output")
            # the controller: C backs up B's adoption of the slot from A, B adopts it
            await c.w.command("assign", {"slots": [(SLOT, 2, None)], "as_backup": True,
                                         "primary": B, "adoption": True, "from_nf": A,
                                         "from_address": a.addr})
            b.w.set_backup(C, c.addr)
            await until(lambda: C in b.w.links and b.w.links[C].writer is not None, "B's backup")
            b.w.adopt(SLOT, 2)
            tail = [sw.stamp(SLOT, checker_frame(1, no), A)[0] for no in (5, 6, 7)]
            sw.epochs[SLOT] = 2  # the switch write: what A has not read yet is the tail
            del NODES[B], NODES[C]  # A's marker is still queued at the switch
            await a.w.release(SLOT, B, b.addr, same_cluster=False, copy_nf=C, copy_address=c.addr)
            a.w.on_frame(tail[0])
            a.w.on_frame(tail[1])
            await until(lambda: c.w.inbuf.count(SLOT) == 2, "C's copies of the tail")
            await b.w.stop()  # B dies, the marker not in
            a.w.on_frame(tail[2])  # forwarded to the dead B, and copied to C
            await until(lambda: c.w.inbuf.count(SLOT) == 3, "C's copy of the last of the tail")
            c.w.promote([SLOT], dead=B)
            rt = c.w.slots[SLOT]
            assert rt.role == SlotRole.ADOPTING and c.out == []  # A's marker first
            c.w.on_frame(a.markers[-1])
            await until(lambda: len(c.out) == 3, "C's output of the tail")
            assert counts(c.out) == [5, 6, 7]
            assert c.w.slots[SLOT].role == SlotRole.PRIMARY and c.w.c.unowned == 0
        finally:
            for n in (a, c):
                await n.w.stop()

    run(body)


def test_the_adopters_backup_lets_in_the_old_owner_the_adoption_names_and_keeps_its_forwards() -> None:
    """With known peers only (as `nf-host run` runs), C's replication server admits A, which
    the adoption's `AssignSlots` named, and takes its forwarded packets of that slot only."""
    policy = PeerPolicy(C, 0, 1, PeerLimits(known_peers_only=True))
    frame = bytes(Switch().stamp(SLOT, checker_frame(7, 1), B, 0)[0])
    other = bytes(Switch().stamp(SLOT + 1, checker_frame(7, 1), B, 0)[0])
    policy.learn(Assign([(SLOT, 2, None)], True, B, True, A, "10.9.0.1:7000"))
    assert policy.admit(hello(A, 0, 1), "10.9.0.1") == A
    assert policy.check(A, Forward(frame)) is not None
    assert policy.check(A, Forward(other)) is None  # (refused, counted)
    assert policy.refused == {"slot": 1}
