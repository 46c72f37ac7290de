"""A private etcd server (Debian's etcd-server) on free loopback ports.

The launcher behind `make run` and the tests start their own etcd with `run_etcd()`: a temporary data
directory, client and peer URLs on 127.0.0.1, and a wait until `/health` says it is up.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from topo.procs import free_port, stop_process, wait_for


@dataclass(frozen=True)
class EtcdServer:
    host: str
    port: int

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"


def etcd_binary() -> str | None:
    return shutil.which("etcd")


@contextmanager
def run_etcd(timeout: float = 20.0, log_path: Path | None = None) -> Iterator[EtcdServer]:
    """Start etcd with a temporary data directory, wait until it is healthy, stop it afterwards.
    Its output goes to `log_path` (default: `etcd.log` in the data directory, gone with it), never
    to a pipe nobody reads: etcd would block once the pipe filled."""
    binary = etcd_binary()
    if binary is None:
        raise RuntimeError("etcd is not installed (apt-get install etcd-server, or run `make setup`)")
    client_port, peer_port = free_port(), free_port()
    with tempfile.TemporaryDirectory(prefix="nfc-etcd-") as data_dir:
        log_file = log_path or Path(data_dir) / "etcd.log"
        log = open(log_file, "ab")  # noqa: SIM115  (closed with etcd, below)
        client_url = f"http://127.0.0.1:{client_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        proc = subprocess.Popen(
            [
                binary,
                "--name", "test",
                "--data-dir", data_dir,
                "--listen-client-urls", client_url,
                "--advertise-client-urls", client_url,
                "--listen-peer-urls", peer_url,
                "--initial-advertise-peer-urls", peer_url,
                "--initial-cluster", f"test={peer_url}",
                "--log-level", "error",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()  # etcd holds its own descriptor
        try:
            def healthy() -> bool:
                if proc.poll() is not None:
                    err = log_file.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"etcd exited with {proc.returncode} (log {log_file}): {err}")
                with urllib.request.urlopen(f"{client_url}/health", timeout=1) as resp:
                    return b'"health":"true"' in resp.read()

            wait_for(healthy, timeout=timeout, what="etcd /health")
            yield EtcdServer("127.0.0.1", client_port)
        finally:
            stop_process(proc)
