"""A NAT instance in its own OS process, for the concurrent-allocation test (run with -m).

It opens the global store, waits at a barrier in the store until `--peers` processes are ready,
then pushes `--count` new outbound connections through `parse_frame` and the NAT and prints the
public ports it got, one per line.
"""

from __future__ import annotations

import argparse
import time

from nf_host.global_state import open_store
from nf_host.nf_api import Context, Verdict
from nf_host.nfs import make_nf
from nf_host.parse import parse_frame
from tests.nf_host.nfs.packets import shim, udp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--store", required=True, help="etcd://HOST:PORT/prefix")
    ap.add_argument("--instance", type=int, required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--peers", type=int, default=2)
    ap.add_argument("--port-min", type=int, default=20000)
    ap.add_argument("--port-max", type=int, default=20299)
    args = ap.parse_args()
    store = open_store(args.store)
    nf = make_nf(
        "nat",
        {
            "public_ip": "203.0.113.1",
            "pool": "race",
            "port_min": args.port_min,
            "port_max": args.port_max,
        },
    )
    store.increment("barrier")
    deadline = time.monotonic() + 30
    while int(store.get("barrier") or b"0") < args.peers:  # a barrier, not a sleep: spins on etcd
        if time.monotonic() > deadline:
            raise SystemExit("peers never arrived at the barrier")
    for i in range(args.count):
        src = f"10.{args.instance}.{i // 250}.{i % 250 + 1}"
        packet = parse_frame(
            bytearray(bytes(udp(src, "198.51.100.1", 4000, 53, b"q"))), shim(i + 1)
        )
        assert packet.flow is not None
        key, rev = packet.flow.canonical()
        ctx = Context(0, i + 1, args.instance, key, rev, store, time.time())
        state = nf.initial_state()
        if nf.process(packet, state, ctx) == Verdict.FORWARD:
            print(state["ext_port"], flush=True)
        else:
            print("dropped", flush=True)


if __name__ == "__main__":
    main()
