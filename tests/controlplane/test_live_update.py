"""Live NF update (controlplane/live_update.py) against fake NF control servers: the slots go to
the NF's cluster peers, the NF and its backup get the new parameters, the slots come back; a
refused update leaves the old version and still brings the slots back."""

from __future__ import annotations

import asyncio
import json

import pytest

from controlplane import cli
from controlplane.spare_pool import ScaleError
from tests.controlplane.api_server import served_api
from tests.controlplane.test_migration import names, with_controller

pytestmark = pytest.mark.unit


def test_update_moves_the_slots_out_updates_the_nf_and_its_backup_and_moves_them_back():
    async def body(c, fakes, servers):
        slots = c.slot_map.slots_of(1)
        seen_during: list[int | None] = []
        draining: list[bool] = []

        def probe() -> None:  # where NF 1's slots are while it is updated
            seen_during.extend(c.slot_map.owner(s) for s in slots)
            draining.append(1 in c.balancer.draining)  # the balancer leaves it alone meanwhile

        fakes[1].on_update = probe
        report = await c.update_nf(1, {"work_us": 20})
        assert report["ok"] and report["updated"] == [1, 3]  # NF 1 and its backup
        assert report["slots_moved_out"] == report["slots_moved_back"] == len(slots)
        assert set(seen_during) == {2} and draining == [True]  # c1's other primary held them
        assert c.slot_map.slots_of(1) == slots  # all back home
        assert fakes[1].params == fakes[3].params == {"work_us": 20}
        assert fakes[6].params == {}  # another cluster's NF untouched
        assert all(same for _, _, same in fakes[1].released)  # deltas within the cluster
        assert 1 not in c.balancer.draining

    asyncio.run(with_controller(body))


def test_refused_parameters_leave_the_old_version_and_bring_the_slots_back():
    async def body(c, fakes, servers):
        slots = c.slot_map.slots_of(2)
        report = await c.update_nf(2, {"bad": True})
        assert not report["ok"] and "refuses these params" in report["error"]
        assert report["updated"] == [] and fakes[4].params == {} and "UpdateNf" not in names(fakes[4])
        assert c.slot_map.slots_of(2) == slots and report["slots_moved_back"] == len(slots)

    asyncio.run(with_controller(body))


def test_an_nf_without_slots_is_updated_at_once_and_bad_requests_change_nothing():
    async def body(c, fakes, servers):
        report = await c.update_nf(5, {"x": 1})  # a spare
        assert report["ok"] and report["slots_moved_out"] == 0 and fakes[5].params == {"x": 1}
        assert fakes[5].released == [] and not any(n == "Adopt" for n, _ in fakes[2].calls)
        with pytest.raises(ScaleError, match="no NF 42"):
            await c.update_nf(42, {})
        c.registry.nfs[7].declared_down = True
        with pytest.raises(ScaleError, match="NF 7 is down"):
            await c.update_nf(7, {})
        # NF 6 is c2's only primary, and the other cluster's primaries would take its slots:
        # with every other primary down there is nowhere to put them
        for p in (1, 2):
            c.registry.nfs[p].declared_down = True
        with pytest.raises(ScaleError, match="only live primary"):
            await c.update_nf(6, {})

    asyncio.run(with_controller(body))


def test_update_through_the_cli_with_wrong_input():
    async def body(c, fakes, servers):
        async with served_api(c) as base:
            code = await asyncio.to_thread(
                cli.main, ["--api", base, "update", "6", "--params", json.dumps({"rate": 3})])
            assert code == 0 and fakes[6].params == {"rate": 3} and fakes[7].params == {"rate": 3}
            code = await asyncio.to_thread(
                cli.main, ["--api", base, "update", "6", "--params", '{"bad": 1}'])
            assert code == 1 and fakes[6].params == {"rate": 3}  # refused: reported, exit 1
            code = await asyncio.to_thread(cli.main, ["--api", base, "update", "42"])
            assert code == 2  # no such NF: 409 with a message
            with pytest.raises(SystemExit) as exc:
                cli.main(["--api", base, "update", "6", "--params", "[1, 2]"])
            assert exc.value.code == 2  # argparse: a JSON object is needed

    asyncio.run(with_controller(body))
