"""p4sim's digest lists leave when BMv2's P4Runtime server (PI's DigestMgr) would send them:
immediately with max_timeout_ns 0, else on the second of its sweeps (at least 100 ms apart);
items remembered, and suppressed, only with an ack timeout (docs/p4sim.md, p4sim/server/digests.py)."""

from __future__ import annotations

import pytest

from p4sim.server.digests import MIN_SWEEP_NS, DigestBatcher, DigestConfig

pytestmark = pytest.mark.unit
D = 7
MS = 1_000_000


def items(lists: list) -> list[list[bytes]]:  # type: ignore[type-arg]
    return [[m.bitstring for m in d.struct.members] for dl in lists for d in dl.data]


def batcher(max_timeout: int, size: int, ack: int) -> DigestBatcher:
    b = DigestBatcher({D})
    b.configure(D, DigestConfig(max_timeout, size, ack), now_ns=0)
    return b


def test_max_timeout_zero_sends_each_item_at_once_and_without_ack_timeout_repeats_it() -> None:
    b = batcher(0, 1, 0)
    assert items(b.add(D, [b"\x01"], 1)) == [[b"\x01"]]
    assert items(b.add(D, [b"\x01"], 2)) == [[b"\x01"]]  # nothing remembered: sent again
    assert b.next_deadline_ns() is None


def test_a_buffered_item_leaves_on_the_second_sweep_at_least_100_ms_apart() -> None:
    b = batcher(1 * MS, 10, 0)  # 1 ms is below PI's floor: the sweeps run every 100 ms
    assert b.add(D, [b"\x01"], 5 * MS) == []
    assert b.poll(99 * MS) == [] and b.next_deadline_ns() == MIN_SWEEP_NS
    assert b.poll(MIN_SWEEP_NS) == []  # first sweep: marked
    assert items(b.poll(2 * MIN_SWEEP_NS)) == [[b"\x01"]]  # second sweep: sent
    assert b.poll(3 * MIN_SWEEP_NS) == []


def test_without_an_ack_timeout_the_list_size_does_not_send_a_list() -> None:
    b = batcher(10**9, 2, 0)  # PI counts remembered items only
    assert b.add(D, [b"\x01"], 0) == [] and b.add(D, [b"\x02"], 0) == []
    assert b.add(D, [b"\x03"], 0) == []


def test_with_an_ack_timeout_items_are_remembered_until_acknowledged_or_expired() -> None:
    b = batcher(10**9, 2, 150 * MS)
    assert b.add(D, [b"\x01"], 0) == []
    assert b.add(D, [b"\x01"], 0) == []  # a duplicate within the list
    [sent] = b.add(D, [b"\x02"], 0)  # two remembered items: the list is full
    assert items([sent]) == [[b"\x01"], [b"\x02"]]
    assert b.add(D, [b"\x01"], 1) == []  # in a list not yet acknowledged: suppressed
    b.ack(D, sent.list_id)
    assert b.add(D, [b"\x01"], 2) == []  # remembered again, in the new list
    [second] = b.add(D, [b"\x03"], 3)
    assert items([second]) == [[b"\x01"], [b"\x03"]]
    # not acknowledged: forgotten after two ack sweeps (150 ms each), then sent again
    b.poll(150 * MS)
    assert b.add(D, [b"\x03"], 151 * MS) == []  # still remembered after one sweep
    b.poll(300 * MS)
    assert b.add(D, [b"\x03"], 301 * MS) == [] and b.add(D, [b"\x04"], 301 * MS) != []
