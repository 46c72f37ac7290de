"""Hosts in network namespaces wired by veth pairs to interfaces in the root namespace, and scapy
send/sniff run inside a host namespace (as a child process) — for the real-interface tests.

Every name carries the test process id so parallel runs do not collide; `teardown` removes all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field

SNIFF_SCRIPT = r"""
import json, sys
from scapy.all import AsyncSniffer, Ether
iface, count, timeout, dst = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
s = AsyncSniffer(iface=iface, count=count, lfilter=lambda p: Ether in p and p[Ether].dst == dst,
                 started_callback=lambda: print("ready", flush=True))
s.start()
s.join(timeout=timeout)
if s.running:
    s.stop()
print(json.dumps([bytes(p).hex() for p in (s.results or [])]), flush=True)
"""

SEND_SCRIPT = r"""
import sys
from scapy.all import Ether, sendp
iface, frames = sys.argv[1], sys.argv[2].split(",")
sendp([Ether(bytes.fromhex(f)) for f in frames], iface=iface, verbose=False)
"""


def _run(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


@dataclass
class Host:
    ns: str
    intf: str  # inside the namespace
    switch_intf: str  # in the root namespace
    mac: str


@dataclass
class VethTopology:
    """N hosts, each in its own namespace, each with a veth pair to the root namespace."""

    hosts: list[Host] = field(default_factory=list)

    @classmethod
    def create(cls, n: int) -> VethTopology:
        tag = f"{os.getpid() % 100000}"
        topo = cls()
        try:
            for i in range(1, n + 1):
                ns, intf, sw = f"p4s{tag}h{i}", f"p4s{tag}h{i}e", f"p4s{tag}s{i}"
                mac = f"02:00:00:00:00:{i:02x}"
                _run("ip", "netns", "add", ns)
                topo.hosts.append(Host(ns, intf, sw, mac))
                _run("ip", "link", "add", sw, "type", "veth", "peer", "name", intf)
                _run("ip", "link", "set", intf, "netns", ns)
                _run("ip", "netns", "exec", ns, "ip", "link", "set", intf, "address", mac)
                for where, name in ((ns, intf), (None, sw)):
                    prefix = ["ip", "netns", "exec", where] if where else []
                    _run(*prefix, "sysctl", "-qw", f"net.ipv6.conf.{name}.disable_ipv6=1")
                    _run(*prefix, "ip", "link", "set", name, "up")
        except Exception:
            topo.teardown()
            raise
        return topo

    def teardown(self) -> None:
        for h in self.hosts:
            subprocess.run(["ip", "link", "del", h.switch_intf], capture_output=True)
            subprocess.run(["ip", "netns", "del", h.ns], capture_output=True)
        self.hosts.clear()

    def sniffer(
        self, host: Host, count: int, timeout: float, dst_mac: str
    ) -> subprocess.Popen[str]:
        """Start sniffing in `host`'s namespace; returns after it is ready."""
        proc = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                host.ns,
                sys.executable,
                "-c",
                SNIFF_SCRIPT,
                host.intf,
                str(count),
                str(timeout),
                dst_mac,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != "ready":
            proc.kill()
            raise RuntimeError(
                f"sniffer did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}"
            )
        return proc

    @staticmethod
    def sniffed(proc: subprocess.Popen[str], timeout: float) -> list[bytes]:
        out, err = proc.communicate(timeout=timeout)
        lines = [ln for ln in out.splitlines() if ln.startswith("[")]
        if not lines:
            raise RuntimeError(f"sniffer failed: {err}")
        return [bytes.fromhex(h) for h in json.loads(lines[-1])]

    def send(self, host: Host, frames: list[bytes]) -> None:
        subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                host.ns,
                sys.executable,
                "-c",
                SEND_SCRIPT,
                host.intf,
                ",".join(f.hex() for f in frames),
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
