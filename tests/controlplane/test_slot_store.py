"""Slot map persistence in a real etcd: a restarted controller resumes with the same map."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from controlplane.slot_map import SlotMap
from controlplane.slot_store import SlotStore, SlotStoreError, load_or_build

pytestmark = pytest.mark.etcd

_prefixes = itertools.count()


def prefix() -> str:
    return f"/test-slot-store/{next(_prefixes)}"


def test_fresh_then_resumed_after_restart(etcd_server):
    pfx = prefix()

    async def first_controller() -> SlotMap:
        async with SlotStore(etcd_server.endpoint, pfx) as store:
            m, resumed = await load_or_build(store, SlotMap.build([1, 2, 3, 4], 4096))
            assert not resumed
            # some ownership changes after start-up, persisted one write each
            for slot, to in ((5, 2), (77, 3), (4095, 1)):
                await store.save_entry(m.move(slot, to))
            await store.save_entries(m.move_all(4, 8))
            return m

    async def restarted_controller() -> tuple[SlotMap, bool]:
        async with SlotStore(etcd_server.endpoint, pfx) as store:
            # a different primary list must not matter: the stored map wins
            return await load_or_build(store, SlotMap.build([1, 2], 4096))

    before = asyncio.run(first_controller())
    after, resumed = asyncio.run(restarted_controller())
    assert resumed
    assert after == before
    assert after.owner(5) == 2 and after.epoch(5) == 2
    assert 4 not in after.counts() and after.counts()[8] > 900


def test_slot_count_mismatch_and_missing_slots_are_errors(etcd_server):
    pfx = prefix()

    async def run() -> None:
        async with SlotStore(etcd_server.endpoint, pfx) as store:
            assert await store.load(64) is None
            await store.save(SlotMap.build([1, 2], 64))
            assert (await store.load(64)) == SlotMap.build([1, 2], 64)
            with pytest.raises(SlotStoreError, match="64 slots"):
                await store.load(128)
            await store._client.delete(store._slot_key(9))
            with pytest.raises(SlotStoreError, match="first: 9"):
                await store.load(64)
            await store._client.put(store._slot_key(9), b"garbage")
            with pytest.raises(SlotStoreError, match="malformed"):
                await store.load(64)
            await store.clear()
            assert await store.load(64) is None

    asyncio.run(run())


class _PrimarySwitch:
    """A switch session that is primary and accepts every slot write."""

    is_primary = True

    async def write_slot(self, entry, group=None):
        pass


def test_controller_resumes_slot_map_after_restart(etcd_server):
    from pathlib import Path

    from controlplane.config import load_config
    from controlplane.controller import Controller

    root = Path(__file__).resolve().parents[2]
    p4info = Path(__file__).parent / "data" / "nfcluster.p4info.txtpb"
    base = load_config(root / "topo" / "nfcluster.yaml")
    cfg = base.model_copy(update={"etcd": base.etcd.model_copy(
        update={"endpoints": [etcd_server.endpoint], "prefix": prefix()}),
        # (the shared etcd serves plaintext: tests/conftest.py)
        "security": base.security.model_copy(update={"etcd_tls": False})})

    async def one_run(move: bool):
        c = Controller(cfg, p4info=p4info, device_config=b"x")
        c.session = _PrimarySwitch()  # type: ignore[assignment]
        try:
            await c.load_slot_map()
            if move:
                await c.move_slot(100, 1 if c.slot_map.owner(100) != 1 else 2)
            return c.resumed, c.slot_map.copy()
        finally:
            await c.close()

    resumed1, first = asyncio.run(one_run(move=True))
    resumed2, second = asyncio.run(one_run(move=False))
    assert (resumed1, resumed2) == (False, True)
    assert second == first and second.epoch(100) == 2


def test_pairs_changed_by_a_fail_over_are_persisted(etcd_server):
    pfx = prefix()

    async def run() -> None:
        async with SlotStore(etcd_server.endpoint, pfx) as store:
            assert await store.load_pairs() is None
            await store.save_pairs({2: 4, 3: None})
        async with SlotStore(etcd_server.endpoint, pfx) as store:
            assert await store.load_pairs() == {2: 4, 3: None}
            await store.clear()
            assert await store.load_pairs() is None

    asyncio.run(run())


def test_a_fail_over_writes_no_slot_and_a_restart_resumes_it(etcd_server):
    """Slots are stored by replica group: a fail-over hands the dead primary's group to its
    backup and writes `groups` and `pairs`, not its 1,024 slots (etcd's history and memory grew
    with every fail-over before), and a restarted controller reads the promoted NF as the owner,
    also of a slot moved to it after the fail-over."""
    from pathlib import Path

    from controlplane.config import load_config
    from controlplane.controller import Controller

    root = Path(__file__).resolve().parents[2]
    p4info = Path(__file__).parent / "data" / "nfcluster.p4info.txtpb"
    base = load_config(root / "topo" / "nfcluster.yaml")
    pfx = prefix()
    cfg = base.model_copy(update={"etcd": base.etcd.model_copy(
        update={"endpoints": [etcd_server.endpoint], "prefix": pfx}),
        "security": base.security.model_copy(update={"etcd_tls": False})})

    async def slot_values(c: Controller) -> dict[bytes, tuple[bytes, int]]:
        assert c.store is not None
        kvs = await c.store._client.get_prefix(f"{pfx}/slots/s/".encode())
        return {kv.key: (kv.value, kv.mod_revision) for kv in kvs}

    async def first_run() -> tuple[SlotMap, int]:
        c = Controller(cfg, p4info=p4info, device_config=b"x")
        c.session = _PrimarySwitch()  # type: ignore[assignment]
        try:
            await c.load_slot_map()
            dead_slots = c.slot_map.slots_of(1)
            before = await slot_values(c)
            await c.hand_over(1, 5, 9)
            assert await slot_values(c) == before  # not one slot key written
            moved = next(s for s in range(4096) if c.slot_map.owner(s) == 2)
            await c.move_slot(moved, 5)  # stored as group 1, NF 5's group now
            assert c.slot_map.slots_of(5) == sorted([*dead_slots, moved])
            return c.slot_map.copy(), moved
        finally:
            await c.close()

    async def second_run() -> Controller:
        c = Controller(cfg, p4info=p4info, device_config=b"x")
        try:
            await c.load_slot_map()
            return c
        finally:
            await c.close()

    first, moved = asyncio.run(first_run())
    c = asyncio.run(second_run())
    assert c.resumed and c.slot_map == first and c.slot_map.owner(moved) == 5
    assert c.groups[5] == 1 and 1 not in c.groups and c.pairs[5] == 9 and 1 not in c.pairs
