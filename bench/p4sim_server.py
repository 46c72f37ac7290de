"""Benchmarks of the p4sim P4Runtime server (not tests): table writes per second over P4Runtime
(batches of 1 and of 100) and packets per second between two veth interfaces through a `p4sim run`
process running tests/p4sim/programs/ipv4_forward.p4.

    .venv/bin/python -m bench.p4sim_server [--writes 1000] [--duration 5] [--no-veth]
        [--only-veth] [--io socket,ring,ring-pyloop] [--engine python,native]
        [--traffic ring,python] [--repeats 3]

The veth part needs root (network namespaces); its traffic comes from bench/veth_traffic.py (by
default TX/RX rings, so that the generator and the receiver cost next to nothing per packet and
the figure is p4sim's). Every variant runs `--repeats` times, interleaved; one table of medians,
each variant's forwarded rate also as a ratio to the first's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
from finsy.proto import U128, p4i, p4r, p4r_grpc

from bench.io_variants import NATIVE_RING_ENV, p4sim_io, parse_ios
from bench.veth_traffic import RECEIVERS, SENDERS
from p4sim.server.device import Device, real_engine
from p4sim.server.service import serve
from tests.p4sim.server.netns import VethTopology
from tests.support.procs import free_port, wait_for

PROGRAM = Path(__file__).resolve().parents[1] / "tests" / "p4sim" / "programs" / "ipv4_forward.p4"

def _route(p4info: p4i.P4Info, i: int, prefix_len: int = 32) -> p4r.Update:
    table = next(t for t in p4info.tables if t.preamble.name.endswith("ipv4_lpm"))
    action = next(a for a in p4info.actions if a.preamble.name.endswith("ipv4_forward"))
    params = {p.name: p.id for p in action.params}
    value = (0x0A000000 + i) if prefix_len == 32 else 0x0A000200
    te = p4r.TableEntry(
        table_id=table.preamble.id,
        match=[
            p4r.FieldMatch(
                field_id=table.match_fields[0].id,
                lpm=p4r.FieldMatch.LPM(value=value.to_bytes(4, "big"), prefix_len=prefix_len),
            )
        ],
    )
    te.action.action.CopyFrom(
        p4r.Action(
            action_id=action.preamble.id,
            params=[
                p4r.Action.Param(param_id=params["dst_addr"], value=b"\x02\x00\x00\x00\x00\x02"),
                p4r.Action.Param(param_id=params["port"], value=b"\x02"),
            ],
        )
    )
    return p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=te))


def _arbitrate(channel: grpc.Channel) -> tuple[object, list[p4r.StreamMessageRequest]]:
    """Open a stream as primary with election id 1; returns the call (keep it alive)."""
    import queue

    q: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
    q.put(
        p4r.StreamMessageRequest(
            arbitration=p4r.MasterArbitrationUpdate(device_id=1, election_id=U128.encode(1))
        )
    )

    def requests() -> Iterator[p4r.StreamMessageRequest]:
        while (m := q.get()) is not None:
            yield m

    call = p4r_grpc.P4RuntimeStub(channel).StreamChannel(requests())
    next(iter(call))
    return call, []


def bench_writes(n: int) -> dict[str, float]:
    from p4sim.runtime.engine_loader import load_switch

    sw = load_switch(str(PROGRAM), cpu_port=510)
    device = Device(1, 510, real_engine)
    server = serve(device, f"127.0.0.1:{free_port()}")
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    stub = p4r_grpc.P4RuntimeStub(channel)
    call, _ = _arbitrate(channel)
    req = p4r.SetForwardingPipelineConfigRequest(
        device_id=1,
        action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
        election_id=U128.encode(1),
    )
    req.config.p4info.CopyFrom(sw.p4info)
    req.config.p4_device_config = sw.device_config()
    stub.SetForwardingPipelineConfig(req)
    results: dict[str, float] = {}
    try:
        t0 = time.perf_counter()
        for i in range(n):
            stub.Write(
                p4r.WriteRequest(
                    device_id=1, election_id=U128.encode(1), updates=[_route(sw.p4info, i)]
                )
            )
        results["writes/s, batch 1"] = n / (time.perf_counter() - t0)
        stub.SetForwardingPipelineConfig(req)  # empty tables again (ipv4_lpm holds 1024)
        t0 = time.perf_counter()
        for b in range(n // 100):
            stub.Write(
                p4r.WriteRequest(
                    device_id=1,
                    election_id=U128.encode(1),
                    updates=[_route(sw.p4info, n + b * 100 + k) for k in range(100)],
                )
            )
        results["writes/s, batch 100"] = (n // 100) * 100 / (time.perf_counter() - t0)
    finally:
        call.cancel()  # type: ignore[attr-defined]
        channel.close()
        server.stop(0)
    return results


def bench_veth(seconds: float, io: str = "socket", engine: str = "native", traffic: str = "ring"
               ) -> dict[str, float]:
    from p4sim.runtime.engine_loader import load_switch

    topo = VethTopology.create(2)
    h1, h2 = topo.hosts
    port = free_port()
    env = dict(os.environ)
    io, env[NATIVE_RING_ENV] = p4sim_io(io)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "p4sim.server.cli",
            str(PROGRAM),
            "--grpc-addr",
            f"127.0.0.1:{port}",
            "-i",
            f"1@{h1.switch_intf}",
            "-i",
            f"2@{h2.switch_intf}",
            "--cpu-port",
            "510",
            "--log-level",
            "warn",
            "--io",
            io,
            "--engine",
            engine,
        ],
        env=env,
    )
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:

        p4info = load_switch(str(PROGRAM), cpu_port=510).p4info
        stub = p4r_grpc.P4RuntimeStub(channel)
        wait_for(
            lambda: stub.Capabilities(p4r.CapabilitiesRequest(), timeout=1),
            timeout=30,
            what="p4sim up",
        )
        call, _ = _arbitrate(channel)
        stub.Write(
            p4r.WriteRequest(
                device_id=1, election_id=U128.encode(1), updates=[_route(p4info, 0, 24)]
            )
        )
        from scapy.layers.inet import IP, UDP
        from scapy.layers.l2 import Ether

        frame = bytes(
            Ether(src=h1.mac, dst="02:00:00:00:00:fe")
            / IP(src="10.0.1.1", dst="10.0.2.2")
            / UDP(sport=1, dport=2)
            / bytes(18)
        )
        rx = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                h2.ns,
                sys.executable,
                "-c",
                RECEIVERS[traffic],
                h2.intf,
                "020000000002",
                str(seconds + 2),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
        tx = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                h1.ns,
                sys.executable,
                "-c",
                SENDERS[traffic],
                h1.intf,
                frame.hex(),
                str(seconds),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        sent = int(tx.stdout.strip())
        received = int(rx.communicate(timeout=seconds + 10)[0].strip().splitlines()[-1])
        call.cancel()  # type: ignore[attr-defined]
        return {
            "offered pkt/s": sent / seconds,
            "forwarded pkt/s (veth to veth)": received / seconds,
        }
    finally:
        channel.close()
        proc.terminate()
        proc.wait(10)
        topo.teardown()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--writes", type=int, default=1000, help="entries per write benchmark (default 1000; ipv4_lpm holds 1024)"
    )
    ap.add_argument("--duration", type=float, default=5.0, help="seconds of traffic (default 5)")
    ap.add_argument("--no-veth", action="store_true", help="skip the packet benchmark (needs root)")
    ap.add_argument("--io", default="socket,ring",
                    help="port I/O variants of the packet benchmark, compared (default socket,ring; "
                         "ring-pyloop: ring without the native fast path, P4SIM_NATIVE_RING=0)")
    ap.add_argument("--engine", default="native",
                    help="packet engines of the packet benchmark, compared (default native; "
                         "python,native for both)")
    ap.add_argument("--traffic", default="ring",
                    help="traffic generator and receiver of the packet benchmark, compared: ring "
                         "(TX/RX rings, no per-packet Python work; default) and/or python (one "
                         "send()/recv() per packet, the first version)")
    ap.add_argument("--repeats", type=int, default=3, help="packet runs per variant (median)")
    ap.add_argument("--only-veth", action="store_true", help="skip the table write benchmark")
    args = ap.parse_args(argv)
    engines = [x for x in args.engine.split(",") if x]
    if not engines or any(e not in ("python", "native") for e in engines):
        ap.error(f"--engine {args.engine!r}: a comma-separated list of python and native")
    traffics = [x for x in args.traffic.split(",") if x]
    if not traffics or any(t not in SENDERS for t in traffics):
        ap.error(f"--traffic {args.traffic!r}: a comma-separated list of ring and python")
    try:
        ios = parse_ios(args.io)
    except ValueError as exc:
        ap.error(str(exc))
    results = {} if args.only_veth else bench_writes(args.writes)
    if not args.no_veth:
        variants = [(io, engine, traffic) for traffic in traffics for io in ios
                    for engine in engines]
        runs: dict[tuple[str, str, str], list[dict[str, float]]] = {v: [] for v in variants}
        for _ in range(args.repeats):
            for variant in variants:  # interleaved: a change of the machine's load hits each
                runs[variant].append(bench_veth(args.duration, *variant))
        base = 0.0

        def label(v: tuple[str, str, str]) -> str:
            return f"--io {v[0]} --engine {v[1]}" + (f" --traffic {v[2]}" if len(traffics) > 1 else "")

        first = label(variants[0])
        for variant in variants:
            name = label(variant)
            for key in runs[variant][0]:
                results[f"{key}, {name}"] = statistics.median(r[key] for r in runs[variant])
            fwd = results[f"forwarded pkt/s (veth to veth), {name}"]
            base = base or fwd
            results[f"forwarded, {name} / {first} (x100)"] = 100 * fwd / base if base else 0
    width = max(len(k) for k in results)
    print(f"{'p4sim P4Runtime server':<{width}}  value")
    for k, v in results.items():
        print(f"{k:<{width}}  {v:10.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
