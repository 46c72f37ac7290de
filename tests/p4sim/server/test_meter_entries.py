"""Meter entries over P4Runtime on the real engine: MODIFY configures one cell or all, a read
returns the configuration, a write without config resets the cell, and wrong writes are refused
with a message naming what is wrong."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from finsy.proto import p4r

from tests.p4sim.server.conftest import Harness, RealProgram, pushed_program
from tests.p4sim.server.entity_builders import INSERT, MODIFY, update
from tests.p4sim.server.p4rt_client import status_details

pytestmark = pytest.mark.unit
EXTERNS = Path(__file__).resolve().parents[1] / "programs" / "externs.p4"


@pytest.fixture
def externs(tmp_path: Path) -> Iterator[tuple[Harness, RealProgram]]:
    with pushed_program(EXTERNS, tmp_path) as pushed:
        yield pushed


def meter(mid: int, index: int | None, config: p4r.MeterConfig | None = None) -> p4r.MeterEntry:
    m = p4r.MeterEntry(meter_id=mid)
    if index is not None:
        m.index.index = index
    if config is not None:
        m.config.CopyFrom(config)
    return m


def configs(h: Harness, mid: int) -> dict[int, tuple[int, int, int, int] | None]:
    out = {}
    for e in h.read(p4r.Entity(meter_entry=meter(mid, None))):
        m = e.meter_entry
        c = m.config
        out[m.index.index] = (c.cir, c.cburst, c.pir, c.pburst) if m.HasField("config") else None
    return out


def test_meter_entries_write_read_reset_and_refusals(externs: tuple[Harness, RealProgram]) -> None:
    h, prog = externs
    mid = prog.id_of("meters", "op_meter")
    assert configs(h, mid) == {0: None, 1: None, 2: None, 3: None}
    cfg = p4r.MeterConfig(cir=100, cburst=10, pir=200, pburst=20)
    h.write(10, update(MODIFY, meter_entry=meter(mid, 2, cfg)))
    assert configs(h, mid)[2] == (100, 10, 200, 20) and configs(h, mid)[1] is None
    h.write(10, update(MODIFY, meter_entry=meter(mid, None, cfg)))  # no index: every cell
    assert set(configs(h, mid).values()) == {(100, 10, 200, 20)}
    h.write(10, update(MODIFY, meter_entry=meter(mid, 2)))  # no config: reset
    assert configs(h, mid)[2] is None and configs(h, mid)[3] == (100, 10, 200, 20)
    [one] = h.read(p4r.Entity(meter_entry=meter(mid, 3)))
    assert one.meter_entry.config.pir == 200
    # a wildcard read over every meter finds both of the program's
    assert {e.meter_entry.meter_id for e in h.read(p4r.Entity(meter_entry=meter(0, None)))} == {
        mid, prog.id_of("meters", "byte_meter")}

    for bad, message in (
        (update(INSERT, meter_entry=meter(mid, 1, cfg)), "can only be modified"),
        (update(MODIFY, meter_entry=meter(mid, 9, cfg)), "index 9"),
        (update(MODIFY, meter_entry=meter(mid, 1, p4r.MeterConfig(cir=5, pir=1))),
         "pir 1 is below cir 5"),
        (update(MODIFY, meter_entry=meter(12345, 1, cfg)), "unknown meter id 12345"),
    ):
        with pytest.raises(grpc.RpcError) as exc:
            h.write(10, bad)
        [err] = status_details(exc.value)
        assert message in err.message, err.message
    assert configs(h, mid)[1] == (100, 10, 200, 20)  # refused writes changed nothing
