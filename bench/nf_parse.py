"""Packets per second of the NF hot path without I/O: `parse_frame` alone, and parse + each example NF.

Run: .venv/bin/python -m bench.nf_parse [--packets N] [--nf NAME ...] [--etcd HOST:PORT]
Prints one table row per case (packets/s and microseconds per packet), all measured in one run on
the same frames, so the rows can be compared as ratios. The global store is `MemoryStore`, so
NFs that touch global state (NAT allocations, generic with a global update rate) are measured
without etcd round trips; `--etcd` adds a second table with those paths against a real etcd.
"""

from __future__ import annotations

import argparse
import struct
import time
from collections.abc import Callable

from contract.checker_record import RECORD
from contract.shim import Kind, Shim
from nf_host.global_state import EtcdStore, MemoryStore
from nf_host.nf_api import Context, FlowKey, FlowState, GlobalStore, NetworkFunction
from nf_host.nfs import make_nf
from nf_host.parse import parse_frame

NF_PARAMS: dict[str, dict[str, object]] = {
    "passthrough": {},
    "checker": {},
    "flow_monitor": {},
    "firewall": {"inside": "10.0.0.0/8"},
    "ids": {"patterns": ["ATTACK", "EVIL-PAYLOAD", "\u00ff\u00fe"]},
    "l4lb": {"vip": "192.0.2.10", "backends": ["10.1.0.1", "10.1.0.2"]},
    "nat": {"public_ip": "203.0.113.1"},
    "generic": {"state_bytes": 64},
}


def udp_frame(flow: int, payload_len: int = 64) -> bytes:
    """An Ethernet/IPv4/UDP frame of flow number `flow` with a checker record (struct, no scapy)."""
    payload = RECORD.pack(flow, 1, 0) + bytes(payload_len - RECORD.size)
    udp_len = 8 + len(payload)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, 0, 0, 64, 17, 0,
                     bytes([10, 0, flow >> 8 & 0xFF, flow & 0xFF]), bytes([192, 0, 2, 10]))  # fmt: skip
    udp = struct.pack("!HHHH", 10000 + flow, 80, udp_len, 0)
    return b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + ip + udp + payload


def measure(
    run: Callable[[bytearray, Shim], None], frames: list[bytes], n: int, repeat: int = 3
) -> float:
    """Best packets/s of `repeat` passes over `n` fresh frame copies (the first pass also warms up)."""
    shim = Shim(Kind.PRIMARY, 0, 1, 1, 1, 0, 0x0800)
    best = 0.0
    for _ in range(repeat):
        bufs = [bytearray(frames[i % len(frames)]) for i in range(n)]
        t0 = time.perf_counter()
        for buf in bufs:
            run(buf, shim)
        best = max(best, n / (time.perf_counter() - t0))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--packets", type=int, default=200_000)
    ap.add_argument("--flows", type=int, default=1000)
    ap.add_argument(
        "--nf", action="append", choices=sorted(NF_PARAMS), help="NFs to measure (default all)"
    )
    ap.add_argument(
        "--etcd",
        metavar="HOST:PORT",
        help="also measure the NFs' global-state paths against this etcd (NAT allocations, generic"
        " NF at global_update_rate 1) next to MemoryStore",
    )
    ap.add_argument(
        "--global-ops", type=int, default=300, help="connections/updates per global case"
    )
    args = ap.parse_args()
    frames = [udp_frame(i) for i in range(args.flows)]
    store = MemoryStore()
    rows: list[tuple[str, float]] = []

    def parse_only(buf: bytearray, shim: Shim) -> None:
        parse_frame(buf, shim)

    rows.append(("parse_frame only", measure(parse_only, frames, args.packets)))
    for name in args.nf or list(NF_PARAMS):
        nf = make_nf(name, NF_PARAMS[name])
        states: dict[FlowKey | None, FlowState] = {}

        def run(
            buf: bytearray,
            shim: Shim,
            nf: NetworkFunction = nf,
            states: dict[FlowKey | None, FlowState] = states,
        ) -> None:
            packet = parse_frame(buf, shim)
            key, rev = packet.flow.canonical() if packet.flow else (None, False)
            state = states.get(key)
            if state is None:
                state = states[key] = nf.initial_state()
            nf.process(packet, state, Context(1, 0, 1, key, rev, store, 0.0))

        rows.append((f"parse + {name}", measure(run, frames, args.packets)))
    base = rows[0][1]
    print(f"{'case':<24} {'packets/s':>12} {'us/packet':>10} {'vs parse':>9}")
    for case, pps in rows:
        print(f"{case:<24} {pps:>12,.0f} {1e6 / pps:>10.2f} {base / pps:>8.2f}x")
    if args.etcd:
        global_table(args.etcd, args.global_ops)


def global_table(endpoint: str, n: int) -> None:
    """New NAT connections/s and generic-NF global updates/s, MemoryStore against etcd."""
    frames = [udp_frame(i) for i in range(n)]
    shim = Shim(Kind.PRIMARY, 0, 1, 1, 1, 0, 0x0800)
    print(f"\n{'global-state case':<34} {'ops/s':>10} {'ms/op':>8}")
    for nf_name, params in (
        ("nat", {"public_ip": "203.0.113.1", "pool": f"bench{time.time_ns()}"}),
        ("generic", {"global_update_rate": 1.0, "counter": f"bench{time.time_ns()}"}),
    ):
        for backend in ("memory", "etcd"):
            store: GlobalStore = (
                MemoryStore() if backend == "memory" else EtcdStore(endpoint, "/nfc/bench/")
            )
            nf = make_nf(nf_name, params)
            store.get("warm-up")
            t0 = time.perf_counter()
            for frame in frames:  # every frame is a new flow: one allocation / one update each
                packet = parse_frame(bytearray(frame), shim)
                assert packet.flow is not None
                key, rev = packet.flow.canonical()
                nf.process(packet, nf.initial_state(), Context(1, 0, 1, key, rev, store, 0.0))
            rate = n / (time.perf_counter() - t0)
            what = "new NAT connections" if nf_name == "nat" else "generic global updates"
            print(f"{what + ' (' + backend + ')':<34} {rate:>10,.0f} {1e3 / rate:>8.3f}")
            if isinstance(store, EtcdStore):
                store.close()


if __name__ == "__main__":
    main()
