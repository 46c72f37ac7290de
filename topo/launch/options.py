"""The options of `nfc-topo run` (and `chaos`): their flags, and the `RunOptions` they make."""

from __future__ import annotations

import argparse
from pathlib import Path

from topo.faults import hogs, mgmt_cut
from topo.faults.injector import ALL_KINDS, FAULT_KINDS
from topo.launch import hot as hot_run
from topo.model import (
    BMV2_QUEUE_DEPTH,
    CHAIN_CONFIG,
    DEFAULT_CONFIG,
    DEFAULT_RATES,
    REPO,
    RunOptions,
    default_rate,
)


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
                        help="seconds the start-up may go without one more NF configured "
                             "before it fails (default 60; a busy machine starts NFs slowly)")
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
