"""Migration cost of a slot: bytes shipped and time, intra-cluster (delta) against inter-cluster
(full state), against the number of flows in the slot.

In-process: two runtime workers (`nf_host.worker.Worker`) on one event loop, replicating over
loopback TCP, the checker NF. The slot gets N flows; with a cluster peer, the peer acknowledges
that state; then `changed` flows see one more packet, and the slot is released to the peer
(ships the `changed` flows) or to an NF of another cluster (ships all N). Time is from `release`
to the adopter's acknowledgement.

    .venv/bin/python -m bench.nf_host_migration [--flows 10 100 1000 10000] [--changed 10]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from nf_host.global_state import MemoryStore
from nf_host.harness import Switch, checker_frame
from nf_host.nfs import make_nf
from nf_host.worker import Worker, WorkerConfig
from tests.support.procs import free_port

SLOT = 1


def _worker(nf_id: int) -> tuple[Worker, str]:
    port = free_port()
    w = Worker(WorkerConfig(nf_id=nf_id, batch_size=64, batch_time=0, repl_port=port),
               make_nf("checker"), MemoryStore(), lambda _f: None)
    return w, f"127.0.0.1:{port}"


async def move(flows: int, changed: int, same_cluster: bool) -> tuple[int, int, float]:
    a, _ = _worker(1)
    b, b_addr = _worker(2)
    await a.start()
    await b.start()
    try:
        a.assign([(SLOT, 1, 1)], as_backup=False)
        if same_cluster:
            a.set_peers([(2, b_addr)])
            await a.links[2].connected.wait()
        sw = Switch()
        for f in range(1, flows + 1):
            a.on_frame(sw.stamp(SLOT, checker_frame(f, 1), 1)[0])
        a.close_batch()
        if same_cluster:
            while a.acked_versions.get(2, {}).get(SLOT) != a.slots[SLOT].state.version:
                await asyncio.sleep(0.001)
        for f in range(1, changed + 1):
            a.on_frame(sw.stamp(SLOT, checker_frame(f, 2), 1)[0])
        b.adopt(SLOT, 2)
        t = time.perf_counter()
        res = await a.release(SLOT, 2, b_addr, same_cluster)
        dt = time.perf_counter() - t
        assert len(b.slots[SLOT].state.flows) == flows
        return res.bytes_shipped, res.flows_shipped, dt
    finally:
        await a.stop()
        await b.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flows", type=int, nargs="+", default=[10, 100, 1000, 10000])
    ap.add_argument("--changed", type=int, default=10, help="flows changed after the peer's version")
    a = ap.parse_args()
    print(f"slot migration, checker NF, {a.changed} flows changed since the peer's last version")
    print(f"{'flows':>7}{'intra bytes':>13}{'intra flows':>12}{'intra ms':>10}"
          f"{'inter bytes':>13}{'inter flows':>12}{'inter ms':>10}{'bytes ratio':>13}")
    for n in a.flows:
        ch = min(a.changed, n)
        ib, iflows, it = asyncio.run(move(n, ch, True))
        xb, xflows, xt = asyncio.run(move(n, ch, False))
        print(f"{n:>7}{ib:>13}{iflows:>12}{it * 1e3:>10.2f}{xb:>13}{xflows:>12}{xt * 1e3:>10.2f}"
              f"{ib / xb:>13.3f}")


if __name__ == "__main__":
    main()
