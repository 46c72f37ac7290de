"""Chaos as a user would meet it: moves and overlapping faults, and what they are counted as.

`nfc-topo chaos` injects faults from a seeded schedule (`topo.faults.injector`, `topo.faults.chaos`); the modes
here make the schedule less polite:

* **moves** (`--moves RATE`, `Mover`): while the faults run, RATE times a second (on average,
  seeded), a random slot that carries traffic is moved to a random other live primary of its
  stage through the controller's HTTP API (`POST /slots/{slot}/move?to=NF`). A move may fail
  (its adopter hung, its owner failed over meanwhile): it is counted (done, undone, failed and
  not undone, refused before it started), never excused; only the verdict judges the traffic.
* **overlap** (`--overlap`, `overlapping`): a fault may start while earlier ones are still in
  flight, up to `OVERLAP_MAX` at once, each in a thread of its own. Each NF fault claims its
  victim and the victim's partner until that pair is protected again
  (`FaultInjector.claim`, `settled_for`), and no claimed NF nor a partner of one is picked: no
  pair loses both its members at once. A fault of the other parts (controller, etcd, switch,
  netem), when the schedule draws one, waits until none is in flight, and runs alone until the
  system has settled.
* **zombies** (`--zombies F`): that share of the NF faults hang the NF (SIGSTOP) and resume it
  (SIGCONT) once the controller has dealt with it, instead of killing it (`FaultInjector.inject`).

`FailoverLog` keeps every fail-over each leading controller reported during the run (a
controller killed takes its history with it), and `modes_summary` counts what the summary's
"chaos modes" line shows: moves done and undone, zombies and how they came back, and **false
fail-overs**: fail-overs (and backup replacements) of an NF no fault had touched, allowed but
counted; the verdict must stay clean across them too.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from topo.faults.injector import CONTROL_KINDS, FaultInjector
from topo.http_api import http_json, http_post
from topo.verify import LossWindow

if TYPE_CHECKING:
    import subprocess

OVERLAP_MAX = 3  # faults in flight at once with --overlap
# a fail-over is a fault's (not false) when it names the fault's victim and follows the fault
# by at most this long (a hang's detection, a move lock held by a Release, 19 s at worst)
MATCH_S = 60.0
# a settle after a fault may take this long in all before it is an error (over 20 s it is
# recorded as slow: a loaded host's timing)
SETTLE_LONGEST = 120.0


@dataclass
class Mover:
    """Random moves at `rate` per second (exponential gaps, seeded) through the leading
    controller's API (`leading()`), until `stop` is set."""

    leading: Callable[[], str]
    rate: float
    seed: int = 1
    moves: list[dict[str, Any]] = field(default_factory=list)  # the API's MoveResult rows
    refused: list[str] = field(default_factory=list)  # requests answered with no result
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed * 1_000_003 + 17)

    def plan(self) -> tuple[int, int] | None:
        """(slot, target): a random slot among those with flows, to a random other live
        primary of its owner's stage; None when there is none."""
        api = self.leading()
        rows = http_json(f"{api}/nfs")
        primaries = {r["id"]: r.get("stage") for r in rows
                     if r["role"] == "primary" and r["alive"]}
        owners = sorted({(int(f["slot"]), int(f["owner"])) for f in http_json(f"{api}/flows")
                         if f.get("owner") in primaries})
        if not owners:
            return None
        slot, owner = self.rng.choice(owners)
        targets = sorted(p for p, st in primaries.items() if p != owner and st == primaries[owner])
        return (slot, self.rng.choice(targets)) if targets else None

    def run(self) -> None:
        """Move until stopped (in a thread of its own)."""
        while not self.stop.wait(self.rng.expovariate(self.rate)):  # the schedule, not a sync
            try:
                planned = self.plan()
                if planned is None:
                    continue
                slot, to = planned
                status, result = http_post(f"{self.leading()}/slots/{slot}/move?to={to}")
            except OSError as exc:  # the leader changing, or gone: no move was asked
                self.refused.append(f"{type(exc).__name__}: {exc}")
                continue
            if isinstance(result, dict) and "ok" in result:
                self.moves.append(result)
            else:
                self.refused.append(f"move of slot {slot} to NF {to}: HTTP {status} {result}")



def move_counts(moves: list[dict[str, Any]], refused: list[str]) -> dict[str, int]:
    """Moves done (the adopter holds the slot), undone (back to the old owner), failed and not
    undone (undecided, or the adopter failed over with it), refused before they started."""
    done = sum(bool(m["ok"]) for m in moves)
    undone = sum(bool(m.get("undone")) for m in moves)
    return {"moves": len(moves), "moves_done": done, "moves_undone": undone,
            "moves_failed": len(moves) - done - undone, "moves_refused": len(refused)}


@dataclass
class FailoverLog:
    """Every fail-over the leading controllers reported over the run, each once."""

    seen: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)

    def add(self, rows: list[dict[str, Any]]) -> None:
        for f in rows:
            self.seen.setdefault((f.get("dead"), f.get("kind"), round(float(f.get("at", 0)), 3)), f)

    def poll(self, api: str) -> None:
        with contextlib.suppress(OSError, ValueError, KeyError):
            self.add(http_json(f"{api}/status")["failovers"])

    def rows(self) -> list[dict[str, Any]]:
        return sorted(self.seen.values(), key=lambda f: float(f.get("at", 0)))


def unfinished_failovers(failovers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The failed fail-overs that no later one of the same NF and kind completed. A fail-over
    cut short by its controller's loss of the switch or the lead (`NotPrimaryError`) is done
    again by the next leader: that attempt is reported, not a failure of the run. A backup's
    replacement that failed because its primary did not answer (`SetBackup`: it hung too) is
    moot once that primary was failed over (to the very backup, only suspected: the busy
    bench's hang run of 2026-11-28, 0 lost and judged FAILED for it)."""
    out = []
    rows = sorted(failovers, key=lambda f: float(f.get("at", 0)))

    def completes(later: dict[str, Any], fo: dict[str, Any]) -> bool:
        if not later.get("ok"):
            return False
        if later.get("dead") == fo.get("dead") and later.get("kind") == fo.get("kind"):
            return True
        return (fo.get("kind") in ("backup", "protect") and later.get("kind") == "primary"
                and later.get("dead") == fo.get("promoted"))  # (its primary failed over)

    for i, fo in enumerate(rows):
        if fo.get("ok", True):
            continue
        if not any(completes(later, fo) for later in rows[i + 1:]):
            out.append(fo)
    return out


def settle(faults: FaultInjector, slow: list[str], timeout: float = 20.0,
           longest: float = SETTLE_LONGEST) -> None:
    """Until the system has settled after a fault (`FaultInjector.wait_pool`). Slower than
    `timeout` on a loaded host is timing, not data: recorded in `slow` and waited for up to
    `longest` in all; only then an error (raised)."""
    t0 = time.monotonic()
    try:
        faults.wait_pool(timeout=timeout)
    except TimeoutError:
        faults.wait_pool(timeout=max(longest - (time.monotonic() - t0), 0.1))
        slow.append(f"settled in {time.monotonic() - t0:.1f} s (over {timeout:.0f} s)")


def false_failovers(failovers: list[dict[str, Any]], faults: list[Any]) -> list[dict[str, Any]]:
    """The fail-overs (`kind` primary) and backup replacements (`backup`) that no fault explains:
    none of the run's faults had that NF as its victim shortly before (`MATCH_S`). Each fault
    explains one."""
    victims = sorted(((f.nf, f.at) for f in faults if getattr(f, "kind", "") not in CONTROL_KINDS),
                     key=lambda v: v[1])
    used: set[int] = set()
    out = []
    for fo in sorted(failovers, key=lambda f: float(f.get("at", 0))):
        if fo.get("kind") not in ("primary", "backup"):
            continue
        at = float(fo.get("at", 0))
        match = next((i for i, (nf, t) in enumerate(victims) if i not in used
                      and nf == fo.get("dead") and t - 1.0 <= at <= t + MATCH_S), None)
        if match is None:
            out.append(fo)
        else:
            used.add(match)
    return out


def modes_summary(faults: list[Any], failovers: list[dict[str, Any]],
                  moves: tuple[list[dict[str, Any]], list[str]] | None = None) -> dict[str, int]:
    """What the summary's "chaos modes" line and disturbances.json's `modes` say; `moves`: the
    random moves' results and refusals (None: no --moves)."""
    zombies = [f for f in faults if getattr(f, "mode", "") == "zombie"]
    false = false_failovers(failovers, faults)
    return {**(move_counts(*moves) if moves is not None else {}),
            "zombies": len(zombies),
            "zombies_back": sum(f.back_ms is not None for f in zombies),
            "false_failovers": sum(f.get("kind") == "primary" for f in false),
            "false_backup_replacements": sum(f.get("kind") == "backup" for f in false),
            "state_lost": sum(f.get("kind") == "lost" for f in failovers)}


def modes_line(modes: dict[str, int]) -> str:
    moves = (f"moves {modes['moves_done']} done, {modes['moves_undone']} undone, "
             f"{modes['moves_failed']} failed and not undone, {modes['moves_refused']} refused "
             "before they started; " if "moves" in modes else "")
    return (f"chaos modes: {moves}zombies {modes['zombies']} (back in the pool owning nothing: "
            f"{modes['zombies_back']}); false fail-overs {modes['false_failovers']}, false backup "
            f"replacements {modes['false_backup_replacements']}; double faults that lost state "
            f"{modes['state_lost']}")


def overlapping(faults: FaultInjector, sender: subprocess.Popen[bytes], kill_every: float,
                until: float, limit: int, log: FailoverLog, errors: list[str],
                max_inflight: int = OVERLAP_MAX, settle_timeout: float = 60.0,
                slow: list[str] | None = None) -> None:
    """The fault schedule with --overlap: every `kill_every` s a victim is picked among the NFs
    no fault in flight claims, and its fault runs in a thread of its own, until it is handled
    and its pair protected again; a fault of another part, once drawn, waits until none is in
    flight and runs alone. Stops at `until` (time.monotonic()), once `limit` faults started (0: no limit),
    or when the traffic ends; then waits for the faults in flight."""
    inflight: dict[threading.Thread, set[int]] = {}
    lock = threading.Lock()
    started = 0

    def run_one(kind: str, nf: int, zombie: bool, claim: set[int]) -> None:
        try:
            rec = faults.inject(kind, nf, zombie=zombie)
            with lock:
                claim |= {n for n in (getattr(rec, "promoted", None),
                                      getattr(rec, "new_backup", None)) if n is not None}
            faults.wait_settled(claim, settle_timeout,
                                f"the pairs of NFs {sorted(claim)} protected again")
        except Exception as exc:  # reported; the verdict still runs
            errors.append(f"fault of NF {nf} ({kind}): {type(exc).__name__}: {exc}")

    while sender.poll() is None and (not limit or started < limit):
        time.sleep(kill_every)  # the fault schedule's period, not synchronisation
        if time.monotonic() >= until:
            break
        log.poll(faults.leading())
        for t in [t for t in inflight if not t.is_alive()]:
            del inflight[t]
        if len(inflight) >= max_inflight:
            continue
        with lock:
            busy = set().union(*inflight.values())
        victim = faults.pick(exclude=busy)
        if victim is None or sender.poll() is not None:
            continue
        kind, nf = victim
        started += 1
        if kind in CONTROL_KINDS:  # alone: the faults in flight end first, then it runs
            for thread in list(inflight):  # (the controller's view of the NFs may change)
                thread.join(timeout=faults.timeout * 2 + settle_timeout + 30)
            inflight.clear()
            log.poll(faults.leading())
            faults.inject(kind, nf)
            settle(faults, slow if slow is not None else [])
            continue
        zombie = faults.draw_zombie(kind)
        claim = faults.claim(kind, nf)
        thread = threading.Thread(target=run_one, args=(kind, nf, zombie, claim),
                                  name=f"fault-{started}", daemon=True)
        inflight[thread] = claim
        thread.start()
    for thread in list(inflight):
        thread.join(timeout=faults.timeout * 2 + settle_timeout + 30)
    log.poll(faults.leading())


def faults_over(faults: Sequence[Any]) -> float:
    """When (time.time()) the last of `faults` was over: its `ended`, else its start plus its
    recovery (a control fault), else its start; 0.0 without faults."""
    def end(f: Any) -> float:
        if getattr(f, "ended", None):
            return float(f.ended)
        window = getattr(f, "window", None)
        if window:
            return float(window[1])
        return float(f.at) + (getattr(f, "takeover_ms", None) or 0.0) / 1000
    return max((end(f) for f in faults), default=0.0)


def wedged_flows(verdict_input: tuple[Any, Any, Any, Any],
                 sent_at: tuple[Any, Any] | None = None,
                 windows: Sequence[LossWindow] = (), after: float = 0.0) -> list[tuple[int, str]]:
    """The (flow, direction)s whose last packet never arrived: a slot that stopped forwarding
    after the faults (wedged) shows so, whatever the verdict excused before. `verdict_input`:
    what the server and the client received, and what the client and the server sent;
    `sent_at` (client's, server's) and the run's loss `windows`: a last packet sent into a
    window (the traffic ended during a switch outage) is the verdict's to judge, not a wedge;
    so is one sent before `after` (time.time(): the faults were not over yet, `faults_over`)."""
    forward, reverse, sent_fwd, sent_rev = verdict_input
    times = sent_at or ({}, {})
    out = []
    for name, arrivals, sent, at in (("forward", forward, sent_fwd, times[0]),
                                     ("reverse", reverse, sent_rev, times[1])):
        for flow, n in sorted(sent.items()):
            if not n or n in {no for no, _ in arrivals.get(flow, ())}:
                continue
            stamps = at.get(flow, ())
            if len(stamps) >= n and (stamps[n - 1] < after
                                     or any(w.met_by(stamps[n - 1]) for w in windows)):
                continue
            out.append((int(flow), name))
    return out
