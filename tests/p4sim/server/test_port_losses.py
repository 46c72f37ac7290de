"""No silent loss at the switch: a port overloaded while p4sim cannot read (SIGSTOP) loses frames
in the kernel, and the loss is counted where it happened (that port's `kernel_drops`, and the
ring's freezes with `--io ring`), served at p4sim's /status and /metrics, and visible in the
controller's status, metrics and `nfc status` table.

Run: flock /tmp/nfc-mininet.lock .venv/bin/pytest tests/p4sim/server/test_port_losses.py (root)
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from controlplane.cli import status_table
from controlplane.config import parse_config
from controlplane.controller import Controller
from tests.p4sim.server.conftest import PROGRAM
from tests.p4sim.server.netns import VethTopology
from tests.support.procs import free_port, stop_process, wait_for

pytestmark = [pytest.mark.netns, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
FRAMES = 20000

BLAST = r"""
import socket, sys
iface, n = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
frame = b"\x02\x00\x00\x00\x00\xfe" + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00" + bytes(986)
sent = 0
for _ in range(n):
    try:
        s.send(frame)
        sent += 1
    except OSError:
        pass
print(sent)
"""


def switch_status(addr: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://{addr}/status", timeout=3) as resp:
        doc: dict[str, Any] = json.loads(resp.read())
    return doc


@pytest.mark.parametrize("io", ["socket", "ring"])
def test_an_overloaded_port_counts_its_kernel_drops_up_to_the_controller(
        topo: VethTopology, io: str) -> None:
    h1, h2 = topo.hosts
    grpc_port, metrics = free_port(), f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "p4sim.server.cli", str(PROGRAM), "--grpc-addr",
         f"127.0.0.1:{grpc_port}", "-i", f"1@{h1.switch_intf}", "-i", f"2@{h2.switch_intf}",
         "--cpu-port", "510", "--io", io, "--ring-mb", "1", "--metrics-addr", metrics],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: switch_status(metrics), timeout=30, what="p4sim serves /status")
        proc.send_signal(signal.SIGSTOP)  # p4sim reads nothing: the kernel's buffer fills
        try:
            blast = subprocess.run(["ip", "netns", "exec", h1.ns, sys.executable, "-c", BLAST,
                                    h1.intf, str(FRAMES)], capture_output=True, text=True,
                                   check=True, timeout=120)
        finally:
            proc.send_signal(signal.SIGCONT)
        sent = int(blast.stdout.strip())
        assert sent == FRAMES

        def counted() -> dict[str, Any] | None:
            port = switch_status(metrics)["ports"]["1"]
            return port if port["kernel_drops"] > 0 and port["rx"] + port["kernel_drops"] >= \
                sent * 0.99 else None

        port1 = wait_for(counted, timeout=30, what="port 1's drops counted")
        # every frame was either read or counted as dropped (a few stray frames, or the host's
        # own backlog under load, are the only slack)
        assert sent * 0.99 <= port1["rx"] + port1["kernel_drops"] <= sent + 20, port1
        assert 0 < port1["kernel_drops"] < sent and port1["rx"] > 0
        if io == "ring":
            assert port1["ring_freezes"] > 0
        assert switch_status(metrics)["ports"]["2"]["kernel_drops"] == 0  # where it happened only
        with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=3) as resp:
            text = resp.read().decode()
        line = next(ln for ln in text.splitlines()
                    if ln.startswith("p4sim_port_kernel_drops_total") and 'port="1"' in ln)
        assert float(line.split()[-1]) >= port1["kernel_drops"]

        # the controller reads the switch's counters and shows them
        data = yaml.safe_load((ROOT / "topo" / "nfcluster.yaml").read_text())
        data["switch"].update(address=f"127.0.0.1:{grpc_port}", stats=metrics)
        ctl = Controller(parse_config(data), use_etcd=False)
        asyncio.run(ctl.read_switch_ports(metrics))
        status = ctl.status()
        assert status["switch_ports"]["1/kernel_drops"] >= port1["kernel_drops"]
        assert "2/kernel_drops" not in status["switch_ports"]
        console = Console(width=300, record=True)
        console.print(status_table(status))
        assert f"port 1/kernel_drops {status['switch_ports']['1/kernel_drops']}" in \
            console.export_text()
        assert ctl.metrics.registry.get_sample_value(
            "nfc_switch_port_losses", {"port": "1", "reason": "kernel_drops"}) == \
            status["switch_ports"]["1/kernel_drops"]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.terminate()
            try:
                proc.wait(10)
            finally:
                stop_process(proc)
    log = proc.stdout.read().decode() if proc.stdout else ""
    assert proc.returncode == 0, log
    assert "port 1 (" in log and "kernel drops" in log  # and it was logged
