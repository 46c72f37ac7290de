"""`nf-host`: run one NF instance (its worker processes and its gRPC control server).

    nf-host run --nf-id 1 --interface veth1 --nf checker --workers 2 \
        --control 127.0.0.1:50101 --replication 127.0.0.1:51010

Every option can also come from a YAML file (`--config nf1.yaml`, keys named like the options with
underscores); flags override the file. The process runs until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from typing import Any

from contract.nf_params import parse_params
from nf_host.config import ConfigError, load_config

log = logging.getLogger("nf_host")


def _params(text: str) -> dict[str, Any]:
    try:
        return parse_params(text, "--params")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nf-host", description="nfcluster host NF runtime")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one NF instance", description=__doc__,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("--config", help="YAML file with any of the options below")
    run.add_argument("--nf-id", type=int, help="this NF's id (1..65535), as in the shim")
    run.add_argument("--cluster", type=int, help="cluster this NF belongs to")
    run.add_argument("--interface", help="data interface (receives shim packets from the switch)")
    run.add_argument("--control", help="gRPC control address host:port or unix:/path (default 127.0.0.1:50100)")
    run.add_argument("--replication", help="replication address of worker 0, host:port (worker i: port+i)")
    run.add_argument("--role", choices=["primary", "backup", "idle"],
                     help="the role it starts in (default primary; the controller may change it)")
    run.add_argument("--nf", help="NF type: passthrough, firewall, nat, flow_monitor, ids, l4lb, generic, checker")
    run.add_argument("--params", type=_params, help="NF parameters as a JSON object")
    run.add_argument("--nf-module", action="append", dest="nf_modules",
                     help="extra module to import that registers NFs (repeatable)")
    run.add_argument("--workers", type=int, help="worker processes (default 1)")
    run.add_argument("--batch-size", type=int, help="B: a batch closes after B packets (default 32)")
    run.add_argument("--batch-time-us", type=int, help="T: or after T microseconds (default 500)")
    run.add_argument("--gap-timeout-ms", type=float, help="skip a missing sequence number after this (default 50)")
    run.add_argument("--promote-wait-ms", type=float,
                     help="a promoted backup waits at most this long for the state of a dead "
                          "primary it lacks while that primary may be alive (default 500; 0: never)")
    run.add_argument("--promote-wait-max-ms", type=float,
                     help="... longer while that primary's deltas keep filling a hole in the "
                          "backup's copies, up to this in all (default 4000)")
    run.add_argument("--reorder-capacity", type=int, help="per-slot reorder buffer (packets)")
    run.add_argument("--backup-buffer-mb", type=float, help="memory for the backup's input copies per worker")
    run.add_argument("--max-held", type=int,
                     help="outputs waiting for the backup's ack before input is paused (default 65536)")
    run.add_argument("--output-retain-ms", type=float,
                     help="as a backup, keep the primary's released output this long: the bound "
                          "on the switch's queues (default 2000)")
    run.add_argument("--repl-max-frame-mb", type=float,
                     help="largest replication frame accepted, MiB (default 64; same on every NF)")
    run.add_argument("--repl-chunk-kb", type=int,
                     help="larger replication messages (snapshots, transfers) leave in fragments "
                          "of this size, paced by the receiver (default 1024)")
    run.add_argument("--repl-max-message-mb", type=float,
                     help="largest message reassembled from fragments, MiB (default 4096)")
    run.add_argument("--repl-max-connections", type=int,
                     help="replication connections accepted per worker (default 64)")
    run.add_argument("--repl-any-peer", action="store_false", dest="repl_known_peers_only",
                     default=None, help="accept replication from any NF, not only known peers "
                                        "(debugging; default: known peers only)")
    run.add_argument("--heartbeat-echo", choices=["realtime", "normal", "loop"],
                     help="who answers heartbeats: a responder process at real-time priority "
                          "(SCHED_FIFO; default), the same at normal priority ('normal'), or "
                          "each worker's event loop")
    run.add_argument("--loop-stall-ms", type=float,
                     help="heartbeats go unanswered once the event loop has not turned for this "
                          "long (default 250)")
    run.add_argument("--global-store", help="'memory' or etcd://host:port[/prefix]")
    run.add_argument("--log-level", help="DEBUG, INFO, WARNING, ...")
    run.add_argument("--pki-dir", help="CA, this NF's certificate and heartbeat key: ca.crt, "
                                       "nf-<id>.crt/.key/.hbkey (default build/pki; docs/security.md)")
    run.add_argument("--control-client", action="append", dest="control_clients", metavar="NAME",
                     help="common name of a client certificate allowed to call the control API "
                          "(repeatable; default: controller)")
    run.add_argument("--insecure", action="store_const", const=False, dest="tls",
                     help="plaintext control API, replication and etcd, unauthenticated "
                          "heartbeats (debugging only; never the default)")
    run.add_argument("--etcd-insecure", action="store_const", const=False, dest="etcd_tls",
                     help="plaintext to the global store's etcd only (an etcd serving no TLS; "
                          "debugging only)")
    return parser


def run(args: argparse.Namespace) -> int:
    overrides = {k: v for k, v in vars(args).items() if k not in ("config", "command")}
    try:
        cfg = load_config(args.config, overrides)
    except ConfigError as exc:
        print(f"nf-host: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=cfg.log_level, format=f"%(asctime)s nf{cfg.nf_id} %(levelname)s %(message)s")
    from mgmt.tls import TlsConfigError, check_nf_files
    try:
        check_nf_files(cfg)
    except TlsConfigError as exc:
        print(f"nf-host: {exc}", file=sys.stderr)
        return 2
    from nf_host.child_process import freeze_startup
    from nf_host.control import serve
    from nf_host.worker_process import WorkerPool

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        pool = WorkerPool(cfg)
    except (RuntimeError, OSError) as exc:
        print(f"nf-host: {exc}", file=sys.stderr)
        return 1
    try:
        server = serve(cfg, pool)
    except (OSError, RuntimeError) as exc:
        print(f"nf-host: {exc}", file=sys.stderr)
        pool.close()
        return 1
    freeze_startup("nf-host")
    log.info("NF %d (%s) up: %d workers on %s, control %s, replication %s",
             cfg.nf_id, cfg.nf, cfg.workers, cfg.interface, cfg.control, cfg.replication)
    while not stop.wait(0.2):
        if not pool.alive():
            log.error("a worker process exited; stopping")
            break
    server.stop(1)
    pool.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "run":
        return run(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
