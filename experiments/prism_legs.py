"""The Prism experiment's legs beyond figure 5.1 (experiments/prism.py runs them):

* shaper A/B: Prism (a hand-off at every request), 4 backends, under the first runs' tbf and
  under the htb with the hand-off channel sharing the responses' queue (no tc filter) -- beside
  the main run's htb, where the channel has a class of its own: the test of why Prism fell at
  large objects;
* the thesis's figure 5.2 ("advanced tests"): 5 backends, the client's link 4 times the
  servers' (its 10 and 40 Gbit/s), object sizes up to 1 MiB, and latency added to every
  hand-off (its 0-300 us, scaled by the link-rate ratio: the same number of bytes of link time);
* a backend failing mid-connection (prism.recovery): backend 1 of 4 crashes a few seconds into
  a run of 256 KiB objects, in each Prism mode; the client counts every failure, the frontend
  records each held connection as recovered or lost.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from experiments.common import Context
from prism.testbed import Testbed, wait_until

LINK_MBIT = 8.0
THESIS_LINK_GBIT = 10.0  # 5.3's servers' links
FIG52_EXTRA_US = (0, 100, 300)  # of the thesis's 0-300 us added hand-off latency


def fig52_extra_ms(us: int) -> float:
    """Added latency in our links' time: the same bytes of link time as `us` at 10 Gbit/s."""
    return us * (THESIS_LINK_GBIT * 1e3 / LINK_MBIT) / 1e3


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _point(tb: Testbed, ctx: Context, mode: str, size: int, connections: int, seconds: float,
           stats: Path, frontend_args: list[str] | None = None) -> dict[str, Any]:
    stats.unlink(missing_ok=True)  # the frontend appends: an earlier run's records would stay
    tb.start_servers(mode, stats=stats, frontend_args=frontend_args)
    out = tb.run_client("--connections", str(connections), "--size", str(size),
                        "--duration", str(seconds), "--seed", str(ctx.seed))
    tb.stop_servers()
    fails = out["failures"]
    assert isinstance(fails, dict)
    return {"mode": mode, "size": size, "connections": connections, "mbps": out["mbps"],
            "responses": out["ok"], "failures": sum(fails.values()),
            "failure_kinds": json.dumps(fails)}


SHAPERS = {"tbf": ("tbf", False), "htb-shared": ("htb", False)}  # name: (shaper, channel class)
MAIN_SHAPER = {"htb-channel": ("htb", True)}  # the main run's


def channel_ab(ctx: Context, logdir: Path, sizes: list[int], connections: int,
               seconds: float, shapers: dict[str, tuple[str, bool]] | None = None
               ) -> list[dict[str, Any]]:
    """Prism (every) with 4 backends under the first runs' tbf, and under the htb without the
    channel's class (the main run has it: "htb-channel")."""
    rows = []
    for name, (shaper, prio) in (shapers or SHAPERS).items():
        tb = Testbed(backends=4, logdir=logdir / name, rate_mbit=LINK_MBIT, target=ctx.target,
                     channel_priority=prio, shaper=shaper)
        try:
            for size in sizes:
                row = _point(tb, ctx, "every", size, connections, seconds,
                             logdir / f"{name}-every-{size}.jsonl")
                ctx.progress("prism", 0, 0, f"shaper {name}, {size} B: {row['mbps']:.2f} Mbit/s "
                             f"{row['failure_kinds'] if row['failures'] else ''}")
                rows.append({"backends": 4, "shaper": name, **row})
        finally:
            tb.close()
    return rows


def figure_52(ctx: Context, logdir: Path, sizes: list[int], extras_us: tuple[int, ...],
              connections: int, seconds: float) -> list[dict[str, Any]]:
    """Proxy, and Prism (every) with each added hand-off latency, 5 backends, client link 4x."""
    rows = []
    tb = Testbed(backends=5, logdir=logdir / "fig52", rate_mbit=None, target=ctx.target)
    try:
        tb.set_rate(LINK_MBIT, client_factor=4.0)
        for size in sizes:
            rows.append({"extra_us": 0, "extra_ms": 0.0, **_point(
                tb, ctx, "proxy", size, connections, seconds, logdir / f"fig52-proxy-{size}.jsonl")})
            for us in extras_us:
                ms = fig52_extra_ms(us)
                row = _point(tb, ctx, "every", size, connections, seconds,
                             logdir / f"fig52-every-{us}-{size}.jsonl",
                             ["--extra-handoff-ms", str(ms)])
                ctx.progress("prism", 0, 0, f"figure 5.2, {size} B, +{us} us (+{ms:g} ms): "
                             f"{row['mbps']:.2f} Mbit/s")
                rows.append({"extra_us": us, "extra_ms": ms, **row})
    finally:
        tb.close()
    return rows


def backend_failure(ctx: Context, logdir: Path, mode: str, size: int, connections: int,
                    seconds: float, crash_after: float) -> dict[str, Any]:
    """Backend 1 of 4 crashes `crash_after` seconds into the run (once it holds a connection).
    `mode` is a frontend mode, or "once+snapshots" (mode once with --snapshots)."""
    server_mode, args = mode, ["--fail-after", "1.0"]
    if mode == "once+snapshots":
        server_mode, args = "once", [*args, "--snapshots"]
    tb = Testbed(backends=4, logdir=logdir / f"fail-{mode}", rate_mbit=LINK_MBIT,
                 target=ctx.target)
    stats = logdir / f"fail-{mode}.jsonl"
    stats.unlink(missing_ok=True)
    try:
        tb.start_servers(server_mode, stats=stats, frontend_args=args)
        start = time.monotonic()
        client = tb.start_client("--connections", str(connections), "--size", str(size),
                                 "--duration", str(seconds), "--seed", str(ctx.seed),
                                 "--timeout", "8")

        def victim_serving() -> bool:
            return time.monotonic() - start >= crash_after and any(
                r["kind"] == "handoff" and r["backend"] == "10.0.3.1" for r in _records(stats))

        wait_until("backend 1 serving", victim_serving, timeout=60)
        tb.crash_backend(1)
        crashed_at = time.monotonic() - start
        out = tb.client_result(client, timeout=300)
    finally:
        tb.close()
    recs = _records(stats)
    failed = [r for r in recs if r["kind"] == "backend_failed"]
    recovered = [r for r in recs if r["kind"] == "recovered"]
    lost = [r for r in recs if r["kind"] == "lost"]
    fails = out["failures"]
    assert isinstance(fails, dict)
    row = {"mode": mode, "size": size, "connections": connections, "crashed_at_s": crashed_at,
           "held": failed[0]["held"] if failed else 0, "recovered": len(recovered),
           "lost": len(lost), "lost_why": "; ".join(sorted({str(r["why"]) for r in lost})),
           "client_responses": out["ok"], "client_failures": sum(fails.values()),
           "client_failure_kinds": json.dumps(fails), "mbps": out["mbps"],
           "recover_ms_max": max((r["recover_ms"] for r in recovered), default=0.0),
           "after_hand_off_ms_max": max((r["since_dump_ms"] for r in recovered), default=0.0)}
    ctx.progress("prism", 0, 0, f"backend failure, {mode}: {row['held']} held, "
                 f"{row['recovered']} recovered, {row['lost']} lost; client {fails or 'no failure'}")
    return row
