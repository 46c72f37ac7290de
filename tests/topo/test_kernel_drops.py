"""The kernel's drops are read where they happen: two namespaces joined by a veth pair; a UDP
socket with a tiny receive buffer that is never read, datagrams to a closed port, and a token
bucket qdisc with a tiny queue on the sender's veth. Each loss shows in `kernel_counters` under its
namespace and interface, and `where_lost` names it.

Run: flock /tmp/nfc-mininet.lock .venv/bin/pytest tests/topo/test_kernel_drops.py (root)
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from controlplane.config import load_config
from tests.support.procs import wait_for
from topo.faults.kernel_drops import kernel_counters
from topo.faults.losses import loss_lines, where_lost

pytestmark = [pytest.mark.netns]

CONFIG = Path(__file__).resolve().parents[2] / "topo" / "nfcluster.yaml"
TAG = f"kd{os.getpid() % 100000}"

RECEIVER = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)  # the kernel's minimum: a few datagrams
s.bind(("10.77.0.2", 9000))
print("ready", flush=True)
sys.stdin.read()  # never reads the socket; ends when the test closes stdin
"""

SENDER = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
port, n = int(sys.argv[1]), int(sys.argv[2])
for _ in range(n):
    s.sendto(bytes(1000), ("10.77.0.2", port))
"""


@dataclass
class Namespace:
    """A Mininet-like node: a name, and `cmd` running a shell command in its namespace."""

    name: str

    @property
    def ns(self) -> str:
        return f"{TAG}{self.name}"

    def cmd(self, command: str) -> str:
        return subprocess.run(["ip", "netns", "exec", self.ns, "sh", "-c", command],
                              capture_output=True, text=True, timeout=30).stdout

    def run(self, *args: str) -> None:
        subprocess.run(["ip", "netns", "exec", self.ns, *args], check=True, capture_output=True,
                       timeout=30)


@dataclass
class Net:
    hosts: list[Namespace]
    switches: list[Namespace]


@pytest.fixture
def net() -> Iterator[Net]:
    a, b = Namespace("a"), Namespace("b")
    try:
        for node in (a, b):
            subprocess.run(["ip", "netns", "add", node.ns], check=True, capture_output=True)
        a.run("ip", "link", "add", "name", "a-eth0", "type", "veth", "peer", "name", "b-eth0",
              "netns", b.ns)
        for node, ip in ((a, "10.77.0.1"), (b, "10.77.0.2")):
            node.run("ip", "addr", "add", f"{ip}/24", "dev", f"{node.name}-eth0")
            node.run("ip", "link", "set", "dev", f"{node.name}-eth0", "up")
        mac_b = b.cmd("cat /sys/class/net/b-eth0/address").strip()
        a.run("ip", "neigh", "replace", "10.77.0.2", "lladdr", mac_b, "dev", "a-eth0")
        yield Net([a, b], [])
    finally:
        for node in (a, b):
            subprocess.run(["ip", "netns", "del", node.ns], capture_output=True)


def test_drops_at_a_socket_a_closed_port_and_a_qdisc_are_counted_where_they_happen(
        net: Net) -> None:
    a, b = net.hosts
    receiver = subprocess.Popen(["ip", "netns", "exec", b.ns, sys.executable, "-c", RECEIVER],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout is not None and receiver.stdout.readline().strip() == "ready"
        a.run(sys.executable, "-c", SENDER, "9000", "200")  # into a buffer of a few datagrams
        a.run(sys.executable, "-c", SENDER, "9001", "5")  # nobody listens there

        def b_udp() -> dict[str, int]:
            return kernel_counters(net, edge=["b"]).get("b/udp", {})

        wait_for(lambda: b_udp().get("udp_noports") == 5, timeout=10, what="5 NoPorts in b")
        udp = b_udp()
        assert udp["udp_rcvbuf_errors"] > 100 and udp["udp_inerrors"] >= udp["udp_rcvbuf_errors"]
        # a token bucket of 8 kbit/s with room for one frame: a burst is mostly dropped there
        a.run("tc", "qdisc", "add", "dev", "a-eth0", "root", "tbf", "rate", "8kbit", "burst",
              "1600", "limit", "1600")
        a.run(sys.executable, "-c", SENDER, "9000", "100")
        drops = kernel_counters(net, edge=["b"])
    finally:
        if receiver.stdin is not None:
            receiver.stdin.close()
        receiver.wait(timeout=10)
    assert drops["a/a-eth0"]["qdisc_drops"] > 90
    assert "a/udp" not in drops  # a is not an end host here: its UDP counters are not read
    sites = where_lost(load_config(CONFIG), None, {}, [], {}, drops)
    text = "\n".join(loss_lines(0, sites))
    assert f"host b: {drops['b/udp']['udp_rcvbuf_errors']} UDP receive buffer full" in text
    assert "host b: 5 UDP datagrams to a closed port" in text
    assert f"interface a/a-eth0: {drops['a/a-eth0']['qdisc_drops']} dropped by the interface's " \
           "queueing discipline" in text
