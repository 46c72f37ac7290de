"""The worker engine in-process: two or three `Worker`s on one event loop, replicating over real
loopback TCP, fed frames directly (no namespaces; scaffolding in tests/nf_host/inprocess.py).
Deterministic checks of output commit, promotion and replication accounting that the namespace
tests can only observe from outside; the moves' are in test_worker_moves_inprocess.py."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from contract.results import PromoteResult
from contract.roles import Role, SlotRole
from nf_host.harness import CheckerSink, OutputDedup, Switch, checker_frame, strip_shim
from tests.nf_host.inprocess import (
    SLOT,
    Node,
    primary_with_backup,
    run,
    running,
    to_primary_and_backup,
    until,
)
from tests.support.procs import free_port

pytestmark = pytest.mark.unit


def test_output_waits_for_the_backup_ack_then_promotion_replays() -> None:
    async def body() -> None:
        a, b = Node(1), Node(2)
        async with running(a, b):
            await primary_with_backup(a, b)
            sw = Switch()
            for no in range(1, 9):
                p, c = sw.stamp(SLOT, checker_frame(1, no), 1, 2)
                assert c is not None
                a.w.on_frame(p)
                b.w.on_frame(c)
            # two batches of 4 closed; no event-loop turn yet, so no ack: nothing released
            assert a.out == [] and a.w.commit.held_outputs == 8
            await until(lambda: len(a.out) == 8, "release after ack")
            assert b.w.replicas[SLOT].last_seq == 8 and b.w.inbuf.count(SLOT) == 0
            # the next 3 packets reach only the backup (the primary died)
            for no in range(9, 12):
                _p, c = sw.stamp(SLOT, checker_frame(1, no), 1, 2)
                assert c is not None
                b.w.on_frame(c)
            res = b.w.promote([SLOT])
            # the 8 outputs A released are logged still (no later delta said they had left):
            # they are sent again, and the switch drops them
            assert res == PromoteResult(replayed=3, slots=[SLOT], reemitted=8)
            assert b.w.slots[SLOT].role == SlotRole.PRIMARY
            sink = CheckerSink()
            dedup = OutputDedup()
            for f in a.out + b.out:
                if dedup.offer(f):
                    sink.feed(f)
            assert sink.errors == [] and sink.last_count == {1: 11} and dedup.dropped == 8

    run(body)


def test_replication_garbage_is_counted() -> None:
    async def body() -> None:
        a = Node(1)
        await a.w.start()
        try:
            from contract.replication import Delta, encode
            from tests.nf_host.raw_frames import raw_frame

            bad = [
                raw_frame({"t": "d", "b": 1, "s": [[1, 1, 1, 1, [[["unhashable"], {}]]]]}),
                raw_frame({"t": "zz"}),
                b"\xff\xff\xff\xff",  # a frame over the size limit
            ]
            for n, data in enumerate(bad, 1):
                r, w = await asyncio.open_connection("127.0.0.1", a.port)
                w.write(data + encode(Delta(2, [])))
                await w.drain()
                # each closes the connection: what follows is not handled (nor acknowledged)
                assert await r.read() == b""
                w.close()
                st = a.w.status()
                # the oversized frame is refused (counted with the refusals), the others are errors
                assert (st.repl_errors, st.repl_refused) == ((n, 0) if n < 3 else (2, 1))
            assert a.w.status().repl_refusals == {"frame": 1}
        finally:
            await a.w.stop()

    run(body)


def test_promotion_before_any_delta_counts_the_copies_that_never_arrived() -> None:
    async def body() -> None:
        b = Node(2)
        await b.w.start()
        try:
            b.w.assign([(SLOT, 1, 1)], as_backup=True)  # the primary dies before its first batch
            sw = Switch()
            copies = [sw.stamp(SLOT, checker_frame(1, no), 1, 2)[1] for no in range(1, 4)]
            for c in copies[1:]:  # copy 1 was lost on the wire
                assert c is not None
                b.w.on_frame(c)
            assert b.w.promote([SLOT]).replayed == 2
            rt = b.w.slots[SLOT]
            assert rt.packets == 0 and rt.seq.next_expected == 1, "waits for number 1"
            b.w.expire_gaps(time.monotonic() + 1.0)
            assert rt.packets == 2 and rt.seq.gaps == 1
        finally:
            await b.w.stop()

    run(body)


def test_primary_and_backup_across_the_sequence_wrap() -> None:
    async def body() -> None:
        a, b = Node(1), Node(2)
        async with running(a, b):
            start = 0xFFFFFFFD
            a.w.assign([(SLOT, 1, start)], as_backup=False)
            b.w.assign([(SLOT, 1, start)], as_backup=True)
            a.w.set_backup(2, b.addr)
            await until(lambda: a.w.links[2].writer is not None, "backup link")
            sw = Switch(next_seq={SLOT: start})
            for no in range(1, 9):
                p, c = sw.stamp(SLOT, checker_frame(1, no), 1, 2)
                assert c is not None
                a.w.on_frame(p)
                b.w.on_frame(c)
            await until(lambda: len(a.out) == 8, "output across the wrap")
            assert [strip_shim(f)[0].seq for f in a.out] == [start, start + 1, start + 2, 0, 1, 2, 3, 4]
            assert b.w.replicas[SLOT].last_seq == 4 and b.w.inbuf.count(SLOT) == 0
            for no in range(9, 11):  # the primary dies; these reach only the backup
                _p, c = sw.stamp(SLOT, checker_frame(1, no), 1, 2)
                assert c is not None
                b.w.on_frame(c)
            assert b.w.promote([SLOT]).replayed == 2
            sink = CheckerSink()
            dedup = OutputDedup()  # across the wrap, too
            for f in a.out + b.out:
                if dedup.offer(f):
                    sink.feed(f)
            assert sink.errors == [] and sink.last_count == {1: 10}

    run(body)


def test_output_acked_but_never_sent_by_a_dying_primary_is_sent_by_the_promoted_backup() -> None:
    """The primary dies after its backup acknowledged a batch but before the batch's output left
    (the old "known window"): the backup logged that output and sends it again on promotion; the
    switch (modelled by OutputDedup) forwards each input's output exactly once."""
    async def body() -> None:
        a, b = Node(1), Node(2)
        for n in (a, b):
            await n.w.start()
        try:
            await primary_with_backup(a, b)
            sw = Switch()
            to_primary_and_backup(sw, a, b, range(1, 5))  # batch 1: released normally
            await until(lambda: len(a.out) == 4, "batch 1 released")
            a.w.tx = lambda frame: None  # A "dies" inside its release: nothing leaves now
            for no in range(5, 9):  # batch 2: acknowledged by the backup, never sent by A
                p, c = sw.stamp(SLOT, checker_frame(1, no), 1, 2)
                assert c is not None
                a.w.on_frame(p)
                b.w.on_frame(c)
            await until(lambda: b.w.replicas[SLOT].last_seq == 8 and a.w.commit.held_outputs == 0,
                        "batch 2 acknowledged")
            await a.w.stop()
            res = b.w.promote([SLOT], dead=1)
            assert res.replayed == 0 and res.reemitted >= 4
            dedup = OutputDedup()
            sink = CheckerSink()
            for f in [*a.out, *b.out]:
                if dedup.offer(f):
                    sink.feed(f)
            assert sink.errors == [] and sink.last_count == {1: 8} and sink.received == 8
        finally:
            await b.w.stop()

    run(body)


def test_a_failed_over_nf_that_comes_back_as_a_spare_drops_its_slots_and_output() -> None:
    """A hung primary that was failed over and resumes is reconfigured idle: it forgets its
    slots and held output, so it never processes or releases anything of them again."""
    async def body() -> None:
        a = Node(1)
        await a.w.start()
        try:
            a.w.assign([(SLOT, 1, 1)], as_backup=False)
            a.w.set_backup(9, f"127.0.0.1:{free_port()}")  # a backup that never answers
            sw = Switch()
            for no in range(1, 5):
                p, _c = sw.stamp(SLOT, checker_frame(1, no), 1, 0)
                a.w.on_frame(p)
            assert a.w.commit.held_outputs == 4 and a.out == []
            await a.w.command("set_role", {"role": 3})  # IDLE: a spare again
            assert a.w.slots == {} and a.w.commit.held_outputs == 0 and a.w.backup_id == 0
            p, _c = sw.stamp(SLOT, checker_frame(1, 5), 1, 0)
            a.w.on_frame(p)
            await asyncio.sleep(0)
            assert a.out == [] and a.w.c.unowned == 1
        finally:
            await a.w.stop()

    run(body)


def test_a_backup_reconfigured_as_a_backup_keeps_its_replica_and_copies() -> None:
    """After a false alarm the controller configures a live backup again, in the same role:
    nothing it holds may be dropped (it would be promoted with an empty replica)."""
    async def body() -> None:
        b = Node(2)
        await b.w.start()
        try:
            await b.w.command("set_role", {"role": 2})
            b.w.assign([(SLOT, 1, 1)], as_backup=True)
            sw = Switch()
            _p, c = sw.stamp(SLOT, checker_frame(1, 1), 1, 2)
            assert c is not None
            b.w.on_frame(c)
            assert b.w.inbuf.count(SLOT) == 1
            await b.w.command("set_role", {"role": 2})  # the same role again
            assert SLOT in b.w.backed_up and b.w.inbuf.count(SLOT) == 1
        finally:
            await b.w.stop()

    run(body)


def test_replication_bytes_are_counted_by_peer_each_way() -> None:
    """The counters behind the experiments' migration-overhead tables: what one NF sends to its
    backup is what the backup received from it, and the transfer of a move is counted apart."""

    async def body() -> None:
        a, b, c = Node(1), Node(2), Node(3)
        async with running(a, b, c):
            a.w.assign([(SLOT, 1, 1)], as_backup=False)
            b.w.assign([(SLOT, 1, 1)], as_backup=True)
            a.w.set_backup(2, b.addr)
            a.w.set_peers([(3, c.addr)])
            await until(lambda: all(i in a.w.links and a.w.links[i].writer is not None
                                    for i in (2, 3)), "links")
            sw = Switch()
            for no in range(1, 9):
                p, cp = sw.stamp(SLOT, checker_frame(1, no), 1, 2)
                assert cp is not None
                a.w.on_frame(p)
                b.w.on_frame(cp)
            await until(lambda: len(a.out) == 8, "release after ack")
            await until(lambda: c.w.replicas.get(SLOT) is not None
                        and c.w.replicas[SLOT].last_seq == 8, "peer delta")
            sa, sb, sc = a.w.repl_bytes(), b.w.repl_bytes(), c.w.repl_bytes()
            assert sa.repl_tx_bytes[2] == sb.repl_rx_bytes[1] > 0
            assert sa.repl_tx_bytes[3] == sc.repl_rx_bytes[1] > 0
            assert sb.repl_tx_bytes == {} and sa.transfer_tx_bytes == 0
            c.w.adopt(SLOT, 2)
            res = await a.w.release(SLOT, 3, c.addr, same_cluster=True)
            assert c.w.repl_bytes().transfer_rx_bytes == res.bytes_shipped \
                == a.w.repl_bytes().transfer_tx_bytes > 0

    run(body)


def test_a_link_named_backup_reconnects_at_once_not_after_its_back_off() -> None:
    """A link backing off (its peer refused or was down: the waits grow to a second) is needed
    the moment it becomes the backup link: output waits for it. `set_backup` (and `set_peers`)
    cut the wait short. Here the wait is made a minute long: only the kick can connect it."""
    async def body() -> None:
        a, b = Node(1), Node(2)
        await a.w.start()
        try:
            a.w.set_peers([(2, b.addr)])  # b is not running yet: refused
            link = a.w.links[2]
            link.retry = 60.0  # after that refusal, wait a minute
            await until(lambda: link.waiting, "the first refusal and the long wait")
            await b.w.start()
            b.w.assign([(SLOT, 1, 1)], as_backup=True)
            a.w.set_backup(2, b.addr)
            await until(lambda: link.writer is not None, "the backup link connected", timeout=10)
            assert link.attempts == 2
        finally:
            for n in (a, b):
                await n.w.stop()

    run(body)


def test_a_promotion_logs_when_its_first_output_is_released(caplog: pytest.LogCaptureFixture) -> None:
    """The fail-over bench measures takeover at the promoted NF from this line: it appears once,
    when the first batch with output of a promoted slot leaves, after the new backup's ack."""
    async def body() -> None:
        b, c = Node(2), Node(3)
        async with running(b, c):
            b.w.assign([(SLOT, 1, 1)], as_backup=True)
            sw = Switch()
            for no in range(1, 4):  # the primary died before any delta: 3 copies to replay
                _p, copy = sw.stamp(SLOT, checker_frame(1, no), 1, 2)
                assert copy is not None
                b.w.on_frame(copy)
            with caplog.at_level(logging.INFO, logger="nf_host.worker"):
                b.w.set_backup(3, c.addr)
                b.w.promote([SLOT], dead=1)
                assert b.out == []  # held for the new backup's ack
                await until(lambda: len(b.out) == 3, "output after the new backup's ack")
                p, _c = sw.stamp(SLOT, checker_frame(1, 4), 2, 3)
                b.w.on_frame(p)
                b.w.close_batch()
                await until(lambda: len(b.out) == 4, "the next output")
            lines = [r.getMessage() for r in caplog.records if "takeover:" in r.getMessage()]
            assert len(lines) == 1 and "first output of the promoted slots released" in lines[0]

    run(body)


def test_a_promotion_takes_the_busy_slots_first_and_the_idle_ones_a_few_per_turn() -> None:
    """`promote_soon` (the Promote command): the slots with copies or state first, in one step
    with the dead primary's logged output, then the idle ones a chunk per event-loop turn. A
    packet that reaches an idle slot before its turn promotes that slot at once."""
    async def body() -> None:
        b = Node(2)
        await b.w.start()
        try:
            idle = [SLOT + 2 * i for i in range(1, 6)]
            b.w.assign([(s, 1, 1) for s in [SLOT, *idle]], as_backup=True)
            sw = Switch()
            _p, copy = sw.stamp(SLOT, checker_frame(1, 1), 1, 2)
            assert copy is not None
            b.w.on_frame(copy)
            calls: list[list[int]] = []
            real = b.w.promotion._promote

            def spy(chosen: list[int], dead: int, measured: list[int]) -> PromoteResult:
                calls.append(list(chosen))
                if len(calls) == 2:  # mid-way: a packet for the last idle slot, not promoted yet
                    p, _c = sw.stamp(idle[-1], checker_frame(2, 1), 2, 3)
                    b.w.on_frame(p)
                    assert b.w.slots[idle[-1]].role == SlotRole.PRIMARY
                    assert b.w.inbuf.count(idle[-1]) == 0
                return real(chosen, dead, measured)

            b.w.promotion._promote = spy  # type: ignore[method-assign]
            res = await b.w.promote_soon([SLOT, *idle], dead=1, chunk=2)
            assert calls == [[SLOT], idle[0:2], [idle[-1]], idle[2:4]]
            assert sorted(res.slots) == sorted([SLOT, *idle]) and res.replayed == 1
            assert all(b.w.slots[s].role == SlotRole.PRIMARY for s in [SLOT, *idle])
            assert len(b.out) == 2  # no backup: both outputs left
        finally:
            await b.w.stop()

    run(body)


def test_a_spare_promoted_then_failed_over_drops_its_slots_when_made_idle_again() -> None:
    """A restarted NF is idle; given slots to back up (no SetRole: the pool's spare becomes a
    backup by AssignSlots) and promoted, it owns slots. Failed over while alive, it is set IDLE
    again: it must drop them, not keep them because it "already was" idle (two owners of a slot
    were seen in a hang run, each refusing the other's deltas, the flows' output held for good)."""
    async def body() -> None:
        b = Node(2)
        await b.w.start()
        try:
            roles = []
            b.w.set_role(Role.IDLE)
            b.w.assign([(SLOT, 1, 1)], as_backup=True)
            roles.append(b.w.role)
            b.w.promote([SLOT], dead=1)
            assert b.w.slots[SLOT].role == SlotRole.PRIMARY
            roles.append(b.w.role)
            b.w.set_role(Role.IDLE)
            roles.append(b.w.role)
            assert SLOT not in b.w.slots and roles == [Role.BACKUP, Role.PRIMARY, Role.IDLE]
        finally:
            await b.w.stop()

    run(body)


def test_frames_of_another_ethertype_are_foreign_not_malformed_nor_drops() -> None:
    """What an NF's interface may carry that is not nfcluster's (an IPv6 router solicitation,
    LLDP, a frame of the management network) is counted apart and is no drop: a loss summary
    must not take it for a lost packet. A shim frame that cannot be processed is malformed."""
    a = Node(1)
    ipv6_rs = bytes(12) + b"\x86\xdd" + bytes(48)
    lldp = bytes(12) + b"\x88\xcc" + bytes(46)
    for frame in (ipv6_rs, lldp, bytes(60)):  # the last: all zeros, EtherType 0
        a.w.on_frame(frame)
    for frame in (b"\x00" * 10,                                   # not even Ethernet
                  bytes(12) + b"\x88\xb5" + b"\x01\x00",          # the shim cut short
                  bytes(12) + b"\x88\xb5" + bytes([9]) + bytes(35)):  # a kind that does not exist
        a.w.on_frame(frame)
    stats = a.w.status()
    assert (stats.foreign, stats.malformed, stats.drops) == (3, 3, 3)
