"""The main job behind `make run`: the whole nfcluster system in Mininet, proven end to end.

It brings up a private etcd, a Mininet network (one P4 switch on the chosen target, the client and
server hosts, one host per NF node, and a management bridge shared with the root namespace), one
`nf-host` process per NF running the checker NF, and the controller; it waits until the controller is
the switch's primary and has configured every NF; it sends numbered traffic on many flows in both
directions while showing a live table of the NFs; and it ends with a summary and the sink's verdict
(every packet delivered exactly once and in order, with an unbroken per-flow count). Everything it
started is stopped on the way out, also on Ctrl-C.

Two options disturb the traffic on purpose:

* `--move-slots N` moves N slots that carry traffic, alternately to a primary of the same cluster
  (the state ships as a delta) and of the other cluster (full state), through the controller's HTTP
  API (`POST /slots/{slot}/move?to=NF`), while the traffic runs; the verdict stays exactly-once, in
  order, counts unbroken;
* `--kill-nf ID` SIGKILLs that primary's `nf-host` (its process group: the runtime and its workers)
  mid-traffic; the controller's heartbeats declare it dead and fail it over to its backup. The
  verdict allows no loss for it: only a switch outage or a wire impairment tied to a packet may
  excuse its loss (topo/loss_evidence.py); never a duplicate, a reordering or a repeated checker
  count; whatever is lost is counted, split by what explains it, and shown.

The moves and fail-overs (bytes shipped, delta or full, times) are in the summary and in
`disturbances.json` in the output directory.

`--hot` proves the load balancer (topo/hot.py): skewed traffic and per-packet work make NF 1 hot;
the controller's balancer moves its slots to its cluster peer (deltas) and to the other cluster
(full state) while the live table shows each NF's load and the decisions; the summary lists every
decision and the time until NF 1 was below the high-water mark (`lb.json` in the output directory);
the verdict stays exactly-once, in order, counts unbroken.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.live import Live

from controlplane.config import ControllerConfig, load_config
from nf_host.shim import SHIM_LEN
from topo import chain_run, chaos, chaos_modes, hogs, mgmt_cut
from topo import hot as hot_run
from topo.disturbances import Disturbances, disturb, http_json, loss_report
from topo.etcd import run_etcd_cluster
from topo.faults import ALL_KINDS, FAULT_KINDS, first_output_times, takeover_times
from topo.kernel_drops import kernel_counters, machine_counters
from topo.loss_evidence import judge, loss_summary, windows_of
from topo.losses import loss_lines, switch_status, where_lost
from topo.memory import RssSampler
from topo.memory import plot as plot_rss
from topo.mgmt_cut import MgmtCuts
from topo.port_accounting import PortAccount, accounting, summary_line
from topo.port_accounting import Snapshot as PortSnapshot
from topo.port_accounting import snapshot as port_snapshot
from topo.procs import free_port, prioritize_session, stop_processes, wait_for
from topo.report import nf_table, summarise
from topo.topology import MGMT_BRIDGE, Topology, build_topology
from topo.traffic import SideReport
from topo.verify import FlowVerdict, Verdict

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = REPO / "topo" / "nfcluster.yaml"
CHAIN_CONFIG = REPO / "topo" / "chain.yaml"
SINK_PORT = 9000
# an NF link's MTU: an edge packet of 1500 bytes and the shim the switch inserts before it
NF_LINK_MTU = 1500 + SHIM_LEN
# members of the etcd cluster `make run` starts (a quorum survives the loss of one)
ETCD_MEMBERS = 3
# the client's rate when --rate is not given, per target (packets/s, replies as many): the switch
# takes 4 packets in and sends 6 out per client packet (its two copies, the NF's output, the same
# for the reply). BMv2 (a logging build) forwarded 98% of 5,000 pkt/s offered and at most about
# 10,000, and silently dropped 1.4% of `make run`'s packets at 400; at 200 it lost 1 in 3,200 and
# 0 (docs/bmv2.md)
DEFAULT_RATES = {"p4sim": 400.0, "bmv2": 200.0}
# packets per egress queue `make run` asks BMv2 for (its own default is 64; docs/bmv2.md)
BMV2_QUEUE_DEPTH = 1024


def default_rate(target: str) -> float:
    """The client's rate on `target` when --rate is not given."""
    return DEFAULT_RATES.get(target, DEFAULT_RATES["p4sim"])


@dataclass(frozen=True)
class RunOptions:
    target: str
    config: Path
    flows: int
    packets: int
    rate: float
    workers: int
    out_dir: Path
    ready_timeout: float
    move_slots: int = 0
    kill_nf: int | None = None
    kill_every: float = 0.0
    hang: bool = False
    seed: int = 1
    faults: int = 0                 # with kill_every: stop after this many (0: until the end)
    fault_kinds: tuple[str, ...] = FAULT_KINDS
    heartbeat_ms: int = 0           # override heartbeat.interval_ms (and its timeout) if > 0
    confirm_ms: int = 0             # override heartbeat.confirm_timeout_ms if > 0
    hot: bool = False
    chain: bool = False             # the config declares a service chain (topo/chain.yaml)
    nf: str = "checker"             # the NF every nf-host runs (the verdict needs the checker)
    nf_params: str = ""             # its parameters, a JSON object ("" : the NF's defaults)
    etcd_members: int = ETCD_MEMBERS
    standby: bool = True            # also start a standby controller
    gap_timeout_ms: int = 200
    io: str | None = None           # p4sim's port I/O (ring, socket; None: p4sim's default)
    engine: str | None = None       # p4sim's packet engine (None: p4sim's default)
    self_takeover: bool | None = None  # heartbeat.self_takeover (None: the config's; §4.3)
    heartbeat_echo: str | None = None  # nf-host --heartbeat-echo (None: nf-host's default)
    heartbeat_misses: int = 0       # override heartbeat.misses if > 0
    settle: float = 0.0             # with kill_every: the traffic's last seconds without faults
    busy: int = 0                   # CPU hogs at nice 19 for the whole run (topo/hogs.py)
    bmv2_queue_depth: int = BMV2_QUEUE_DEPTH  # BMv2's egress queues, packets (0: BMv2's 64)
    api_port: int = 0               # the first controller's HTTP API port (0: a free one)
    # chaos modes (topo/chaos_modes.py): random moves per second during the faults, faults
    # side by side, and the share of NF faults that are zombies (hung, then resumed)
    moves: float = 0.0
    overlap: bool = False
    zombies: float = 0.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The scenario's options, shared by `python -m topo run` and the tests."""
    parser.add_argument("--config", type=Path, default=None,
                        help="controller YAML config (default topo/nfcluster.yaml; with --chain "
                             "topo/chain.yaml)")
    parser.add_argument("--flows", type=int, default=32, help="number of flows (default 32)")
    parser.add_argument("--packets", type=int, default=100, help="packets per flow and direction")
    parser.add_argument("--rate", type=float, default=None,
                        help="packets/s sent by the client (default: "
                             + ", ".join(f"{r:.0f} on {t}" for t, r in DEFAULT_RATES.items())
                             + "; docs/bmv2.md says why BMv2's is lower)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes per NF")
    parser.add_argument("--out-dir", type=Path, default=REPO / "results" / "run",
                        help="where logs and traffic reports go (default results/run)")
    parser.add_argument("--ready-timeout", type=float, default=60.0,
                        help="seconds to wait for the controller to configure everything")
    parser.add_argument("--move-slots", type=int, default=0, metavar="N",
                        help="during traffic, move N slots that carry traffic (intra- and "
                             "inter-cluster) through the HTTP API")
    parser.add_argument("--kill-nf", type=int, metavar="ID",
                        help="SIGKILL this primary's nf-host mid-traffic (the controller fails it over)")
    parser.add_argument("--kill-every", type=float, default=0.0, metavar="SECONDS",
                        help="every SECONDS during the traffic, kill a random primary, backup or "
                             "spare (seeded), then start it again as a spare")
    parser.add_argument("--hang", action="store_true",
                        help="with --kill-nf/--kill-every: SIGSTOP instead of SIGKILL (a hung NF, "
                             "caught by heartbeats)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the fault schedule")
    parser.add_argument("--faults", type=int, default=0, metavar="N",
                        help="with --kill-every: stop after N faults (default: until traffic ends)")
    parser.add_argument("--fault-kinds", default=",".join(FAULT_KINDS), metavar="KINDS",
                        help="with --kill-every: what to fault, comma-separated, among "
                             f"{','.join(ALL_KINDS)} (default primary,backup,spare: NFs by role; "
                             "controller: the leading controller; etcd: one member; mgmt: an "
                             "NF's management link cut past the heartbeat deadline)")
    parser.add_argument("--heartbeat-ms", type=int, default=0, metavar="MS",
                        help="heartbeat interval and deadline for this run (default: the config's)")
    parser.add_argument("--confirm-ms", type=int, default=0, metavar="MS",
                        help="deadline of the probe that confirms a failure (default: the config's)")
    parser.add_argument("--heartbeat-misses", type=int, default=0, metavar="N",
                        help="missed heartbeats in a row before the confirming probe (default: "
                             "the config's)")
    parser.add_argument("--self-takeover", action=argparse.BooleanOptionalAction, default=None,
                        help="backups armed to take over by themselves when their primary's "
                             "replication link dies (docs/protocols.md §4.3; default: the "
                             "config's heartbeat.self_takeover)")
    parser.add_argument("--heartbeat-echo", choices=["realtime", "normal", "loop"], default=None,
                        help="who answers heartbeats in every nf-host (nf_host/liveness.py; "
                             "default: nf-host's, a responder process at real-time priority)")
    parser.add_argument("--hot", action="store_true",
                        help=f"skewed traffic makes NF {hot_run.HOT_NF} hot; the load balancer "
                             "relieves it (decisions shown live and in the summary)")
    parser.add_argument("--chain", action="store_true",
                        help="a service chain, firewall -> nat -> flow_monitor (topo/chain.yaml): "
                             "--move-slots moves slots of the middle stage, --kill-nf 1 kills the "
                             "firewall's primary; the verdict also checks the NAT's translation")
    parser.add_argument("--io", choices=["ring", "socket"], default=None,
                        help="p4sim's port I/O (default: p4sim's own default)")
    parser.add_argument("--engine", default=None,
                        help="p4sim's packet engine, if p4sim offers --engine (default: its own)")
    parser.add_argument("--bmv2-queue-depth", type=int, default=BMV2_QUEUE_DEPTH, metavar="N",
                        help=f"BMv2: packets per egress queue, set through simple_switch_CLI "
                             f"(default {BMV2_QUEUE_DEPTH}; 0: BMv2's own, 64)")
    hogs.add_argument(parser)


def options_from(args: argparse.Namespace) -> RunOptions:
    if args.kill_every < 0:
        raise SystemExit("--kill-every must be positive")
    kinds = tuple(k.strip() for k in args.fault_kinds.split(",") if k.strip())
    bad = [k for k in kinds if k not in ALL_KINDS]
    if bad or not kinds:
        raise SystemExit(f"--fault-kinds: {','.join(bad) or 'none given'}: choose among "
                         f"{','.join(ALL_KINDS)}")
    if min(args.heartbeat_ms, args.faults, args.confirm_ms, args.heartbeat_misses) < 0:
        raise SystemExit("--heartbeat-ms, --heartbeat-misses, --confirm-ms and --faults must not "
                         "be negative")
    if "mgmt" in kinds and not mgmt_cut.available():
        raise SystemExit("--fault-kinds mgmt: an NF's management link cannot be cut here (it "
                         "needs root, a cgroup v2 mount and a kernel with CONFIG_CGROUP_BPF)")
    if args.chain and args.hot:
        raise SystemExit("--chain and --hot: choose one")
    moves, zombies = getattr(args, "moves", 0.0), getattr(args, "zombies", 0.0)
    if moves < 0 or not 0 <= zombies <= 1:
        raise SystemExit("--moves must not be negative, and --zombies is a share from 0 to 1")
    config = args.config or (CHAIN_CONFIG if args.chain else DEFAULT_CONFIG)
    rate = default_rate(args.target) if args.rate is None else args.rate
    if rate <= 0 or args.bmv2_queue_depth < 0:
        raise SystemExit("--rate must be positive and --bmv2-queue-depth not negative")
    return RunOptions(args.target, config, args.flows, args.packets, rate, args.workers,
                      args.out_dir, args.ready_timeout, args.move_slots, args.kill_nf,
                      args.kill_every, args.hang, args.seed, args.faults, kinds, args.heartbeat_ms,
                      args.confirm_ms, args.hot, args.chain, io=args.io, engine=args.engine,
                      self_takeover=args.self_takeover, heartbeat_echo=args.heartbeat_echo,
                      heartbeat_misses=args.heartbeat_misses,
                      settle=getattr(args, "settle", 0.0), busy=args.busy,
                      bmv2_queue_depth=args.bmv2_queue_depth, moves=moves,
                      overlap=getattr(args, "overlap", False), zombies=zombies)


# -- network ---------------------------------------------------------------------------------------

def _quiet(host: Any) -> Any:
    """No IPv6 on a host, set before its interfaces exist: no router solicitations or MLD
    reports on the data path (the NFs would count them as malformed frames)."""
    host.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")
    return host


@contextmanager
def _no_ipv6_on_new_root_interfaces() -> Iterator[None]:
    """While the network is built, interfaces created in the root namespace (the switch's ports)
    start without IPv6, so no MLD report or router solicitation leaves them at link-up; the
    machine's previous default is restored afterwards."""
    knob = Path("/proc/sys/net/ipv6/conf/default/disable_ipv6")
    if not knob.exists():
        yield
        return
    before = knob.read_text().strip()
    knob.write_text("1")
    try:
        yield
    finally:
        knob.write_text(before)


@contextmanager
def mininet_network(topo: Topology, target: str, grpc_port: int, log_dir: Path,
                    device_id: int = 1, switch_opts: dict[str, Any] | None = None) -> Iterator[Any]:
    """Build and start the Mininet network; stop it and remove what it left behind afterwards.
    `switch_opts`: extra arguments of the switch class (p4sim's io, engine, metrics_port)."""
    from mininet.log import setLogLevel
    from mininet.net import Mininet
    from mininet.nodelib import LinuxBridge

    from topo.switches import switch_class

    setLogLevel("warning")
    net = Mininet(topo=None, build=False, controller=None, autoSetMacs=False)
    try:
        with _no_ipv6_on_new_root_interfaces():
            # the configuration's device id, not the switch class's counter (which goes on
            # counting when one process builds several networks, e.g. the experiments)
            sw = net.addSwitch(topo.switch_name, cls=switch_class(target), grpc_port=grpc_port,
                               cpu_port=topo.cpu_port, log_dir=str(log_dir), device_id=device_id,
                               **(switch_opts or {}))
            mgmt = net.addSwitch(MGMT_BRIDGE, cls=LinuxBridge)
            for h in topo.edge:
                host = _quiet(net.addHost(h.name, ip=h.ip, mac=h.mac))
                net.addLink(host, sw, port2=h.port)
            prefix = topo.mgmt_network.prefixlen
            for node in topo.nodes:
                host = _quiet(net.addHost(node.name, ip=f"{node.mgmt_ip}/{prefix}"))
                net.addLink(host, mgmt, intfName1=f"{node.name}-m")
                for link in node.nfs:
                    net.addLink(host, sw, port2=link.port, intfName1=link.intf, addr1=link.mac)
            net.build()
        net.start()
        subprocess.run(["ip", "addr", "add", f"{topo.mgmt_gateway}/{prefix}", "dev", MGMT_BRIDGE],
                       check=True)
        for host in net.hosts:
            for intf in host.intfList():
                # the switch reads frames off veths: checksums must be complete, not offloaded
                host.cmd(f"ethtool -K {intf.name} tx off rx off >/dev/null 2>&1")
        # an NF link carries the edge's frames with the shim inserted: both of its ends take a
        # full-size edge frame plus the shim (a kernel drops a frame above a veth's MTU)
        for node in topo.nodes:
            for link in node.nfs:
                net.get(node.name).cmd(f"ip link set dev {link.intf} mtu {NF_LINK_MTU}")
                subprocess.run(["ip", "link", "set", "dev", sw.intfs[link.port].name, "mtu",
                                str(NF_LINK_MTU)], check=True)
        client, server = net.get("client"), net.get("server")
        client_ip, server_ip = client.IP(), server.IP()
        # permanent: a plain entry goes stale after ~30 s and the kernel re-probes it with ARP,
        # which the switch does not answer; while it re-resolves, every packet is dropped
        client.cmd(f"ip neigh replace {server_ip} lladdr {server.MAC()} nud permanent "
                   f"dev {client.defaultIntf()}")
        server.cmd(f"ip neigh replace {client_ip} lladdr {client.MAC()} nud permanent "
                   f"dev {server.defaultIntf()}")
        yield net
    finally:
        with contextlib.suppress(Exception):
            net.stop()
        subprocess.run(["ip", "link", "del", MGMT_BRIDGE], stderr=subprocess.DEVNULL, check=False)


# -- processes -------------------------------------------------------------------------------------

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
    It runs the checker NF, or with service chains its stage's NF (topo/chain_run.py). With
    `cuts`, in the NF's own cgroup, where its management link can be cut (topo/mgmt_cut.py)."""
    nf = cfg.nf(nf_id)
    program = (chain_run.nf_args(cfg, nf_id, global_store) if cfg.chains
               else ["--nf", opts.nf, "--global-store", global_store])
    node = net.get(topo.node_of(nf.id).name)
    role = "idle" if idle or nf.role == "spare" else nf.role
    cmd = [sys.executable, "-m", "nf_host", "run", "--nf-id", str(nf.id),
           "--cluster", str(cfg.cluster_numbers()[nf.cluster]),
           "--interface", topo.link_of(nf.id).intf, "--control", nf.mgmt,
           "--replication", nf.replication_address(), "--role", role,
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
    data.setdefault("api", {})["listen"] = api
    if hot:
        hot_run.apply_config(data)
    path = out / "controller.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# -- the job ---------------------------------------------------------------------------------------

@dataclass
class System:
    """What `system()` brought up: everything the run's traffic and disturbances need."""

    opts: RunOptions
    cfg: ControllerConfig
    topo: Topology
    net: Any                                  # the Mininet network
    etcd: Any                                 # topo.etcd's cluster handle
    nf_procs: list[subprocess.Popen[bytes]]   # one nf-host per NF, by ascending id
    ctls: chaos.Controllers
    api: str                                  # the first leader's HTTP API
    log_dir: Path
    store: str                                # the NF runtimes' global store (etcd over mgmt)
    switch_stats: str | None = None           # p4sim's counter endpoint (host:port)
    cuts: MgmtCuts | None = None              # where NFs' management links are cut (mgmt faults)

    def restart_nf(self, nf_id: int) -> subprocess.Popen[bytes]:
        """Start NF `nf_id` again, idle (the controller returns it to the spare pool); it is
        stopped with the others on the way out."""
        proc = start_nf(self.net, self.cfg, self.topo, self.opts, self.log_dir, nf_id, idle=True,
                        global_store=self.store, cuts=self.cuts)
        self.nf_procs.append(proc)
        return proc


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
        etcd = stack.enter_context(run_etcd_cluster(opts.etcd_members, log_dir=log_dir,
                                                    also_on=topo.mgmt_gateway))
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

        ctls = chaos.Controllers(start_controller, {n: f"http://127.0.0.1:{p}"
                                                    for n, p in ctl_ports.items()})
        ctl = ctls.procs["controller"] = start_controller("controller")
        console.print("waiting for the controller to push the pipeline and configure every NF ...")

        def ready() -> bool:
            if ctl.poll() is not None:
                raise RuntimeError(f"the controller exited; see {log_dir / 'controller.log'}")
            st = http_json(f"{api}/status")
            return bool(st["switch"]["primary"] and st["switch"]["last_reconcile"] is not None
                        and st["nfs"]["configured"] == st["nfs"]["total"])

        wait_for(ready, timeout=opts.ready_timeout, interval=0.2, what="controller ready")
        if opts.standby:
            # a standby controller (DESIGN §5): it leads, from etcd, when the leader is gone
            ctls.procs["standby"] = start_controller("standby")
            wait_for(lambda: http_json(f"{standby_api}/status")["leadership"]["leader"] is not None,
                     timeout=opts.ready_timeout, interval=0.2, what="standby controller watching")
        else:
            del ctls.apis["standby"]
        yield System(opts, cfg, topo, net, etcd, nf_procs, ctls, api, log_dir, store, stats_addr,
                     cuts)


def run(opts: RunOptions, console: Console | None = None) -> Verdict:
    """Run the scenario and return the sink's verdict (raises on a failure to start)."""
    console = console or Console()
    cfg = load_config(opts.config)
    if opts.kill_nf is not None and opts.kill_nf not in {p.id for p in cfg.primaries()}:
        raise RuntimeError(f"--kill-nf {opts.kill_nf}: not a primary of {opts.config}")
    with ExitStack() as stack:
        stack.enter_context(hogs.cpu_hogs(opts.busy, console.print))  # stopped on every way out
        sys_ = stack.enter_context(system(opts, console))
        cfg, net, ctls, api, log_dir = sys_.cfg, sys_.net, sys_.ctls, sys_.api, sys_.log_dir
        memory = RssSampler(os.getpid())
        stack.callback(memory.stop)  # (stopped below on the normal path: idempotent)
        client, server = net.get("client"), net.get("server")
        server_ip = server.IP()
        for cmd in chain_run.neighbours(cfg, client.MAC()):
            server.cmd(f"{cmd} dev {server.defaultIntf()}")
        sink = server.popen([sys.executable, "-m", "topo.traffic", "sink", "--listen",
                             f"{server_ip}:{SINK_PORT}", "--idle", "0", "--out",
                             str(log_dir / "server.json")], cwd=str(REPO))
        stack.enter_context(started([sink]))
        wait_for(lambda: f":{SINK_PORT}" in server.cmd("ss -uln"), timeout=10, what="sink bound")
        sports: list[str] = []
        watch: hot_run.HotWatch | None = None
        hot_ids: list[int] = []
        if opts.hot:
            hot_slots = {int(r["slot"]) for r in http_json(f"{api}/slots?nf={hot_run.HOT_NF}")}
            ports = hot_run.skewed_ports(hot_slots, client.IP(), server_ip, SINK_PORT, opts.flows,
                                         cfg.switch.slot_count)
            hot_ids = hot_run.hot_flows(ports, hot_slots, client.IP(), server_ip, SINK_PORT,
                                        cfg.switch.slot_count)
            sports = ["--sports", ",".join(map(str, ports))]
            watch = hot_run.HotWatch(api)
        machine0 = machine_counters()  # the per-CPU backlog's drops are machine-wide
        switch_node = net.get(sys_.topo.switch_name)

        def target_status() -> dict[str, Any] | None:
            return switch_status(sys_.switch_stats)

        # each switch port's interface and P4 counters before the traffic (topo/port_accounting)
        ports0 = port_snapshot(api, switch_node, target_status, first="p4")
        sender = client.popen([sys.executable, "-m", "topo.traffic", "send", "--dst",
                               f"{server_ip}:{SINK_PORT}", "--flows", str(opts.flows), "--packets",
                               str(opts.packets), "--rate", str(opts.rate), "--wait", "10",
                               "--out", str(log_dir / "client.json"), *sports], cwd=str(REPO))
        stack.enter_context(started([sender]))
        console.print(f"sending {opts.flows} flows x {opts.packets} packets each way ...")
        dist: Disturbances | None = None
        worker: threading.Thread | None = None
        if opts.move_slots or opts.kill_nf is not None or opts.kill_every:
            dist = Disturbances()
            faults = chaos.injector(sys_)
            worker = threading.Thread(target=disturb, args=(api, opts, faults, sender, dist),
                                      name="disturb", daemon=True)
            worker.start()
        with Live(console=console, refresh_per_second=4) as live:
            while sender.poll() is None:
                with contextlib.suppress(Exception):
                    if watch is not None:
                        watch.api = ctls.leader_api(watch.api)  # (a controller fault)
                        loads = hot_run.loads_of(watch.poll())
                        live.update(hot_run.live(nf_table(http_json(f"{api}/nfs"), "NFs (live)",
                                                          loads), watch))
                    else:
                        live.update(nf_table(http_json(f"{ctls.leader_api(api)}/nfs"),
                                             "NFs (live)"))
                time.sleep(0.25)  # display refresh cadence, not synchronisation
        if worker is not None:
            worker.join(timeout=120 if opts.overlap or opts.moves else 30)
        # the sender waited for the last replies; the sink has no idle deadline (a switch outage
        # may be longer than any), so it stops here and writes its report
        sink.terminate()
        wait_for(lambda: sink.poll() is not None, timeout=30, what="sink finished")
        api = ctls.leader_api(api)  # after controller faults, the standby may lead
        memory.stop()
        nfs = http_json(f"{api}/nfs?refresh=1")  # counts as of now, not of the last load poll
        (log_dir / "nfs.json").write_text(json.dumps(nfs, indent=1))
        ports1 = port_snapshot(api, switch_node, target_status, first="interfaces")
        accounts, accounts_why = port_window(ports0, ports1, dist)
        switch_drops: dict[str, int] = http_json(f"{api}/status").get("switch_drops", {})
        switch_doc = switch_status(sys_.switch_stats)
        kernel = kernel_counters(net, [h.name for h in cfg.edge], sys_.topo.switch_name,
                                 switch_links=switch_doc is None, machine_since=machine0)
        (log_dir / "switch.json").write_text(json.dumps(
            {"drops": switch_drops, "p4sim": switch_doc, "kernel": kernel, "ports": {
                "before": ports0 and ports0.to_json(), "after": ports1 and ports1.to_json(),
                "accounts": None if accounts is None else [a.to_json() for a in accounts],
                "why_not": accounts_why or None}}, indent=1))
        lb: dict[str, Any] = {}
        if watch is not None:
            lb = http_json(f"{api}/lb/history")
            lb["relief"] = watch.relief()
            lb["samples"] = watch.samples
            lb["hot_flows"] = hot_ids
        if dist is not None:  # (what each leader reported during the run, and this one's)
            seen = chaos_modes.FailoverLog()
            seen.add(dist.failovers)
            seen.add(http_json(f"{api}/status")["failovers"])
            dist.failovers = seen.rows()
            dist.rss = memory.snapshots()
            dist.rss_series = memory.series_json()
            if dist.faults_ended_at is not None:
                dist.rss_settled_from = round(memory.since(dist.faults_ended_at), 1)
            dist.rss_lives = memory.incarnations(dist.rss_settled_from)
            dist.errors += [f"controller {n} stopped by itself (lease lost) and was started again"
                            for n in ctls.revived]
    client_rep = SideReport.from_json(json.loads((log_dir / "client.json").read_text()))
    server_rep = SideReport.from_json(json.loads((log_dir / "server.json").read_text()))
    inputs = (server_rep.received, client_rep.received, client_rep.sent, server_rep.sent)
    # a loss is excused only by a fault's window tied to it (topo/loss_evidence.py)
    verdict = judge(client_rep, server_rep, dist.faults if dist is not None else [],
                    _slots_of_flows(cfg, client_rep), not cfg.chains, bool(cfg.chains))
    losses = loss_summary(verdict, switch_drops)
    nat = chain_run.nat_problems(cfg, server_rep)
    if nat:
        verdict = Verdict([*verdict.flows, FlowVerdict(-1, 0, 0, nat[:10])])
    if lb:
        moved = [d["at"] for d in lb["decisions"] if d["action"]["action"] == "move"]
        lb["latency"] = hot_run.latency(client_rep.rtt, hot_ids, min(moved, default=None),
                                        lb["relief"]["relieved"])
        (log_dir / "lb.json").write_text(json.dumps(lb, indent=1))
    faulted = dist.faults if dist is not None else []
    wedged = chaos_modes.wedged_flows(inputs, (client_rep.sent_at, server_rep.sent_at),
                                      windows_of(faulted, bool(cfg.chains)),
                                      chaos_modes.faults_over(faulted))
    if dist is not None:
        if dist.faults or opts.moves:
            dist.modes = chaos_modes.modes_summary(
                dist.faults, dist.failovers,
                (dist.chaos_moves, dist.moves_refused) if opts.moves else None)
        if dist.faults:
            dist.losses = {**loss_report(inputs, counted=not cfg.chains), **losses,
                           "wedged_flows": len(wedged)}
            takeover_times(dist.faults, client_rep, server_rep, _slots_of_flows(cfg, client_rep))
            first_output_times(dist.faults, log_dir)
        (log_dir / "disturbances.json").write_text(json.dumps(
            {**asdict(dist), "faults": [f.to_json() for f in dist.faults]}, indent=1))
        if dist.faults and plot_rss(dist.rss_series, log_dir / "rss.png",
                                    dist.rss_settled_from):
            console.print(f"memory over the run: {log_dir / 'rss.png'}")
    chain = " -> ".join(st.name for st in cfg.stages()) if cfg.chains else ""
    summarise(console, verdict, client_rep, server_rep, nfs, dist, switch_drops, chain, losses)
    console.print(summary_line(accounts, accounts_why))
    lost = loss_report(inputs, counted=not cfg.chains)["lost"]
    if lost or not verdict.ok:  # where: every drop counter of the path that is not zero
        for line in loss_lines(lost, where_lost(cfg, switch_doc, switch_drops, nfs, {
                "client": client_rep.host_drops, "server": server_rep.host_drops}, kernel,
                accounts), verdict.losses.outage):
            console.print(line)
    if wedged:  # a slot that stopped forwarding: its flows' last packets never came
        console.print(f"[bold red]wedged:[/] the last packets of {len(wedged)} flow(s) never "
                      f"arrived (flow, direction): {wedged[:10]}")
        verdict = Verdict([*verdict.flows, FlowVerdict(-1, 0, 0, [
            f"{len(wedged)} flow(s) wedged: their last packets never arrived"])])
    if lb:
        hot_run.summary(console, lb, lb["relief"])
        moves = [d for d in lb["decisions"] if d["action"]["action"] == "move"]
        # under chaos, the balancer's moves may meet faults (and the hot NF may be one): only
        # the traffic's verdict judges them there
        if not opts.kill_every and (lb["relief"]["seconds"] is None
                                    or any(d["outcome"] != "moved" for d in moves)):
            return Verdict([*verdict.flows, FlowVerdict(-1, 0, 0, ["the hot NF was not relieved "
                                                                   "by moves that all succeeded"])])
    if dist is not None and (dist.errors or any(not m["ok"] for m in dist.moves)
                             or any(not f["ok"] for f in dist.failovers)):
        return Verdict([*verdict.flows, FlowVerdict(-1, 0, 0, ["a move or fail-over failed"])])
    if dist is not None and any(not f.ok for f in dist.faults):
        return Verdict([*verdict.flows, FlowVerdict(-1, 0, 0, ["a fault was not handled"])])
    return verdict


def port_window(before: PortSnapshot | None, after: PortSnapshot | None,
                dist: Disturbances | None) -> tuple[list[PortAccount] | None, str]:
    """Each switch port's account over the traffic (`topo.port_accounting`), or None and why
    not: a counter snapshot not read, or a switch restarted in between (its P4 counters began
    again at 0, so a difference would mean nothing)."""
    if before is None or after is None:
        return None, "the P4 port counters could not be read (a program without port_rx/port_tx?)"
    if dist is not None and any(getattr(f, "kind", "") == "switch" for f in dist.faults):
        return None, "the switch restarted during the traffic: not computed"
    return accounting(before, after)


def _slots_of_flows(cfg: ControllerConfig, client: SideReport) -> dict[int, int]:
    """Each flow's slot, as the switch hashes its 5-tuple (client port -> the sink's port, UDP)."""
    client_ip = next(h.prefixes[0] for h in cfg.edge if h.name == "client").split("/")[0]
    server_ip = next(h.prefixes[0] for h in cfg.edge if h.name == "server").split("/")[0]
    # (topo's own model of the hash: `ptf_tests`, the PTF suite's, is no installed package)
    return {flow: hot_run.slot_of(client_ip, server_ip, port, SINK_PORT, 17,
                                  cfg.switch.slot_count)
            for flow, port in client.ports.items()}


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main(args: argparse.Namespace) -> int:
    console = Console(width=max(Console().width, 110))
    signal.signal(signal.SIGTERM, _interrupt)  # stopped like Ctrl-C: everything is cleaned up
    try:
        verdict = run(options_from(args), console)
    except KeyboardInterrupt:
        console.print("\ninterrupted: everything started was stopped")
        return 130
    except (PermissionError, FileNotFoundError, RuntimeError, TimeoutError) as exc:
        console.print(f"[bold red]make run failed:[/] {exc}")
        return 1
    return 0 if verdict.ok else 1
