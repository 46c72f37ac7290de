"""Throughput and latency of the host NF runtime, with replication off and on, against batch size
and worker count: real `nf-host run` processes on veths in a private namespace (needs root).

A primary (pass-through NF) and, with replication on, a backup receive the harness's packets; the
harness keeps a window of packets outstanding and follows the primary's committed count (its
Status), so the rate is of *committed* packets (output released after the backup's ack). Latency is measured at a
paced rate, from sending a packet to receiving its output. Prints tables and ratios of one run.

    .venv/bin/python -m bench.nf_host_throughput [--packets 20000] [--batches 1 8 32 128]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass

import psutil

from contract.proto import nf_control_pb2 as pb
from nf_host.harness import (
    Netns,
    NfProcess,
    RawPort,
    SendPort,
    Switch,
    assign,
    checker_frame,
    pair,
)
from tests.support.procs import free_port, wait_for

SLOTS = list(range(16))


@dataclass
class Result:
    rate: float  # committed output packets/s seen by the harness
    cpu_rate: float  # packets per CPU-second of the primary's processes (capacity of one worker)
    p50_us: float
    p99_us: float
    lost: int = 0  # sequence numbers skipped (gaps) during the throughput phase: must be 0


def _cpu(nf: NfProcess) -> float:
    procs = [psutil.Process(nf.proc.pid)]
    procs += procs[0].children(recursive=True)
    return float(sum(p.cpu_times().user + p.cpu_times().system for p in procs))


def _frames(n: int, backup: bool) -> list[tuple[bytes, bytes | None]]:
    sw = Switch()
    out = []
    for i in range(n):
        slot = SLOTS[i % len(SLOTS)]
        out.append(sw.stamp(slot, checker_frame(i % 256, i // 256 + 1), 1, 2 if backup else 0))
    return out


def committed(nf: NfProcess) -> int:
    """Packets whose output the primary has released (its slots' committed seqs; numbering from 1)."""
    return sum(s.committed_seq for s in nf.status().slots if s.role == pb.SLOT_PRIMARY)


def run_one(ns: Netns, batch: int, replicate: bool, workers: int, packets: int, nf: str) -> Result:
    a_nf, a_sw = ns.veth()
    b_nf, b_sw = ns.veth()
    a = NfProcess(ns.name, 1, a_nf, free_port(), nf=nf, workers=workers, batch_size=batch)
    b = NfProcess(ns.name, 2, b_nf, free_port(), nf=nf, workers=workers, batch_size=batch) if replicate else None
    sa, sb = SendPort(ns.name, a_sw), SendPort(ns.name, b_sw)
    pa: RawPort | None = None
    try:
        a.wait_ready()
        if b is not None:
            b.wait_ready()
            pair(a, b, SLOTS)
        else:
            assign(a, SLOTS)
        frames = _frames(packets + 2000, replicate)
        # throughput: a send-only harness keeps a window of packets outstanding; progress is the
        # primary's committed count (output released), read over its control API
        window = max(4096, 8 * batch)
        chunk = 512
        cpu0 = _cpu(a)
        t0 = time.perf_counter()
        done = 0
        for i in range(0, packets, chunk):
            while i - done > window:
                time.sleep(0.001)  # polling Status costs the NF too: not in a tight loop
                done = committed(a)
            for p, c in frames[i : min(i + chunk, packets)]:
                sa.send(p)
                if c is not None:
                    sb.send(c)
        while done < packets:
            time.sleep(0.001)
            done = committed(a)
        elapsed = time.perf_counter() - t0
        rate = packets / elapsed
        cpu_rate = packets / max(1e-9, _cpu(a) - cpu0)
        lost = int(a.status().load.gaps)
        # latency at a paced rate (well below capacity), with a receiving port
        pa = RawPort(ns.name, a_sw)
        n_lat = 2000
        sent: list[float] = []
        gap = 1 / 4000
        t = time.perf_counter()
        for p, c in frames[packets:]:
            delay = t - time.perf_counter()
            if delay > 0:
                time.sleep(delay)  # sleeping, not spinning: the receiver thread needs the GIL
            sent.append(time.perf_counter())
            sa.send(p)
            if c is not None:
                sb.send(c)
            t += gap
        wait_for(lambda: pa is not None and len(pa.received) >= n_lat, 30, what="latency output")
        lats = sorted(r - s for r, s in zip(pa.times[:n_lat], sent, strict=True))
        return Result(rate, cpu_rate, statistics.median(lats) * 1e6, lats[int(0.99 * len(lats))] * 1e6, lost)
    finally:
        for proc in (a, b):
            if proc is not None:
                proc.stop()
        sa.close()
        sb.close()
        if pa is not None:
            pa.close()
        ns.ip("link", "del", a_nf)
        ns.ip("link", "del", b_nf)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--packets", type=int, default=20000)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32, 128])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--nf", default="passthrough")
    ap.add_argument("--repeat", type=int, default=3, help="runs per point; the best is reported")
    a = ap.parse_args()
    sys.setswitchinterval(0.0002)  # the harness's receiver thread timestamps output promptly
    with Netns("nfcb") as ns:
        def best(batch: int, rep: bool, workers: int) -> Result:
            """Best of --repeat runs: the machine is shared, noise only ever slows a run down."""
            runs = [run_one(ns, batch, rep, workers, a.packets, a.nf) for _ in range(a.repeat)]
            return Result(max(r.rate for r in runs), max(r.cpu_rate for r in runs),
                          min(r.p50_us for r in runs), min(r.p99_us for r in runs),
                          sum(r.lost for r in runs))

        rows: dict[tuple[int, bool], Result] = {}
        for batch in a.batches:
            for rep in (False, True):
                rows[(batch, rep)] = best(batch, rep, 1)
        print(f"\n{a.nf} NF, 1 worker, {a.packets} packets, best of {a.repeat}: committed output rate, latency")
        print("(pkt/s: end to end on this machine; pkt/cpu-s: packets per CPU-second of the primary)")
        print(f"{'batch':>6}{'off pkt/s':>11}{'on pkt/s':>10}{'on/off':>7}{'off pkt/cpu-s':>14}"
              f"{'on pkt/cpu-s':>13}{'on/off':>7}{'off p50':>8}{'off p99':>8}{'on p50':>8}{'on p99':>8}"
              f"{'lost':>6}  (latency us; lost = gaps, must be 0)")
        for batch in a.batches:
            off, on = rows[(batch, False)], rows[(batch, True)]
            print(f"{batch:>6}{off.rate:>11.0f}{on.rate:>10.0f}{on.rate / off.rate:>7.2f}"
                  f"{off.cpu_rate:>14.0f}{on.cpu_rate:>13.0f}{on.cpu_rate / off.cpu_rate:>7.2f}"
                  f"{off.p50_us:>8.0f}{off.p99_us:>8.0f}{on.p50_us:>8.0f}{on.p99_us:>8.0f}"
                  f"{off.lost + on.lost:>6}")
        wrows = {w: best(32, True, w) for w in a.workers}
        print(f"\nthroughput against workers (replication on, batch 32), {len(SLOTS)} slots")
        print(f"{'workers':>8}{'pkt/s':>12}{'ratio':>8}{'pkt/cpu-s':>11}")
        for w, r in wrows.items():
            print(f"{w:>8}{r.rate:>12.0f}{r.rate / wrows[a.workers[0]].rate:>8.2f}{r.cpu_rate:>11.0f}")


if __name__ == "__main__":
    main()
