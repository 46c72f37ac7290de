"""A cluster peer's replicas, when they become a backup's: replaced by the new owner's state (last
seq included), and synchronised with the primary's held output when the peer is made its backup.

Double fault: primary A dies after its deltas of batches its backup B never received reached
peer P (A's uncommitted numbers). B is promoted; its first delta replaces P's replica (flows and,
since this fix, the last seq). P then becomes B's backup (`AssignSlots(as_backup)` keeps the
replica it holds), B dies and P is promoted: it must start after B's last committed number, so
the numbers only A had processed, which nobody holds any more, are skipped *and counted* as gaps.
Before the fix the replaced replica kept A's higher last seq, and P skipped them uncounted.
"""

from __future__ import annotations

import asyncio

import pytest

from contract.replication import Delta, Message, SlotRow, decode
from nf_host.global_state import MemoryStore
from nf_host.harness import Switch, checker_frame
from nf_host.nfs import make_nf
from nf_host.worker import Worker, WorkerConfig

pytestmark = pytest.mark.unit

A, B, P, C = 1, 2, 3, 5
SLOT = 3


def delta(sender: int, batch: int, version: int, last_seq: int, replace: bool, gen: int
          ) -> Delta:
    return Delta(batch, [SlotRow(SLOT, 1, version, last_seq, [], replace, gen)], sender=sender)


def test_a_replaced_replica_takes_the_new_owners_last_seq_and_the_skip_is_counted() -> None:
    async def run() -> tuple[int | None, int, list[int]]:
        out: list[bytes | bytearray] = []
        p = Worker(WorkerConfig(nf_id=P, batch_size=1, batch_time=0), make_nf("checker"),
                   MemoryStore(), out.append)
        # as A's cluster peer: A's deltas up to seq 10 (B, A's backup, only got up to 6)
        p.on_replication(delta(A, 1, 1, 6, False, 0))
        p.on_replication(delta(A, 2, 2, 10, False, 0))
        # B promoted (owner generation 1) replays and commits up to 8: its first delta replaces
        p.on_replication(delta(B, 1, 3, 8, True, 1))
        assert p.replicas[SLOT].last_seq == 8
        # P becomes B's backup and receives the copies the switch now sends it: 11 and 12 (9 and
        # 10 were stamped before, for A and B only)
        p.assign([(SLOT, 1, None)], as_backup=True)
        switch = Switch()
        switch.next_seq[SLOT] = 11
        for no in (1, 2):
            _prim, copy = switch.stamp(SLOT, checker_frame(7, no), B, P)
            assert copy is not None
            p.on_frame(copy)
        # B dies: P is promoted from its replica
        p.promote([SLOT], dead=B)
        rt = p.slots[SLOT]
        p.expire_gaps(1e12)  # 9 and 10 never come
        return rt.state.last_seq, rt.seq.gaps, [rt.packets]

    last, gaps, packets = asyncio.run(run())
    assert last == 12 and packets == [2]
    assert gaps == 2  # 9 and 10: skipped and counted


class FakeLink:
    """A replication link that is connected and records what is sent on it (decoded)."""

    def __init__(self, nf_id: int, address: str) -> None:
        self.nf_id, self.address = nf_id, address
        self.connected = asyncio.Event()
        self.connected.set()
        self.sent: list[Message] = []

    def send(self, msg: Message) -> int:
        self.sent.append(msg)
        return 1

    def send_raw(self, data: bytes) -> int:
        self.sent.append(decode(data[4:]))
        return 1

    def kick(self) -> None: ...
    def cork(self) -> None: ...
    def uncork(self) -> None: ...

    def backlog(self) -> int:
        return 0

    async def close(self) -> None: ...


def fake_links(w: Worker) -> dict[int, FakeLink]:
    """`w`'s replication links become `FakeLink`s, by NF id (the dict returned, filled as made)."""
    links: dict[int, FakeLink] = {}

    def link(nf_id: int, address: str) -> FakeLink:
        links.setdefault(nf_id, FakeLink(nf_id, address))
        w.links[nf_id] = links[nf_id]  # type: ignore[assignment]
        return links[nf_id]

    w.linkset.link = link  # type: ignore[method-assign,assignment]
    return links


def test_a_cluster_peer_made_the_backup_gets_a_snapshot_with_the_held_output() -> None:
    """B's backup C stops acknowledging; the controller makes the cluster peer P B's backup. P's
    link is connected already (no reconnection snapshot), and its replicas came from B's peer
    deltas, which carry no output. Without a snapshot, P's next ack would release the batches
    held for C while P had logged none of their output: B dying then, P (promoted) would neither
    replay them (its replica holds their state) nor send their output again."""
    async def run() -> tuple[FakeLink, int]:
        b = Worker(WorkerConfig(nf_id=B, batch_size=1, batch_time=0), make_nf("checker"),
                   MemoryStore(), lambda frame: None)
        links = fake_links(b)
        b.assign([(SLOT, 1, 1)], as_backup=False)
        b.set_peers([(P, "10.9.0.3:7000")])
        b.set_backup(C, "10.9.0.5:7000")
        switch = Switch()
        for no in (1, 2, 3):
            prim, _copy = switch.stamp(SLOT, checker_frame(7, no), B, C)
            b.on_frame(prim)  # a batch each; C never acknowledges: 3 outputs held
        held = b.commit.held_outputs
        b.set_backup(P, "10.9.0.3:7000")
        return links[P], held

    p_link, held = asyncio.run(run())
    assert held == 3
    snap = p_link.sent[-1]
    assert isinstance(snap, Delta) and snap.full and snap.outputs is not None
    assert sum(len(frames) for _bid, frames in snap.outputs) == 3  # the held output, logged at P
