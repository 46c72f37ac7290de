"""How soon a SIGKILLed process's peers can know: the floor under a crash's fail-over.

A crashed NF is detected when its sockets close (docs/protocols.md §7): the controller's gRPC
channel leaves READY, the backup's replication link reads EOF. The kernel closes them only while
it tears the process down, after freeing its memory, so the time from the signal to the first
evidence grows with the process's size. This benchmark starts a child process that holds `--rss`
MiB (touched), a listening TCP socket and a gRPC server, connects to both, SIGKILLs the child and
measures, from the signal, when a plain TCP read sees EOF and when a `grpc.aio` channel leaves
READY. Each size is repeated `--repeats` times (interleaved); the table gives medians and p90 in
ms and each size's ratio to the smallest one.

    .venv/bin/python -m bench.process_teardown [--rss 10,60,200] [--repeats 15]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time

import grpc
from rich.console import Console
from rich.table import Table

CHILD = r"""
import socket, sys, time
from concurrent import futures
import grpc
buf = bytearray(int(sys.argv[1]) * 2**20)
for i in range(0, len(buf), 4096):
    buf[i] = 1
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
srv = grpc.server(futures.ThreadPoolExecutor(2))
gport = srv.add_insecure_port("127.0.0.1:0")
srv.start()
print(s.getsockname()[1], gport, flush=True)
conn, _ = s.accept()
time.sleep(3600)
"""


async def one_kill(rss_mib: int) -> tuple[float, float]:
    """(ms to EOF, ms to the gRPC channel leaving READY) for one SIGKILL of a child of `rss_mib`."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(rss_mib)], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None
        tcp_port, grpc_port = map(int, child.stdout.readline().split())
        reader, writer = await asyncio.open_connection("127.0.0.1", tcp_port)
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}")
        await asyncio.wait_for(channel.channel_ready(), 10)
        seen: dict[str, float] = {}

        async def eof() -> None:
            await reader.read(1)
            seen["eof"] = time.perf_counter()

        async def state_change() -> None:
            await channel.wait_for_state_change(grpc.ChannelConnectivity.READY)
            seen["grpc"] = time.perf_counter()

        watchers = [asyncio.create_task(eof()), asyncio.create_task(state_change())]
        await asyncio.sleep(0)  # both watchers wait before the signal
        t0 = time.perf_counter()
        os.kill(child.pid, signal.SIGKILL)
        await asyncio.wait_for(asyncio.gather(*watchers), 10)
        writer.close()
        await channel.close()
        return (seen["eof"] - t0) * 1000, (seen["grpc"] - t0) * 1000
    finally:
        child.kill()
        child.wait()


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(0.9 * len(ordered) + 0.5) - 1)]


async def run(sizes: list[int], repeats: int) -> dict[int, list[tuple[float, float]]]:
    results: dict[int, list[tuple[float, float]]] = {s: [] for s in sizes}
    for i in range(repeats):
        for size in sizes:  # interleaved: a change of the machine's load hits every size alike
            results[size].append(await one_kill(size))
        print(f"\r{i + 1}/{repeats} rounds", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.process_teardown",
                                description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--rss", default="10,60,200", help="child sizes in MiB, comma-separated")
    p.add_argument("--repeats", type=int, default=15, help="kills per size (median, p90)")
    args = p.parse_args(argv)
    try:
        sizes = [int(s) for s in args.rss.split(",") if s]
    except ValueError:
        p.error(f"--rss {args.rss!r}: give sizes in MiB, e.g. 10,60,200")
    if not sizes or min(sizes) < 1 or args.repeats < 1:
        p.error("--rss needs sizes >= 1 MiB and --repeats >= 1")
    results = asyncio.run(run(sizes, args.repeats))
    table = Table(title=f"SIGKILL to the first evidence, ms ({args.repeats} kills per size)")
    for col in ("RSS MiB", "EOF p50", "EOF p90", "gRPC p50", "gRPC p90", "x (EOF p50)"):
        table.add_column(col, justify="right")
    base = statistics.median(e for e, _ in results[sizes[0]])
    for size in sizes:
        eofs = [e for e, _ in results[size]]
        grpcs = [g for _, g in results[size]]
        table.add_row(str(size), f"{statistics.median(eofs):.2f}", f"{p90(eofs):.2f}",
                      f"{statistics.median(grpcs):.2f}", f"{p90(grpcs):.2f}",
                      f"{statistics.median(eofs) / base:.2f}")
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
