"""What disturbs a run while its traffic flows: slot moves through the HTTP API, NF kills and
chaos faults from a seeded schedule (`disturb`, in a thread of the scenario), and what the sink's
verdict says they cost (`loss_report`)."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from topo.faults import chaos_modes
from topo.faults.injector import FaultInjector, FaultRecord
from topo.faults.memory import RssLife
from topo.http_api import http_json, http_post
from topo.procs import wait_for
from topo.verify import tally

if TYPE_CHECKING:
    import subprocess

    from topo.model import RunOptions


# -- disturbances: slot moves and a killed primary during the traffic -----------------------------

@dataclass
class Disturbances:
    """What the disturbing thread did; written to disturbances.json."""

    moves: list[dict[str, Any]] = field(default_factory=list)
    killed: int | None = None
    killed_at: float | None = None
    faults: list[FaultRecord] = field(default_factory=list)
    failovers: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    losses: dict[str, Any] = field(default_factory=dict)
    rss: dict[str, dict[str, int]] = field(default_factory=dict)  # "start"/"warm"/"end": process -> bytes
    rss_series: list[dict[str, Any]] = field(default_factory=list)  # {"t": s, "rss": {...}} (topo/faults/memory.py)
    rss_lives: list[RssLife] = field(default_factory=list)  # each process incarnation (topo/faults/memory.py)
    # with a settle tail (RunOptions.settle): when the last fault was over, as time.monotonic(),
    # and as seconds on the RSS sampler's clock (the memory verdict's `settled_from`)
    faults_ended_at: float | None = None
    rss_settled_from: float | None = None
    # chaos modes (topo/faults/chaos_modes.py): the random moves made during the faults (the API's
    # results, and the requests answered with none), and what `modes_summary` counts
    chaos_moves: list[dict[str, Any]] = field(default_factory=list)
    moves_refused: list[str] = field(default_factory=list)
    modes: dict[str, int] = field(default_factory=dict)
    # settles after a fault slower than the harness's 20 s (timing on a loaded host, not data:
    # reported, not judged; one not reached within `chaos_modes.SETTLE_LONGEST` is an error)
    slow_settles: list[str] = field(default_factory=list)


def _processed(api: str) -> int:
    return sum(int(r.get("packets", 0)) for r in http_json(f"{api}/nfs") if r["role"] == "primary")


def _move_plan(api: str, n: int, avoid: int | None) -> list[tuple[int, int]]:
    """(slot, target) for n distinct slots with traffic, alternating intra- and inter-cluster.
    With service chains: slots of the middle stage of the first chain, to primaries of it."""
    stages = http_json(f"{api}/status").get("stages", [])
    stage = stages[len(stages) // 2]["id"] if len(stages) > 1 else None
    nfs = http_json(f"{api}/nfs")
    primaries = {r["id"]: r["cluster"] for r in nfs if r["role"] == "primary" and r["alive"]
                 and (stage is None or r.get("stage") == stage)}
    slots: dict[int, int] = {}
    if stage is None:  # the flows the switch reported, at their slots
        rows = list(http_json(f"{api}/flows"))
    else:  # the stage's slots that carried packets
        rows = [r for p in sorted(primaries) for r in http_json(f"{api}/slots?nf={p}")
                if r["packets"] > 0]
    for row in rows:
        if row["owner"] in primaries and row["owner"] != avoid:
            slots.setdefault(int(row["slot"]), int(row["owner"]))
    plan: list[tuple[int, int]] = []
    for i, (slot, owner) in enumerate(sorted(slots.items())[:n]):
        intra = i % 2 == 0
        targets = sorted(p for p, c in primaries.items()
                         if p != owner and p != avoid and (c == primaries[owner]) == intra)
        if not targets:  # no such primary in this topology: take any other
            targets = sorted(p for p in primaries if p != owner and p != avoid)
        if targets:
            plan.append((slot, targets[i // 2 % len(targets)]))
    return plan


def disturb(api: str, opts: RunOptions, faults: FaultInjector,
            sender: subprocess.Popen[bytes], out: Disturbances) -> None:
    """Move slots, then kill a primary, while the sender runs (in a thread of the scenario)."""
    total = 2 * opts.flows * opts.packets
    out.faults = faults.records  # the same list: what was injected shows even if this never ends
    try:
        if opts.move_slots:
            wait_for(lambda: sender.poll() is not None or _processed(api) >= total // 6,
                     timeout=60, interval=0.05, what="traffic flowing")
            wait_for(lambda: sender.poll() is not None
                     or len(http_json(f"{api}/flows")) >= min(opts.flows, opts.move_slots),
                     timeout=10, interval=0.05, what="flows learned")
            plan: list[tuple[int, int]] = []

            def planned() -> bool:  # the switch's counters show traffic on slots to move
                plan[:] = _move_plan(api, opts.move_slots, opts.kill_nf)
                return bool(plan) or sender.poll() is not None

            wait_for(planned, timeout=10, interval=0.1, what="slots with traffic to move")
            for slot, target in plan:
                status, result = http_post(f"{api}/slots/{slot}/move?to={target}")
                if isinstance(result, dict):
                    out.moves.append(result)
                else:
                    out.errors.append(f"move of slot {slot} to NF {target}: HTTP {status} {result}")
        if opts.kill_nf is not None:
            wait_for(lambda: sender.poll() is not None or _processed(api) >= total * 2 // 5,
                     timeout=60, interval=0.05, what="traffic before the kill")
            victim = _victim(api, opts.kill_nf)
            rec = faults.inject("primary", victim)
            out.killed, out.killed_at = victim, rec.at
            # the run ends with the victim back in the pool, not whenever the traffic ends (a
            # kill late in a short run left it still starting when the summary was taken)
            faults.wait_back(victim)
        if opts.kill_every > 0:
            # some traffic first: a tenth of the run, at most 4 s of it (a soak is long)
            wait_for(lambda: sender.poll() is not None
                     or _processed(api) >= min(total // 10, int(opts.rate * 2 * 4)),
                     timeout=60, interval=0.05, what="traffic before the first fault")
            # with a settle tail, the schedule ends that long before the traffic does
            until = time.monotonic() + opts.packets * opts.flows / opts.rate - opts.settle \
                if opts.settle else math.inf
            schedule(opts, faults, sender, until, out)
            if opts.settle:
                out.faults_ended_at = time.monotonic()
    except Exception as exc:  # reported in the summary and the JSON; the verdict still runs
        out.errors.append(f"{type(exc).__name__}: {exc}")


def _victim(api: str, nf: int) -> int:
    """`nf`, or, if a fail-over has already taken its slots (a false alarm on a loaded machine:
    it was alive), the primary that holds them now: `--kill-nf` kills the primary that carries
    that NF's traffic, which the controller must then fail over."""
    roles = {int(r["id"]): str(r.get("role")) for r in http_json(f"{api}/nfs")}
    if roles.get(nf) == "primary":
        return nf
    for fo in reversed(http_json(f"{api}/status").get("failovers", [])):
        promoted = fo.get("promoted")
        if fo.get("dead") == nf and promoted and roles.get(int(promoted)) == "primary":
            return _victim(api, int(promoted)) if int(promoted) != nf else nf
    return nf


def schedule(opts: RunOptions, faults: FaultInjector, sender: subprocess.Popen[bytes],
             until: float, out: Disturbances) -> None:
    """The fault schedule until `until` (time.monotonic()): one fault at a time, each once the
    last has settled, or with `opts.overlap` side by side (topo/faults/chaos_modes.py); with
    `opts.moves`, random moves meanwhile. Every fail-over a leader reports goes to
    `out.failovers` (each leader keeps its own history)."""
    log = chaos_modes.FailoverLog()
    mover: chaos_modes.Mover | None = None
    moving: threading.Thread | None = None
    if opts.moves > 0:
        mover = chaos_modes.Mover(faults.leading, opts.moves, opts.seed)
        moving = threading.Thread(target=mover.run, name="mover", daemon=True)
        moving.start()
    try:
        if opts.overlap:
            chaos_modes.overlapping(faults, sender, opts.kill_every, until, opts.faults, log,
                                    out.errors, slow=out.slow_settles)
            return
        while sender.poll() is None and (not opts.faults or len(faults.records) < opts.faults):
            time.sleep(opts.kill_every)  # the fault schedule's period, not synchronisation
            if time.monotonic() >= until:
                break
            log.poll(faults.leading())
            victim = faults.pick()
            if victim is None or sender.poll() is not None:
                continue
            faults.inject(*victim, zombie=faults.draw_zombie(victim[0]))
            chaos_modes.settle(faults, out.slow_settles)
        log.poll(faults.leading())
    finally:
        if mover is not None and moving is not None:
            mover.stop.set()
            moving.join(timeout=60)  # a move answers within the API's deadline
            out.chaos_moves, out.moves_refused = list(mover.moves), list(mover.refused)
        out.failovers = log.rows()


def loss_report(verdict_input: tuple[Any, Any, Any, Any], counted: bool = True) -> dict[str, Any]:
    """For a run with a killed primary: losses, duplicates, reorderings and repeated counts.

    A loss of the documented window (an output committed but not yet sent when the primary died)
    leaves a gap in the flow's checker counts (its state change survived in the backup), so
    `lost_after_processing` counts the missing counts below each flow's highest count. Without
    a checker NF in the path (`counted=False`) the count columns stay 0."""
    forward, reverse, sent_fwd, sent_rev = verdict_input
    lost = dup = reordered = repeats = not_rising = gaps = 0
    for flow in sorted(set(sent_fwd) | set(sent_rev)):
        counts: list[int] = []
        for arrivals, sent in ((forward.get(flow, ()), sent_fwd.get(flow, 0)),
                               (reverse.get(flow, ()), sent_rev.get(flow, 0))):
            t = tally(arrivals, sent)
            lost += t.lost
            dup += t.duplicated
            reordered += t.out_of_order
            not_rising += t.counts_not_rising if counted else 0
            counts += [c for _, c in arrivals] if counted else []
        repeats += len(counts) - len(set(counts))
        if counts:
            gaps += max(counts) - len(set(counts))
    return {"lost": lost, "duplicated": dup, "reordered": reordered, "count_repeats": repeats,
            "counts_not_rising": not_rising, "lost_after_processing": gaps,
            "ok": dup == 0 and reordered == 0 and repeats == 0 and not_rising == 0}
