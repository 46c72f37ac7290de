"""The contract package (`contract/`) imports nothing of the project outside it, the management
network's (`mgmt/`) nothing but `contract`, and the repository has no import circle at all
(hidden ones included: tools/import_cycles.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.cross_imports import cross_edges
from tools.import_cycles import import_edges, report

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent


def test_contract_imports_only_itself() -> None:
    outside = [(e.src, e.dst, f"{e.path.name}:{e.line}") for e in import_edges(ROOT, True)
               if e.src.split(".")[0] == "contract" and e.dst.split(".")[0] != "contract"]
    assert outside == []


def test_mgmt_imports_nothing_of_the_processes() -> None:
    """The management network's shared infrastructure (`mgmt/`) is no part of any one process:
    the controller, the NF runtime and the launcher import it, it imports none of them."""
    outside = [(e.src, e.dst, f"{e.path.name}:{e.line}") for e in import_edges(ROOT, True)
               if e.src.split(".")[0] == "mgmt" and e.dst.split(".")[0] not in ("mgmt", "contract")]
    assert outside == []


def test_the_repository_has_no_import_circle() -> None:
    n, text = report(ROOT, (), type_checking=False)
    assert n == 0, text


def test_the_processes_share_the_shim_and_the_wire_formats_only_through_contract() -> None:
    """No part reaches into nf_host for what the processes agree on (issue #35)."""
    shared = {"nf_host.shim", "nf_host.timing", "nf_host.proto", "nf_host.reorder",
              "nf_host.liveness", "ptf_tests.lib.slot_hash", "topo.records"}
    reached = [(src, mod, f"{path.name}:{line}") for src, _dst, mod, path, line in cross_edges(ROOT)
               if any(mod == s or mod.startswith(s + ".") for s in shared)]
    assert reached == []


def test_the_slot_hash_model_uses_the_switch_simulators_crc16() -> None:
    """`contract.slot_hash` keeps its own CRC-16/ARC (it imports nothing of the project): the
    same function as p4sim's `crc16`, which the switch program's `hash` runs on."""
    import random

    from contract.slot_hash import crc16, flow_hash
    from p4sim.runtime.primitives import crc16 as p4sim_crc16

    rng = random.Random(35)
    assert crc16(b"123456789") == 0xBB3D
    for _ in range(200):
        data = rng.randbytes(rng.randrange(1, 20))
        assert crc16(data) == p4sim_crc16(data)
    # both directions of a flow hash alike
    assert flow_hash("10.0.0.1", "10.1.0.1", 1000, 80, 17) == flow_hash("10.1.0.1", "10.0.0.1",
                                                                        80, 1000, 17)


def test_the_dispatch_tables_route_by_type_and_raise_their_own_errors() -> None:
    """Both runners' tables are one `contract.dispatch.DispatchTable`: a handler gets the items
    of its type, an item without a handler raises the table's error (a receiver counts a
    `ProtocolError`), a handler of a type the table does not dispatch is refused."""
    from contract import commands, replication

    received = replication.Dispatch[str]()
    received.on(replication.Ack, lambda m: f"ack {m.batch}")
    received.on(replication.Forward, lambda m: f"forward {len(m.frame)}")
    assert received(replication.Ack(7)) == "ack 7"
    assert received(replication.Forward(b"abc")) == "forward 3"
    assert received.handles(replication.Ack(1)) and not received.handles(replication.Bye())
    with pytest.raises(replication.ProtocolError, match="no handler here for a 'bye' message"):
        received(replication.Bye())
    with pytest.raises(TypeError, match="Ping is not one of the types"):
        received.on(commands.Ping, lambda c: "")  # (mypy lets it by: checked at run time)

    run = commands.Dispatch[int | None]()
    run.on(commands.Flows, lambda c: c.slot)
    assert run(commands.Flows(12)) == 12
    with pytest.raises(ValueError, match="no handler here for the command 'ping'"):
        run(commands.Ping())
    with pytest.raises(TypeError, match="Ack is not one of the types"):
        run.on(replication.Ack, lambda m: None)
