"""Private etcd servers (Debian's etcd-server) on free loopback ports: one, or a cluster.

The launcher behind `make run` and the tests start their own etcd: `run_etcd()` one member,
`run_etcd_cluster(3)` a real three-member cluster (`make run` uses it) whose members can be
killed and started again (`EtcdCluster.kill`, `EtcdCluster.start`) to play the loss of a member
or of the quorum. Each member has a temporary data directory, client and peer URLs on
127.0.0.1, and the launcher waits until `/health` says the cluster is up. A cluster member
snapshots and compacts often enough that its memory stays bounded over a soak.

Mutual TLS by default (docs/security.md): given a PKI directory (`pki`, the repository's
build/pki unless told otherwise), clients and peers speak https with the "etcd" certificate,
and etcd requires a client certificate of the CA (`--client-cert-auth`, `--peer-client-cert-auth`).
`pki=None` serves plaintext: an explicit choice, for debugging and the tests' shared fixture.
"""

from __future__ import annotations

import logging
import os
import shutil
import ssl
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from mgmt.etcd_endpoints import ETCD_NAME
from mgmt.pki import local_pki
from mgmt.tls import Identity
from topo.procs import free_port, prioritize_session, stop_process, wait_for

# a member keeps its raft log in memory up to a snapshot, every SNAPSHOT_COUNT entries (etcd's
# default is 100000), and 5000 more after it (fixed in etcd 3.4); revisions older than
# COMPACTION_RETENTION are compacted (periodic mode: about every such period), which keeps the
# key index and the database small; the Go heap may grow to 1 + GOGC/100 times what is live
# (default 100). On a bare 3-member cluster at 100 writes/s (26,000 in 5 minutes), 5000 entries,
# revision compaction and GOGC 100 reached 53-58 MiB and still grew; these settings levelled off
# at 43-45 MiB from the third minute on (docs/chaos.md, "Memory over a soak")
# the members run at the controllers' niceness, their sessions too (`prioritize_session`): at nice
# 0 on a starved host (make soak-all: ten NFs, moves, faults and two CPU hogs on 2 cores) the
# members lost their raft leader and the controllers, both in turn, their 5 s lease, and the run
# ended with none leading
ETCD_NICE = -10
SNAPSHOT_COUNT = 1000
COMPACTION_RETENTION = "1m"
GOGC = "50"
PORT_ATTEMPTS = 3  # cluster starts tried when a port found free was taken meanwhile
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EtcdServer:
    host: str
    port: int

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"


def etcd_binary() -> str | None:
    return shutil.which("etcd")


class MemberExited(RuntimeError):
    """An etcd member's process exited while the cluster was expected to come up."""


@dataclass
class EtcdMember:
    name: str
    client_port: int
    peer_port: int
    data_dir: Path
    log_file: Path
    proc: subprocess.Popen[bytes] | None = None
    also_on: str | None = None  # a second client address (the management network's gateway)
    scheme: str = "https"  # (http: plaintext)

    @property
    def client_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.client_port}"

    @property
    def client_urls(self) -> str:
        """Where it serves clients: loopback, and `also_on` when given."""
        extra = f",{self.scheme}://{self.also_on}:{self.client_port}" if self.also_on else ""
        return self.client_url + extra

    @property
    def peer_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.peer_port}"


@dataclass
class EtcdCluster:
    """A running etcd cluster of `len(members)` members on loopback."""

    members: list[EtcdMember] = field(default_factory=list)
    pki: Path | None = None  # mutual TLS with this PKI's "etcd" certificate (None: plaintext)

    @property
    def tls(self) -> bool:
        return self.pki is not None

    def tls_args(self) -> list[str]:
        """etcd's flags for mutual TLS on client and peer links (none for plaintext)."""
        if self.pki is None:
            return []
        ca, crt, key = (str(self.pki / f) for f in ("ca.crt", f"{ETCD_NAME}.crt", f"{ETCD_NAME}.key"))
        return ["--cert-file", crt, "--key-file", key, "--trusted-ca-file", ca,
                "--client-cert-auth",
                "--peer-cert-file", crt, "--peer-key-file", key, "--peer-trusted-ca-file", ca,
                "--peer-client-cert-auth"]

    def _health_context(self) -> ssl.SSLContext | None:
        """The launcher asks /health as the controller (etcd wants a client certificate)."""
        return None if self.pki is None else Identity(self.pki, "controller").client_context()

    @property
    def endpoints(self) -> list[str]:
        """Every member's client endpoint, HOST:PORT (the form the controller's config takes)."""
        return [f"127.0.0.1:{m.client_port}" for m in self.members]

    def endpoints_on(self, host: str) -> list[str]:
        """The client endpoints on `host` (one of the addresses the members serve on)."""
        return [f"{host}:{m.client_port}" for m in self.members]

    @property
    def servers(self) -> list[EtcdServer]:
        return [EtcdServer("127.0.0.1", m.client_port) for m in self.members]

    def _initial_cluster(self) -> str:
        return ",".join(f"{m.name}={m.peer_url}" for m in self.members)

    def start(self, index: int) -> None:
        """Start member `index` (again: it rejoins with its data directory)."""
        m = self.members[index]
        if m.proc is not None and m.proc.poll() is None:
            return
        binary = etcd_binary()
        if binary is None:
            raise RuntimeError("etcd is not installed (apt-get install etcd-server, or run `make setup`)")
        log = open(m.log_file, "ab")  # noqa: SIM115  (etcd holds its own descriptor)
        m.proc = subprocess.Popen(
            [
                "nice", "-n", str(ETCD_NICE), binary,
                "--name", m.name,
                "--data-dir", str(m.data_dir),
                "--listen-client-urls", m.client_urls,
                "--advertise-client-urls", m.client_urls,
                "--listen-peer-urls", m.peer_url,
                "--initial-advertise-peer-urls", m.peer_url,
                "--initial-cluster", self._initial_cluster(),
                "--initial-cluster-state", "new",
                "--initial-cluster-token", "nfcluster",
                "--log-level", "error",
                # bounded memory over a long run (make soak): see SNAPSHOT_COUNT
                "--snapshot-count", str(SNAPSHOT_COUNT),
                "--auto-compaction-mode", "periodic",
                "--auto-compaction-retention", COMPACTION_RETENTION,
                *self.tls_args(),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "GOGC": GOGC},
            # not in the terminal's process group: Ctrl-C reaches the launcher only, which stops
            # the member by its PID (`make up --cli`: a Ctrl-C in Mininet's CLI must not kill it)
            start_new_session=True,
        )
        log.close()
        prioritize_session(m.proc.pid, ETCD_NICE)  # (its own session: see ETCD_NICE)

    def kill(self, index: int) -> None:
        """SIGKILL member `index` (its data directory stays, so `start` brings it back)."""
        m = self.members[index]
        if m.proc is not None:
            if m.proc.poll() is None:
                m.proc.kill()
            m.proc.wait()
            m.proc = None

    def alive(self, index: int) -> bool:
        proc = self.members[index].proc
        return proc is not None and proc.poll() is None

    def healthy(self, index: int) -> bool:
        """Member `index` answers /health with true (it is up and the cluster has a quorum)."""
        m = self.members[index]
        if m.proc is not None and m.proc.poll() is not None:
            err = m.log_file.read_text(errors="replace")[-2000:]
            raise MemberExited(f"etcd member {m.name} exited with {m.proc.returncode} "
                               f"(log {m.log_file}): {err}")
        try:
            with urllib.request.urlopen(f"{m.client_url}/health", timeout=1,
                                        context=self._health_context()) as resp:
                return b'"health":"true"' in resp.read()
        except OSError:
            return False

    def wait_healthy(self, timeout: float = 20.0) -> None:
        """Wait until every running member reports a healthy cluster."""
        running = [i for i in range(len(self.members)) if self.alive(i)]
        wait_for(lambda: all(self.healthy(i) for i in running), timeout=timeout,
                 what=f"etcd members {running} healthy", fatal=(MemberExited,))

    def stop(self) -> None:
        for i in range(len(self.members)):
            m = self.members[i]
            if m.proc is not None:
                stop_process(m.proc)
                m.proc = None


@contextmanager
def run_etcd_cluster(size: int = 3, timeout: float = 20.0, log_dir: Path | None = None,
                     log_name: str = "etcd-{i}.log", also_on: str | None = None,
                     pki: Path | Literal["local"] | None = "local") -> Iterator[EtcdCluster]:
    """Start a `size`-member etcd cluster, wait until it is healthy, stop it afterwards. Member
    i logs to `log_dir/log_name` (`{i}` replaced; default: next to its data directory, gone
    with it), never to a pipe nobody reads: etcd would block once the pipe filled. Clients
    reach it on loopback, and on `also_on` too when given (the management network's address
    in the root namespace, for NF runtimes in their own namespaces). `pki`: mutual TLS with
    that PKI's certificates (default the repository's, `local_pki()`); None: plaintext."""
    if etcd_binary() is None:
        raise RuntimeError("etcd is not installed (apt-get install etcd-server, or run `make setup`)")
    if size < 1:
        raise ValueError(f"an etcd cluster needs at least one member, not {size}")
    pki_dir = local_pki() if pki == "local" else pki
    if pki_dir is not None:
        Identity(pki_dir, ETCD_NAME).check()
    with tempfile.TemporaryDirectory(prefix="nfc-etcd-") as tmp:
        for attempt in range(1, PORT_ATTEMPTS + 1):
            cluster = EtcdCluster(pki=pki_dir)
            for i in range(size):
                data_dir = Path(tmp) / f"try-{attempt}" / f"member-{i}"
                data_dir.mkdir(parents=True)
                log_file = (log_dir / log_name.format(i=i)) if log_dir else data_dir.with_suffix(".log")
                cluster.members.append(EtcdMember(f"m{i}", free_port(), free_port(), data_dir,
                                                  log_file, also_on=also_on,
                                                  scheme="https" if pki_dir else "http"))
            try:
                for i in range(size):
                    cluster.start(i)
                cluster.wait_healthy(timeout)
                break
            except (RuntimeError, TimeoutError) as exc:
                cluster.stop()
                # a port found free was taken before etcd bound it (another process picked
                # it meanwhile): again with new ports
                if "address already in use" not in str(exc) or attempt == PORT_ATTEMPTS:
                    raise
                log.warning("etcd: a port was taken before it could bind (%s); new ports", exc)
        try:
            yield cluster
        finally:
            cluster.stop()


@contextmanager
def run_etcd(timeout: float = 20.0, log_path: Path | None = None,
             pki: Path | Literal["local"] | None = "local") -> Iterator[EtcdServer]:
    """Start one etcd member with a temporary data directory, wait until it is healthy, stop it
    afterwards. Its output goes to `log_path` (default: a file in the data directory); `pki` as
    for `run_etcd_cluster` (mutual TLS unless None)."""
    log_dir, log_name = (log_path.parent, log_path.name) if log_path else (None, "")
    with run_etcd_cluster(1, timeout, log_dir, log_name, pki=pki) as cluster:
        yield cluster.servers[0]
