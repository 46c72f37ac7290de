"""A backup that takes over by itself when its primary's replication link closes without a
goodbye (docs/protocols.md §4.3): in-process workers over real loopback TCP, as in
test_worker_inprocess."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from contract.replication import Delta, SlotRow, encode
from contract.results import PromoteResult
from contract.roles import SlotRole
from nf_host.harness import CheckerSink, OutputDedup, Switch, checker_frame
from nf_host.peer_policy import hello
from tests.nf_host.inprocess import SLOT, Node, primary_with_backup, run, until

pytestmark = pytest.mark.unit


async def _feed(a: Node | None, b: Node, sw: Switch, numbers: range) -> None:
    """Packets of flow 1 numbered `numbers`: to `a` (None: it is dead) and a copy to `b`."""
    for no in numbers:
        p, c = sw.stamp(SLOT, checker_frame(1, no), 1, 2)
        assert c is not None
        if a is not None:
            a.w.on_frame(p)
        b.w.on_frame(c)


def _kill_link(a: Node, how: str) -> None:
    """What the kernel does to a killed process's connection to its backup: a reset, or the end
    of the stream (no goodbye either way)."""
    writer = a.w.links[2].writer
    assert writer is not None
    if how == "reset":
        writer.transport.abort()
    else:
        writer.transport.close()
    a.w.links[2].closed = True  # (and it never reconnects)


@contextlib.asynccontextmanager
async def armed(primary_to: int = 1, successor: int = 3,
                start_successor: bool = True) -> AsyncIterator[tuple[Node, Node, Node, Switch]]:
    """A (NF 1) owns SLOT with backup B (NF 2), which is armed to take over from NF
    `primary_to` with NF `successor` (C, NF 3, started if `start_successor`); A has released
    the output of packets 1..4."""
    a, b, c = Node(1), Node(2), Node(3)
    nodes = [a, b, c] if start_successor else [a, b]
    for n in nodes:
        await n.w.start()
    try:
        await primary_with_backup(a, b)
        b.w.arm_takeover(primary_to, successor, c.addr if successor else "")
        sw = Switch()
        await _feed(a, b, sw, range(1, 5))
        await until(lambda: len(a.out) == 4, "A's output released")
        yield a, b, c, sw
    finally:
        for n in (a, b, c):
            await n.w.stop()


def _delivered(*nodes: Node) -> CheckerSink:
    dedup, sink = OutputDedup(), CheckerSink()
    for n in nodes:
        for f in n.out:
            if dedup.offer(f):
                sink.feed(f)
    return sink


@pytest.mark.parametrize("how", ["reset", "eof"])
def test_an_armed_backup_takes_over_when_its_primarys_link_dies(how: str) -> None:
    async def body() -> None:
        async with armed() as (a, b, c, sw):
            await _feed(a, b, sw, range(5, 9))
            await until(lambda: len(a.out) == 8, "A's output released")
            _kill_link(a, how)
            await _feed(None, b, sw, range(9, 13))  # the copies of what A never processed
            await until(lambda: b.w.slots.get(SLOT) is not None
                        and b.w.slots[SLOT].role == SlotRole.PRIMARY, "B promoted itself")
            assert b.w.backup_id == 3 and b.w.c.self_promotions == 1
            assert b.w.status().took_over_from == [1]
            await until(lambda: _delivered(a, b).received == 12, "every packet delivered")
            sink = _delivered(a, b)
            assert sink.errors == [] and sink.last_count == {1: 12}
            # the successor holds the state of what B released
            assert c.w.replicas[SLOT].last_seq == 12
            # the controller's Promote that follows changes nothing and clears the report
            res = await b.w.command("promote", {"slots": [SLOT], "dead": 1, "backup": 3,
                                                "address": c.addr})
            assert isinstance(res, PromoteResult)
            assert res.replayed == 0 and b.w.status().took_over_from == []

    run(body)


def test_a_takeover_releases_nothing_until_the_successor_holds_the_state() -> None:
    async def body() -> None:
        async with armed(start_successor=False) as (a, b, c, sw):  # C is not running yet
            _kill_link(a, "reset")
            await _feed(None, b, sw, range(5, 9))
            await until(lambda: SLOT in b.w.slots and b.w.slots[SLOT].role == SlotRole.PRIMARY
                        and b.w.c.packets == 4, "B promoted, the 4 copies processed")
            held = b.w.commit.held_outputs  # theirs, and A's logged output sent again
            await asyncio.sleep(0.1)  # (time for a wrong release; nothing waits on this)
            # (only what A had released may have left again: duplicates, nothing new)
            assert _delivered(a, b).received == 4
            assert held >= 4 and b.w.commit.held_outputs == held
            await c.w.start()
            await until(lambda: _delivered(a, b).received == 8, "released once C acknowledged")
            assert c.w.replicas[SLOT].last_seq == 8

    run(body)


def test_what_the_primary_had_released_leaves_again_at_once_the_rest_after_the_ack() -> None:
    """A's logged output up to its released watermark needs no ack to leave again (it had left);
    what A may not have released waits for the successor's ack like any new output."""
    async def body() -> None:
        async with armed(start_successor=False) as (a, b, c, sw):
            await _feed(a, b, sw, range(5, 9))  # batch 2; its delta tells B batch 1 has left
            await until(lambda: len(a.out) == 8, "A's output released")
            _kill_link(a, "eof")
            await until(lambda: len(b.out) == 4, "batch 1's output sent again at once")
            assert [bytes(f) for f in b.out] == [bytes(f) for f in a.out[:4]]
            assert b.w.commit.held_outputs == 4 and b.w.c.reemitted == 8
            await c.w.start()
            await until(lambda: len(b.out) == 8, "batch 2's output, once C acknowledged")
            assert [bytes(f) for f in b.out[4:]] == [bytes(f) for f in a.out[4:]]
            assert len(c.w.out_log.take(2)) == 8  # C logged both (if B dies, it sends them)

    run(body)


def test_a_backup_armed_without_a_successor_takes_over_unprotected() -> None:
    """No NF qualified as a successor: the backup takes over without a backup, as the
    controller's fail-over would, and releases at once."""
    async def body() -> None:
        async with armed(successor=0, start_successor=False) as (a, b, _c, sw):
            _kill_link(a, "eof")
            await _feed(None, b, sw, range(5, 9))
            await until(lambda: _delivered(a, b).received == 8, "every packet delivered")
            assert b.w.backup_id == 0 and b.w.c.self_promotions == 1

    run(body)


@pytest.mark.parametrize("case", ["goodbye", "disarmed", "other_sender"])
def test_no_takeover_without_an_armed_backup_and_a_lost_link(case: str) -> None:
    async def body() -> None:
        async with armed(primary_to=4 if case == "other_sender" else 1) as (a, b, _c, _sw):
            if case == "disarmed":
                b.w.arm_takeover(0, 0, "")
            if case == "goodbye":
                await a.w.stop()  # closes its links on purpose, with a goodbye
            else:
                _kill_link(a, "reset")
            lost = asyncio.Event()

            def on_lost(nf: int) -> None:
                b.w.on_peer_lost(nf)
                lost.set()

            assert b.w.server is not None
            b.w.server.on_lost = on_lost
            if case != "goodbye":
                await asyncio.wait_for(lost.wait(), 5)
            else:
                await until(lambda: not b.w.server._conns, "the connection closed")  # type: ignore[union-attr]
            assert SLOT not in b.w.slots and b.w.c.self_promotions == 0 and b.w.backup_id == 0

    run(body)


def test_a_primarys_older_connection_is_closed_unapplied_and_its_end_is_no_death() -> None:
    """A sender has one connection at a time: once it connects again, what still arrives on its
    older connection (frames retransmitted after a network cut, older than the snapshot the new
    connection starts with) must not be applied, and that connection's end is no death. Seen
    with a management-link cut: the stale deltas rolled the backup's replica back, then the old
    connection's reset started a takeover from that state while the primary lived."""
    async def body() -> None:
        async with armed() as (a, b, _c, sw):
            a.w.links[2].closed = True  # (its link does not reconnect by itself here)
            assert b.w.server is not None
            server = b.w.server
            count = b.w.replicas[SLOT].flows
            before = {k: dict(v) for k, v in count.items()}
            old_r, old = await asyncio.open_connection("127.0.0.1", b.port)
            old.write(encode(hello(1, 0, 1)))
            await until(lambda: server.superseded == 1, "A's link superseded")
            _r, newer = await asyncio.open_connection("127.0.0.1", b.port)
            newer.write(encode(hello(1, 0, 1)))
            await until(lambda: server.superseded == 2, "the older connection superseded")
            stale = Delta(99, [SlotRow(SLOT, 1, 1, 2, [[k, {"count": 1}] for k in before])],
                          sender=1)
            old.write(encode(stale))  # (the server has closed it: nothing is read any more)
            with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
                assert await asyncio.wait_for(old_r.read(), 5) == b""  # closed, no ack
            assert {k: dict(v) for k, v in b.w.replicas[SLOT].flows.items()} == before
            await _feed(None, b, sw, range(5, 7))
            assert SLOT not in b.w.slots and b.w.c.self_promotions == 0
            newer.transport.abort()  # the newest ends: the primary is dead
            await until(lambda: b.w.c.self_promotions == 1, "the takeover")

    run(body)


IDLE = SLOT + 1  # a second slot of A's that B backs up and nothing is sent to


def test_a_takeover_keeps_its_peers_and_idle_slots_waiting_until_its_first_output_left() -> None:
    """The quiet window (nf_host/quiet_window.py): from the promotion until the first output of
    the promoted slots leaves, what B sends its cluster peer D is held on the link and its idle
    slot is not promoted; both follow once C acknowledged and the output left."""
    async def body() -> None:
        async with armed(start_successor=False) as (a, b, c, sw):  # C is not running yet
            d = Node(4)
            await d.w.start()
            try:
                b.w.assign([(IDLE, 1, 1)], as_backup=True)
                b.w.set_peers([(4, d.addr)])
                await until(lambda: 4 in b.w.links and b.w.links[4].writer is not None,
                            "B's link to its peer D")
                b.w.quiet.max_s = 30.0  # (the window ends with the first output, not by time)
                _kill_link(a, "reset")
                await _feed(None, b, sw, range(5, 9))
                await until(lambda: SLOT in b.w.slots and b.w.slots[SLOT].role == SlotRole.PRIMARY
                            and b.w.c.packets == 4, "B promoted, the 4 copies processed")
                await asyncio.sleep(0.1)  # (time for a wrong send or promotion; nothing waits)
                assert b.w.quiet.active
                assert b.w.links[4].corked and b.w.links[4].backlog() > 0
                assert SLOT not in d.w.replicas  # nothing reached the peer
                assert IDLE not in b.w.slots and IDLE in b.w.replicas  # not promoted yet
                await c.w.start()
                await until(lambda: _delivered(a, b).received == 8, "released once C acked")
                await until(lambda: SLOT in d.w.replicas and d.w.replicas[SLOT].last_seq == 8,
                            "the peer's replica, once the output left")
                await until(lambda: IDLE in b.w.slots and b.w.slots[IDLE].role == SlotRole.PRIMARY,
                            "the idle slot promoted, once the output left")
                assert not b.w.quiet.active and not b.w.links[4].corked
            finally:
                await d.w.stop()

    run(body)


def test_the_quiet_window_ends_by_itself_and_can_be_turned_off() -> None:
    """A takeover without traffic never releases an output: its window ends after `max_s`."""
    from nf_host.quiet_window import QuietWindow

    async def body() -> None:
        ended: list[int] = []
        win = QuietWindow(lambda: ended.append(1), max_s=0.02, on=True)
        win.begin()
        assert win.active
        await asyncio.wait_for(win.over(), 5)  # the timer ended it
        assert not win.active and ended == [1]
        win.end()  # (ending an ended window does nothing)
        assert ended == [1]
        win.begin()
        win.end()  # the first output left: at once
        assert ended == [1, 1]
        off = QuietWindow(lambda: ended.append(2), on=False)
        off.begin()
        assert not off.active
        await asyncio.wait_for(off.over(), 1)
        assert ended == [1, 1]

    run(body)


def test_a_peer_made_the_backup_during_the_quiet_window_is_sent_to_at_once() -> None:
    """If the new backup is a peer whose link the window holds (the controller chose another
    successor than the armed one), its link is released: the output waits for its ack only."""
    async def body() -> None:
        async with armed(start_successor=False) as (a, b, _c, sw):  # the armed C never runs
            d = Node(4)
            await d.w.start()
            try:
                b.w.set_peers([(4, d.addr)])
                await until(lambda: 4 in b.w.links and b.w.links[4].writer is not None,
                            "B's link to its peer D")
                b.w.quiet.max_s = 30.0
                _kill_link(a, "reset")
                await _feed(None, b, sw, range(5, 9))
                await until(lambda: b.w.links[4].corked, "the peer's link held")
                b.w.set_backup(4, d.addr)  # the controller's choice: D
                await until(lambda: _delivered(a, b).received == 8, "released once D acked")
                assert d.w.replicas[SLOT].last_seq == 8
            finally:
                await d.w.stop()

    run(body)
