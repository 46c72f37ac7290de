"""The in-process API of p4sim: device config round trip, packet-in/packet-out through the CPU
port, traces, counters by index, thread safety, and the ``p4sim compile`` command.

Run one case: .venv/bin/pytest tests/p4sim/test_switch_api.py -k packet_out
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import threading

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from p4sim.runtime.api_values import ActionCall, Match, P4simError, TableEntry
from p4sim.runtime.engine_loader import switch_from_device_config
from p4sim.runtime.switch import Switch
from tests.p4sim.harness import CPU_PORT, PROGRAMS, add, load

pytestmark = pytest.mark.unit


@pytest.fixture
def sw() -> Switch:
    return load("ipv4_forward.p4")


def ip_packet(dst: str = "10.0.0.1", ttl: int = 64) -> bytes:
    return bytes(Ether(dst="00:00:00:00:00:01") / IP(src="1.1.1.1", dst=dst, ttl=ttl) / UDP() / b"data")


def test_device_config_round_trip_keeps_ids(sw):
    again = switch_from_device_config(sw.device_config(), sw.p4info, cpu_port=CPU_PORT)
    assert again.p4info == sw.p4info
    add(again, "ipv4_lpm", {"dst_addr": Match("lpm", 0x0A000000, prefix_len=8)}, "ipv4_forward",
        {"dst_addr": 1, "port": 3})
    assert [p for p, _ in again.process(1, ip_packet())] == [3]
    with pytest.raises(P4simError) as ei:
        switch_from_device_config(b"not a config")
    assert ei.value.code == "INVALID_ARGUMENT"


def test_packet_to_cpu_carries_packet_in_header(sw):
    add(sw, "ipv4_lpm", {"dst_addr": Match("lpm", 0x0A000001, prefix_len=32)}, "send_to_cpu")
    [(port, data)] = sw.process(7, ip_packet())
    assert port == CPU_PORT
    meta = int.from_bytes(data[:2], "big")
    assert meta >> 7 == 7  # packet_in.ingress_port
    assert Ether(data[2:])[IP].dst == "10.0.0.1"


def test_packet_out_goes_to_the_requested_port(sw):
    payload = ip_packet(dst="99.9.9.9")
    header = (5 << 7).to_bytes(2, "big")  # packet_out.egress_port = 5
    [(port, data)] = sw.process(CPU_PORT, header + payload)
    assert port == 5
    assert data == payload  # packet_out header removed, packet otherwise untouched


def test_trace_reports_parser_tables_and_ports():
    sw = load("ipv4_forward.p4", engine="python")  # tracing is the Python engine's
    lines: list[str] = []
    sw.set_trace(lines.append)
    sw.process(1, ip_packet(ttl=1))
    sw.set_trace(None)
    assert any("ingress port 1" in ln for ln in lines)
    assert "parser state parse_ipv4" in lines
    assert any("dropped" in ln for ln in lines)
    n = len(lines)
    sw.process(1, ip_packet(ttl=1))
    assert len(lines) == n  # tracing off again
    add(sw, "ipv4_lpm", {"dst_addr": Match("lpm", 0x0A000000, prefix_len=8)}, "ipv4_forward",
        {"dst_addr": 1, "port": 3})
    sw.set_trace(lines.append)
    sw.process(1, ip_packet())
    assert "table MyIngress.ipv4_lpm: hit, action MyIngress.ipv4_forward" in lines
    assert "out port 3, 46 bytes" in lines[-1]


def test_native_engine_does_not_trace_and_says_so(caplog):
    sw = load("ipv4_forward.p4", engine="native")
    lines: list[str] = []
    sw.set_trace(lines.append)
    sw.process(1, ip_packet(ttl=1))
    assert lines == []
    assert "does not trace packets" in caplog.text


def test_indexed_counter_api(sw):
    cid = sw.entity_id("counter", "port_packets")
    assert sw.counter_size(cid) == 512
    sw.process(4, ip_packet())
    pk, by = sw.counter_read(cid, 4)
    assert pk == 1 and by == len(ip_packet())
    with pytest.raises(P4simError) as ei:
        sw.counter_read(cid, 512)
    assert ei.value.code == "OUT_OF_RANGE"
    with pytest.raises(P4simError) as ei:
        sw.counter_read(0x12000001, 0)
    assert ei.value.code == "NOT_FOUND"


def test_table_writes_are_atomic_with_packets(sw):
    tid, aid = sw.table_id("ipv4_lpm"), sw.action_id("ipv4_forward")
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            i = 0
            while not stop.is_set():
                e = TableEntry(tid, {1: Match("lpm", 0x0B000000 | (i % 200) << 8, prefix_len=24)},
                               ActionCall(aid, {1: 1, 2: 2}))
                sw.table_insert(e)
                sw.table_delete(e)
                i += 1
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t = threading.Thread(target=writer)
    t.start()
    try:
        for _ in range(2000):
            out = sw.process(1, ip_packet(dst="11.0.5.1"))
            assert out in ([], [(2, out[0][1])] if out else [])
    finally:
        stop.set()
        t.join()
    assert not errors


def test_compile_cli_writes_p4info_and_device_config(tmp_path):
    txt, js, out = tmp_path / "p.p4info.txtpb", tmp_path / "p.json", tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "p4sim", "compile", str(PROGRAMS / "tables.p4"), "--arch", "v1model",
         "-I", str(PROGRAMS / "include"), "-D", "UNUSED=1", "--p4runtime-files", f"{txt},{js}", "-o", str(out)],
        capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    text_format = importlib.import_module("google.protobuf.text_format")
    from finsy.proto import p4i

    info = text_format.Parse(txt.read_text(), p4i.P4Info())
    assert {t.preamble.alias for t in info.tables} >= {"t_exact", "t_const"}
    assert js.read_text().startswith("{")
    sw = switch_from_device_config((out / "tables.p4sim").read_bytes(), info)
    assert sw.table_id("t_exact") == next(t.preamble.id for t in info.tables if t.preamble.alias == "t_exact")


def test_device_config_with_a_foreign_p4info_is_refused(sw):
    other = load("tables.p4")
    with pytest.raises(P4simError) as ei:
        switch_from_device_config(sw.device_config(), other.p4info)
    assert ei.value.code == "INVALID_ARGUMENT"


def test_table_get_finds_an_entry_by_key(sw):
    e = add(sw, "ipv4_lpm", {"dst_addr": Match("lpm", 0x0A000000, prefix_len=8)}, "ipv4_forward",
            {"dst_addr": 1, "port": 3})
    got = sw.table_get(TableEntry(e.table_id, dict(e.match)))
    assert got is not None and got.action == e.action
    other = {fid: Match("lpm", 0x0B000000, prefix_len=8) for fid in e.match}
    assert sw.table_get(TableEntry(e.table_id, other)) is None
