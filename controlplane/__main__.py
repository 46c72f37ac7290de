"""`nfc-controller`: run the nfcluster controller, or check a configuration file.

    nfc-controller check --config topo/nfcluster.yaml
    nfc-controller run --config topo/nfcluster.yaml [--election-id N] [--no-etcd] [--api HOST:PORT]

`run` serves the HTTP API (and /metrics) at once, campaigns for the leadership in etcd (standing by
while another controller leads), then connects to the switch (arbitration with an election id
above every earlier leader's, pipeline push, reconciliation), resumes or creates the slot map in
etcd, configures and heartbeats the NFs, until SIGINT or SIGTERM (it resigns, so a standby takes
over at once). Exit status 3: the leadership was lost (the lease could not be renewed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from controlplane.api import api_token, serve
from controlplane.config import ConfigError, ControllerConfig, load_config, split_hostport
from controlplane.controller import Controller
from controlplane.handoff_api import HandOffService
from controlplane.leader import Leadership, LeadershipLost
from controlplane.switch_session import DeviceConfigError, SlotBitsError, check_slot_bits
from mgmt.pki import SECRET
from prism.switch_entries import load_hosts

LOG = logging.getLogger("nfc-controller")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nfc-controller", description="the nfcluster P4Runtime controller")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="validate a configuration file and print a summary")
    c.add_argument("--config", required=True, type=Path, help="controller YAML configuration")
    r = sub.add_parser("run", help="run the controller until SIGINT/SIGTERM")
    r.add_argument("--config", required=True, type=Path, help="controller YAML configuration")
    r.add_argument("--election-id", type=int, help="P4Runtime election id (default: switch.election_id)")
    r.add_argument("--no-etcd", action="store_true", help="keep the slot map in memory only")
    r.add_argument("--api", metavar="HOST:PORT", help="HTTP API listen address (default: api.listen)")
    r.add_argument("--p4info", type=Path, help="P4Info text file (default: switch.p4info)")
    r.add_argument("--device-config", type=Path, help="device config (default: by switch.target)")
    r.add_argument("--prism-hosts", type=Path, metavar="FILE",
                   help="serve Prism's hand-off API for these hosts (JSON name -> {addr, mac, port})")
    r.add_argument("--name", help="this controller's name in the leader election (default host:pid)")
    r.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                   help="the log's level (default INFO)")
    return p


def summary(cfg: ControllerConfig) -> str:
    lines = [f"switch {cfg.switch.address} target={cfg.switch.target} device={cfg.switch.device_id} "
             f"slots={cfg.switch.slot_count}"]
    for cluster in cfg.clusters:
        members = ", ".join(f"{nf.name}({nf.role} port {nf.port} on {nf.node})"
                            for nf in cfg.cluster_members(cluster.name))
        lines.append(f"cluster {cluster.name}: {members}")
    lines.append("pairs: " + ", ".join(f"{p.id}->{p.backup}" for p in cfg.primaries()))
    return "\n".join(lines)


async def run(cfg: ControllerConfig, args: argparse.Namespace) -> int:
    check_slot_bits(cfg.switch, args.p4info or cfg.switch.p4info)
    controller = Controller(cfg, election_id=args.election_id, use_etcd=not args.no_etcd,
                            p4info=args.p4info, device_config=args.device_config)
    host, port = split_hostport(args.api or cfg.api.listen)
    handoff = None
    if args.prism_hosts is not None:  # Prism's hand-off API on this controller's session
        handoff = HandOffService(controller.session, controller.session.switch.write,
                                 load_hosts(args.prism_hosts))
    runner = await serve(controller, host, port, token=api_token(cfg.api.token),
                         extra_routes=[handoff.register] if handoff else [])
    handoff_start = asyncio.create_task(handoff.start()) if handoff else None
    # start-up's objects (modules, config, P4Info) live as long as the process: out of the cyclic
    # collector's full scans, which otherwise stop this loop (heartbeats, fail-overs) for tens of
    # ms (as they did the NF runtimes': nf_host/child_process.py, freeze_startup)
    gc.freeze()
    LOG.info("%d objects of start-up frozen out of the cyclic collector's reach",
             gc.get_freeze_count())
    LOG.info("API on http://%s:%d", host, port)
    leadership = None
    if not args.no_etcd:  # one leader among the controllers (controlplane/leader.py)
        leadership = controller.leadership = Leadership(
            cfg.etcd.endpoints, cfg.etcd.prefix, args.name or f"{socket.gethostname()}:{os.getpid()}",
            cfg.etcd.leader_ttl_s, tls=cfg.security.etcd_identity())
    loop = asyncio.get_running_loop()
    current = asyncio.current_task()
    assert current is not None
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, current.cancel)
    try:
        return await lead_then_run(controller, leadership, args.election_id or cfg.switch.election_id)
    except asyncio.CancelledError:
        return 0
    finally:
        if handoff_start is not None:
            handoff_start.cancel()
        await runner.cleanup()
        LOG.info("stopped")


async def lead_then_run(controller: Controller, leadership: Leadership | None, election_base: int) -> int:
    """Stand by until elected (when `leadership` is given), then run the controller while the
    lease is renewed. Returns 0 when cancelled, 3 when the leadership was lost."""
    tasks: list[asyncio.Task[None]] = []
    try:
        if leadership is not None:
            LOG.info("standby: campaigning for the leadership")
            term = await leadership.campaign()
            # above every earlier leader's: the switch makes this one primary, even over a
            # previous leader that is still connected (cut off from etcd, not dead)
            controller.session.set_election_id(election_base + term)
        tasks.append(asyncio.create_task(controller.run(), name="controller"))
        if leadership is not None:
            tasks.append(asyncio.create_task(leadership.hold(), name="lease"))
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for t in done:
            if isinstance(t.exception(), LeadershipLost):
                LOG.error("leadership lost (%s): stopping; start again to stand by", t.exception())
                return 3
            t.result()
        return 0
    finally:
        for t in tasks:  # the controller's run() closes its connections when cancelled
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if not tasks:
            await controller.close()
        if leadership is not None:
            await leadership.resign()  # a standby takes over now rather than at the lease's end
            await leadership.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"cannot read {args.config}: {exc}", file=sys.stderr)
        return 2
    if args.command == "check":
        print(summary(cfg))
        return 0
    p4info = args.p4info or cfg.switch.p4info
    if not p4info.exists():
        print(f"no P4Info at {p4info}: run `make build` first, or pass --p4info", file=sys.stderr)
        return 2
    sec = cfg.security
    if sec.tls:  # its certificate and the heartbeat secret (docs/security.md), before anything
        missing = [p for p in (sec.pki_dir / "ca.crt", sec.pki_dir / f"{sec.name}.crt",
                               sec.pki_dir / f"{sec.name}.key", sec.pki_dir / SECRET)
                   if not p.is_file()]
        if missing:
            print(f"missing {', '.join(map(str, missing))}: create the PKI (`make pki`, "
                  f"docs/security.md) or set security.tls: false (plaintext, debugging only)",
                  file=sys.stderr)
            return 2
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        return asyncio.run(run(cfg, args))
    except (DeviceConfigError, SlotBitsError) as exc:
        print(f"nfc-controller: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
