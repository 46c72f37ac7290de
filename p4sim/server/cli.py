"""The `p4sim run` subcommand: a P4Runtime switch on Linux interfaces, flags shaped like BMv2's
`simple_switch_grpc`.

    p4sim run --grpc-addr 127.0.0.1:9559 --device-id 1 -i 1@veth1 -i 2@veth2 --cpu-port 510 \
        [--no-p4 | PROG.p4] [--log-level trace] [--pcap DIR]

With a program, it is compiled and committed at start (cookie 0); with `--no-p4`, the switch waits
for SetForwardingPipelineConfig. SIGTERM and SIGINT stop it cleanly.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from finsy.proto import p4i

    from p4sim.server.engine import SwitchLike

TRACE = 5
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
    from p4sim.ports import parse_interface

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


def run(args: argparse.Namespace) -> int:
    from p4sim.ports import PortSet
    from p4sim.server.device import Device
    from p4sim.server.pcap import PcapTap
    from p4sim.server.pipeline import Pipeline
    from p4sim.server.service import serve

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
    from p4sim.switch import P4simError, Switch, default_engine

    engine = args.engine or ("python" if trace is not None else default_engine())

    def make_engine(data: bytes, p4info: p4i.P4Info, cpu_port: int | None) -> SwitchLike:
        sw = Switch.from_device_config(data, p4info, cpu_port=cpu_port, engine=engine)
        log.info("p4sim engine: %s", sw.engine)
        return sw

    device = Device(args.device_id, args.cpu_port, engine_factory=make_engine, trace=trace)
    if args.program:
        try:
            switch = Switch.load(
                args.program, args.include, dict(args.define), cpu_port=args.cpu_port, engine=engine
            )
            log.info("p4sim engine: %s", switch.engine)
        except P4simError as exc:
            log.error("%s", exc)
            device.close()
            return 1
        if trace is not None:
            switch.set_trace(trace)
        device.pipeline = Pipeline(switch, switch.p4info, switch.device_config(), 0)
    names = dict(args.interface)
    port_set = PortSet(names)
    try:
        port_set.open()
    except OSError as exc:
        log.error("cannot attach interfaces: %s", exc)
        device.close()
        return 1
    tap = PcapTap(args.pcap, names) if args.pcap else None
    device.tap = tap
    device.port_sender = port_set.send
    try:
        server = serve(device, args.grpc_addr)
    except Exception as exc:
        log.error("cannot serve P4Runtime on %s: %s", args.grpc_addr, exc)
        port_set.close()
        device.close()
        return 1
    port_set.start(device.inject)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log.info(
        "p4sim device %d serving P4Runtime on %s, ports %s, cpu port %s",
        args.device_id,
        args.grpc_addr,
        {p: n for p, n in sorted(names.items())},
        args.cpu_port,
    )
    while not stop.wait(1.0):
        pass
    log.info("stopping")
    port_set.close()
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
