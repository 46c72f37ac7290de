"""The Prism testbed: a client, a frontend and N backends, each in a network namespace of its
own, on ports of one p4sim switch, with the hand-off controller on a management bridge.

    switch port 1: client 10.0.1.1     port 2: frontend 10.0.2.1     port 2+k: backend 10.0.3.k
    management bridge 192.168.77.0/24 (controller 192.168.77.254:8700), not through the switch

Links are shaped with htb (`set_rate`), the hand-off channel in a class of its own.

Run it inside a private network namespace (`unshare -n`, as the make targets and tests do):
the switch-side interfaces, the bridge and the switch's gRPC port live there. Hosts are
unnamed namespaces held by a `sleep` process each (like Mininet's), so nothing is named in
/run/netns. Hosts resolve each other by static neighbour entries (the switch punts ARP).
Offloads are off on every veth: p4sim reads frames before the kernel fills in checksums.
Every process is started here and stopped by its PID (`close`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO

from prism.protocol import CHANNEL_TOS

REPO = Path(__file__).resolve().parent.parent
MGMT_NET = "192.168.77"
CONTROLLER_PORT = 8700
GRPC = "127.0.0.1:9559"
FRONTEND_PORT = 8080
READY_TIMEOUT_S = 120.0  # a loaded 2-core machine starts Python slowly


TARGETS = ("p4sim", "bmv2")
BMV2_BINARY = "simple_switch_grpc"


class TargetMissing(RuntimeError):
    """The switch target or its built files are not there (a test skips on it)."""


def target_files(target: str, build: Path) -> tuple[Path, Path]:
    """(P4Info, device config) `make build` writes for the target (mk/dataplane.mk)."""
    if target == "bmv2":
        return build / "bmv2" / "nfcluster.p4info.txtpb", build / "bmv2" / "nfcluster.json"
    return build / "nfcluster.p4info.txtpb", build / "nfcluster.p4sim"


def target_missing(target: str, build: Path) -> str | None:
    """Why the target cannot run here, or None."""
    if target == "bmv2" and shutil.which(BMV2_BINARY) is None:
        return f"{BMV2_BINARY} is not on PATH (install BMv2 for the bmv2 leg)"
    missing = [str(p) for p in target_files(target, build) if not p.exists()]
    return f"not built: {', '.join(missing)} (run `make build`)" if missing else None


def switch_command(target: str, ports: list[str]) -> list[str]:
    """`p4sim run` or `simple_switch_grpc` on the ports, waiting for the pipeline push."""
    if target == "bmv2":
        return [BMV2_BINARY, "--device-id", "1", *ports, "--no-p4", "--",
                "--grpc-server-addr", GRPC, "--cpu-port", "510"]
    return [sys.executable, "-m", "p4sim.server.cli", "--grpc-addr", GRPC, "--device-id", "1",
            "--cpu-port", "510", "--log-level", "warn", *ports, "--no-p4"]


def sh(*cmd: str) -> None:
    proc = subprocess.run(list(cmd), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {proc.stderr.strip()}")


@dataclass
class Host:
    name: str
    index: int       # switch port, and the last byte of the MAC and management address
    addr: str
    holder: subprocess.Popen[bytes]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.holder.pid

    @property
    def mac(self) -> str:
        return f"02:00:00:00:00:{self.index:02x}"

    @property
    def mgmt(self) -> str:
        return f"{MGMT_NET}.{self.index}"

    def run(self, *cmd: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["nsenter", "-t", str(self.pid), "-n", *cmd], check=True,
                              capture_output=True, text=True)

    def popen(self, cmd: list[str], log: IO[bytes] | None = None) -> subprocess.Popen[bytes]:
        p = subprocess.Popen(["nsenter", "-t", str(self.pid), "-n", *cmd], cwd=REPO,
                             stdout=log or subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def listening(self, port: int) -> bool:
        return f":{port} " in self.run("ss", "-Hltn").stdout


def wait_until(what: str, check: Callable[[], bool], timeout: float = READY_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"testbed: {what} not ready after {timeout} s")
        time.sleep(0.05)


def _offloads_off(prefix: list[str], dev: str) -> None:
    for feature in ("rx", "tx", "sg", "tso", "gso", "gro"):
        subprocess.run([*prefix, "ethtool", "-K", dev, feature, "off"], capture_output=True)


class Testbed:
    """Build with `Testbed(backends=2, logdir=...)`; `close()` undoes everything."""

    __test__ = False  # not a pytest class
    open_testbeds: set[Testbed] = set()

    def __init__(self, backends: int, logdir: Path, build: Path = REPO / "build",
                 rate_mbit: float | None = None, target: str = "p4sim",
                 channel_priority: bool = True, shaper: str = "htb") -> None:
        if target not in TARGETS:
            raise ValueError(f"unknown target {target!r} ({', '.join(TARGETS)})")
        if missing := target_missing(target, build):
            raise TargetMissing(missing)
        self.target = target
        self.netns = os.readlink("/proc/thread-self/ns/net")
        Testbed.open_testbeds.add(self)
        self.logdir = logdir
        logdir.mkdir(parents=True, exist_ok=True)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.hosts: list[Host] = []
        self.runs = 0
        self.frontend_port = FRONTEND_PORT
        self.channel_priority = channel_priority
        self.shaper = shaper
        try:
            self._build(backends, build, rate_mbit)
        except BaseException:
            self.close()
            raise

    @property
    def client(self) -> Host:
        return self.hosts[0]

    @property
    def frontend(self) -> Host:
        return self.hosts[1]

    @property
    def backends(self) -> list[Host]:
        return self.hosts[2:]

    @property
    def controller_url(self) -> str:
        return f"http://{MGMT_NET}.254:{CONTROLLER_PORT}"

    def log(self, name: str) -> IO[bytes]:
        return (self.logdir / f"{name}.log").open("ab")

    def _host(self, name: str, index: int, addr: str) -> Host:
        holder = subprocess.Popen(["unshare", "-n", "sleep", "1000000"])
        host = Host(name, index, addr, holder)
        self.hosts.append(host)
        pid = str(holder.pid)
        wait_until(f"{name} namespace", lambda: os.readlink(f"/proc/{pid}/ns/net")
                   != os.readlink("/proc/self/ns/net"))
        dev, sw, mdev, msw = f"h{index}-eth0", f"s1-eth{index}", f"h{index}-mgmt", f"m{index}"
        for stale in (sw, msw):  # an earlier testbed's, its host namespace still going away
            subprocess.run(["ip", "link", "del", stale], capture_output=True)
        sh("ip", "link", "add", dev, "type", "veth", "peer", "name", sw)
        sh("ip", "link", "add", mdev, "type", "veth", "peer", "name", msw)
        sh("ip", "link", "set", dev, "netns", pid)
        sh("ip", "link", "set", mdev, "netns", pid)
        sh("ip", "link", "set", sw, "up")
        sh("ip", "link", "set", msw, "master", "pmgmt0", "up")
        _offloads_off([], sw)
        host.run("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        host.run("ip", "link", "set", "lo", "up")
        host.run("ip", "link", "set", dev, "address", host.mac, "up")
        host.run("ip", "addr", "add", f"{addr}/16", "dev", dev)
        host.run("ip", "link", "set", mdev, "up")
        host.run("ip", "addr", "add", f"{host.mgmt}/24", "dev", mdev)
        _offloads_off(["nsenter", "-t", pid, "-n"], dev)
        return host

    def _build(self, backends: int, build: Path, rate_mbit: float | None) -> None:
        subprocess.run(["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"], capture_output=True)
        sh("ip", "link", "set", "lo", "up")
        sh("ip", "link", "add", "pmgmt0", "type", "bridge")
        sh("ip", "addr", "add", f"{MGMT_NET}.254/24", "dev", "pmgmt0")
        sh("ip", "link", "set", "pmgmt0", "up")
        self._host("client", 1, "10.0.1.1")
        self._host("frontend", 2, "10.0.2.1")
        for k in range(1, backends + 1):
            self._host(f"backend{k}", 2 + k, f"10.0.3.{k}")
        for h in self.hosts:
            for other in self.hosts:
                if other is not h:
                    h.run("ip", "neigh", "replace", other.addr, "lladdr", other.mac,
                          "dev", f"h{h.index}-eth0", "nud", "permanent")
        if rate_mbit is not None:
            self.set_rate(rate_mbit, channel_priority=self.channel_priority, shaper=self.shaper)
        ports = [arg for h in self.hosts for arg in ("-i", f"{h.index}@s1-eth{h.index}")]
        self.procs.append(subprocess.Popen(switch_command(self.target, ports), cwd=REPO,
                                           stdout=self.log(self.target), stderr=subprocess.STDOUT))
        p4info, config = target_files(self.target, build)
        hosts_file = self.logdir / "hosts.json"
        hosts_file.write_text(json.dumps({h.name: {"addr": h.addr, "mac": h.mac, "port": h.index}
                                          for h in self.hosts}))
        self.procs.append(subprocess.Popen(
            [sys.executable, "-m", "prism.controller", "--hosts", str(hosts_file),
             "--p4info", str(p4info), "--device-config", str(config), "--switch", GRPC,
             "--listen", f"{MGMT_NET}.254:{CONTROLLER_PORT}"],
            cwd=REPO, stdout=self.log("controller"), stderr=subprocess.STDOUT))
        wait_until("controller", self._controller_ready, timeout=2 * READY_TIMEOUT_S)

    def _controller_ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.controller_url + "/status", timeout=2) as resp:
                return bool(json.loads(resp.read())["ready"])
        except OSError:
            return False

    def controller_status(self) -> dict[str, int]:
        with urllib.request.urlopen(self.controller_url + "/status", timeout=5) as resp:
            out: dict[str, int] = json.loads(resp.read())
            return out

    def set_rate(self, rate_mbit: float, client_factor: float = 5.0,
                 channel_priority: bool = True, shaper: str = "htb") -> None:
        """Shape the frontend's and every backend's link to `rate_mbit` and the client's to
        `client_factor` times that, both directions (the thesis's 5.2: 1 and 5 Gbit/s).

        An `htb` of two classes under one at the link's rate: the hand-off channel's class
        (packets with DSCP EF, prism.protocol.mark_channel; 10% guaranteed, priority 0) and
        everything else's (90%, priority 1), each borrowing up to the whole rate, each queue a
        byte FIFO of rate x 50 ms + burst (a tbf's queue at `latency 50ms`). With
        `channel_priority` off the filter is left out: the channel shares the bulk class's
        queue with the responses (the A/B test of docs/prism.md). `shaper="tbf"`: a plain tbf
        (rate, burst, `latency 50ms`), the first runs' shaper, no channel class."""
        for h in self.hosts:
            rate = rate_mbit * (client_factor if h is self.client else 1.0)
            burst = max(32000, int(rate * 1e6 / 8 / 250))
            limit = str(int(rate * 1e6 / 8 * 0.05) + burst)
            kbit = int(rate * 1000)
            for prefix in (["nsenter", "-t", str(h.pid), "-n"], []):
                dev = f"h{h.index}-eth0" if prefix else f"s1-eth{h.index}"
                tc = [*prefix, "tc"]
                if shaper == "tbf":
                    sh(*tc, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{rate}mbit",
                       "burst", str(burst), "latency", "50ms")
                    continue
                sh(*tc, "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb",
                   "default", "20")
                for classid, parent, share, prio in (("1:1", "1:", kbit, "0"),
                                                     ("1:10", "1:1", kbit // 10, "0"),
                                                     ("1:20", "1:1", kbit - kbit // 10, "1")):
                    sh(*tc, "class", "add", "dev", dev, "parent", parent, "classid", classid,
                       "htb", "rate", f"{share}kbit", "ceil", f"{kbit}kbit", "burst",
                       str(burst), "prio", prio)
                for leaf in ("1:10", "1:20"):
                    sh(*tc, "qdisc", "add", "dev", dev, "parent", leaf, "bfifo", "limit", limit)
                if channel_priority:
                    sh(*tc, "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip",
                       "prio", "1", "u32", "match", "ip", "tos", hex(CHANNEL_TOS), "0xfc",
                       "flowid", "1:10")

    def start_servers(self, mode: str, stats: Path | None = None,
                      frontend_args: list[str] | None = None) -> None:
        """Backends, then the frontend in `mode` (once, every, proxy); waits until they listen.

        Each start uses ports of its own (8080/9090/9091 + 10 per earlier start): connections
        a stopped server had restored stay bound to its ports until the kernel lets them go,
        and a restored socket's forced reuse does not extend to a new listener."""
        py = sys.executable
        shift = 10 * self.runs
        self.runs += 1
        self.frontend_port = FRONTEND_PORT + shift
        data, control = str(9090 + shift), str(9091 + shift)
        for b in self.backends:
            b.popen([py, "-m", "prism.backend", "--addr", b.addr, "--controller",
                     self.controller_url, "--data-port", data, "--control-port", control],
                    self.log(b.name))
        for b in self.backends:
            wait_until(b.name, partial(b.listening, int(control)))
        cmd = [py, "-m", "prism.frontend", "--addr", self.frontend.addr, "--mode", mode,
               "--port", str(self.frontend_port), "--backends",
               ",".join(b.addr for b in self.backends), "--controller", self.controller_url,
               "--backend-data-port", data, "--backend-control-port", control]
        if stats is not None:
            cmd += ["--stats", str(stats)]
        cmd += frontend_args or []
        self.frontend.popen(cmd, self.log("frontend"))
        wait_until("frontend", partial(self.frontend.listening, self.frontend_port))
        # through the switch (its first packets can wait for p4sim's native engine to build)
        wait_until("client -> frontend through the switch", self._client_reaches_frontend,
                   timeout=180)

    def _client_reaches_frontend(self) -> bool:
        probe = f"echo -n > /dev/tcp/{self.frontend.addr}/{self.frontend_port}"
        return subprocess.run(["nsenter", "-t", str(self.client.pid), "-n", "timeout", "2",
                               "bash", "-c", probe], capture_output=True).returncode == 0

    def stop_servers(self) -> None:
        for h in self.hosts:
            _stop(h.procs)
            h.procs.clear()

    def run_client(self, *args: str) -> dict[str, object]:
        """One prism.client run from the client host; its JSON summary."""
        return self.client_result(self.start_client(*args))

    def start_client(self, *args: str) -> subprocess.Popen[str]:
        """A prism.client run started in the background (`client_result` waits for it)."""
        proc = subprocess.Popen(
            ["nsenter", "-t", str(self.client.pid), "-n", sys.executable, "-m", "prism.client",
             "--server", f"{self.frontend.addr}:{self.frontend_port}", *args],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(proc)  # type: ignore[arg-type]  # stopped by PID with the rest
        return proc

    @staticmethod
    def client_result(proc: subprocess.Popen[str], timeout: float = 600) -> dict[str, object]:
        stdout, stderr = proc.communicate(timeout=timeout)
        if not stdout.strip():
            raise RuntimeError(f"client printed nothing: {stderr[-2000:]}")
        out: dict[str, object] = json.loads(stdout.strip().splitlines()[-1])
        return out

    def crash_backend(self, k: int) -> None:
        """Backend k (1-based) fails like a crashed host: every packet it would send is dropped
        (a zero-byte FIFO as the root qdisc of both its links, so its kernel's FINs and RSTs
        never leave either), then its processes are killed (SIGKILL)."""
        b = self.backends[k - 1]
        for dev in (f"h{b.index}-eth0", f"h{b.index}-mgmt"):
            b.run("tc", "qdisc", "replace", "dev", dev, "root", "bfifo", "limit", "0")
        for p in b.procs:
            p.kill()
        for p in b.procs:
            p.wait()
        b.procs.clear()

    def close(self) -> None:
        """Stop every process by PID; delete the links, but only from the testbed's own network
        namespace (a caller in another namespace would delete someone else's `s1-eth1`): from
        elsewhere they go with the namespace, once its last process is gone."""
        Testbed.open_testbeds.discard(self)
        self.stop_servers()
        _stop(self.procs)
        _stop([h.holder for h in self.hosts])
        if os.readlink("/proc/thread-self/ns/net") != self.netns:
            return
        subprocess.run(["ip", "link", "del", "pmgmt0"], capture_output=True)
        for h in self.hosts:
            for dev in (f"s1-eth{h.index}", f"m{h.index}"):
                subprocess.run(["ip", "link", "del", dev], capture_output=True)

    @classmethod
    def close_all(cls) -> None:
        """Close every testbed still open (an interrupted run, from the main thread)."""
        for tb in list(cls.open_testbeds):
            tb.close()


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

