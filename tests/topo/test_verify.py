"""The sink's verdict catches loss, duplication, reordering and broken counts, and passes clean runs."""

from __future__ import annotations

import pytest

from topo.records import Record
from topo.verify import verify


def _clean(n_fwd: int, n_rev: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    # forward and reverse interleaved: counts 1..n_fwd+n_rev split between the directions
    fwd, rev, count = [], [], 0
    for i in range(max(n_fwd, n_rev)):
        if i < n_fwd:
            count += 1
            fwd.append((i + 1, count))
        if i < n_rev:
            count += 1
            rev.append((i + 1, count))
    return fwd, rev


@pytest.mark.unit
def test_clean_bidirectional_flow_passes() -> None:
    fwd, rev = _clean(5, 5)
    v = verify({1: fwd}, {1: rev}, {1: 5}, {1: 5})
    assert v.ok and v.packets_received == 10


@pytest.mark.unit
@pytest.mark.parametrize(
    "mutate, expect",
    [
        (lambda f: f[:-1], "lost 1"),
        (lambda f: [*f, f[-1]], "duplicated 1"),
        (lambda f: [f[1], f[0], *f[2:]], "out of order 1"),
    ],
)
def test_broken_delivery_is_named(mutate, expect: str) -> None:
    fwd, rev = _clean(5, 0)
    v = verify({1: mutate(fwd)}, {1: rev}, {1: 5}, {1: 0})
    assert not v.ok
    assert expect in v.problems()[0]


@pytest.mark.unit
def test_state_rollback_breaks_the_count() -> None:
    # a fail-over that lost the last committed update would repeat count 3
    v = verify({1: [(1, 1), (2, 2), (3, 3)]}, {1: [(1, 3)]}, {1: 3}, {1: 1})
    assert not v.ok
    assert any("not 1..4" in p for p in v.problems())


@pytest.mark.unit
def test_record_round_trip_and_short_payload() -> None:
    r = Record(7, 42, 9)
    assert Record.unpack(r.pack(64)) == r
    with pytest.raises(ValueError, match="shorter than a record"):
        Record.unpack(b"\0" * 8)


def test_losses_the_wire_explains_pass_more_do_not_and_duplicates_never() -> None:
    from topo.verify import verify

    fwd = {0: [(1, 1), (3, 3), (4, 4)]}  # packet 2 lost before the NF: never counted
    rev = {0: [(1, 2)]}
    assert not verify(fwd, rev, {0: 4}, {0: 1}).ok
    assert verify(fwd, rev, {0: 4}, {0: 1}, wire_lost=1).ok
    fwd_counts = {0: [(1, 1), (3, 2), (4, 3)]}  # a gap in the numbers, the counts consecutive
    assert verify(fwd_counts, {0: [(1, 4)]}, {0: 4}, {0: 1}, wire_lost=1).ok
    assert not verify(fwd_counts, {0: [(1, 4)]}, {0: 5}, {0: 1}, wire_lost=1).ok  # 2 lost > 1
    dup = {0: [(1, 1), (1, 2), (3, 3)]}
    assert not verify(dup, {0: [(1, 4)]}, {0: 3}, {0: 1}, wire_lost=5).ok
