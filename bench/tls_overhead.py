"""What mutual TLS costs the replication channel (nf_host/tls_streams.py `TlsStreams`, docs/security.md):
connection set-up (TCP connect, plus the TLS 1.3 handshake with client certificates) and the
throughput of a one-way stream of replication-sized frames, plaintext against TLS, on loopback.
Medians of repeats; prints a table.

Run: .venv/bin/python -m bench.tls_overhead [--repeats 5] [--mib 64]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Sequence

from mgmt.pki import local_pki
from mgmt.tls import nf_identity
from nf_host import replication
from nf_host.tls_streams import TlsStreams
from tests.support.procs import free_port


async def _measure(transport: replication.StreamTransport, connects: int, total: int,
                   frame: int) -> tuple[float, float]:
    """(median connection set-up in ms, stream throughput in MiB/s)."""
    received = asyncio.Event()

    async def sink(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        got = 0
        try:
            while got < total:
                data = await reader.read(1 << 16)
                if not data:
                    break
                got += len(data)
        finally:
            if got >= total:
                received.set()
            writer.close()

    port = free_port()
    server = await transport.start_server(sink, "127.0.0.1", port)
    try:
        setups = []
        for _ in range(connects):
            t0 = time.perf_counter()
            _r, w = await transport.open_connection("127.0.0.1", port)
            if w.get_extra_info("ssl_object") is not None:
                w.write(b"")  # (the client's handshake is done once open_connection returns)
            setups.append((time.perf_counter() - t0) * 1000)
            w.close()
        _r, w = await transport.open_connection("127.0.0.1", port)
        chunk = bytes(frame)
        t0 = time.perf_counter()
        for _ in range(total // frame):
            w.write(chunk)
            await w.drain()
        await asyncio.wait_for(received.wait(), 120)
        elapsed = time.perf_counter() - t0
        w.close()
        return statistics.median(setups), total / elapsed / (1 << 20)
    finally:
        server.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tls_overhead", description=__doc__)
    parser.add_argument("--repeats", type=int, default=5, help="runs per transport (median)")
    parser.add_argument("--mib", type=int, default=64, help="MiB streamed per run")
    parser.add_argument("--frame-kib", type=int, default=16, help="frame size (KiB)")
    args = parser.parse_args(argv)
    total, frame = args.mib << 20, args.frame_kib << 10
    transports: dict[str, replication.StreamTransport] = {
        "plaintext TCP": replication.TCP,
        "mutual TLS 1.3": TlsStreams(nf_identity(local_pki(), 1)),
    }
    print(f"{'transport':<16} {'set-up ms':>10} {'MiB/s':>8}   (median of {args.repeats}, "
          f"{args.mib} MiB in {args.frame_kib} KiB frames, loopback)")
    for name, t in transports.items():
        runs = [asyncio.run(_measure(t, 20, total, frame)) for _ in range(args.repeats)]
        print(f"{name:<16} {statistics.median(r[0] for r in runs):>10.2f} "
              f"{statistics.median(r[1] for r in runs):>8.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
