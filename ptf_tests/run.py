"""Run the PTF suite against a switch attached to veth pairs in a private network namespace.

    python -m ptf_tests.run --target p4sim [TEST_OR_GROUP ...]
    python -m ptf_tests.run --target bmv2  [TEST_OR_GROUP ...]

What it does, and always undoes (also on Ctrl-C): creates a network namespace with one veth pair
per switch port (`swpN` for the switch, `ptfN` for ptf, IPv6 disabled so the kernel stays
quiet), starts the switch inside it (`p4sim run` or `simple_switch_grpc`, no program: the
tests push the pipeline over P4Runtime), waits until its gRPC port listens, runs
`ptf --test-dir ptf_tests` inside the namespace with the P4Runtime address and the built
files as test parameters, then stops the switch and deletes the namespace.
Needs root (namespaces) and `make build` output in --build-dir.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PTF_DIR = REPO / "ptf_tests"
DEFAULT_PORTS = (1, 2, 3, 4)
CPU_PORT = 510
GRPC_PORT = 9559

# What `make build` writes (mk/dataplane.mk): p4sim output in build/, p4c's in build/bmv2/.
P4SIM_P4INFO = "nfcluster.p4info.txtpb"
P4SIM_CONFIGS = ("nfcluster.p4sim.json", "nfcluster.json", "nfcluster.p4sim", "nfcluster.bin")
BMV2_P4INFO = "bmv2/nfcluster.p4info.txtpb"
BMV2_CONFIG = "bmv2/nfcluster.json"
# BMv2 (through PI) delivers digest lists on a timer, p4sim at once (docs/bmv2.md)
DIGEST_QUIET_S = {"p4sim": 0.05, "bmv2": 0.5}


class RunError(RuntimeError):
    """A precondition of the run is missing (root, build output, switch binary)."""


@dataclass(frozen=True)
class SwitchSpec:
    """How to start one target and which built files its pipeline push sends."""

    command: list[str]
    p4info: Path
    device_config: Path


def _sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), check=check, capture_output=True, text=True)


def p4sim_command() -> list[str]:
    venv_bin = Path(sys.executable).parent
    exe = venv_bin / "p4sim"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "p4sim"]


def p4sim_run_available() -> str | None:
    """None when `p4sim run` is usable; otherwise why not."""
    try:
        out = subprocess.run(
            [*p4sim_command(), "run", "--help"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"p4sim cannot start: {exc}"
    if out.returncode != 0:
        return f"`p4sim run --help` failed: {(out.stderr or out.stdout).strip()[-300:]}"
    if "--grpc-addr" not in out.stdout:
        return "`p4sim run` is not built yet (no --grpc-addr flag)"
    return None


def find_p4sim_config(build: Path) -> Path:
    for name in P4SIM_CONFIGS:
        if (build / name).is_file():
            return build / name
    raise RunError(f"no p4sim device config in {build} (looked for {', '.join(P4SIM_CONFIGS)}); run `make build`")


def switch_spec(target: str, build: Path, ports: Sequence[int], grpc_addr: str) -> SwitchSpec:
    ifaces = [a for p in ports for a in ("-i", f"{p}@swp{p}")]
    if target == "p4sim":
        reason = p4sim_run_available()
        if reason:
            raise RunError(reason)
        cmd = [
            *p4sim_command(), "run", "--grpc-addr", grpc_addr, "--device-id", "1",
            "--cpu-port", str(CPU_PORT), *ifaces, "--no-p4",
        ]
        return SwitchSpec(cmd, build / P4SIM_P4INFO, find_p4sim_config(build))
    if target == "bmv2":
        exe = shutil.which("simple_switch_grpc")
        if exe is None:
            raise RunError("simple_switch_grpc is not on PATH (install BMv2 for TARGET=bmv2)")
        cmd = [
            exe, "--device-id", "1", *ifaces, "--no-p4", "--",
            "--grpc-server-addr", grpc_addr, "--cpu-port", str(CPU_PORT),
        ]
        return SwitchSpec(cmd, build / BMV2_P4INFO, build / BMV2_CONFIG)
    raise RunError(f"unknown target {target!r} (p4sim or bmv2)")


@contextmanager
def namespace(name: str, ports: Sequence[int]) -> Iterator[str]:
    """A network namespace with veth pairs swpN <-> ptfN, deleted on exit."""
    _sh("ip", "netns", "add", name)
    try:
        _sh("ip", "-n", name, "link", "set", "lo", "up")
        for key in ("all", "default"):
            _sh("ip", "netns", "exec", name, "sysctl", "-q", "-w", f"net.ipv6.conf.{key}.disable_ipv6=1")
        for p in ports:
            _sh("ip", "-n", name, "link", "add", f"swp{p}", "type", "veth", "peer", "name", f"ptf{p}")
            for dev in (f"swp{p}", f"ptf{p}"):
                _sh("ip", "-n", name, "link", "set", dev, "mtu", "9000")
                _sh("ip", "-n", name, "link", "set", dev, "up")
        yield name
    finally:
        _sh("ip", "netns", "del", name, check=False)


def wait_listening(ns: str, port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RunError(f"the switch exited with code {proc.returncode} before listening")
        out = _sh("ip", "netns", "exec", ns, "ss", "-Hltn", f"sport = :{port}", check=False)
        if out.stdout.strip():
            return
        time.sleep(0.1)
    raise RunError(f"the switch did not listen on port {port} within {timeout} s")


def stop(proc: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


def print_switch_log(path: Path, lines: int = 40) -> None:
    """The last `lines` of the switch's log, or why there is none."""
    try:
        tail = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError as exc:
        print(f"ptf-run: tests failed; no switch log to show ({path}: {exc.strerror})",
              file=sys.stderr)
        return
    if not tail:
        print(f"ptf-run: tests failed; the switch log {path} is empty", file=sys.stderr)
        return
    print("ptf-run: tests failed; last lines of the switch log:", *tail, sep="\n  ", file=sys.stderr)


def run(
    target: str,
    build: Path,
    tests: Sequence[str],
    ports: Sequence[int] = DEFAULT_PORTS,
    log_dir: Path | None = None,
    extra_ptf_args: Sequence[str] = (),
) -> int:
    if os.geteuid() != 0:
        raise RunError("the PTF runner needs root (network namespaces and raw sockets)")
    grpc_addr = f"127.0.0.1:{GRPC_PORT}"
    spec = switch_spec(target, build, ports, grpc_addr)
    for f in (spec.p4info, spec.device_config):
        if not f.is_file():
            raise RunError(f"{f} is missing: run `make build`")
    logs = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="nfc-ptf-"))
    logs.mkdir(parents=True, exist_ok=True)
    ns = f"nfcptf{os.getpid()}"
    params = ";".join(
        [
            f"grpc_addr='{grpc_addr}'",
            "device_id=1",
            f"cpu_port={CPU_PORT}",
            f"p4info='{spec.p4info.resolve()}'",
            f"device_config='{spec.device_config.resolve()}'",
            # how long a digest stream must stay quiet to count as drained between cases
            f"digest_quiet_s={DIGEST_QUIET_S[target]}",
        ]
    )
    with namespace(ns, ports), open(logs / "switch.log", "wb") as switch_log:
        proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, *spec.command], stdout=switch_log, stderr=subprocess.STDOUT
        )
        try:
            wait_listening(ns, GRPC_PORT, proc, timeout=30.0)
            ptf_cmd = [
                "ip", "netns", "exec", ns,
                str(Path(sys.executable).parent / "ptf"),
                "--test-dir", str(PTF_DIR),
                "--pypath", str(REPO),
                # a directory of its own: ptf empties its log directory, the switch's log with it
                "--log-dir", str(logs / "ptf"),
                "--default-timeout", "3",
                "--default-negative-timeout", "0.3",
                "--test-params", params,
                *[a for p in ports for a in ("-i", f"{p}@ptf{p}")],
                *extra_ptf_args,
                *tests,
            ]
            print(f"ptf-run: target {target}, logs in {logs}", flush=True)
            rc = subprocess.run(ptf_cmd, cwd=logs, check=False).returncode
        finally:
            stop(proc)
    if rc != 0:
        print_switch_log(logs / "switch.log")
        print(f"ptf-run: logs kept in {logs}", file=sys.stderr)
    elif log_dir is None:
        shutil.rmtree(logs, ignore_errors=True)
    return rc


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ptf_tests.run", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--target", choices=("p4sim", "bmv2"), default="p4sim")
    parser.add_argument("--build-dir", type=Path, default=REPO / "build")
    parser.add_argument("--log-dir", type=Path, default=None, help="keep ptf and switch logs here")
    parser.add_argument("--ptf-arg", action="append", default=[], help="extra argument for ptf")
    parser.add_argument("tests", nargs="*", help="test names or groups (default: all)")
    args = parser.parse_args(argv)
    try:
        return run(args.target, args.build_dir, args.tests, log_dir=args.log_dir,
                   extra_ptf_args=args.ptf_arg)
    except RunError as exc:
        print(f"ptf-run: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
