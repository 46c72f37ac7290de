"""A table entry written with `counter_data` sets its direct counter (INSERT and MODIFY), on the
real engine; before, the data was accepted and ignored (it read back 0)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from finsy.proto import p4r

from tests.p4sim.server.conftest import Harness, RealProgram, pushed_program
from tests.p4sim.server.entity_builders import INSERT, MODIFY, enc, table

pytestmark = pytest.mark.unit
TABLES = Path(__file__).resolve().parents[1] / "programs" / "tables.p4"


@pytest.fixture
def tables(tmp_path: Path) -> Iterator[tuple[Harness, RealProgram]]:
    with pushed_program(TABLES, tmp_path) as pushed:
        yield pushed


def entry(prog: RealProgram, a: int, packets: int | None = None) -> p4r.TableEntry:
    tid = prog.id_of("tables", "t_exact")
    [t] = [x for x in prog.p4info.tables if x.preamble.id == tid]
    te = p4r.TableEntry(table_id=tid, match=[p4r.FieldMatch(
        field_id=t.match_fields[0].id, exact=p4r.FieldMatch.Exact(value=enc(a)))])
    te.action.action.CopyFrom(prog.action("set_port", port=2))
    if packets is not None:
        te.counter_data.packet_count, te.counter_data.byte_count = packets, packets * 100
    return te


def counts(h: Harness, prog: RealProgram, a: int) -> tuple[int, int]:
    probe = entry(prog, a)
    probe.ClearField("action")
    probe.counter_data.SetInParent()
    [e] = h.read(p4r.Entity(table_entry=probe))
    return e.table_entry.counter_data.packet_count, e.table_entry.counter_data.byte_count


def test_counter_data_on_insert_and_modify_sets_the_direct_counter(
        tables: tuple[Harness, RealProgram]) -> None:
    h, prog = tables
    h.write(10, table(entry(prog, 7, packets=5)))
    assert counts(h, prog, 7) == (5, 500)
    h.write(10, table(entry(prog, 7, packets=9), MODIFY))
    assert counts(h, prog, 7) == (9, 900)
    h.write(10, table(entry(prog, 7), MODIFY))  # no counter_data: the counter is kept
    assert counts(h, prog, 7) == (9, 900)
    h.write(10, table(entry(prog, 8), INSERT))
    assert counts(h, prog, 8) == (0, 0)
