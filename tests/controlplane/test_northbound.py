"""Northbound: the HTTP API, the `nfc` CLI tables and the Prometheus metrics, on a controller that
is not connected to anything (views must work before the switch and the NFs are up)."""

from __future__ import annotations

import asyncio
import io
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from rich.console import Console

from controlplane import cli
from controlplane.api import serve
from controlplane.config import load_config
from controlplane.controller import Controller
from controlplane.metrics import ControllerMetrics
from controlplane.migration import NotPrimaryError
from controlplane.switch_session import NewFlow
from tests.support.procs import free_port

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
P4INFO = Path(__file__).parent / "data" / "nfcluster.p4info.txtpb"


def make_controller() -> Controller:
    c = Controller(load_config(ROOT / "topo" / "nfcluster.yaml"), use_etcd=False,
                   p4info=P4INFO, device_config=b"x")
    flow = NewFlow(slot=7, src_addr=0x0A000001, dst_addr=0x0A000002, src_port=1234, dst_port=80,
                   protocol=6)
    c.flows.add([flow])
    c.flows.add([flow])
    c.counters.slot_counters = {7: (10, 1000), 8: (0, 0)}
    c.metrics.update_slot_traffic(c.slot_counters)
    c.metrics.update_nfs(c.registry.summaries())
    c.metrics.count_write("insert", 5)
    return c


def get(url: str) -> tuple[int, bytes, str]:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.status, resp.read(), resp.headers.get("Content-Type", "")


async def with_api(body: Any) -> None:
    c = make_controller()
    port = free_port()
    runner = await serve(c, "127.0.0.1", port)
    try:
        await body(c, f"http://127.0.0.1:{port}")
    finally:
        await runner.cleanup()
        await c.close()


def test_http_api_views():
    async def body(c, base):
        _, raw, _ = await asyncio.to_thread(get, base + "/status")
        status = json.loads(raw)
        assert status["slots"] == 4096 and status["pairs"] == {"1": 5, "2": 6, "3": 7, "4": 8}
        assert status["switch"]["primary"] is False and status["packets"] == 10
        assert status["flows"] == {"known": 1, "total": 1}
        nfs = json.loads((await asyncio.to_thread(get, base + "/nfs"))[1])
        assert [n["id"] for n in nfs] == list(range(1, 11))
        assert sum(n["slots_owned"] for n in nfs) == 4096 and nfs[0]["backup"] == 5
        polled: list[int] = []

        async def poll_all() -> dict[int, Any]:
            polled.append(1)
            return {}

        c.registry.poll_all = poll_all  # GET /nfs?refresh=1 asks the NFs now, a plain GET not
        await asyncio.to_thread(get, base + "/nfs")
        assert polled == []
        await asyncio.to_thread(get, base + "/nfs?refresh=1")
        assert polled == [1]
        slots = json.loads((await asyncio.to_thread(get, base + "/slots?nf=2&limit=3"))[1])
        assert len(slots) == 3 and all(s["owner"] == 2 and s["backup"] == 6 for s in slots)
        one = json.loads((await asyncio.to_thread(get, base + "/slots"))[1])[7]
        assert one["packets"] == 10 and one["bytes"] == 1000 and one["epoch"] == 1
        flows = json.loads((await asyncio.to_thread(get, base + "/flows"))[1])
        assert flows == [{"slot": 7, "src": "10.0.0.1:1234", "dst": "10.0.0.2:80", "protocol": "tcp",
                          "owner": c.slot_map.owner(7), "digests": 2, "age_s": flows[0]["age_s"]}]
        code, text, ctype = await asyncio.to_thread(get, base + "/metrics")
        assert code == 200 and ctype.startswith("text/plain")
        assert b'nfc_slot_packets{slot="7"} 10.0' in text
        assert b'nfc_slot_packets{slot="8"}' not in text  # only slots with traffic
        assert b'nfc_p4rt_writes_total{op="insert"} 5.0' in text
        assert b'nfc_nf_alive{nf="1"} -1.0' in text
        with pytest.raises(urllib.error.HTTPError) as info:
            await asyncio.to_thread(get, base + "/slots?nf=abc")
        assert info.value.code == 400

    asyncio.run(with_api(body))


def run_cli(args: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main(args, console=Console(file=out, width=160, color_system=None))
    return code, out.getvalue()


def test_cli_tables_and_json():
    async def body(c, base):
        code, text = await asyncio.to_thread(run_cli, ["--api", base, "status"])
        assert code == 0 and "127.0.0.1:9559" in text and "standby" in text and "1->5" in text
        code, text = await asyncio.to_thread(run_cli, ["--api", base, "nfs"])
        assert code == 0 and "nf1" in text and "primary" in text and "backup" in text
        assert len([line for line in text.splitlines() if " nf" in line]) == 10
        code, text = await asyncio.to_thread(run_cli, ["--api", base, "slots"])
        assert code == 0 and "by owner" in text
        code, text = await asyncio.to_thread(run_cli, ["--api", base, "slots", "--nf", "1", "--limit", "2"])
        assert code == 0 and "slots (2)" in text
        code, text = await asyncio.to_thread(run_cli, ["--api", base, "flows"])
        assert code == 0 and "10.0.0.1:1234" in text and "tcp" in text
        code, text = await asyncio.to_thread(run_cli, ["--api", base, "--json", "status"])
        assert code == 0 and json.loads(text)["slots"] == 4096

    asyncio.run(with_api(body))


def test_cli_unreachable_api_and_help(capsys):
    code = cli.main(["--api", f"http://127.0.0.1:{free_port()}", "status"])
    assert code == 2
    assert "cannot reach the controller API" in capsys.readouterr().err
    for args in (["--help"], ["slots", "--help"], ["flows", "--help"]):
        with pytest.raises(SystemExit) as info:
            cli.main(args)
        assert info.value.code == 0


def test_controller_main_check_and_errors(tmp_path, capsys):
    from controlplane.__main__ import main

    assert main(["check", "--config", str(ROOT / "topo" / "nfcluster.yaml")]) == 0
    assert "pairs: 1->5, 2->6, 3->7, 4->8" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("clusters: [{name: c1}]\nnfs: [{id: 1}]\n")
    assert main(["check", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "nfs[0].name: Field required" in err and "nfs[0].node" in err


def test_move_slot_building_block_without_switch():
    async def run() -> None:
        c = make_controller()
        try:
            owner = c.slot_map.owner(9)
            target = 1 if owner != 1 else 2
            # not the switch's primary: nothing is moved, nothing changes (a move used to be
            # recorded here without any switch write)
            with pytest.raises(NotPrimaryError):
                await c.move_slot(9, target)
            assert c.slot_map.entry(9).owner == owner and c.slot_map.epoch(9) == 1
            with pytest.raises(ValueError, match="not a primary"):
                await c.move_slot(9, 5)
        finally:
            await c.close()

    asyncio.run(run())


def test_slot_gauge_of_an_nf_that_owns_no_slot_any_more_reads_zero() -> None:
    m = ControllerMetrics()
    m.update_slot_counts({1: 5, 2: 3})
    m.update_slot_counts({2: 8})  # NF 1 failed over: its slots are NF 2's now
    text = generate_latest(m.registry).decode()
    assert 'nfc_nf_slots{nf="1"} 0.0' in text and 'nfc_nf_slots{nf="2"} 8.0' in text


def test_move_and_failover_histories_are_bounded_and_moves_still_counted() -> None:
    from controlplane.failover import FailoverResult
    from controlplane.migration import MoveResult
    from controlplane.run_history import HISTORY

    c = make_controller()
    for i in range(HISTORY + 5):
        c.record_move(MoveResult(slot=i % 4096, from_nf=1, to_nf=2, epoch=2, ok=i % 2 == 0,
                                 same_cluster=True))
        c.failovers.append(FailoverResult(dead=1, promoted=5, new_backup=None, slots=1))
    assert len(c.moves) == HISTORY and len(c.failovers) == HISTORY
    assert c.moves[0].slot == 5  # the oldest ones went
    assert c.status()["moves"] == {"total": HISTORY + 5, "ok": (HISTORY + 6) // 2, "undone": 0}
