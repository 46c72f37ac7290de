"""Packets per second through p4sim in-process (single core), per engine, printed as a table.

    .venv/bin/python -m bench.p4sim_pps [--packets N] [--repeat R] [--batch B]

Each program runs on the Python engine (one `process` call per packet: the reference) and on the
native engine (one `process` call per packet; `process_batch`, many packets per call with a list
of outputs per packet; `process_packed`, many packets per call with the outputs in two flat
buffers); the last column is the ratio to the Python engine. Medians of --repeat runs.

(a) tests/p4sim/programs/ipv4_forward.p4: IPv4 LPM forwarding, TTL decrement, checksum verify
    and update, 100 routes of mixed prefix lengths;
(b) p4src/v1model/nfcluster.p4: an edge TCP packet stamped and multicast to primary and backup
    (two packets out per packet in), when the program is present.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether

from p4sim.runtime.api_values import ActionCall, Match, TableEntry
from p4sim.runtime.engine_loader import load_switch
from p4sim.runtime.switch import Switch

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Case:
    name: str
    setup: Callable[[], tuple[Switch, list[tuple[int, bytes]]]]
    outputs_per_packet: int


def ipv4_case() -> tuple[Switch, list[tuple[int, bytes]]]:
    sw = load_switch(str(ROOT / "tests/p4sim/programs/ipv4_forward.p4"), cpu_port=510)
    t = sw.table_id("ipv4_lpm")
    a = sw.action_id("ipv4_forward")
    seen: set[Match] = set()
    for i in range(100):
        plen = (8, 16, 24, 32)[i % 4]
        value = (10 << 24 | i << 16 | i << 8 | i) & (0xFFFFFFFF ^ ((1 << (32 - plen)) - 1))
        m = Match("lpm", value, prefix_len=plen)
        if m not in seen:  # the /8 prefixes repeat
            seen.add(m)
            sw.table_insert(TableEntry(t, {1: m}, ActionCall(a, {1: 0x020000000000 + i, 2: 1 + i % 8})))
    pkts = [(1, bytes(Ether() / IP(src="192.168.0.1", dst=f"10.{i}.{i}.{i}", ttl=64) / UDP() / (b"x" * 64)))
            for i in range(32)]
    return sw, pkts


def nfcluster_case() -> tuple[Switch, list[tuple[int, bytes]]]:
    sw = load_switch(str(ROOT / "p4src/v1model/nfcluster.p4"),
                     [str(ROOT / "p4src/shared"), str(ROOT / "p4src/v1model")], cpu_port=510)
    pr, spr = sw.table_id("port_role"), sw.action_id("set_port_role")
    sw.table_insert(TableEntry(pr, {1: Match("exact", 1)}, ActionCall(spr, {1: 1})))
    nfp, snt = sw.table_id("nf_port"), sw.action_id("set_nf_target")
    for port in (2, 3):
        sw.table_insert(TableEntry(pr, {1: Match("exact", port)}, ActionCall(spr, {1: 2})))
        sw.table_insert(TableEntry(nfp, {1: Match("exact", port)}, ActionCall(snt, {1: port, 2: port})))
    so, srg = sw.table_id("slot_owner"), sw.action_id("set_replica_group")
    for slot in range(4096):
        sw.table_insert(TableEntry(so, {1: Match("exact", 0), 2: Match("exact", slot)},
                                  ActionCall(srg, {1: 2, 2: 1, 3: 2, 4: 0})))
    sw.mc_group_set(2, [(2, 1), (3, 2)])
    pkts = [(1, bytes(Ether() / IP(src="10.0.0.1", dst="10.0.1.1") / TCP(sport=1000 + i, dport=80, flags="A")
                      / (b"x" * 64))) for i in range(32)]
    return sw, pkts


@dataclass
class Variant:
    name: str
    engine: str
    api: str  # "process" (one call per packet), "batch" (process_batch), "packed" (process_packed)
    scale: int  # packets per run, as a multiple of --packets


VARIANTS = [
    Variant("python process()", "python", "process", 1),
    Variant("native process()", "native", "process", 4),
    Variant("native process_batch()", "native", "batch", 20),
    Variant("native process_packed()", "native", "packed", 40),
]


def measure(case: Case, variant: Variant, packets: int, repeat: int, batch: int) -> tuple[float, int]:
    """Median packets in/s over ``repeat`` runs, and the outputs per input packet."""
    os.environ["P4SIM_ENGINE"] = variant.engine
    sw, pkts = case.setup()
    if sw.engine != variant.engine:
        raise SystemExit(f"{case.name}: the {variant.engine} engine is not available ({sw.native_fallback})")
    chunk = (pkts * (batch // len(pkts) + 1))[:batch]
    for port, data in pkts:  # warm up
        sw.process(port, data)
    outs = len(sw.process(*pkts[0]))
    n = len(pkts)
    total = packets * variant.scale
    rates = []
    for _ in range(repeat):
        sw.take_digests()
        t0 = time.perf_counter()
        if variant.api == "process":
            for i in range(total):
                sw.process(*pkts[i % n])
        elif variant.api == "batch":
            for _ in range(total // batch):
                sw.process_batch(chunk)
        else:
            for _ in range(total // batch):
                sw.process_packed(chunk)
        dt = time.perf_counter() - t0
        rates.append((total if variant.api == "process" else total // batch * batch) / dt)
    return statistics.median(rates), outs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--packets", type=int, default=20000,
                    help="packets per run of the Python engine (native variants run 4-40x more; default 20000)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per variant; the median is reported (default 5)")
    ap.add_argument("--batch", type=int, default=256, help="packets per batch call (default 256)")
    args = ap.parse_args(argv)
    cases = [Case("ipv4_forward (LPM + checksum)", ipv4_case, 1)]
    if (ROOT / "p4src/v1model/nfcluster.p4").exists():
        cases.append(Case("nfcluster (stamp + multicast x2)", nfcluster_case, 2))
    print(f"{'program':<34} {'engine and API':<26} {'packets in/s':>14} {'packets out/s':>14} "
          f"{'ns/packet':>10} {'x python':>9}")
    for c in cases:
        base = 0.0
        for v in VARIANTS:
            pps, outs = measure(c, v, args.packets, args.repeat, args.batch)
            assert outs == c.outputs_per_packet, f"{c.name}: {outs} outputs per packet"
            base = base or pps
            print(f"{c.name:<34} {v.name:<26} {pps:>14,.0f} {pps * outs:>14,.0f} {1e9 / pps:>10.0f} "
                  f"{pps / base:>8.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
