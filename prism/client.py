"""The Prism load client: persistent connections, one request at a time each, every response's
length and content checked (prism.protocol.object_bytes).

    python -m prism.client --server 10.0.2.1:8080 --connections 8 --size 65536 --duration 5
    python -m prism.client --server 10.0.2.1:8080 --connections 2 --requests 20 --size 4096

Prints one JSON object: requests answered correctly, bytes, seconds, throughput (Mbit/s), and
every failure by kind (reset, short: closed mid-response, content: a byte differs, other).
Exit status 1 when any request failed.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from prism.protocol import ProtocolError, Request, object_bytes, recv_exact

SEED_STRIDE = 1 << 20


@dataclass
class Tally:
    ok: int = 0
    bytes: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)


def run_connection(server: tuple[str, int], conn_no: int, size: int, requests: int | None,
                   deadline: float, seed: int, tally: Tally, timeout: float = 30.0) -> None:
    n = 0
    try:
        with socket.create_connection(server, timeout=timeout) as sock:
            while (requests is None and time.monotonic() < deadline) or (
                    requests is not None and n < requests):
                req_seed = seed + conn_no * SEED_STRIDE + n
                sock.sendall(Request(size, req_seed).encode())
                data = recv_exact(sock, size)
                n += 1
                with tally.lock:
                    if data == object_bytes(size, req_seed):
                        tally.ok += 1
                        tally.bytes += size
                    else:
                        tally.failures["content"] += 1
    except ConnectionResetError:
        tally.failures["reset"] += 1
    except ProtocolError:
        tally.failures["short"] += 1
    except OSError as exc:
        tally.failures[f"other: {exc.__class__.__name__}"] += 1


def run(server: tuple[str, int], connections: int, size: int, requests: int | None,
        duration: float, seed: int, timeout: float = 30.0) -> dict[str, object]:
    tally = Tally()
    start = time.monotonic()
    deadline = start + duration
    threads = [threading.Thread(target=run_connection,
                                args=(server, i, size, requests, deadline, seed, tally, timeout))
               for i in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.monotonic() - start
    return {"connections": connections, "size": size, "ok": tally.ok, "bytes": tally.bytes,
            "seconds": seconds, "mbps": tally.bytes * 8 / seconds / 1e6,
            "failures": dict(tally.failures)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="prism-client", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", required=True, help="frontend address:port")
    parser.add_argument("--connections", type=int, default=4, help="persistent connections")
    parser.add_argument("--size", type=int, default=65536, help="object size in bytes")
    parser.add_argument("--requests", type=int, help="requests per connection (else --duration)")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds, without --requests")
    parser.add_argument("--seed", type=int, default=1, help="seed of the objects' content")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds a connection waits on the server before it fails")
    args = parser.parse_args(argv)
    host, port = args.server.rsplit(":", 1)
    out = run((host, int(port)), args.connections, args.size, args.requests, args.duration,
              args.seed, args.timeout)
    print(json.dumps(out))
    sys.exit(1 if out["failures"] else 0)


if __name__ == "__main__":
    main()
