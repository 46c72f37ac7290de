"""The nfcluster v1model program on p4sim: it compiles, its P4Info carries the names of the shared
contract, and an edge packet is stamped and replicated to the primary and the backup NF.

Run one case: .venv/bin/pytest tests/p4sim/test_nfcluster.py -k stamp
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether

from contract.shim import Kind, decap
from p4sim.runtime.api_values import Match
from p4sim.runtime.engine_loader import load_switch
from p4sim.runtime.switch import Switch
from tests.p4sim.harness import add

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "p4src" / "v1model" / "nfcluster.p4"
INCLUDES = [str(ROOT / "p4src" / "shared"), str(ROOT / "p4src" / "v1model")]

needs_program = pytest.mark.skipif(not PROGRAM.exists(), reason="p4src/v1model/nfcluster.p4 not present")


@pytest.fixture
def sw(p4sim_engine: str) -> Switch:
    return load_switch(str(PROGRAM), INCLUDES, cpu_port=510, engine=p4sim_engine)


def short_names(items: Any) -> dict[str, Any]:
    return {x.preamble.name.rsplit(".", 1)[-1]: x for x in items}


@needs_program
def test_p4info_has_the_contract_names(sw):
    info = sw.p4info
    tables = short_names(info.tables)
    assert {"port_role", "slot_owner", "nf_port", "edge_forward", "nf_stage", "edge_chain",
            "stage_next"} <= set(tables)
    assert all(t.preamble.name.startswith(("NfcIngress.", "NfcEgress.")) for t in info.tables)
    fields = {name: [(m.name, m.bitwidth) for m in t.match_fields] for name, t in tables.items()}
    assert fields["port_role"] == [("port", 9)]
    assert fields["slot_owner"] == [("stage", 8), ("slot", 16)]
    assert fields["nf_stage"] == fields["edge_chain"] == [("port", 9)]
    assert fields["stage_next"] == [("stage", 8), ("reverse", 1)]
    assert fields["nf_port"] == [("port", 9)]
    assert fields["edge_forward"] == [("dst_addr", 32)]
    actions = {a.preamble.name.rsplit(".", 1)[-1]: [(p.name, p.bitwidth) for p in a.params] for a in info.actions}
    assert actions["set_port_role"] == [("role", 8)]
    assert actions["set_replica_group"] == [("group", 16), ("epoch", 16), ("primary", 16), ("seq_base", 32)]
    assert actions["set_nf_target"] == [("nf_id", 16), ("nf_mac", 48)]
    assert actions["forward_to_edge"] == [("port", 9), ("dst_mac", 48)]
    assert actions["set_nf_stage"] == [("stage", 8)]
    assert actions["enter_chain"] == [("stage", 8), ("reverse", 1)]
    assert actions["to_stage"] == [("stage", 8), ("rehash", 1)]
    regs = {n: r.type_spec.bitstring.bit.bitwidth for n, r in short_names(info.registers).items()}
    assert regs["slot_seq"] == 32 and regs["slot_epoch"] == 16
    assert {"slot_traffic", "nf_port_drops", "no_route_drops", "unowned_drops",
            "nf_output_drops"} <= set(short_names(info.counters))
    [digest] = [d for d in info.digests if d.preamble.name == "new_flow_t"]
    members = info.type_info.structs["new_flow_t"].members
    assert [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in members] == [
        ("slot", 16), ("src_addr", 32), ("dst_addr", 32), ("src_port", 16), ("dst_port", 16), ("protocol", 8)]
    cpm = {c.preamble.name: [(m.name, m.bitwidth) for m in c.metadata] for c in info.controller_packet_metadata}
    assert cpm["packet_in"][0] == ("ingress_port", 9)
    assert cpm["packet_out"][0] == ("egress_port", 9)
    assert digest.preamble.id >> 24 == 0x17


@needs_program
def test_edge_packet_is_stamped_and_replicated(sw):
    add(sw, "port_role", {"port": Match("exact", 1)}, "set_port_role", {"role": 1})
    for port in (2, 3):
        add(sw, "port_role", {"port": Match("exact", port)}, "set_port_role", {"role": 2})
        add(sw, "nf_port", {"port": Match("exact", port)}, "set_nf_target",
            {"nf_id": 10 + port, "nf_mac": 0x0200000000 + port})
    for slot in range(4096):
        add(sw, "slot_owner", {"stage": Match("exact", 0), "slot": Match("exact", slot)},
            "set_replica_group",
            {"group": 12, "epoch": 1, "primary": 12, "seq_base": 0})
    sw.mc_group_set(12, [(2, 1), (3, 2)])
    syn = Ether(src="00:00:00:00:00:aa", dst="00:00:00:00:00:bb") / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(
        sport=1234, dport=80, flags="S")
    outs = dict(sw.process(1, bytes(syn)))
    assert set(outs) == {2, 3}
    shim2, inner2 = decap(outs[2])
    shim3, _ = decap(outs[3])
    assert shim2.kind == Kind.PRIMARY and shim3.kind == Kind.BACKUP
    assert shim2.seq == shim3.seq == 1 and shim2.epoch == 1 and shim2.first_of_epoch
    assert Ether(inner2)[TCP].dport == 80
    outs = dict(sw.process(1, bytes(syn)))
    assert decap(outs[2])[0].seq == 2 and not decap(outs[2])[0].first_of_epoch
    digests = sw.take_digests()
    assert len(digests) == 2 and digests[0][1][0] == shim2.slot.to_bytes(2, "big")
