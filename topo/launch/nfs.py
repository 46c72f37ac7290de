"""The NF runtimes of a run: one `nf-host` per NF started on its node, and processes stopped by
PID on the way out."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from controlplane.config import ControllerConfig
from mgmt.pki import local_pki
from topo.faults.mgmt_cut import MgmtCuts
from topo.launch import chain_run
from topo.launch import hot as hot_run
from topo.launch.topology import Topology
from topo.model import REPO, RunOptions
from topo.procs import stop_processes


@contextmanager
def started(procs: list[subprocess.Popen[bytes]]) -> Iterator[list[subprocess.Popen[bytes]]]:
    try:
        yield procs
    finally:
        stop_processes(procs)


def start_nfs(net: Any, cfg: ControllerConfig, topo: Topology, opts: RunOptions,
              log_dir: Path, global_store: str = "memory", cuts: MgmtCuts | None = None,
              ) -> list[subprocess.Popen[bytes]]:
    return [start_nf(net, cfg, topo, opts, log_dir, nf.id, global_store=global_store, cuts=cuts)
            for nf in sorted(cfg.nfs, key=lambda n: n.id)]


def start_nf(net: Any, cfg: ControllerConfig, topo: Topology, opts: RunOptions, log_dir: Path,
             nf_id: int, idle: bool = False, global_store: str = "memory",
             cuts: MgmtCuts | None = None) -> subprocess.Popen[bytes]:
    """Start NF `nf_id`'s `nf-host` on its node (its log appended to `nf<id>.log`). An NF started
    again after a fault (`idle`) comes up idle, and the controller returns it to the spare pool.
    It runs the checker NF, or with service chains its stage's NF (topo/launch/chain_run.py). With
    `cuts`, in the NF's own cgroup, where its management link can be cut (topo/faults/mgmt_cut.py)."""
    nf = cfg.nf(nf_id)
    program = (chain_run.nf_args(cfg, nf_id, global_store) if cfg.chains
               else ["--nf", opts.nf, "--global-store", global_store])
    node = net.get(topo.node_of(nf.id).name)
    role = "idle" if idle or nf.role == "spare" else nf.role
    cmd = [sys.executable, "-m", "nf_host", "run", "--nf-id", str(nf.id),
           "--cluster", str(cfg.cluster_numbers()[nf.cluster]),
           "--interface", topo.link_of(nf.id).intf, "--control", nf.mgmt,
           "--replication", nf.replication_address(), "--role", role,
           # its certificate and heartbeat key (docs/security.md), or plaintext if the
           # controller's configuration says `security.tls: false`
           *(["--pki-dir", str(local_pki())] if cfg.security.tls else ["--insecure"]),
           *(["--etcd-insecure"] if cfg.security.tls and not cfg.security.etcd_tls else []),
           *program, "--workers", str(opts.workers),
           "--batch-size", str(cfg.batch.size), "--batch-time-us", str(cfg.batch.timeout_us),
           # a slot move takes 10-60 ms here: wait longer than that before skipping a number
           "--gap-timeout-ms", str(opts.gap_timeout_ms),
           *(hot_run.nf_params() if opts.hot else []),
           *(["--params", opts.nf_params] if opts.nf_params else []),
           *(["--heartbeat-echo", opts.heartbeat_echo] if opts.heartbeat_echo else [])]
    if cuts is not None:
        cmd = cuts.wrap(nf.id, cmd)
    log = open(log_dir / f"nf{nf.id}.log", "ab")  # noqa: SIM115  (closed with the process)
    proc: subprocess.Popen[bytes] = node.popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                               cwd=str(REPO))
    log.close()
    return proc
