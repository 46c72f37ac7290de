"""The controller's switch session against p4sim's P4Runtime service (in-process, loopback).

Each test runs twice: with a small in-memory engine (tests/controlplane/fake_engine.py) and the
contract's hand-written P4Info, and with the real data-plane program `p4src/v1model/nfcluster.p4`
compiled by p4sim in-process (a compile error fails the tests). Both exercise the real P4Runtime
server (validation, arbitration, reads).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from finsy.proto import p4i
from google.protobuf import text_format  # type: ignore[import-untyped]

from controlplane.config import load_config
from controlplane.pipeline_state import DesiredState, replica_pairs
from controlplane.slot_map import SlotMap
from controlplane.switch_session import SwitchSession
from p4sim.server.device import Device
from p4sim.server.service import serve
from tests.controlplane.fake_engine import FakeEngine, fake_engine_factory

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
P4INFO = Path(__file__).parent / "data" / "nfcluster.p4info.txtpb"
PROGRAM = ROOT / "p4src" / "v1model" / "nfcluster.p4"
BLOB = b"fake-device-config"


def compile_program(tmp: Path) -> tuple[Path, bytes]:
    """The real program compiled by p4sim: (P4Info text file, device config bytes)."""
    from p4sim.runtime.engine_loader import load_switch

    sw = load_switch(str(PROGRAM), include_dirs=[str(ROOT / "p4src" / "shared")], cpu_port=510)
    info = tmp / "nfcluster.p4info.txtpb"
    info.write_text(text_format.MessageToString(sw.p4info))
    return info, sw.device_config()


@pytest.fixture(params=["fake-engine", "real-program"])
def p4sim_server(request: Any, tmp_path: Path) -> Any:
    engines: list[FakeEngine] = []
    if request.param == "real-program":
        pipeline = compile_program(tmp_path)
        device = Device(device_id=1, cpu_port=510)
    else:
        pipeline = (P4INFO, BLOB)
        device = Device(device_id=1, cpu_port=510, engine_factory=fake_engine_factory(engines))
    server = serve(device, "127.0.0.1:0")
    try:
        yield server, engines, pipeline
    finally:
        server.stop(grace=None)


def switch_cfg(port: int):
    cfg = load_config(ROOT / "topo" / "nfcluster.yaml")
    # 256 slots keep the tests fast; the real program's table holds 2^SLOT_BITS entries anyway
    sw = cfg.switch.model_copy(update={"address": f"127.0.0.1:{port}", "slot_bits": 8})
    return cfg.model_copy(update={"switch": sw})


def session(cfg: Any, election_id: int, pipeline: tuple[Path, bytes], **kw: Any) -> SwitchSession:
    return SwitchSession(cfg.switch, election_id=election_id, p4info=pipeline[0],
                         device_config=pipeline[1], **kw)


def desired(s: SwitchSession, cfg, slot_map: SlotMap) -> DesiredState:
    return s.builder.desired(cfg, {p.id: p.backup for p in cfg.primaries()}, slot_map)


def test_push_pipeline_install_and_read_back_equal(p4sim_server):
    server, engines, pipeline = p4sim_server
    cfg = switch_cfg(server.port)
    slot_map = SlotMap.build([1, 2, 3, 4], cfg.switch.slot_count)
    writes: list[tuple[str, int]] = []

    async def run() -> None:
        async with session(cfg, 10, pipeline, on_write=lambda op, n: writes.append((op, n))) as s:
            await s.wait_primary(timeout=10)
            assert s.is_primary
            state = desired(s, cfg, slot_map)
            first = await s.reconcile(state)
            assert first.counts()["insert"] == len(state.tables) + len(state.groups)
            assert sum(n for op, n in writes if op == "insert") == first.counts()["insert"]
            # read back equal: nothing left to do, the slot map and the groups are what we wrote
            assert not await s.reconcile(state)
            owned = await s.read_slot_owner()
            assert [owned[i].owner for i in range(cfg.switch.slot_count)] == slot_map.owners()
            assert all(owned[i].epoch == 1 for i in owned)
            groups = {g.multicast_group_id: replica_pairs(g) for g in await s.read_groups()}
            assert groups == {1: [(3, 1), (7, 2)], 2: [(4, 1), (8, 2)], 3: [(5, 1), (9, 2)],
                              4: [(6, 1), (10, 2)]}
            # one ownership change is one MODIFY, visible on read
            entry = slot_map.move(17, 3 if slot_map.owner(17) != 3 else 4)
            await s.write_slot(entry)
            assert (await s.read_slot_owner())[17] == entry
            # counters read by name, all indexes
            counters = await s.read_counter("slot_traffic")
            size = s.schema.counters[s.names.counter("slot_traffic")].size
            assert sorted(counters) == list(range(size))
            assert all(v == (0, 0) for v in counters.values())
            assert counters == await s.read_counter_entries("slot_traffic")  # = finsy's decoding

    asyncio.run(run())
    if engines:
        assert engines[-1].device_config() == BLOB


def test_reconcile_after_reconnect_fixes_differences(p4sim_server):
    server, _engines, pipeline = p4sim_server
    cfg = switch_cfg(server.port)
    slot_map = SlotMap.build([1, 2, 3, 4], cfg.switch.slot_count)

    async def run() -> None:
        async with session(cfg, 10, pipeline) as s:
            await s.wait_primary(timeout=10)
            await s.reconcile(desired(s, cfg, slot_map))
            # someone else changed the switch while we were away
            await s.switch.delete([s.builder.slot_owner(slot_map.entry(5))])
            await s.switch.insert([s.builder.port_role(99, 1)])
            await s.set_group(2, 4, None)
        moved = slot_map.copy()
        moved.move(6, 1 if moved.owner(6) != 1 else 2)
        async with session(cfg, 10, pipeline) as s:
            await s.wait_primary(timeout=10)
            changes = await s.reconcile(desired(s, cfg, moved))
            assert changes.counts() == {"insert": 1, "modify": 2, "delete": 1}
            assert not await s.reconcile(desired(s, cfg, moved))
            owned = await s.read_slot_owner()
            assert owned[6] == moved.entry(6) and owned[5] == moved.entry(5)

    asyncio.run(run())


def test_standby_cannot_write_and_takes_over(p4sim_server):
    server, _, pipeline = p4sim_server
    cfg = switch_cfg(server.port)
    slot_map = SlotMap.build([1, 2, 3, 4], cfg.switch.slot_count)
    async def run() -> None:
        became: list[int] = []

        async def on_primary(s: SwitchSession) -> None:
            became.append(s.switch.election_id)

        primary = session(cfg, 20, pipeline)
        standby = session(cfg, 10, pipeline, on_primary=on_primary)
        await primary.__aenter__()
        try:
            await primary.wait_primary(timeout=10)
            await primary.reconcile(desired(primary, cfg, slot_map))
            await standby.__aenter__()
            assert not standby.is_primary
            with pytest.raises(Exception, match=r"PERMISSION_DENIED|permission"):
                await standby.write_slot(slot_map.move(1, 2))
            # reads are allowed for a backup
            assert len(await standby.read_slot_owner()) == cfg.switch.slot_count
        finally:
            await primary.__aexit__(None, None, None)
        try:
            await standby.wait_primary(timeout=10)
            assert standby.is_primary and became
            await standby.write_slot(slot_map.entry(1))
            assert (await standby.read_slot_owner())[1] == slot_map.entry(1)
        finally:
            await standby.__aexit__(None, None, None)

    asyncio.run(run())


def test_contract_p4info_parses():
    info = text_format.Parse(P4INFO.read_text(), p4i.P4Info())
    assert {t.preamble.alias for t in info.tables} == {
        "port_role", "slot_owner", "nf_port", "edge_forward", "nf_stage", "edge_chain", "stage_next"}
