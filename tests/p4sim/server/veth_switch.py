"""A real `p4sim run` between the two hosts of a `VethTopology` (port 1 at h1, port 2 at h2), with
a primary P4Runtime client and its `/status` endpoint: what the end-to-end veth tests share."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import grpc
from finsy.proto import p4r, p4r_grpc

from tests.p4sim.server.conftest import PROGRAM
from tests.p4sim.server.netns import VethTopology
from tests.p4sim.server.p4rt_client import StreamClient
from tests.support.procs import free_port, stop_process, wait_for


def status(addr: str) -> dict[str, Any]:
    """p4sim's `/status` at `addr` (its --metrics-addr)."""
    with urllib.request.urlopen(f"http://{addr}/status", timeout=5) as resp:
        doc: dict[str, Any] = json.loads(resp.read())
    return doc


@dataclass
class VethSwitch:
    stub: p4r_grpc.P4RuntimeStub
    stream: StreamClient
    metrics: str  # the --metrics-addr
    log: str = ""  # p4sim's output, once it has stopped

    def write(self, updates: list[p4r.Update]) -> None:
        """One WriteRequest as the primary client (election id 1)."""
        req = p4r.WriteRequest(device_id=1, updates=updates)
        req.election_id.low = 1
        self.stub.Write(req)


@contextmanager
def p4sim_on_veths(topo: VethTopology, io: str) -> Iterator[VethSwitch]:
    """`p4sim run` of the real program (native engine, `--io io`) on h1's and h2's switch-side
    interfaces, answering P4Runtime with this client as primary; stopped (by PID) on exit, its
    output then in `log`."""
    h1, h2 = topo.hosts
    port, metrics = free_port(), f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "p4sim.server.cli", str(PROGRAM), "--grpc-addr", f"127.0.0.1:{port}",
         "-i", f"1@{h1.switch_intf}", "-i", f"2@{h2.switch_intf}", "--cpu-port", "510",
         "--io", io, "--engine", "native", "--metrics-addr", metrics, "--log-level", "info"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stream: StreamClient | None = None
    sw: VethSwitch | None = None
    try:
        stub = p4r_grpc.P4RuntimeStub(channel)
        wait_for(lambda: stub.Capabilities(p4r.CapabilitiesRequest(), timeout=1), timeout=30,
                 what="p4sim answers Capabilities")
        stream = StreamClient(channel)
        stream.arbitrate(1)
        assert stream.receive("arbitration").arbitration.status.code == 0
        sw = VethSwitch(stub, stream, metrics)
        yield sw
    finally:
        if stream is not None:
            stream.close()
        channel.close()
        stop_process(proc)
        if sw is not None:
            sw.log = proc.stdout.read().decode() if proc.stdout else ""
