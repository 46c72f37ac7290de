"""Beyond the Prism thesis: a scale study by simulation, calibrated on the hand-off costs the
`prism` experiment measured on the real system (run `make experiments EXP=prism` first).

The model runs in virtual time (sim.loop: asyncio whose clock moves only when nothing is ready):
client connections, one request at a time each; a response crosses its path's links (backend,
then client for Prism; backend, frontend in, frontend out, client for the proxy) in chunks,
each link a FIFO server at its rate, so concurrent responses share a link; a hand-off costs the
measured medians (frontend's `begin` step and dump, the channel with the backend's restore and
`commit`), a hand-back (mode every) the same again, and every switch Write is served by one
batching controller (the measured write time per Write, the steps that arrived meanwhile in the
next). It is validated against every measured point (same links, backends, sizes and
connections), then run at the thesis's scale (5.2: servers' links 1 Gbit/s, the client's 5,
4-32 backends, 100 connections) with the costs measured here and with costs 10 x smaller.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from experiments import plots
from experiments.common import Check, Context, Outcome, read_csv, write_csv
from sim.loop import run as run_virtual

NAME = "prism-scale"
CHUNK = 64 * 1024
RTT_S = 0.001


@dataclass(frozen=True)
class Costs:
    """Hand-off costs in seconds (medians measured by the `prism` experiment)."""

    begin: float     # frontend: the `begin` step's round trip (its Write included)
    dump: float
    channel: float   # state to the backend, its restore and `commit`, the ACK back
    write: float     # one switch Write at the controller

    def scaled(self, factor: float) -> Costs:
        return Costs(self.begin * factor, self.dump * factor, self.channel * factor,
                     self.write * factor)


@dataclass(frozen=True)
class Setup:
    mode: str
    backends: int
    size: int
    connections: int
    link_bps: float
    client_factor: float = 5.0


class Link:
    """A FIFO server at `bps`: a chunk waits for the chunks ahead of it, then takes its time."""

    def __init__(self, bps: float) -> None:
        self.bps = bps
        self.lock = asyncio.Lock()

    async def send(self, nbytes: int) -> None:
        async with self.lock:
            await asyncio.sleep(nbytes * 8 / self.bps)


class Controller:
    """One Write at a time; steps arriving during a Write go together in the next."""

    def __init__(self, write_s: float) -> None:
        self.write_s = write_s
        self.waiting: list[asyncio.Future[None]] = []
        self.busy = False

    async def step(self) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting.append(done)
        if not self.busy:
            self.busy = True
            asyncio.get_running_loop().create_task(self._serve())
        await done

    async def _serve(self) -> None:
        while self.waiting:
            batch, self.waiting = self.waiting, []
            await asyncio.sleep(self.write_s)
            for done in batch:
                done.set_result(None)
        self.busy = False


async def transfer(path: list[Link], size: int, delivered: Callable[[int], None]) -> None:
    """`size` bytes over the links of `path`, pipelined chunk by chunk (store and forward);
    `delivered(n)` as each chunk leaves the last link."""
    queues: list[asyncio.Queue[int | None]] = [asyncio.Queue() for _ in path]

    async def hop(i: int) -> None:
        while (n := await queues[i].get()) is not None:
            await path[i].send(n)
            if i + 1 < len(path):
                queues[i + 1].put_nowait(n)
            else:
                delivered(n)
        if i + 1 < len(path):
            queues[i + 1].put_nowait(None)

    tasks = [asyncio.ensure_future(hop(i)) for i in range(len(path))]
    for off in range(0, size, CHUNK):
        queues[0].put_nowait(min(CHUNK, size - off))
    queues[0].put_nowait(None)
    await asyncio.gather(*tasks)


async def simulate_async(s: Setup, costs: Costs, duration: float) -> float:
    """Throughput in bit/s of one setup: the bytes delivered to the client between a third of
    `duration` (the connections' first hand-offs are over) and its end."""
    loop = asyncio.get_running_loop()
    client = Link(s.link_bps * s.client_factor)
    fe_in, fe_out = Link(s.link_bps), Link(s.link_bps)
    backends = [Link(s.link_bps) for _ in range(s.backends)]
    ctl = Controller(costs.write)
    rr = itertools.cycle(range(s.backends))
    done_bytes = 0
    start = loop.time() + duration / 3
    end = loop.time() + duration

    def delivered(n: int) -> None:
        nonlocal done_bytes
        if start <= loop.time() <= end:
            done_bytes += n

    async def hand_off() -> None:
        await ctl.step()                                   # begin
        await asyncio.sleep(max(0.0, costs.begin - costs.write) + costs.dump)
        await ctl.step()                                   # commit
        await asyncio.sleep(max(0.0, costs.channel - costs.write))

    async def connection() -> None:
        owner = next(rr)
        first = True
        while loop.time() < end:
            await asyncio.sleep(RTT_S / 2)                 # the request
            if s.mode == "proxy":
                await transfer([backends[owner], fe_in, fe_out, client], s.size, delivered)
                owner = next(rr)
            else:
                if s.mode == "every" or first:
                    if s.mode == "every" and not first:
                        await ctl.step()                   # lock (hand-back)
                        await asyncio.sleep(costs.dump + costs.channel)
                        await ctl.step()                   # release
                    owner = next(rr)
                    await hand_off()
                first = False
                await transfer([backends[owner], client], s.size, delivered)
            await asyncio.sleep(RTT_S / 2)

    await asyncio.gather(*(connection() for _ in range(s.connections)))
    return done_bytes * 8 / (end - start)


def simulate(s: Setup, costs: Costs, duration: float) -> float:
    return run_virtual(simulate_async(s, costs, duration))


def measured_costs(rows: list[dict[str, Any]]) -> Costs:
    def med(key: str) -> float:
        return statistics.median(float(r[key]) for r in rows) / 1000.0

    return Costs(begin=med("begin_ms"), dump=med("dump_ms"), channel=med("handoff_ms"),
                 write=med("begin_write_ms"))


def run(ctx: Context) -> Outcome:
    thr = ctx.out_dir / "prism-throughput.csv"
    if not thr.exists() or not thr.read_text():
        return Outcome(NAME, error="no prism-throughput.csv: run `make experiments EXP=prism` first")
    measured = read_csv(thr)
    # every hand-off's record, as the frontend wrote it (prism-logs/<backends>-every-<size>.jsonl)
    records = [json.loads(line) for f in sorted((ctx.out_dir / "prism-logs").glob("*-every-*.jsonl"))
               for line in f.read_text().splitlines()]
    handoffs = [r for r in records if r["kind"] == "handoff"]
    if not handoffs:
        return Outcome(NAME, error="no hand-off records in prism-logs/: run EXP=prism first")
    costs = measured_costs(handoffs)
    out = Outcome(NAME)
    link_bps = 8e6  # experiments/prism.py LINK_MBIT
    validation: list[dict[str, Any]] = []
    for r in measured:
        s = Setup(r["mode"], int(r["backends"]), int(r["size"]), int(r["connections"]), link_bps)
        sim = simulate(s, costs, duration=2.0 if ctx.quick else 6.0)
        validation.append({"mode": s.mode, "backends": s.backends, "size": s.size,
                           "measured_mbps": float(r["mbps"]), "simulated_mbps": sim / 1e6,
                           "ratio": sim / 1e6 / max(float(r["mbps"]), 1e-9)})
    out.csvs.append(write_csv(ctx.out_dir / "prism-scale-validation.csv", validation))
    sizes = [4096, 262144] if ctx.quick else [4096, 16384, 65536, 262144]
    counts = [32] if ctx.quick else [4, 16, 32]
    scale: list[dict[str, Any]] = []
    cost_sets = {"measured": costs, "10x faster": costs.scaled(0.1)}
    for (label, c), n, size, mode in itertools.product(cost_sets.items(), counts, sizes,
                                                        ("proxy", "every", "once")):
        if mode == "proxy" and label != "measured":
            continue  # the proxy pays no hand-off
        s = Setup(mode, n, size, 100, 1e9)
        gbps = simulate(s, c, duration=0.2 if ctx.quick else 0.5) / 1e9
        scale.append({"costs": label, "backends": n, "size": size, "mode": mode, "gbps": gbps})
        ctx.progress(NAME, len(scale), 0, f"{label}, {n} backends, {mode}, {size} B: {gbps:.2f} Gbit/s")
    out.csvs.append(write_csv(ctx.out_dir / "prism-scale.csv", scale))
    for n in counts:
        series = []
        for label in cost_sets:
            for mode in ("every", "once"):
                pts = [r for r in scale if r["costs"] == label and r["backends"] == n and r["mode"] == mode]
                series.append((f"Prism{' (one hand-off)' if mode == 'once' else ''}, {label} costs",
                               [p["size"] / 1024 for p in pts], [p["gbps"] for p in pts]))
        pts = [r for r in scale if r["mode"] == "proxy" and r["backends"] == n]
        series.append(("proxy", [p["size"] / 1024 for p in pts], [p["gbps"] for p in pts]))
        out.plots.append(plots.line(ctx.out_dir / f"prism-scale-{n}-backends.png",
                                    f"Simulated, {n} backends, links 1 Gbit/s (client 5)",
                                    "object size (KiB)", "Gbit/s", series, logx=True))
    ratios = [v["ratio"] for v in validation if v["measured_mbps"] > 0]
    med_ratio = statistics.median(ratios) if ratios else float("nan")
    out.checks.append(Check("the model is within a factor of 2 of the median measured point",
                            0.5 <= med_ratio <= 2.0, f"median simulated/measured {med_ratio:.2f}"))
    proxy_max = max((r["gbps"] for r in scale if r["mode"] == "proxy"), default=0.0)
    out.checks.append(Check("the simulated proxy stays within the frontend's 1 Gbit/s",
                            proxy_max <= 1.05, f"{proxy_max:.2f} Gbit/s"))
    out.notes.append(
        f"Calibration (medians of the measured Prism hand-offs): begin {costs.begin * 1e3:.3g} ms, "
        f"dump {costs.dump * 1e3:.3g} ms, channel+restore+commit {costs.channel * 1e3:.3g} ms, "
        f"switch Write {costs.write * 1e3:.3g} ms; a hand-back costs a lock and a release step "
        "and a dump plus the channel again (not measured apart).")
    return out

