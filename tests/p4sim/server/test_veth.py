"""Packets cross real veth interfaces through a `p4sim run` process (ipv4_forward.p4), with each
port I/O (`--io socket` and `--io ring`): hosts in their own network namespaces send with scapy,
the route is written over P4Runtime, the other host receives the rewritten packets; pcap
captures and per-packet trace lines are written; SIGTERM stops the switch cleanly.

Run: sudo .venv/bin/pytest tests/p4sim/server/test_veth.py   (needs root)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from finsy.proto import p4r, p4r_grpc
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap

from tests.p4sim.server.conftest import PROGRAM, RealProgram
from tests.p4sim.server.entity_builders import INSERT, enc, update
from tests.p4sim.server.netns import VethTopology
from tests.p4sim.server.p4rt_client import StreamClient
from tests.support.procs import free_port, stop_process, wait_for

pytestmark = [pytest.mark.netns, pytest.mark.slow]

N = 20


@pytest.mark.parametrize("io", ["socket", "ring"])
def test_packets_cross_veths_through_p4sim(
    topo: VethTopology, real_program: RealProgram, tmp_path: Path, io: str
) -> None:
    h1, h2 = topo.hosts
    port = free_port()
    pcap_dir = tmp_path / "pcap"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "p4sim.server.cli",
            str(PROGRAM),
            "--grpc-addr",
            f"127.0.0.1:{port}",
            "--device-id",
            "1",
            "-i",
            f"1@{h1.switch_intf}",
            "-i",
            f"2@{h2.switch_intf}",
            "--cpu-port",
            "510",
            "--pcap",
            str(pcap_dir),
            "--log-level",
            "trace",
            "--io",
            io,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stream: StreamClient | None = None
    try:
        stub = p4r_grpc.P4RuntimeStub(channel)
        wait_for(
            lambda: stub.Capabilities(p4r.CapabilitiesRequest(), timeout=1),
            timeout=30,
            what="p4sim answers Capabilities",
        )
        stream = StreamClient(channel)
        stream.arbitrate(1)
        assert stream.receive("arbitration").arbitration.status.code == 0
        prog = real_program
        table_id = prog.id_of("tables", "ipv4_lpm")
        [table] = [t for t in prog.p4info.tables if t.preamble.id == table_id]
        aid = prog.id_of("actions", "ipv4_forward")
        [action] = [a for a in prog.p4info.actions if a.preamble.id == aid]
        params = {p.name: p.id for p in action.params}
        te = p4r.TableEntry(
            table_id=table_id,
            match=[
                p4r.FieldMatch(
                    field_id=table.match_fields[0].id,
                    lpm=p4r.FieldMatch.LPM(value=enc(0x0A000200), prefix_len=24),
                )
            ],
        )
        te.action.action.CopyFrom(
            p4r.Action(
                action_id=aid,
                params=[
                    p4r.Action.Param(param_id=params["dst_addr"], value=enc(0x020000000002)),
                    p4r.Action.Param(param_id=params["port"], value=b"\x02"),
                ],
            )
        )
        req = p4r.WriteRequest(device_id=1, updates=[update(INSERT, table_entry=te)])
        req.election_id.low = 1
        stub.Write(req)

        sniffer = topo.sniffer(h2, N, 30, h2.mac)
        frames = [
            bytes(
                Ether(src=h1.mac, dst="02:00:00:00:00:fe")
                / IP(src="10.0.1.1", dst="10.0.2.2", ttl=64)
                / UDP(sport=1000 + i, dport=53)
                / bytes(20)
            )
            for i in range(N)
        ]
        topo.send(h1, frames)
        got = topo.sniffed(sniffer, 40)
        assert len(got) == N
        ports = sorted(Ether(g)[UDP].sport for g in got)
        assert ports == [1000 + i for i in range(N)]
        first = Ether(got[0])
        assert first.src == "02:00:00:00:00:fe" and first[IP].ttl == 63
        assert len(rdpcap(str(pcap_dir / f"{h1.switch_intf}_in.pcap"))) >= N
        assert len(rdpcap(str(pcap_dir / f"{h2.switch_intf}_out.pcap"))) == N
    finally:
        if stream is not None:
            stream.close()
        channel.close()
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            finally:
                stop_process(proc)
    log = proc.stdout.read().decode() if proc.stdout else ""
    assert proc.returncode == 0, log
    trace = [ln for ln in log.splitlines() if "p4sim.trace" in ln]
    assert len(trace) >= N  # --log-level trace: lines for every packet
