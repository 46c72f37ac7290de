"""The flood: a scan of distinct 5-tuples at a primary/backup pair under load, with bounded flow
state (issue #32). `make flood` runs it with 1,000,000 flows; `tests/nf_host/test_flood.py` with
a short count in CI.

In-process: the real runtime workers (`nf_host.worker.Worker`, checker NF) of a primary and its
backup on one event loop, replicating over loopback TCP, a modelled switch numbering packets
(8 slots) and copying each to the backup. The load: `steady` long-lived flows get one packet in
every ten throughout; the rest are distinct 5-tuples (one packet each, from 10.x.y.z), far more
than the primary's `max_flows`. Input is fed in bursts, each once the backup has acknowledged
enough of the output before it (backpressure, as the switch's queues would give).

What it shows, and `run` returns: the process's memory (RSS) sampled along the flood stays flat
once the bound is reached; the primary's flow table never exceeds the bound by more than its held
output; the backup holds exactly the primary's flows and states afterwards (in sync through
every eviction); and a fail-over after the flood loses nothing: the steady flows' packets that
only the backup saw are replayed, and every steady flow's checker count is exact end to end
(outputs through the modelled switch's dedup).

    .venv/bin/python -m nf_host.flood [--flows 1000000] [--max-flows 50000] [--steady 100]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any

import psutil

from contract.checker_record import RECORD
from nf_host.global_state import MemoryStore
from nf_host.harness import (
    CheckerSink,
    OutputDedup,
    Switch,
    checker_frame,
    read_checker,
    strip_shim,
    udp_frame,
)
from nf_host.nfs import make_nf
from nf_host.state_store import key_to_wire
from nf_host.worker import Worker, WorkerConfig

SLOTS = 8
BURST = 256
STEADY_BASE = 1 << 24  # checker flow ids of the steady flows (the flood's are below)
_IP = struct.Struct("!I")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class FloodResult:
    flows: int
    max_flows: int
    seconds: float = 0.0
    rss_mb: list[tuple[int, float]] = field(default_factory=list)  # (packets sent, RSS MB)
    table_max: int = 0  # the largest flow table seen (after a burst)
    evictions: dict[str, int] = field(default_factory=dict)
    in_sync: bool = False
    backup_flows: int = 0
    failover_errors: list[str] = field(default_factory=list)
    steady_counts_ok: bool = False
    replayed: int = 0

    @property
    def rss_after_bound(self) -> tuple[float, float]:
        """(RSS when the bound was first reached twice over, the largest RSS after), MB."""
        later = [mb for sent, mb in self.rss_mb if sent >= 3 * self.max_flows]
        return (later[0], max(later)) if later else (0.0, 0.0)


class _Nf:
    def __init__(self, nf_id: int, max_flows: int, dedup: OutputDedup, sink: CheckerSink) -> None:
        self.port = _free_port()
        # the steady flows' output is checked as it leaves (through the modelled switch's dedup:
        # memory O(steady flows)); from `keep_all` on (the fail-over), every output is kept, to be
        # checked in stamp order with the promoted backup's
        self.dedup, self.sink = dedup, sink
        self.outputs = 0
        self.keep: list[bytes | bytearray] = []
        self.keep_all = False
        self.w = Worker(WorkerConfig(nf_id=nf_id, batch_size=64, batch_time=0.0005,
                                     repl_port=self.port),
                        make_nf("checker", {"max_flows": max_flows}), MemoryStore(), self.tx)

    def tx(self, frame: bytes | bytearray) -> None:
        self.outputs += 1
        if self.keep_all:
            self.keep.append(frame)
            return
        _check(frame, self.dedup, self.sink)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"


def _check(frame: bytes | bytearray, dedup: OutputDedup, sink: CheckerSink) -> None:
    """Through the switch's dedup (every output moves its watermark), then, if a steady flow's,
    through the checker's sink."""
    if dedup.offer(frame):
        rec = read_checker(strip_shim(frame)[1])
        if rec is not None and rec[0] >= STEADY_BASE:
            sink.feed(frame)


def flood_frame(i: int) -> bytes:
    """Packet 1 of flood flow `i`: a 5-tuple of its own (10.0.0.0/8 sources)."""
    src = socket.inet_ntoa(_IP.pack(0x0A000000 + i))
    return udp_frame(src, "192.0.2.1", 40000, 53, RECORD.pack(i, 1, 0))


async def _until(cond: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.001)


async def _flood(flows: int, max_flows: int, steady: int, samples: int) -> FloodResult:
    res = FloodResult(flows, max_flows)
    dedup, sink = OutputDedup(), CheckerSink()
    a, b = _Nf(1, max_flows, dedup, sink), _Nf(2, max_flows, dedup, sink)
    await a.w.start()
    await b.w.start()
    proc = psutil.Process()
    sw = Switch()
    sent_steady = [0] * steady
    try:
        slots: list[tuple[int, int, int | None]] = [(s, 1, 1) for s in range(SLOTS)]
        a.w.assign(slots, as_backup=False)
        b.w.assign(slots, as_backup=True)
        a.w.set_backup(2, b.addr)
        await _until(lambda: 2 in a.w.links and a.w.links[2].writer is not None, "backup link")

        def send(frame: bytes, slot: int, to_primary: bool = True) -> None:
            p, c = sw.stamp(slot, frame, 1, 2)
            assert c is not None
            if to_primary:
                a.w.on_frame(p)
            b.w.on_frame(c)

        def steady_packet(j: int, to_primary: bool = True) -> None:
            sent_steady[j] += 1
            send(checker_frame(STEADY_BASE + j, sent_steady[j]), j % SLOTS, to_primary)

        every = max(1, flows // samples)
        total = flows + flows // 9
        t0 = time.perf_counter()
        i = n = 0
        while i < flows:
            for _ in range(BURST):
                if n % 10 == 9:
                    steady_packet(n // 10 % steady)
                elif i < flows:
                    send(flood_frame(i), i % SLOTS)
                    i += 1
                    if i % every == 0:
                        res.rss_mb.append((i, proc.memory_info().rss / 1e6))
                n += 1
            res.table_max = max(res.table_max, len(a.w.flow_table))
            # backpressure: the next burst once most of the held output is acknowledged
            await _until(lambda: a.w.commit.held_outputs < 4 * BURST, "acks")
        res.seconds = time.perf_counter() - t0
        assert n >= total - BURST
        a.w.close_batch()
        await _until(lambda: a.w.commit.held_outputs == 0, "the last output released")
        a.w.bounds.expire(time.monotonic())  # down to the bound, now that nothing is held
        a.w.close_batch()
        await _until(lambda: a.w.commit.held_outputs == 0 and not a.w.commit.inflight,
                     "the evictions acknowledged")
        res.evictions = dict(a.w.flow_table.evicted)
        res.in_sync = all(
            b.w.replicas[s].flows == {key_to_wire(k): v for k, v in a.w.slots[s].state.flows.items()}
            for s in range(SLOTS))
        res.backup_flows = sum(len(b.w.replicas[s].flows) for s in range(SLOTS))
        # the fail-over: 3 more packets per steady flow; the last reaches only the backup (the
        # primary dies before its output leaves)
        a.keep_all = b.keep_all = True
        for _round in range(2):
            for j in range(steady):
                steady_packet(j)
        a.w.close_batch()
        await _until(lambda: a.w.commit.held_outputs == 0, "the steady flows' output")
        a.w.tx = lambda frame: None  # dies: nothing leaves from now
        for j in range(steady):
            steady_packet(j, to_primary=False)
        await a.w.stop()
        promoted = b.w.promote(list(range(SLOTS)), dead=1)
        res.replayed = promoted.replayed
        await _until(lambda: b.w.commit.held_outputs == 0, "the promoted backup's output")
        for f in sorted(a.keep + b.keep, key=lambda f: strip_shim(f)[0].seq):
            _check(f, dedup, sink)
        res.failover_errors = sink.errors
        res.steady_counts_ok = sink.last_count == {
            STEADY_BASE + j: sent_steady[j] for j in range(steady)}
        return res
    finally:
        await a.w.stop()
        await b.w.stop()


def run(flows: int, max_flows: int, steady: int = 100, samples: int = 20) -> FloodResult:
    gc.collect()
    return asyncio.run(_flood(flows, max_flows, steady, samples))


def report(res: FloodResult) -> str:
    first, peak = res.rss_after_bound
    lines = [
        f"flood: {res.flows} distinct 5-tuples + steady flows, max_flows {res.max_flows} per "
        f"worker, {res.seconds:.1f} s ({res.flows / max(res.seconds, 1e-9):.0f} flows/s)",
        f"  flow table: at most {res.table_max} (bound {res.max_flows}); evictions "
        f"{res.evictions}",
        "  RSS (MB) by flows sent: " + ", ".join(f"{s}: {mb:.0f}" for s, mb in res.rss_mb),
        f"  RSS after 3x the bound: {first:.1f} MB, at most {peak:.1f} MB "
        f"(+{peak - first:.1f} MB)",
        f"  backup in sync: {res.in_sync} ({res.backup_flows} flows)",
        f"  fail-over: {res.replayed} packets replayed, steady flows exact: "
        f"{res.steady_counts_ok}, errors: {res.failover_errors[:5]}",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flows", type=int, default=1_000_000, help="distinct 5-tuples to send")
    ap.add_argument("--max-flows", type=int, default=50_000, help="the primary's bound")
    ap.add_argument("--steady", type=int, default=100, help="long-lived flows (one packet in 10)")
    a = ap.parse_args()
    res = run(a.flows, a.max_flows, a.steady)
    print(report(res))
    ok = res.in_sync and res.steady_counts_ok and not res.failover_errors
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
