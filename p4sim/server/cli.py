"""The `p4sim run` subcommand: a P4Runtime switch on Linux interfaces, flags shaped like BMv2's
`simple_switch_grpc`.

    p4sim run --grpc-addr 127.0.0.1:9559 --device-id 1 -i 1@veth1 -i 2@veth2 --cpu-port 510 \
        [--no-p4 | PROG.p4] [--log-level trace] [--pcap DIR] [--io ring|socket] \
        [--metrics-addr 127.0.0.1:9560]

With a program, it is compiled and committed at start (cookie 0); with `--no-p4`, the switch waits
for SetForwardingPipelineConfig. SIGTERM and SIGINT stop it cleanly. `--metrics-addr` serves the
port and device counters (every loss is counted) at /metrics (Prometheus) and /status (JSON);
`p4sim status --metrics-addr ...` prints them, and `p4sim impair --metrics-addr ... PORT ...` sets
a port's wire impairment (loss, duplication, delay, reordering: p4sim/io/impair.py).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from finsy.proto import p4i

    from p4sim.server.engine import SwitchLike

TRACE = 5
IO_KINDS = ("socket", "ring")
DEFAULT_IO = "ring"  # twice the zero-loss capacity of `make run` (make bench-system)
LEVELS = {
    "trace": TRACE,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "off": logging.CRITICAL + 10,
}


def _define(text: str) -> tuple[str, str]:
    name, _, value = text.partition("=")
    if not name:
        raise argparse.ArgumentTypeError(f"define must be NAME[=VALUE], got {text!r}")
    return name, value or "1"


def _interface(text: str) -> tuple[int, str]:
    from p4sim.io.ports import parse_interface

    try:
        return parse_interface(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("program", nargs="?", help="P4_16 program (v1model) to run from the start")
    p.add_argument(
        "--no-p4", action="store_true", help="start without a program; wait for a pipeline push"
    )
    p.add_argument(
        "--grpc-addr",
        "--grpc-server-addr",
        dest="grpc_addr",
        default="127.0.0.1:9559",
        help="P4Runtime listen address host:port (default 127.0.0.1:9559, loopback only)",
    )
    p.add_argument("--device-id", type=int, default=1, help="P4Runtime device id (default 1)")
    p.add_argument(
        "--tls-dir", metavar="DIR",
        help="serve P4Runtime over mutual TLS with DIR/ca.crt, DIR/switch.crt and DIR/switch.key "
             "(clients need a certificate of that CA; `make pki` creates build/pki)")
    p.add_argument(
        "-i",
        "--interface",
        type=_interface,
        action="append",
        default=[],
        metavar="PORT@IFACE",
        help="attach port PORT to Linux interface IFACE (repeatable)",
    )
    p.add_argument(
        "--cpu-port", type=int, default=None, help="port of packet-in/packet-out (e.g. 510)"
    )
    p.add_argument(
        "-I", "--include", action="append", default=[], metavar="DIR", help="include directory"
    )
    p.add_argument(
        "-D",
        "--define",
        type=_define,
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="preprocessor define",
    )
    p.add_argument(
        "-L",
        "--log-level",
        choices=list(LEVELS),
        default="info",
        help="trace prints, per packet, parser states, tables hit/missed, actions and ports out",
    )
    p.add_argument(
        "--pcap", metavar="DIR", help="write <iface>_in.pcap / <iface>_out.pcap per port into DIR"
    )
    p.add_argument(
        "--engine",
        choices=["python", "native"],
        default=None,
        help="packet engine: native (the program compiled to C; the default, falling back to "
        "python with a log line when it cannot be built) or python (the reference; traces "
        "packets with -L trace, which picks it when --engine is not given). "
        "Default: $P4SIM_ENGINE, else native",
    )
    p.add_argument(
        "--io", choices=IO_KINDS, default=DEFAULT_IO,
        help="port I/O: 'ring' (memory-mapped TPACKET_V3 rings, batches) or 'socket' (one "
        f"system call per frame); default {DEFAULT_IO}",
    )
    p.add_argument(
        "--ring-mb", type=float, default=8.0, metavar="MB",
        help="with --io ring: receive ring size per port in MiB (default 8: 2048 blocks of 4 KiB)",
    )
    p.add_argument(
        "--no-register-access", action="store_true",
        help="answer P4Runtime register reads and writes UNIMPLEMENTED, as BMv2's server does "
        "(p4lang/PI#376): to check on p4sim that a controller needs no register access",
    )
    p.add_argument(
        "--metrics-addr", metavar="HOST:PORT",
        help="serve counters at http://HOST:PORT/metrics (Prometheus) and /status (JSON), and "
        "the ports' wire impairment at /ports/PORT/impair (p4sim impair); use a loopback address",
    )


def register_run(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `run` subcommand to the `p4sim` CLI."""
    p = subparsers.add_parser(
        "run",
        help="run p4sim as a P4Runtime switch on Linux interfaces (like simple_switch_grpc)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_arguments(p)
    p.set_defaults(func=run)


def register_status(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `status` subcommand: a running switch's port and device counters."""
    p = subparsers.add_parser(
        "status", help="print a running p4sim's port counters and losses (from --metrics-addr)",
        description="Fetch /status from a `p4sim run --metrics-addr HOST:PORT` and print, per "
        "port, frames in and out and every loss (kernel drops, ring freezes, transmit errors, "
        "full transmit ring, receive errors), then the device's counters.")
    p.add_argument("--metrics-addr", required=True, metavar="HOST:PORT", help="the switch's address")
    p.add_argument("--json", action="store_true", help="print the JSON document as it is")
    p.set_defaults(func=status_cmd)


def status_cmd(args: argparse.Namespace) -> int:
    import json
    import urllib.request

    url = f"http://{args.metrics_addr}/status"
    try:
        with urllib.request.urlopen(url, timeout=3.0) as resp:
            data = json.loads(resp.read())
    except OSError as exc:
        print(f"p4sim status: cannot read {url}: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(data, indent=1))
        return 0
    cols = ["rx", "tx", "kernel_drops", "ring_freezes", "tx_errors", "tx_overflows",
            "rx_truncated", "rx_errors", "if_tx_dropped", "if_rx_dropped"]
    print(f"p4sim device {data['device_id']}, io {data['io']}, lost {data['lost']}")
    print(f"{'port':>5} {'interface':<16}" + "".join(f"{c:>13}" for c in cols))
    for port, c in data["ports"].items():
        gone = " (gone)" if c["gone"] else ""
        print(f"{port:>5} {c['interface']:<16}" + "".join(f"{c[k]:>13}" for k in cols) + gone)
    for port, c in data["ports"].items():
        if c.get("impair") is not None or c.get("impair_dropped") or c.get("impair_delayed"):
            print(impair_line(port, c))
    print("device: " + ", ".join(f"{k} {v}" for k, v in data["device"].items()))
    return 0


def impair_line(port: str | int, c: dict[str, Any]) -> str:
    """One port's impairment and its counters, in words."""
    from p4sim.io.impair import Impairment

    imp = c.get("impair")
    what = f"impaired: {Impairment(**imp).describe()}" if imp is not None else "not impaired"
    return (f"port {port} ({c['interface']}) {what}; dropped {c['impair_dropped']}, duplicated "
            f"{c['impair_duplicated']}, reordered {c['impair_reordered']}, delayed "
            f"{c['impair_delayed']}, held now {c.get('impair_held', 0)}")


def register_impair(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `impair` subcommand: a running switch's wire impairment of one port."""
    p = subparsers.add_parser(
        "impair", help="impair what a running p4sim sends on a port (loss, duplication, delay, "
        "reordering, as tc netem), or clear it (via --metrics-addr)",
        description="Set, show or clear the wire impairment of PORT on a `p4sim run "
        "--metrics-addr HOST:PORT` (POST/GET/DELETE /ports/PORT/impair; docs/p4sim.md, \"Wire "
        "impairment\"). With no option it shows the port's impairment and counters.")
    p.add_argument("--metrics-addr", required=True, metavar="HOST:PORT", help="the switch's address")
    p.add_argument("port", type=int, metavar="PORT", help="the switch port")
    p.add_argument("--loss", type=float, metavar="P", help="probability a frame is dropped")
    p.add_argument("--duplicate", type=float, metavar="P", help="probability it is sent twice")
    p.add_argument("--reorder", type=float, metavar="P",
                   help="with --delay-ms: probability it is sent at once, ahead of delayed ones")
    p.add_argument("--delay-ms", type=float, metavar="MS", help="hold every frame (but the --reorder ones) MS ms, 0..1000")
    p.add_argument("--seed", type=int, help="the random generator's seed (default 0)")
    p.add_argument("--clear", action="store_true", help="remove the impairment (held frames "
                   "are sent)")
    p.set_defaults(func=impair_cmd)


def impair_cmd(args: argparse.Namespace) -> int:
    from p4sim.server.stats import ImpairRefused, impair_call

    keys = ("loss", "duplicate", "reorder", "delay_ms", "seed")
    body = {k: getattr(args, k) for k in keys if getattr(args, k) is not None}
    if args.clear and body:
        print("p4sim impair: --clear takes no other option", file=sys.stderr)
        return 2
    if body:  # checked here too, with the switch's own rules: a bad value never needs the switch
        from p4sim.io.impair import Impairment, ImpairmentError

        try:
            Impairment.from_json(body)
        except ImpairmentError as exc:
            print(f"p4sim impair: {exc}", file=sys.stderr)
            return 2
    method = "DELETE" if args.clear else "POST" if body else "GET"
    try:
        doc = impair_call(args.metrics_addr, args.port, method, body or None)
    except ImpairRefused as exc:
        print(f"p4sim impair: {exc.why}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"p4sim impair: cannot reach http://{args.metrics_addr}/ports/{args.port}/impair: "
              f"{exc}", file=sys.stderr)
        return 1
    print(impair_line(doc["port"], doc))
    ended = doc.get("ended")
    if ended:  # (POST or DELETE): the one it ended or replaced, over its own life
        print(f"the impairment it ended had dropped {ended['impair_dropped']}, duplicated "
              f"{ended['impair_duplicated']}, reordered {ended['impair_reordered']}, delayed "
              f"{ended['impair_delayed']}")
    return 0


def open_ports(args: argparse.Namespace, names: dict[int, str]) -> Any:
    """The port set `--io` asks for, opened."""
    from p4sim.io.ports import PortSet

    if args.io == "ring":
        from p4sim.io.pktring import RingConfig
        from p4sim.io.ring_ports import RingPortSet

        ports: PortSet = RingPortSet(names, ring=RingConfig.sized(args.ring_mb))
    else:
        ports = PortSet(names)
    ports.open()
    return ports


def _native_rings(port_set: Any, device: Any) -> None:
    """The ring fast path in C whenever the committed pipeline runs on the native engine
    (p4sim/native/rings.py); without cffi, or with P4SIM_NATIVE_RING=0 (for comparisons), the
    Python path does everything."""
    if os.environ.get("P4SIM_NATIVE_RING", "1") == "0":
        return
    try:
        from p4sim.native.rings import NativeRingPath
    except ImportError:
        return
    port_set.fast = NativeRingPath(port_set, device).run


def run(args: argparse.Namespace) -> int:
    from p4sim.server.device import Device
    from p4sim.server.pcap import PcapTap
    from p4sim.server.pipeline import Pipeline
    from p4sim.server.service import serve, tls_credentials

    logging.addLevelName(TRACE, "TRACE")
    logging.basicConfig(
        level=LEVELS[args.log_level],
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    log = logging.getLogger("p4sim")
    if args.program and args.no_p4:
        log.error("give either a program or --no-p4, not both")
        return 2
    if not args.program and not args.no_p4:
        log.error("give a program (PROG.p4) or --no-p4")
        return 2
    ports = [p for p, _ in args.interface]
    if len(set(ports)) != len(ports):
        log.error("a port number is given twice in -i")
        return 2
    trace_log = logging.getLogger("p4sim.trace")
    trace = (lambda line: trace_log.log(TRACE, "%s", line)) if args.log_level == "trace" else None
    from p4sim.runtime.api_values import P4simError
    from p4sim.runtime.engine_loader import default_engine, load_switch, switch_from_device_config

    engine = args.engine or ("python" if trace is not None else default_engine())

    def make_engine(data: bytes, p4info: p4i.P4Info, cpu_port: int | None) -> SwitchLike:
        sw = switch_from_device_config(data, p4info, cpu_port=cpu_port, engine=engine)
        log.info("p4sim engine: %s", sw.engine)
        return sw

    device = Device(args.device_id, args.cpu_port, engine_factory=make_engine, trace=trace,
                    serve_registers=not args.no_register_access)
    if args.program:
        try:
            switch = load_switch(
                args.program, args.include, dict(args.define), cpu_port=args.cpu_port, engine=engine
            )
            log.info("p4sim engine: %s", switch.engine)
        except P4simError as exc:
            log.error("%s", exc)
            device.close()
            return 1
        if trace is not None:
            switch.set_trace(trace)
        device.pipeline = Pipeline(switch, switch.p4info, switch.device_config(), 0,
                                   serve_registers=device.serve_registers)
    names = dict(args.interface)
    try:
        port_set = open_ports(args, names)
    except (OSError, ValueError) as exc:
        log.error("cannot attach interfaces: %s", exc)
        device.close()
        return 1
    tap = PcapTap(args.pcap, names) if args.pcap else None
    device.tap = tap
    device.port_sender = port_set.send
    try:
        server = serve(device, args.grpc_addr,
                       tls=tls_credentials(args.tls_dir) if args.tls_dir else None)
    except Exception as exc:
        log.error("cannot serve P4Runtime on %s: %s", args.grpc_addr, exc)
        port_set.close()
        device.close()
        return 1
    stats = None
    if args.metrics_addr:
        from p4sim.server.stats import StatsServer

        try:
            stats = StatsServer(args.metrics_addr, port_set, device)
        except (OSError, ValueError) as exc:
            log.error("cannot serve metrics on %s: %s", args.metrics_addr, exc)
            port_set.close()
            server.stop(0)
            device.close()
            return 1
    if args.io == "ring":
        _native_rings(port_set, device)
    port_set.start(device.inject, device.inject_batch)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log.info(
        "p4sim device %d serving P4Runtime on %s, ports %s, cpu port %s, io %s, metrics %s%s",
        args.device_id,
        args.grpc_addr,
        {p: n for p, n in sorted(names.items())},
        args.cpu_port,
        args.io,
        args.metrics_addr or "off",
        ", register entries refused (as BMv2)" if args.no_register_access else "",
    )
    while not stop.wait(1.0):
        pass
    log.info("stopping")
    port_set.close()
    lost = {p: st.lost for p, st in sorted(port_set.stats.items()) if st.lost}
    log.info("port losses over the run: %s", lost or "none")
    if stats is not None:
        stats.close()
    server.stop(1.0)
    if tap is not None:
        tap.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (`python -m p4sim.server.cli`), the same as `p4sim run`."""
    parser = argparse.ArgumentParser(
        prog="p4sim run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_run_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
