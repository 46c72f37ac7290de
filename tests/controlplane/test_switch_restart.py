"""A restarted switch numbers every slot from 1 again: before the slots get their owners back,
the controller sets each slot's `slot_seq` to the highest number its NFs received (primary or
backup), so that the new packets are not taken for duplicates; after a mere reconnect the switch
is ahead and nothing is written."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.controlplane.test_migration import with_controller

pytestmark = pytest.mark.unit


class Registers:
    def __init__(self, values: dict[int, int]) -> None:
        self.values = values
        self.written: list[dict[int, int]] = []

    async def read_register(self, name: str, index: int | None = None) -> dict[int, int]:
        assert name == "slot_seq"
        return dict(self.values)

    async def write_register(self, name: str, values: dict[int, int]) -> None:
        assert name == "slot_seq"
        self.written.append(dict(values))
        self.values.update(values)


def test_a_restarted_switch_resumes_each_slots_numbering_where_its_nfs_are() -> None:
    async def body(c: Any, fakes: Any, servers: Any) -> None:
        a, b = c.slot_map.slots_of(1)[:2]
        fakes[1].seen = {a: 500, b: 70}
        fakes[3].seen = {a: 503}  # NF 1's backup holds copies up to 503 (they reached it only)
        regs = Registers({s: 0 for s in range(c.cfg.switch.slot_count)})  # a restarted switch
        c.session.read_register = regs.read_register
        await c._resume_numbering(regs)
        assert regs.written == [{a: 503, b: 70}]  # the next stamps: 504 and 71
        await c._resume_numbering(regs)  # a reconnect to a switch that is ahead: nothing
        assert len(regs.written) == 1
        assert c.metrics.registry.get_sample_value("nfc_numbering_resumed_total") == 2

    asyncio.run(with_controller(body))
