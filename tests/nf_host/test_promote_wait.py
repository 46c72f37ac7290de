"""A promotion waits, bounded, for the dead primary's state it lacks (nf_host/promote_wait.py,
docs/protocols.md §4): a false alarm's primary is alive and still has it. In-process workers
over loopback TCP, as in test_worker_inprocess."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import pytest

from contract.commands import Promote
from contract.results import PromoteResult
from contract.roles import Role
from contract.shim import Kind
from contract.timing import SWITCH_QUEUE_BOUND
from nf_host.harness import CheckerSink, OutputDedup, Switch, checker_frame
from nf_host.promote_wait import UNNAMED, PrimarySync
from tests.nf_host.inprocess import SLOT, Node, primary_with_backup, run, until
from tests.support.procs import free_port

pytestmark = pytest.mark.unit


def _delivered(*nodes: Node) -> CheckerSink:
    """What the switch forwards of the nodes' output (each input's output once), checked."""
    dedup, sink = OutputDedup(), CheckerSink()
    for n in nodes:
        for f in n.out:
            if dedup.offer(f):
                sink.feed(f)
    return sink


def _promote(c: Node) -> asyncio.Task[PromoteResult]:
    """The controller's `Promote(slots=[SLOT], dead=1)` to C, without a new backup."""
    return asyncio.get_running_loop().create_task(c.w.ask(
        Promote([SLOT], dead=1, backup=0, address="")))


async def _new_backup(a: Node, c: Node, *, primary_told: bool) -> None:
    """C (NF 3) is made A's backup as the controller does: AssignSlots to C, then (if
    `primary_told`) SetBackup to A, whose snapshot C has applied on return."""
    await c.w.command("assign", {"slots": [(SLOT, 1, None)], "as_backup": True, "primary": 1})
    if primary_told:
        a.w.set_backup(3, c.addr)
        await until(lambda: 1 in c.w.primary_sync.synced, "A's snapshot applied at C")


def test_a_backup_given_again_over_the_same_connection_gets_the_snapshot_again() -> None:
    """The busy bench's hang run of 2026-11-28: A's `SetBackup(C)` was answered late (A stalled),
    so the controller recorded no pair, and C, made a spare meanwhile, dropped what it held of
    A; C was then given to A again over A's open connection to it. A, told of the backup it
    already had, sent no snapshot, C lacked it for good and, promoted at a false alarm, took
    older state. Told again, A now sends its snapshot again."""
    async def body() -> None:
        a, c = Node(1), Node(3)
        for n in (a, c):
            await n.w.start()
        try:
            a.w.assign([(SLOT, 1, 1)], as_backup=False)
            await _new_backup(a, c, primary_told=True)
            c.w.set_role(Role.IDLE)  # a spare again: what it held of A is gone
            assert 1 not in c.w.primary_sync.synced
            await _new_backup(a, c, primary_told=True)  # (waits for the snapshot at C)
            assert c.w.primary_sync.lacking(1, [SLOT]) == []
        finally:
            for n in (a, c):
                await n.w.stop()

    run(body)


def test_a_backup_promoted_before_the_primarys_snapshot_waits_for_it() -> None:
    """The hang run's loss (NF 3 failed over to NF 7 100 ms after NF 7 became its backup): A
    lost its backup, so it holds its output; C is made its backup and promoted before A's
    snapshot arrived. Without the wait C started the slot from empty state (counts 1.. again)
    and A's held output was never released; with it, C takes A's state and held output."""
    async def body() -> None:
        a, c = Node(1), Node(3)
        c.w.cfg.promote_wait = 5.0  # (the default is short; the test's host may be slow)
        for n in (a, c):
            await n.w.start()
        try:
            a.w.assign([(SLOT, 1, 1)], as_backup=False)
            a.w.set_backup(9, f"127.0.0.1:{free_port()}")  # a backup that no longer answers
            sw = Switch()
            for no in range(1, 5):
                a.w.on_frame(sw.stamp(SLOT, checker_frame(1, no), 1, 0)[0])
            await _new_backup(a, c, primary_told=False)
            for no in range(5, 9):  # the group rewritten: C gets the copies
                prim, copy = sw.stamp(SLOT, checker_frame(1, no), 1, 3)
                assert copy is not None
                a.w.on_frame(prim)
                c.w.on_frame(copy)
            assert a.w.commit.held_outputs == 8 and a.out == []
            task = _promote(c)
            await until(lambda: c.w.primary_sync.waits == 1, "the promotion waits")
            assert SLOT not in c.w.slots and not task.done()
            a.w.set_backup(3, c.addr)  # A (alive) is told at last: its snapshot reaches C
            res = await task
            assert res.slots == [SLOT] and res.replayed == 0 and res.reemitted == 8
            for no in range(9, 13):  # the switch now sends the slot to C (a batch of 4)
                c.w.on_frame(sw.stamp(SLOT, checker_frame(1, no), 3, 0)[0])
            await until(lambda: _delivered(a, c).received == 12, "every packet delivered")
            sink = _delivered(a, c)
            assert sink.errors == [] and sink.last_count == {1: 12}
            st = c.w.status()
            assert st.gaps == 0 and st.promote_waits == 1 and st.promote_wait_timeouts == 0
        finally:
            for n in (a, c):
                await n.w.stop()

    run(body)


async def _with_hole(wait: float) -> tuple[Node, Node, Switch, list[bytes]]:
    """A (NF 1) owns SLOT and released 1..4; C (NF 3) is its new backup, A's snapshot (through 4)
    applied; 5..8 were stamped before the group rewrite (A has not read them yet: returned) and
    9..12 after it, their copies at C: a hole of 5..8 at C."""
    a, c = Node(1), Node(3)
    c.w.cfg.promote_wait = wait
    for n in (a, c):
        await n.w.start()
    a.w.assign([(SLOT, 1, 1)], as_backup=False)
    sw = Switch()
    for no in range(1, 5):
        a.w.on_frame(sw.stamp(SLOT, checker_frame(1, no), 1, 0)[0])
    await until(lambda: len(a.out) == 4, "A's output released (no backup)")
    await _new_backup(a, c, primary_told=True)
    backlog = [sw.stamp(SLOT, checker_frame(1, no), 1, 0)[0] for no in range(5, 9)]
    for no in range(9, 13):
        prim, copy = sw.stamp(SLOT, checker_frame(1, no), 1, 3)
        assert copy is not None
        backlog.append(prim)
        c.w.on_frame(copy)
    assert c.w.holes() == [SLOT]
    return a, c, sw, backlog


def test_a_promotion_waits_for_the_live_primarys_backlog_then_replays_the_rest() -> None:
    """C's copies start after a hole (packets stamped before the switch sent C copies, still in
    A's backlog): A is alive, processes them and its delta fills the hole; C then promotes and
    replays the rest. Without the wait C skipped 5..8 as a gap and they were lost."""
    async def body() -> None:
        a, c, sw, backlog = await _with_hole(wait=5.0)
        try:
            task = _promote(c)
            await until(lambda: c.w.primary_sync.waits == 1, "the promotion waits")
            for frame in backlog:  # A reads its backlog (the false alarm's primary is alive)
                a.w.on_frame(frame)
            res = await task
            assert res.slots == [SLOT]
            for no in range(13, 17):  # the switch now sends the slot to C (a batch of 4)
                c.w.on_frame(sw.stamp(SLOT, checker_frame(1, no), 3, 0)[0])
            await until(lambda: _delivered(a, c).received == 16, "every packet delivered")
            sink = _delivered(a, c)
            assert sink.errors == [] and sink.last_count == {1: 16}
            assert c.w.status().gaps == 0 and c.w.primary_sync.timeouts == 0
        finally:
            for n in (a, c):
                await n.w.stop()

    run(body)


@pytest.mark.parametrize("end", ["lost", "bound"])
def test_a_promotion_waits_no_longer_than_the_primary_can_send(end: str) -> None:
    """A dead primary's connection ends without a goodbye: the promotion waits no more. One
    that stays silent (hung) is waited for `promote_wait` at most. Either way the hole is then
    skipped as a gap, counted, and a wait to the bound is counted too."""
    async def body() -> None:
        a, c, _sw, _backlog = await _with_hole(wait=20.0 if end == "lost" else 0.2)
        try:
            loop = asyncio.get_running_loop()
            started = loop.time()
            task = _promote(c)
            await until(lambda: c.w.primary_sync.waits == 1, "the promotion waits")
            if end == "lost":
                c.w.on_peer_lost(1)
            res = await task
            assert res.slots == [SLOT] and res.replayed == 4
            assert loop.time() - started < 5.0
            assert c.w.primary_sync.timeouts == (1 if end == "bound" else 0)
            await until(lambda: c.w.status().gaps == 4, "the hole skipped and counted")
        finally:
            for n in (a, c):
                await n.w.stop()

    run(body)


def test_a_late_copy_that_closes_the_hole_ends_the_wait() -> None:
    """The hole is closed by the copies themselves (late at the backup, behind newer ones): the
    promotion goes on as the last one arrives, not at the bound, and replays them all."""
    async def body() -> None:
        a, c, _sw, backlog = await _with_hole(wait=20.0)
        try:
            loop = asyncio.get_running_loop()
            started = loop.time()
            task = _promote(c)
            await until(lambda: c.w.primary_sync.waits == 1, "the promotion waits")
            for frame in backlog[:4]:  # the copies of 5..8, as the switch would have sent them
                copy = bytearray(frame)
                copy[14] = Kind.BACKUP
                c.w.on_frame(bytes(copy))
            res = await task
            assert res.replayed == 8 and loop.time() - started < 5.0
            await until(lambda: c.w.c.packets == 8, "5..12 processed at C")
            assert c.w.status().gaps == 0 and c.w.primary_sync.timeouts == 0
        finally:
            for n in (a, c):
                await n.w.stop()

    run(body)


def test_a_slot_counts_as_held_only_once_its_owner_sent_its_whole_state() -> None:
    """The fix2 bench run: A took over slots with C as its new backup in one step, so its
    snapshot to C (taken just before) held none of them; each came later as a "replace" entry.
    C promoted in between must not count its snapshot as the state of those slots; a delta of
    another NF on top of a whole state leaves a mix, held by nobody."""
    sync = PrimarySync()
    sync.assigned(5)
    assert sync.lacking(5, [1, 2]) == [1, 2]  # no snapshot yet
    sync.snapshot(5)  # (empty: A owned nothing yet)
    assert sync.lacking(5, [1, 2]) == [1, 2]
    sync.whole(1, 5)  # A's replace entry of slot 1
    assert sync.lacking(5, [1, 2]) == [2]
    sync.delta(1, 5)  # A's own deltas keep it
    sync.delta(1, 6)  # another owner's delta on top: a mix
    assert sync.lacking(5, [1, 2]) == [1, 2]
    sync.whole(2, UNNAMED)  # an adoption's state ("xs"), named by the primary's next delta
    sync.delta(2, 5)
    assert sync.lacking(5, [1, 2]) == [1]
    sync.forget([2], primary=5)  # promoted here: no longer backed up
    assert sync.lacking(5, [1]) == [1] and 5 not in sync.backing


def test_an_empty_slot_taken_over_reaches_the_new_backup_with_its_generation() -> None:
    """A promoted slot with no flows used to be shipped only with its first packet: the new
    backup kept an older owner generation for it, and, promoted in turn, started one its peers
    took for a zombie's and refused every delta of (the fix3 bench run: 1,471 outputs held
    behind a backup that refused them, then dropped)."""
    async def body() -> None:
        a, b, c = Node(1), Node(2), Node(3)
        for n in (a, b, c):
            await n.w.start()
        try:
            await primary_with_backup(a, b)  # no packet yet: SLOT has no flows
            await c.w.command("assign", {"slots": [(SLOT, 1, None)], "as_backup": True,
                                         "primary": 2})
            res = await b.w.command("promote", {"slots": [SLOT], "dead": 1, "backup": 3,
                                                "address": c.addr})
            assert isinstance(res, PromoteResult)
            assert res.slots == [SLOT] and b.w.slots[SLOT].state.gen == 1
            await until(lambda: SLOT in c.w.replicas and c.w.replicas[SLOT].gen == 1,
                        "the new owner's generation at its backup")
            assert c.w.primary_sync.lacking(2, [SLOT]) == []
        finally:
            for n in (a, b, c):
                await n.w.stop()

    run(body)


def _timed_wait(feed_until: float, longest: float, second: bool = False,
                hole: bool = True, may_live: bool = False,
                snapshot_at: float | None = None, complete: bool = False,
                fresh: bool = False) -> tuple[float, str, str]:
    """In virtual time: a promotion of slot 5 for primary 1 lacking copies (a hole; else, A's
    snapshot) waits with a silence bound of 0.1 s and `longest` in all, while the primary's
    deltas come every 50 ms until `feed_until`; with `second`, a Promote asked again joins it;
    `may_live` as the controller's Promote says; A's snapshot arrives at `snapshot_at`, if
    given; `complete`: C holds A's snapshot and no hole; `fresh`: C became A's backup just
    now (else long ago). Returns when the wait ended and both waits' words."""
    from sim.loop import run as run_virtual

    async def body() -> tuple[float, str, str]:
        loop = asyncio.get_running_loop()
        ps = PrimarySync()
        ps.assigned(1)  # (without `hole`, A's snapshot never comes: C lacks it to the end)
        if not fresh:
            ps.assigned_at[1] -= SWITCH_QUEUE_BOUND
        if hole or complete:
            ps.snapshot(1)
            ps.whole(5, 1)

        async def feed() -> None:
            while loop.time() < feed_until:
                ps.delta(5, 1)
                await asyncio.sleep(0.05)

        feeder = loop.create_task(feed())
        def snapshot_comes() -> None:
            ps.snapshot(1)
            ps.whole(5, 1)

        if snapshot_at is not None:
            loop.call_later(snapshot_at, snapshot_comes)

        def holes(slots: Iterable[int]) -> list[int]:
            return list(slots) if hole and not complete else []  # (never filled here)

        first = loop.create_task(ps.wait(1, [5], holes, 0.1, longest, may_live))
        joined = loop.create_task(ps.wait(1, [5], holes, 0.1, longest, may_live)) \
            if second else None
        how = await first
        ended = loop.time()
        again = await joined if joined is not None else ""
        feeder.cancel()
        return ended, how, again

    return run_virtual(body())


def test_a_promotion_waits_while_a_slow_primarys_deltas_keep_coming() -> None:
    """`make bench-failover --busy 2`'s hang run: a backup given to A a moment before, promoted
    when A was (falsely) suspected, waited 500 ms, then skipped as a gap what A, alive but
    seconds behind, was still working through (759 packets of 6 flows). The wait now goes on
    `promote_wait` past A's last delta, up to `promote_wait_max`."""
    ended, how, _ = _timed_wait(feed_until=0.6, longest=2.0)
    assert 0.6 <= ended <= 0.75, ended  # 0.1 s after the last delta, not 0.1 s after the start
    assert "until the bound" in how
    ended, _, _ = _timed_wait(feed_until=0.0, longest=2.0)
    assert ended <= 0.15  # a silent primary (hung, or dead without a goodbye) is not waited for
    ended, _, _ = _timed_wait(feed_until=5.0, longest=1.0)
    assert 1.0 <= ended <= 1.05  # a primary that never catches up: `promote_wait_max` in all
    ended, how, _ = _timed_wait(feed_until=0.6, longest=2.0, hole=False)
    # a snapshot A does not know it owes never comes, however long its deltas do (simulation
    # seed 59: the extended wait outlived the NF being promoted)
    assert ended <= 0.15 and "lacked its snapshot" in how


def test_a_snapshot_of_a_primary_that_may_live_is_waited_for_through_its_silence() -> None:
    """`make bench-failover --busy 2`'s hang run (2,338 lost): NF 6, stalled, was given NF 2 as
    its backup and declared down 0.5 s later, before its snapshot came; NF 2 waited 500 ms,
    promoted older replicas, and its new backup, holding newer ones, refused all its deltas.
    Declared down on silence alone, A may be alive: the snapshot it owes comes once it runs
    again, with nothing heard of it meanwhile, so it is waited for up to `promote_wait_max`."""
    ended, how, _ = _timed_wait(feed_until=0.0, longest=2.0, hole=False, may_live=True,
                                snapshot_at=1.2)
    assert 1.2 <= ended <= 1.25 and "until complete" in how, (ended, how)
    ended, how, _ = _timed_wait(feed_until=0.0, longest=2.0, hole=False, may_live=True)
    assert 2.0 <= ended <= 2.05 and "until the bound" in how  # never comes: the bound
    # its connection closed (a crash): the controller does not say it may live
    ended, how, _ = _timed_wait(feed_until=0.0, longest=2.0, hole=False, snapshot_at=1.2)
    assert ended <= 0.15 and "until the bound" in how


def test_a_backup_given_just_now_waits_until_the_primarys_deltas_stop() -> None:
    """`make bench-failover --busy 2`'s loop-echo hang run: NF 5 was made NF 9's backup, and NF
    9 (alive, starved) failed over to it 60 ms later. NF 5 held NF 9's snapshot and no copy
    showed a hole yet; it promoted at once, refused the deltas NF 9 sent of the packets
    stamped before the switch's copies to NF 5 began, and skipped them as a gap (56 lost).
    A backup given less than the switch queue bound ago, promoted for a primary that may
    live, waits until that primary's deltas stop (the group write cut its input)."""
    ended, how, _ = _timed_wait(feed_until=0.6, longest=2.0, complete=True, fresh=True,
                                may_live=True)
    assert 0.6 <= ended <= 0.75 and "until its deltas stopped" in how, (ended, how)
    assert "a new backup" in how
    ended, how, _ = _timed_wait(feed_until=5.0, longest=1.0, complete=True, fresh=True,
                                may_live=True)
    assert 1.0 <= ended <= 1.05 and "until the bound" in how  # deltas that never stop
    # a crash (its connection closed), or a backup of long standing: no wait at all
    for kw in ({"fresh": True}, {"may_live": True}):
        ended, how, _ = _timed_wait(feed_until=0.6, longest=2.0, complete=True, **kw)
        assert ended == 0.0 and how == "", kw


def test_a_promote_asked_again_joins_the_wait_under_way() -> None:
    """The controller asks a Promote again after 2 s without a reply: the second joins the
    first's wait (one wait, one log line), instead of starting its own and delaying the reply."""
    ended, how, again = _timed_wait(feed_until=0.3, longest=2.0, second=True)
    assert "a hole" in how and again == ""
    assert 0.3 <= ended <= 0.45
