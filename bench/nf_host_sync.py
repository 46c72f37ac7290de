"""Syncing a new backup: seconds and bytes on the wire to get a worker's whole state to a backup
that has none, against the number of flows (10k, 100k, 1M by default).

In-process: two runtime workers (`nf_host.worker.Worker`) on one event loop, replicating over
loopback TCP with the default limits (64 MiB frames, 1 MiB fragments: nf_host/chunked.py). The
primary owns 16 slots whose flows hold a checker-sized state (two small ints); then `set_backup`
names the backup, whose link connects and sends the (re)connection snapshot. Time is from
`set_backup` to the primary's receipt of the backup's ack of the snapshot batch (the backup holds
every flow: checked). Both ends run on the one event loop, so the time is the sum of the
sender's encoding and the receiver's decoding and applying; "CPU s" is the process's CPU time
over the same span (what the sync costs, whatever else the machine runs). Bytes are what the link sent (frames
with their length prefixes, the fragments' framing included); "frags" the fragment frames, and
"max frame" the largest frame, which stays at one fragment however large the state.

    .venv/bin/python -m bench.nf_host_sync [--flows 10000 100000 1000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time

from nf_host.chunked import CHUNK
from nf_host.global_state import MemoryStore
from nf_host.nfs import make_nf
from nf_host.worker import Worker, WorkerConfig
from tests.support.procs import free_port

SLOTS = 16


def _worker(nf_id: int) -> tuple[Worker, str]:
    port = free_port()
    w = Worker(WorkerConfig(nf_id=nf_id, batch_size=64, batch_time=0, repl_port=port),
               make_nf("checker"), MemoryStore(), lambda _f: None)
    return w, f"127.0.0.1:{port}"


def _fill(w: Worker, flows: int) -> None:
    per = -(-flows // SLOTS)
    for slot in range(SLOTS):
        st = w.slots[slot].state
        for i in range(slot * per, min(flows, (slot + 1) * per)):
            key = (0x0A000000 + i, 0x0B000000 + (i >> 16), 1024 + (i & 0xFFFF) % 60000, 80, 17)
            st.flows[key] = {"count": i & 0xFF, "gaps": 0}
            st.dirty.add(key)
        st.seal()
        st.last_seq = 1


async def sync(flows: int) -> tuple[float, float, int, int]:
    a, _ = _worker(1)
    b, b_addr = _worker(2)
    await a.start()
    await b.start()
    try:
        a.assign([(s, 1, 1) for s in range(SLOTS)], as_backup=False)
        b.assign([(s, 1, 1) for s in range(SLOTS)], as_backup=True)
        _fill(a, flows)
        gc.collect()
        t, cpu = time.perf_counter(), time.process_time()
        a.set_backup(2, b_addr)
        while len(a.acked_versions.get(2, {})) < SLOTS:
            await asyncio.sleep(0.001)
        dt, dcpu = time.perf_counter() - t, time.process_time() - cpu
        link = a.links[2]
        assert sum(len(r.flows) for r in b.replicas.values()) == flows
        return dt, dcpu, link.bytes_sent, link.streams
    finally:
        await a.stop()
        await b.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flows", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--repeats", type=int, default=3, help="runs per size (the median is shown)")
    a = ap.parse_args()
    print(f"backup sync (full snapshot), checker-sized state, {SLOTS} slots, "
          f"fragments of {CHUNK >> 10} KiB; median of {a.repeats}")
    print(f"{'flows':>9}{'seconds':>10}{'CPU s':>8}{'MB sent':>10}{'bytes/flow':>12}{'frags':>8}"
          f"{'max frame':>11}{'flows/s':>11}")
    for n in a.flows:
        runs = [asyncio.run(sync(n)) for _ in range(a.repeats)]
        dt = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        sent = runs[0][2]
        frags = -(-sent // CHUNK) if runs[0][3] else 0
        print(f"{n:>9}{dt:>10.2f}{cpu:>8.2f}{sent / 1e6:>10.1f}{sent / n:>12.1f}{frags:>8}"
              f"{min(sent, CHUNK + 32):>11}{n / dt:>11.0f}")


if __name__ == "__main__":
    main()
