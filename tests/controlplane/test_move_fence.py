"""A move whose `Release` fails is decided by the adopter's fence, and a move a leader left half
done is finished by the next one (controlplane/migration.py, the move journal in
controlplane/slot_store.py; docs/protocols.md §5 "When a move is decided"). Fake NFs and a
recording switch, as in test_migration.py; the runtime's side of the fence is
tests/nf_host/test_move_fence_inprocess.py. Issue #30, items 1 and 2."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controlplane.migration import MoveError
from controlplane.slot_map import SlotEntry
from controlplane.slot_store import MoveIntent
from tests.controlplane.test_migration import make, names, wait_until, with_controller

pytestmark = pytest.mark.unit


def _run(body: Any, etcd: str | None = None) -> None:
    asyncio.run(with_controller(body, etcd))


def test_a_release_whose_reply_is_lost_after_the_adopter_started_completes_the_move() -> None:
    """Release times out (its reply lost), but B had accepted the transfer: the fence says
    `started`, the move is complete. Before, it was undone: the switch went back to A at e+2
    while B kept the slot as a stale primary, and A was assigned an empty slot."""
    async def body(c: Any, fakes: Any, servers: Any) -> None:
        slot = c.slot_map.slots_of(1)[0]
        epoch = c.slot_map.epoch(slot)
        c.release_timeout = 0.3
        fakes[1].release_delay = 2.0
        fakes[2].started.add(slot)
        c.session.writes.clear()
        for f in fakes.values():
            f.assigned.clear()
        [res] = await c.migrate([slot], 2)
        assert res.ok and res.fenced and not res.undone and res.epoch == epoch + 1
        assert "adopter had started" in res.error and "DEADLINE_EXCEEDED" in res.error
        assert c.session.writes == [("slot", SlotEntry(slot, 2, epoch + 1))]  # never back to A
        assert c.slot_map.entry(slot) == SlotEntry(slot, 2, epoch + 1)
        assert ("CancelAdopt", (slot, epoch + 1)) in fakes[2].calls
        assert not [a for a in fakes[1].assigned if slot in a[0]]  # A is not given it back
        assert c.open_moves == {} and c.status()["moves"] == {"total": 1, "ok": 1, "undone": 0}

    _run(body)


def test_an_old_owner_that_died_after_the_adopter_started_is_failed_over_without_the_slot() -> None:
    """A dies with the move (Release UNAVAILABLE) after B started: the move is complete, and
    A's fail-over promotes A's backup for A's other slots only. Before, the move was undone to
    A's group at e+2 and A's backup was promoted from the pre-move replica (counts older than
    B's, epoch e while the switch was at e+2; a peer of B holding B's replica then refused every
    delta of the promoted NF: StaleSender for ever)."""
    async def body(c: Any, fakes: Any, servers: Any) -> None:
        slot = c.slot_map.slots_of(1)[0]
        epoch = c.slot_map.epoch(slot)
        fakes[2].started.add(slot)
        await servers[1].stop()  # dies before its Release reply leaves
        [res] = await c.migrate([slot], 2)
        assert res.ok and res.fenced and not res.undone
        assert c.slot_map.entry(slot) == SlotEntry(slot, 2, epoch + 1)
        rest = c.slot_map.slots_of(1)
        for _ in range(3):
            await c.registry.detector.heartbeat_round()
        await wait_until(lambda: bool(c.failovers))
        [fo] = c.failovers
        assert fo.ok and fo.promoted == 3 and slot not in fakes[3].promoted
        assert fakes[3].promoted == rest and c.slot_map.owner(slot) == 2

    _run(body)


def test_a_move_undone_to_a_dying_owner_gives_its_promoted_backup_the_new_epoch() -> None:
    """A dies with the move and B had not started: the fence cancels, the move is undone to
    A's group at e+2, and A's fail-over tells the promoted backup that epoch (its replica has e:
    it would stamp its output e, and order its deltas, as of before the move)."""
    async def body(c: Any, fakes: Any, servers: Any) -> None:
        slot = c.slot_map.slots_of(1)[0]
        epoch = c.slot_map.epoch(slot)
        await servers[1].stop()
        [res] = await c.migrate([slot], 2)
        assert res.undone and c.slot_map.entry(slot) == SlotEntry(slot, 1, epoch + 2)
        for _ in range(3):
            await c.registry.detector.heartbeat_round()
        await wait_until(lambda: bool(c.failovers))
        assert c.failovers[0].ok and slot in fakes[3].promoted
        await wait_until(lambda: fakes[3].slots.get(slot) == epoch + 2)
        assert ([slot], False) in fakes[3].assigned and c.untold_epochs == {}

    _run(body)


def test_a_cancelled_adoption_is_undone_and_the_fence_is_asked_again_until_it_answers() -> None:
    async def body(c: Any, fakes: Any, servers: Any) -> None:
        slot = c.slot_map.slots_of(1)[0]
        epoch = c.slot_map.epoch(slot)
        c.release_timeout = 0.3
        fakes[1].release_delay = 2.0
        fakes[2].fence_errors = 2  # its worker does not answer, twice
        [res] = await c.migrate([slot], 2)
        assert not res.ok and res.undone and res.fenced
        assert [a for n, a in fakes[2].calls if n == "CancelAdopt"] == [(slot, epoch + 1)] * 3
        assert c.slot_map.entry(slot) == SlotEntry(slot, 1, epoch + 2)
        assert fakes[1].slots[slot] == epoch + 2 and c.open_moves == {}

    _run(body)


def test_an_adopter_that_never_answers_its_fence_leaves_the_move_undecided_not_undone() -> None:
    """No answer from B (and not declared down): undoing could make two owners, so the slot
    stays B's and the move stays journalled, to be decided later."""
    async def body(c: Any, fakes: Any, servers: Any) -> None:
        slot = c.slot_map.slots_of(1)[0]
        epoch = c.slot_map.epoch(slot)
        c.release_timeout = 0.3
        c.fence_patience = 0.5
        fakes[1].release_delay = 2.0
        fakes[2].fence_errors = 1000
        [res] = await c.migrate([slot], 2)
        assert not res.ok and not res.undone and res.fenced and "undecided" in res.error
        assert c.slot_map.entry(slot) == SlotEntry(slot, 2, epoch + 1)
        assert c.open_moves == {slot: MoveIntent(slot, 1, 2, epoch + 1, c.groups[1])}
        with pytest.raises(MoveError, match="not decided"):  # not moved again meanwhile
            await c.migrate([slot], 6)

    _run(body)


def test_a_release_the_old_owner_answered_it_kept_is_undone_even_if_the_adopter_is_silent() -> None:
    async def body(c: Any, fakes: Any, servers: Any) -> None:
        slot = c.slot_map.slots_of(1)[0]
        epoch = c.slot_map.epoch(slot)
        c.fence_patience = 0.3
        fakes[1].release_error = "NF 2 refused slot 3: not adopting; the slot stays owned here"
        fakes[2].fence_errors = 1000
        [res] = await c.migrate([slot], 2)
        assert res.undone and c.slot_map.entry(slot) == SlotEntry(slot, 1, epoch + 2)

    _run(body)


def _half_done(c: Any, fakes: Any, etcd_written: bool) -> Any:
    """What a leader that died mid-move left: B adopting, the move journalled, the switch at B
    (e+1), and etcd's slot entry too if `etcd_written`; A never told to release."""
    async def do() -> tuple[int, int]:
        slot = c.slot_map.slots_of(1)[0]
        epoch = c.slot_map.epoch(slot)
        fakes[2].adopting[slot] = epoch + 1
        await c.open_move(MoveIntent(slot, 1, 2, epoch + 1, c.groups.get(1, 1)))
        entry = SlotEntry(slot, 2, epoch + 1)
        await c.session.write_slot(entry)
        if etcd_written:
            await c.store.save_entry(entry, c.groups)
        return slot, epoch
    return do()


@pytest.mark.etcd
@pytest.mark.parametrize("etcd_written", [True, False], ids=["after-etcd", "before-etcd"])
def test_a_new_leader_finishes_a_move_its_predecessor_left_half_done(
        etcd_server: Any, etcd_written: bool) -> None:
    """The leader dies after the switch write (before or after etcd's): the next one finds the
    journalled move, keeps the slot at B at e+1 (the reconcile's entry: packets stamped e+1 are
    not stranded), tells B `Adopt` again instead of an `AssignSlots` that would replace the
    adoption and drop its buffered packets, re-sends A's `Release` and clears the journal."""
    async def body(c: Any, fakes: Any, servers: Any) -> None:
        slot, epoch = await _half_done(c, fakes, etcd_written)
        for f in fakes.values():
            f.calls.clear()
            f.assigned.clear()
        new = make(c.cfg, True)
        new.session = c.session
        try:
            await new.load_slot_map()
            assert new.open_moves == {slot: MoveIntent(slot, 1, 2, epoch + 1, new.groups.get(1, 1))}
            assert new.slot_map.entry(slot) == SlotEntry(slot, 2, epoch + 1)
            new.switch_ready.set()
            await new.configure_nfs(retry=0.05)
            # (the move is recorded after its journal entry is cleared in etcd: wait for both)
            await wait_until(lambda: not new.open_moves and bool(new.moves))
            assert not [a for a in fakes[2].assigned if slot in a[0] and not a[1]]
            assert ("Adopt", (slot, epoch + 1, 1)) in fakes[2].calls
            assert fakes[1].released == [(slot, 2, True)]
            [res] = list(new.moves)
            assert res.ok and res.epoch == epoch + 1 and new.slot_map.owner(slot) == 2
            assert new.store is not None
            assert await new.store.load_moves(new.groups) == {}
            again = await new.store.load(new.cfg.slot_space, new.groups)
            assert again is not None and again.entry(slot) == SlotEntry(slot, 2, epoch + 1)
        finally:
            await new.close()
        assert names(fakes[1]).count("Release") == 1

    _run(body, etcd_server.endpoint)


@pytest.mark.etcd
def test_a_journalled_move_that_is_over_is_cleared_not_replayed(etcd_server: Any) -> None:
    async def body(c: Any, fakes: Any, servers: Any) -> None:
        slot = c.slot_map.slots_of(1)[0]
        epoch = c.slot_map.epoch(slot)
        await c.open_move(MoveIntent(slot, 1, 2, epoch + 1, 1))
        await c.move_slot(slot, 2)
        await c.move_slot(slot, 1)  # (undone: e+2 at A; the journal's deletion was lost)
        new = make(c.cfg, True)
        try:
            await new.load_slot_map()
            assert new.store is not None and new.open_moves == {}
            assert await new.store.load_moves(new.groups) == {}
            assert new.slot_map.entry(slot) == SlotEntry(slot, 1, epoch + 2)
        finally:
            await new.close()

    _run(body, etcd_server.endpoint)


def test_a_move_whose_old_owner_was_failed_over_gives_back_to_the_primary_of_its_group() -> None:
    """A journalled move (the slot at B at e+1) whose old owner A died and was failed over (A's
    backup, NF 3, promoted for A's other slots): finishing it, the fence names NF 3, which holds
    A's group and A's last state of the slot, as the NF B's buffered packets (and B's backup's
    copies) go back to, and the undo gives the slot to NF 3 at e+2 (M15). Before, they went back
    to A's NF id, a dead or restarted process that drops them (simulation seeds 11 of switch
    restarts and 32 of etcd outages; the runtime's side: tests/nf_host/test_give_back_to_group.py)."""
    async def body(c: Any, fakes: Any, servers: Any) -> None:
        slot = c.slot_map.slots_of(1)[0]
        epoch = c.slot_map.epoch(slot)
        intent = MoveIntent(slot, 1, 2, epoch + 1, c.groups.get(1, 1))
        await c.open_move(intent)
        await c.move_slot(slot, 2)  # (the leader that wrote the switch died here)
        await servers[1].stop()
        for _ in range(3):
            await c.registry.detector.heartbeat_round()
        await wait_until(lambda: bool(c.failovers))
        assert c.failovers[0].ok and c.failovers[0].promoted == 3
        assert slot not in fakes[3].promoted  # (the slot map gives it to the move)
        # A's fail-over finishes the moves that waited for it (`finish_open_moves`)
        await wait_until(lambda: c.open_moves == {})
        assert c.slot_map.entry(slot) == SlotEntry(slot, 3, epoch + 2)
        assert fakes[2].given_back_to and set(fakes[2].given_back_to) == {3}
        # told first that B may give it back (B may be of another cluster: the peer policy)
        assert ("ExpectGiveBack", (slot, 2)) in fakes[3].calls
        assert set(fakes[4].given_back_to) <= {3}  # (B's backup, asked when B forgot it: M14)
        assert ([slot], False) in fakes[3].assigned and c.open_moves == {}

    _run(body)


def test_while_the_old_owner_is_suspected_the_undo_gives_back_to_it_and_a_copy_to_its_backup():
    """M16: with A declared down, A (a false alarm: the undo gives it the slot) or A's backup
    (A's fail-over promotes it) owns the slot next: the fence names A, and A's backup for a
    copy; with A up, A only; with A's backup down too, A only (docs/protocols.md §5)."""
    from types import SimpleNamespace

    from controlplane.migration import GiveBack, give_back_to

    def ctl(down: set[int]) -> Any:
        nfs = {i: SimpleNamespace(declared_down=i in down) for i in (1, 2, 3)}
        return SimpleNamespace(state=SimpleNamespace(pairs={1: 2, 3: None}),
                               registry=SimpleNamespace(nfs=nfs))

    intent = MoveIntent(slot=5, src=1, dst=3, epoch=2, src_group=1)
    assert give_back_to(ctl({1}), intent) == GiveBack(1, 2)
    assert give_back_to(ctl(set()), intent) == GiveBack(1)
    assert give_back_to(ctl({1, 2}), intent) == GiveBack(1)


async def _move_with_its_release_unanswered(c: Any, fakes: Any) -> tuple[int, int, Any]:
    """A move of one of NF 1's slots to NF 2 whose `Release` is under way and will time out:
    (slot, its epoch before the move, the move's task)."""
    slot = c.slot_map.slots_of(1)[0]
    epoch = c.slot_map.epoch(slot)
    c.release_timeout = 0.3
    fakes[1].release_delay = 2.0
    move = asyncio.ensure_future(c.migrate([slot], 2))
    await wait_until(lambda: "Release" in names(fakes[1]))
    return slot, epoch, move


def test_a_move_whose_adopter_is_taken_for_dead_stays_journalled_until_it_answers() -> None:
    """M19 (simulation `stalls`, seeds 44 and 58): B and its backup are declared down while A's
    Release is unanswered, so the move is left to B's fail-over, but B was only slow. The move
    stays journalled; once B answers (no fail-over), its fence decides: B never had the
    transfer, so the move is undone. Closed at once before, B kept the slot ADOPTING for a
    transfer that never came while the switch sent the slot to it."""
    async def body(c: Any, fakes: Any, servers: Any) -> None:
        slot, epoch, move = await _move_with_its_release_unanswered(c, fakes)
        for nf in (2, 4):  # B and its backup taken for dead (a busy host)
            c.registry.nfs[nf].declared_down = True
        [res] = await move
        assert not res.ok and not res.undone and "once it answers again" in res.error
        assert c.open_moves == {slot: MoveIntent(slot, 1, 2, epoch + 1, c.groups[1])}
        for nf in (2, 4):  # only slow: it answers again, and is not failed over
            c.registry.nfs[nf].declared_down = False
        c.slot_moves.finish_open_moves()
        await wait_until(lambda: c.open_moves == {})
        assert c.slot_map.entry(slot) == SlotEntry(slot, 1, epoch + 2)  # cancelled at B: undone
        assert ("CancelAdopt", (slot, epoch + 1)) in fakes[2].calls

    _run(body)


def test_an_adopter_whose_backup_cancelled_its_adoption_is_told_once_it_answers() -> None:
    """M19 (simulation `stalls`, seeds 60 and 95): B is taken for dead, its backup holds no state
    of the slot and cancels the adoption (M14), and the move is undone; B, only slow, still
    holds the slot ADOPTING. Once it answers, it is told `CancelAdopt`."""
    async def body(c: Any, fakes: Any, servers: Any) -> None:
        slot, epoch, move = await _move_with_its_release_unanswered(c, fakes)
        c.registry.nfs[2].declared_down = True
        [res] = await move
        assert res.undone and c.slot_map.entry(slot) == SlotEntry(slot, 1, epoch + 2)
        assert ("CancelAdopt", (slot, epoch + 1)) in fakes[4].calls  # B's backup decided
        assert ("CancelAdopt", (slot, epoch + 1)) not in fakes[2].calls
        assert c.untold_cancels == {2: {slot: epoch + 1}}
        c.registry.nfs[2].declared_down = False
        c.slot_moves.finish_open_moves()
        await wait_until(lambda: c.untold_cancels == {})
        assert ("CancelAdopt", (slot, epoch + 1)) in fakes[2].calls

    _run(body)
