"""Which replication channel: framed TCP (asyncio streams + msgpack) or a gRPC bidirectional stream?

Both carry the same msgpack batch delta (B flows of small state) and an ack per message, on
loopback, in one process with two event loops' worth of work. Measures: one-at-a-time round trip
(what a batch waits before its output is released) and pipelined messages/s (window of 16).

    .venv/bin/python -m bench.nf_host_repl_channel [--messages 5000] [--flows 32]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import AsyncIterator

import grpc
import msgpack

from contract.replication import Ack, Delta, Message, SlotRow, encode, to_wire
from nf_host.replication import ReplicationServer, read_message

METHOD = "/nfc.bench.Repl/Stream"


def delta(i: int, flows: int) -> Delta:
    entries: list[list[object]] = [[k.to_bytes(13, "big"), {"count": i, "short": 0}]
                                   for k in range(flows)]
    return Delta(i, [SlotRow(7, 1, i, i * flows, entries)])


def ack(m: Message) -> Ack:
    assert isinstance(m, Delta)
    return Ack(m.batch)


async def tcp_run(n: int, flows: int, window: int) -> tuple[float, float]:
    server = ReplicationServer("127.0.0.1", 0, ack)
    await server.start()
    assert isinstance(server._server, asyncio.Server)  # (TCP here, not the simulation's)
    port = server._server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    rtts = []
    for i in range(min(n, 2000)):
        t = time.perf_counter()
        writer.write(encode(delta(i, flows)))
        await read_message(reader)
        rtts.append(time.perf_counter() - t)
    t = time.perf_counter()
    sent = acked = 0
    while acked < n:
        while sent < n and sent - acked < window:
            writer.write(encode(delta(sent, flows)))
            sent += 1
        answer = await read_message(reader)
        assert isinstance(answer, Ack)
        acked = answer.batch + 1  # acks are cumulative (the server coalesces them)
    rate = n / (time.perf_counter() - t)
    writer.close()
    await server.close()
    return statistics.median(rtts), rate


async def grpc_run(n: int, flows: int, window: int) -> tuple[float, float]:
    async def stream(it: AsyncIterator[bytes], ctx: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        async for req in it:
            m = msgpack.unpackb(req)
            yield msgpack.packb({"t": "a", "b": m["b"]})

    server = grpc.aio.server()
    handler = grpc.method_handlers_generic_handler(
        "nfc.bench.Repl", {"Stream": grpc.stream_stream_rpc_method_handler(stream)})
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    call = channel.stream_stream(METHOD)()
    rtts = []
    for i in range(min(n, 2000)):
        t = time.perf_counter()
        await call.write(msgpack.packb(to_wire(delta(i, flows))))
        await call.read()
        rtts.append(time.perf_counter() - t)
    t = time.perf_counter()
    sent = acked = 0
    while acked < n:
        while sent < n and sent - acked < window:
            await call.write(msgpack.packb(to_wire(delta(sent, flows))))
            sent += 1
        reply = msgpack.unpackb(await call.read())
        acked = int(reply["b"]) + 1
    rate = n / (time.perf_counter() - t)
    await call.done_writing()
    await channel.close()
    await server.stop(None)
    return statistics.median(rtts), rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=5000)
    ap.add_argument("--flows", type=int, default=32)
    ap.add_argument("--window", type=int, default=16)
    a = ap.parse_args()
    tcp = asyncio.run(tcp_run(a.messages, a.flows, a.window))
    grp = asyncio.run(grpc_run(a.messages, a.flows, a.window))
    print(f"replication channel, {a.flows} flows per delta, {a.messages} messages, window {a.window}")
    print(f"{'channel':<14}{'rtt p50 (us)':>14}{'msgs/s':>12}")
    print(f"{'framed TCP':<14}{tcp[0] * 1e6:>14.0f}{tcp[1]:>12.0f}")
    print(f"{'gRPC stream':<14}{grp[0] * 1e6:>14.0f}{grp[1]:>12.0f}")
    print(f"ratio TCP/gRPC: rtt {tcp[0] / grp[0]:.2f}x, throughput {tcp[1] / grp[1]:.2f}x")


if __name__ == "__main__":
    main()
