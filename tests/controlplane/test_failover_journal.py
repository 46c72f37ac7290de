"""The fail-over journal (controlplane/failover_journal.py, docs/protocols.md §8 L3): a fail-over
journalled and not persisted is found by the next leader and finished; one whose hand-over was
persisted is over and cleared; the hand-over writes groups and pairs in one transaction. Over
the simulation's in-memory etcd (sim/etcd.py), in virtual time."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from controlplane import failover_journal
from controlplane.slot_store import SlotStore
from sim import loop
from sim.etcd import SimEtcd
from sim.network import SimNet

pytestmark = pytest.mark.unit


@dataclass
class Leader:
    """What the journal reads and keeps of a controller."""

    store: SlotStore | None
    pairs: dict[int, int | None]
    open_failovers: dict[int, int] = field(default_factory=dict)


def test_a_failover_journalled_and_not_persisted_is_finished_by_the_next_leader() -> None:
    async def body() -> None:
        net = SimNet(random.Random(1))
        net.node("a")
        etcd = SimEtcd(net, random.Random(2))
        store = SlotStore("127.0.0.1:2379", "/t", client=etcd.client("a"))
        first = Leader(store, {1: 3, 2: 4})
        await net.spawn("a", failover_journal.journal(first, 1, 3))
        await net.spawn("a", failover_journal.journal(first, 2, 4))
        # NF 2's fail-over was persisted (one transaction), NF 1's was not: the leader stopped
        await net.spawn("a", store.save_handover({4: 2, 1: 1}, {4: None, 1: 3}))
        stored = await net.spawn("a", store.load_pairs())
        assert stored == {4: None, 1: 3} and await net.spawn("a", store.load_groups()) == {4: 2, 1: 1}
        nxt = Leader(store, stored)
        await net.spawn("a", failover_journal.resume(nxt))
        assert nxt.open_failovers == {1: 3}  # NF 2's entry is over: cleared from etcd too
        assert await net.spawn("a", store.load_failovers()) == {1: 3}
        assert failover_journal.pending(nxt) == [1]
        # before either NF of it is configured, NF 1 is failed over again; others are not held
        assert [failover_journal.unfinished(nxt, n) for n in (1, 3, 4, 5)] == [1, 1, None, None]
        # finished: the pairs hold it, and its entry goes
        nxt.pairs = {3: None, 4: None}
        await net.spawn("a", failover_journal.close(nxt, 1))
        assert failover_journal.pending(nxt) == [] and failover_journal.unfinished(nxt, 3) is None
        assert await net.spawn("a", store.load_failovers()) == {}

    loop.run(body())
