"""Helpers of the p4sim tests: load a program from tests/p4sim/programs, build test packets, write entries by name."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import pytest
from scapy.layers.l2 import Ether

from p4sim.runtime.api_values import ActionCall, Match, TableEntry
from p4sim.runtime.engine_loader import load_switch
from p4sim.runtime.switch import Switch

PROGRAMS = Path(__file__).parent / "programs"
ETH_TEST = 0x88B6
CPU_PORT = 510


def load(name: str, engine: str | None = None, **defines: str) -> Switch:
    """A program of tests/p4sim/programs on ``engine`` (default: ``$P4SIM_ENGINE``, see
    tests/p4sim/conftest.py); a native run of a program the native engine does not run is skipped."""
    sw = load_switch(str(PROGRAMS / name), [str(PROGRAMS / "include")], defines, cpu_port=CPU_PORT, engine=engine)
    if sw.native_fallback is not None:
        pytest.skip(f"native engine: {sw.native_fallback}")
    return sw


def one_header_program(fields: str, ingress: str) -> str:
    """A v1model program around one header, `h_t { fields }`, extracted from the packet and
    emitted again; `ingress` is the body of the ingress control (declarations, then `apply`)."""
    return f"""#include <core.p4>
#include <v1model.p4>
header h_t {{ {fields} }}
struct headers_t {{ h_t h; }}
struct meta_t {{ }}
parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {{
    state start {{ pkt.extract(hdr.h); transition accept; }}
}}
control VC(inout headers_t hdr, inout meta_t m) {{ apply {{ }} }}
control I(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {{
{ingress}
}}
control E(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {{ apply {{ }} }}
control CC(inout headers_t hdr, inout meta_t m) {{ apply {{ }} }}
control D(packet_out pkt, in headers_t hdr) {{ apply {{ pkt.emit(hdr.h); }} }}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


@dataclass
class Scratch:
    op: int = 0
    a: int = 0
    b: int = 0
    r8: int = 0
    r16: int = 0
    r32: int = 0

    def pack(self) -> bytes:
        return struct.pack("!BBBBHI", self.op, self.a, self.b, self.r8, self.r16, self.r32)

    @classmethod
    def unpack(cls, data: bytes) -> Scratch:
        return cls(*struct.unpack("!BBBBHI", data[:10]))


def scratch_packet(h: Scratch, payload: bytes = b"payload!") -> bytes:
    return bytes(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01", type=ETH_TEST)) + h.pack() + payload


def result(out: list[tuple[int, bytes]]) -> tuple[int, Scratch]:
    """The single output packet's port and decoded test header."""
    assert len(out) == 1, out
    port, data = out[0]
    assert int.from_bytes(data[12:14], "big") == ETH_TEST
    return port, Scratch.unpack(data[14:])


def run_scratch(sw: Switch, h: Scratch, port: int = 1) -> Scratch:
    _, r = result(sw.process(port, scratch_packet(h)))
    return r


def add(sw: Switch, table: str, match: dict[str, Match], action: str, params: dict[str, int] | None = None,
        priority: int = 0) -> TableEntry:
    tid = sw.table_id(table)
    aid = sw.action_id(action)
    e = TableEntry(
        tid,
        {sw.field_id(tid, k): m for k, m in match.items()},
        ActionCall(aid, {sw.param_id(aid, k): v for k, v in (params or {}).items()}),
        priority=priority,
    )
    sw.table_insert(e)
    return e
