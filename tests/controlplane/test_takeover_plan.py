"""Backups armed to take over by themselves (controlplane/takeover_plan.py, docs/protocols.md
§4.3) against fake NF control servers: each backup is told its successor, the one the fail-over
would choose; the plans follow the pool; the fail-over uses the armed successor; a primary a
backup took over from is failed over even though it still answers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controlplane.takeover_plan import arm_takeovers
from tests.controlplane.test_failover import kill_primary_1
from tests.controlplane.test_migration import wait_until, with_controller

pytestmark = pytest.mark.unit


def test_each_backup_is_armed_with_the_successor_a_fail_over_would_choose() -> None:
    async def body(c: Any, fakes: Any, servers: Any) -> None:
        # c1: 1 (node a) backed up by 3 (node b), 2 (node b) by 4 (node a), spare 5 (node c);
        # c2: 6 backed up by 7, no spare and no idle NF: 7 takes over without a backup
        assert await arm_takeovers(c) == 3
        assert (fakes[3].armed, fakes[4].armed, fakes[7].armed) == ((1, 5), (2, 5), (6, 0))
        assert fakes[1].armed is None and fakes[5].armed is None
        assert await arm_takeovers(c) == 0  # nothing changed: nothing sent
        # the spare goes: 3 and 4 are re-armed without a successor
        c.registry.nfs[5].declared_down = True
        assert await arm_takeovers(c) == 2
        assert (fakes[3].armed, fakes[4].armed) == ((1, 0), (2, 0))
        # a pair that ends disarms its backup
        c.pairs[2] = None
        await arm_takeovers(c)
        assert fakes[4].armed is None and 4 not in c.armed

    asyncio.run(with_controller(body))


def test_the_fail_over_keeps_the_successor_the_backup_was_armed_with() -> None:
    """Promote comes first and the successor the backup already uses stays its backup, even
    when the pool would now rank another NF first."""
    async def body(c: Any, fakes: Any, servers: Any) -> None:
        await arm_takeovers(c)
        c.armed[3] = (1, 4)  # as if 3 had been armed with 4 (the fake NF is not asked again)
        c.pairs[2] = None  # (so that 4 qualifies)
        for f in fakes.values():
            f.calls.clear()
        await kill_primary_1(c, servers)
        await wait_until(lambda: bool(c.failovers))
        [fo] = c.failovers
        assert fo.ok and (fo.promoted, fo.new_backup) == (3, 4)
        calls = [n for n, _ in fakes[3].calls if n not in ("Heartbeat", "Status")]
        assert calls[0] == "Promote"  # before the successor is told its slots

    asyncio.run(with_controller(body))


def test_a_primary_whose_backup_took_over_is_failed_over_though_it_answers() -> None:
    async def body(c: Any, fakes: Any, servers: Any) -> None:
        await c.registry.detector.heartbeat_round()
        fakes[3].took_over_from = [1]
        await c.registry.poll_all()
        await wait_until(lambda: bool(c.failovers))
        [fo] = c.failovers
        assert fo.ok and (fo.dead, fo.promoted) == (1, 3)
        assert c.registry.nfs[1].declared_down

    asyncio.run(with_controller(body))
