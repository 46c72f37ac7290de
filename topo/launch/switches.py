"""Mininet switch classes for P4Runtime targets: `P4simSwitch` (p4sim, always available) and
`Bmv2Switch` (BMv2 `simple_switch_grpc`, when that binary is on PATH).

`P4Host` is a host with checksum offloads off, as software switches need.
They are the counterpart of the P4Switch/BMv2 classes of the P4 tutorials: each Mininet interface
of the switch becomes a data-plane port (`-i N@iface`, N = Mininet's port number), the switch serves
P4Runtime on 127.0.0.1:`grpc_port` with `device_id`, and `start()` returns only once the gRPC port
accepts connections. Processes are started with Popen and stopped by their own handle.

The switch process runs at niceness `SWITCH_NICE` (-10, the controller's), and so does its session
as a scheduling group (`topo.procs.prioritize_session`: with the kernel's autogroups a process's
own niceness counts only inside its session): it stands in for a hardware switch, whose
forwarding never waits for the host's CPU. At nice 0 on a loaded 2-core host
(`make bench-failover --busy 2` beside other jobs: load 11-24) p4sim got a tenth of the wall time
(run 50 ms, waiting on the run queue 550 ms, per 600 ms) and once stopped reading its client port
for 8 s: its receive ring (about 2 s deep) overflowed and 18,652 client packets were kernel drops
at that port, which the bench's verdict took for the loss of a false fail-over (docs/protocols.md,
"A loaded host delays, never drops").
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mininet.node import Host, Switch

from topo.procs import prioritize_session

BMV2_BINARY = "simple_switch_grpc"
BMV2_CLI = "simple_switch_CLI"  # BMv2's runtime CLI (Thrift), for what P4Runtime does not set
SWITCH_NICE = -10  # the switch process's niceness (see the module docstring); root may lower it


def bmv2_available() -> bool:
    return shutil.which(BMV2_BINARY) is not None


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


class _GrpcSwitch(Switch):  # type: ignore[misc]
    """Common part: ports from Mininet interfaces, a child process, a readiness wait."""

    next_grpc_port = 50051
    next_device_id = 1

    def __init__(
        self,
        name: str,
        program: str | None = None,
        grpc_port: int | None = None,
        device_id: int | None = None,
        cpu_port: int | None = 510,
        log_level: str = "info",
        log_dir: str = "/tmp",
        pcap_dir: str | None = None,
        start_timeout: float = 20.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(name, **kwargs)
        if grpc_port is None:
            grpc_port = _GrpcSwitch.next_grpc_port
            _GrpcSwitch.next_grpc_port += 1
        if device_id is None:
            device_id = _GrpcSwitch.next_device_id
            _GrpcSwitch.next_device_id += 1
        self.program = program
        self.grpc_port = grpc_port
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.log_level = log_level
        self.log_path = Path(log_dir) / f"{name}.log"
        self.pcap_dir = pcap_dir
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def port_args(self) -> list[str]:
        args: list[str] = []
        for port, intf in sorted(self.intfs.items()):
            if intf.name == "lo" or port == 0:
                continue
            args += ["-i", f"{port}@{intf.name}"]
        return args

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, controllers: list[Any]) -> None:
        if _listening(self.grpc_port):
            raise RuntimeError(f"{self.name}: port {self.grpc_port} is already in use")
        for _port, intf in sorted(self.intfs.items()):
            if intf.name != "lo":
                # the kernel must not speak on a data-plane port (IPv6 router solicitations,
                # MLD): the switch would carry those frames to whatever is on the other side
                self.cmd(f"sysctl -qw net.ipv6.conf.{intf.name}.disable_ipv6=1")
        # the data plane first: a starved switch drops at its receive rings (module docstring);
        # without the privilege `nice` says so in the log and runs it at the default priority
        cmd = ["nice", "-n", str(SWITCH_NICE), *self.command()]
        with open(self.log_path, "ab") as log:  # appended: a restarted switch keeps the old log
            # a session of its own: a Ctrl-C at the terminal reaches the launcher only, which
            # stops the switch by its PID
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        # its own session is its own scheduling group: the group gets the priority too
        prioritize_session(self.proc.pid, SWITCH_NICE)
        deadline = time.monotonic() + self.start_timeout
        while not _listening(self.grpc_port):
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited at start; see {self.log_path}")
            if time.monotonic() > deadline:
                self.stop_process()
                raise RuntimeError(f"{self.name} did not listen on {self.grpc_address}")
            time.sleep(0.05)

    def stop_process(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def stop(self, deleteIntfs: bool = True) -> None:
        self.stop_process()
        super().stop(deleteIntfs)

    def defaultIntf(self) -> Any:
        return None


class P4simSwitch(_GrpcSwitch):
    """A Mininet switch run by `p4sim run` (with `program`, or `--no-p4` to wait for a push).

    `io` picks the port I/O (`ring` or `socket`; None: p4sim's default), `engine` the packet
    engine (passed as `--engine` when not None: only p4sims that have the option), and
    `metrics_port` serves p4sim's counters on 127.0.0.1 (`--metrics-addr`), `tls_dir` is the PKI
    of P4Runtime over mutual TLS (`--tls-dir`). Register entries
    are refused (`--no-register-access`) unless `registers`: BMv2's P4Runtime server serves
    none, so every run on p4sim also shows that the system needs none."""

    def __init__(self, name: str, io: str | None = None, engine: str | None = None,
                 metrics_port: int | None = None, registers: bool = False,
                 tls_dir: str | None = None, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self.io, self.engine, self.metrics_port = io, engine, metrics_port
        self.tls_dir = tls_dir  # P4Runtime over mutual TLS with this PKI (docs/security.md)
        self.registers = registers

    @property
    def metrics_address(self) -> str | None:
        return None if self.metrics_port is None else f"127.0.0.1:{self.metrics_port}"

    def command(self) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "p4sim.server.cli",
            "--grpc-addr",
            self.grpc_address,
            "--device-id",
            str(self.device_id),
            "--log-level",
            self.log_level,
        ]
        if self.cpu_port is not None:
            cmd += ["--cpu-port", str(self.cpu_port)]
        if self.pcap_dir:
            cmd += ["--pcap", self.pcap_dir]
        if self.io is not None:
            cmd += ["--io", self.io]
        if self.engine is not None:
            cmd += ["--engine", self.engine]
        if self.metrics_port is not None:
            cmd += ["--metrics-addr", f"127.0.0.1:{self.metrics_port}"]
        if not self.registers:
            cmd += ["--no-register-access"]
        if self.tls_dir is not None:
            cmd += ["--tls-dir", self.tls_dir]
        cmd += self.port_args()
        cmd += [self.program] if self.program else ["--no-p4"]
        return cmd


def p4sim_engines() -> list[str]:
    """The engines `p4sim run --engine` offers ([] when it has no such option: only its one)."""
    import re

    out = subprocess.run([sys.executable, "-m", "p4sim.server.cli", "--help"], capture_output=True,
                         text=True, check=False).stdout
    m = re.search(r"--engine \{([^}]*)\}", out)
    return m.group(1).split(",") if m else []


def bmv2_runtime_commands(queue_depth: int | None) -> list[str]:
    """What BMv2's runtime CLI is told after the switch starts: every egress queue's depth in
    packets (`set_queue_depth`; None or 0: BMv2's default, 64). P4Runtime has no such setting."""
    return [f"set_queue_depth {queue_depth}"] if queue_depth else []


def run_bmv2_cli(thrift_port: int, commands: list[str],
                 run: Any = subprocess.run) -> str | None:
    """Send `commands` to BMv2's runtime CLI on `thrift_port`; None when they went through, else
    why not (no CLI on PATH, a BMv2 built without Thrift, an error it printed). `run`:
    `subprocess.run`'s stand-in for tests."""
    if not commands:
        return None
    cli = shutil.which(BMV2_CLI)
    if cli is None:
        return f"{BMV2_CLI} is not on PATH"
    try:
        done = run([cli, "--thrift-port", str(thrift_port)], input="\n".join(commands) + "\n",
                   capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{BMV2_CLI}: {exc}"
    out = f"{done.stdout}\n{done.stderr}"
    if done.returncode != 0 or "Error" in out or "Could not connect" in out:
        return f"{BMV2_CLI} failed ({done.returncode}): {out.strip()[-300:]}"
    return None


class Bmv2Switch(_GrpcSwitch):
    """A Mininet switch run by BMv2 `simple_switch_grpc`; `program` is the p4c JSON, if any.

    Each switch also gets its own Thrift port (BMv2's CLI), 9090 upwards unless given. With
    `queue_depth`, every egress queue holds that many packets (BMv2's runtime CLI, once the
    switch listens; BMv2's default is 64): a failure is logged, and the switch runs with its
    default (`runtime_error` says why).
    """

    next_thrift_port = 9090

    def __init__(self, name: str, thrift_port: int | None = None,
                 queue_depth: int | None = None, **kwargs: Any) -> None:
        if not bmv2_available():
            raise RuntimeError(f"{BMV2_BINARY} is not on PATH")
        super().__init__(name, **kwargs)
        if thrift_port is None:
            thrift_port = Bmv2Switch.next_thrift_port
            Bmv2Switch.next_thrift_port += 1
        self.thrift_port = thrift_port
        self.queue_depth = queue_depth
        self.runtime_error: str | None = None

    def start(self, controllers: list[Any]) -> None:
        super().start(controllers)
        self.runtime_error = run_bmv2_cli(self.thrift_port,
                                          bmv2_runtime_commands(self.queue_depth))
        if self.runtime_error is not None:
            with open(self.log_path, "a") as log:
                log.write(f"nfcluster: egress queue depth not set: {self.runtime_error}\n")

    def command(self) -> list[str]:
        cmd = [shutil.which(BMV2_BINARY) or BMV2_BINARY, "--device-id", str(self.device_id)]
        cmd += ["--thrift-port", str(self.thrift_port)]
        cmd += self.port_args()
        if self.pcap_dir:
            cmd += ["--pcap", self.pcap_dir]
        cmd += ["--log-console", "-L", self.log_level] if self.log_level != "info" else []
        cmd += [self.program] if self.program else ["--no-p4"]
        cmd += ["--", "--grpc-server-addr", self.grpc_address]
        if self.cpu_port is not None:
            cmd += ["--cpu-port", str(self.cpu_port)]
        return cmd


class P4Host(Host):  # type: ignore[misc]
    """A Mininet host with checksum/segmentation offloads off on its interface.

    A software switch reads frames with AF_PACKET before the kernel fills in offloaded checksums,
    so without this a host's TCP/UDP packets would reach the other host with bad checksums.
    """

    def config(self, **params: Any) -> Any:
        r = super().config(**params)
        for feature in ("rx", "tx", "sg"):
            self.cmd("ethtool", "--offload", self.defaultIntf().name, feature, "off")
        self.cmd("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        return r


def switch_class(target: str) -> type[_GrpcSwitch]:
    """The switch class for a target name: 'p4sim' or 'bmv2'."""
    if target == "p4sim":
        return P4simSwitch
    if target == "bmv2":
        return Bmv2Switch
    raise ValueError(f"unknown target {target!r} (p4sim or bmv2)")


__all__ = ["Bmv2Switch", "P4Host", "P4simSwitch", "bmv2_available",
           "bmv2_runtime_commands", "p4sim_engines", "run_bmv2_cli", "switch_class"]
