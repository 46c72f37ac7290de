"""The whole system of a run brought up and torn down: etcd, the Mininet network and its switch,
one `nf-host` per NF, the controller and a standby (`system`), with the controller's
configuration for this run (`runtime_config`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from controlplane.config import load_config
from mgmt.pki import local_pki
from topo.etcd import run_etcd_cluster
from topo.faults.mgmt_cut import MgmtCuts
from topo.http_api import http_json
from topo.launch import hot as hot_run
from topo.launch.controllers import Controllers
from topo.launch.network import mininet_network
from topo.launch.nfs import start_nf, start_nfs, started
from topo.launch.topology import build_topology
from topo.model import REPO, RunOptions, System
from topo.procs import free_port, prioritize_session, stop_processes, wait_for

# the controller-ready wait's hard cap, in `--ready-timeout`s, while NFs keep being configured
READY_CAP = 5


class NotReady(RuntimeError):
    """The system will not come up: the controller exited, or configured no more NFs for
    `--ready-timeout` s."""


def runtime_config(cfg_path: Path, target: str, switch_addr: str, etcd_endpoints: list[str], api: str,
                   out: Path, heartbeat_ms: int = 0, confirm_ms: int = 0, hot: bool = False,
                   switch_stats: str | None = None, self_takeover: bool | None = None,
                   misses: int = 0) -> Path:
    """The configuration with this run's target and addresses (switch, etcd, API, p4sim's
    counter endpoint `switch_stats`) filled in, the heartbeat interval (`heartbeat_ms`, with a
    deadline of the same length), the misses before the probe (`misses`) and the confirming
    probe's deadline (`confirm_ms`) if given."""
    data = yaml.safe_load(cfg_path.read_text())
    if heartbeat_ms:
        data.setdefault("heartbeat", {}).update(interval_ms=heartbeat_ms, timeout_ms=heartbeat_ms)
    if confirm_ms:
        data.setdefault("heartbeat", {})["confirm_timeout_ms"] = confirm_ms
    if misses:
        data.setdefault("heartbeat", {})["misses"] = misses
    if self_takeover is not None:
        data.setdefault("heartbeat", {})["self_takeover"] = self_takeover
    data.setdefault("switch", {})["address"] = switch_addr
    if switch_stats is not None:
        data["switch"]["stats"] = switch_stats
    if target != data["switch"].get("target", "p4sim"):
        data["switch"]["target"] = target
        data["switch"].pop("device_config", None)
        if target == "bmv2":  # p4c's outputs, as `make build` writes them
            data["switch"]["p4info"] = str(REPO / "build" / "bmv2" / "nfcluster.p4info.txtpb")
    for key in ("p4info", "device_config"):
        if key in data["switch"] and not Path(data["switch"][key]).is_absolute():
            data["switch"][key] = str(REPO / data["switch"][key])
    data["switch"].setdefault("p4info", str(REPO / "build" / "nfcluster.p4info.txtpb"))
    data.setdefault("etcd", {})["endpoints"] = list(etcd_endpoints)
    # the repository's PKI (mgmt/pki.py), created if missing: the NFs' certificates and
    # heartbeat keys come from it too (topo/launch/nfs.py)
    security = data.setdefault("security", {})
    if security.get("tls", True):
        security.setdefault("pki_dir", str(local_pki()))
    if target != "p4sim":  # (p4sim serves TLS when the launcher asks; BMv2 here does not)
        security["switch_tls"] = False
    data.setdefault("api", {})["listen"] = api
    if hot:
        hot_run.apply_config(data)
    path = out / "controller.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@contextmanager
def system(opts: RunOptions, console: Console) -> Iterator[System]:
    """Bring the whole system up (etcd, the Mininet network and its switch, one nf-host per NF,
    the controller and, with `opts.standby`, a standby) and wait until the controller is the
    switch's primary and has configured every NF; stop everything on the way out. `run` and the
    experiments (`experiments/`) send their traffic through it."""
    if os.geteuid() != 0:
        raise PermissionError("the scenario creates network namespaces: run it as root")
    cfg = load_config(opts.config)
    topo = build_topology(cfg)
    p4info = REPO / cfg.switch.p4info if not cfg.switch.p4info.is_absolute() else cfg.switch.p4info
    if not p4info.exists():
        raise FileNotFoundError(f"{p4info} is missing: run `make build` first")
    log_dir = opts.out_dir
    log_dir.mkdir(parents=True, exist_ok=True)
    grpc_port, standby_api_port = free_port(), free_port()
    api_port = opts.api_port or free_port()
    switch_opts: dict[str, Any] = {}
    stats_addr: str | None = None
    if opts.target == "p4sim":  # its counters: the controller shows the switch's port losses
        switch_opts = {"io": opts.io, "engine": opts.engine, "metrics_port": free_port()}
        if cfg.security.tls and cfg.security.switch_tls:  # P4Runtime over mutual TLS
            switch_opts["tls_dir"] = str(local_pki())
        stats_addr = f"127.0.0.1:{switch_opts['metrics_port']}"
    elif opts.target == "bmv2":  # deeper egress queues than BMv2's 64 (docs/bmv2.md)
        switch_opts = {"queue_depth": opts.bmv2_queue_depth}
    api = f"http://127.0.0.1:{api_port}"
    standby_api = f"http://127.0.0.1:{standby_api_port}"
    with ExitStack() as stack:
        console.print(f"starting the network on {opts.target} (logs in {log_dir}) ...")
        net = stack.enter_context(mininet_network(topo, opts.target, grpc_port, log_dir,
                                                  cfg.switch.device_id, switch_opts))
        console.print(f"starting etcd ({opts.etcd_members} member(s)) ...")
        # on the management network too: the NF runtimes' global state (a NAT's port pool)
        # over mutual TLS unless the configuration says plaintext (docs/security.md)
        etcd_pki = local_pki() if cfg.security.etcd_identity() is not None else None
        etcd = stack.enter_context(run_etcd_cluster(opts.etcd_members, log_dir=log_dir,
                                                    also_on=topo.mgmt_gateway, pki=etcd_pki))
        store = "etcd://" + ",".join(etcd.endpoints_on(topo.mgmt_gateway)) + "/nfc-global"
        cuts: MgmtCuts | None = None
        if "mgmt" in opts.fault_kinds and opts.kill_every:
            cuts = MgmtCuts()
            stack.callback(cuts.close)  # after the NFs stopped (callbacks run last in, first out)
        nf_procs = stack.enter_context(started(start_nfs(net, cfg, topo, opts, log_dir, store,
                                                         cuts)))
        cfg_path = runtime_config(opts.config, opts.target, f"127.0.0.1:{grpc_port}", etcd.endpoints,
                                  f"127.0.0.1:{api_port}", log_dir, opts.heartbeat_ms,
                                  opts.confirm_ms, opts.hot, stats_addr, opts.self_takeover,
                                  opts.heartbeat_misses)
        ctl_procs: list[subprocess.Popen[bytes]] = []
        stack.callback(lambda: stop_processes(ctl_procs))
        ctl_ports = {"controller": api_port, "standby": standby_api_port}

        def start_controller(name: str) -> subprocess.Popen[bytes]:
            """`nfc-controller run` named `name` (it leads, or stands by until it can). The
            control plane first: on a saturated machine its heartbeats and fail-overs must not
            wait behind the data plane (a slow answer looks like a dead NF)."""
            with open(log_dir / f"{name}.log", "ab") as log:
                proc = subprocess.Popen(
                    ["nice", "-n", "-10", sys.executable, "-m", "controlplane", "run", "--config",
                     str(cfg_path), "--api", f"127.0.0.1:{ctl_ports[name]}", "--name", name],
                    stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO),
                    start_new_session=True)  # Ctrl-C reaches the launcher only: stopped by PID
            prioritize_session(proc.pid, -10)  # (its own session: the nice above counts in it only)
            ctl_procs.append(proc)
            return proc

        ctls = Controllers(start_controller, {n: f"http://127.0.0.1:{p}"
                                                    for n, p in ctl_ports.items()})
        ctl = ctls.procs["controller"] = start_controller("controller")
        console.print("waiting for the controller to push the pipeline and configure every NF ...")

        progress = {"configured": 0, "since": time.monotonic()}

        def ready() -> bool:
            """The switch has its pipeline and every NF its configuration. On a busy machine NFs
            start slowly: the wait goes on while NFs keep being configured, and fails once
            `ready_timeout` s pass with none more."""
            if ctl.poll() is not None:
                raise NotReady(f"the controller exited; see {log_dir / 'controller.log'}")
            st = http_json(f"{api}/status")
            done, total, now = st["nfs"]["configured"], st["nfs"]["total"], time.monotonic()
            if done != progress["configured"]:
                console.print(f"  {done}/{total} NFs configured")
                progress.update(configured=done, since=now)
            elif now - progress["since"] > opts.ready_timeout:
                raise NotReady(f"controller not ready: {done}/{total} NFs configured and none more "
                               f"in {opts.ready_timeout:.0f} s (--ready-timeout); logs in {log_dir}")
            return bool(st["switch"]["primary"] and st["switch"]["last_reconcile"] is not None
                        and done == total)

        wait_for(ready, timeout=READY_CAP * opts.ready_timeout, interval=0.2,
                 what="controller ready", fatal=(NotReady,))
        if opts.standby:
            # a standby controller (DESIGN §5): it leads, from etcd, when the leader is gone
            ctls.procs["standby"] = start_controller("standby")
            wait_for(lambda: http_json(f"{standby_api}/status")["leadership"]["leader"] is not None,
                     timeout=opts.ready_timeout, interval=0.2, what="standby controller watching")
        else:
            del ctls.apis["standby"]

        def start_idle(nf_id: int) -> subprocess.Popen[bytes]:
            return start_nf(net, cfg, topo, opts, log_dir, nf_id, idle=True, global_store=store,
                            cuts=cuts)

        yield System(opts, cfg, topo, net, etcd, nf_procs, ctls, api, log_dir, store, start_idle,
                     stats_addr, cuts)
