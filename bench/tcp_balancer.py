"""The load balancer's part of `make bench-tcp`: its configuration, and the "balancer" event.

The bench's chain makes the NAT primaries of topo/chain.yaml (2 and 3) small (`SMALL_PPS`: the
packets of any connection make the one carrying it hot, above `thresholds.high_water`) and every
other NF large (`LARGE_PPS`: their backups 5 and 6 and the two NAT spares, 11 and 12, the firewall
and the monitor); the balancer is enabled but paused (`load_balancer.paused`), so the baseline
phase runs without it. The "balancer" event resumes it (`POST /lb/resume`) and lets it act on
iperf3's load as it decides: both NAT primaries hot and none below the low-water mark, so it
scales out (a spare, 11, becomes a NAT primary, 12 its backup), then it sheds the hot primaries'
slots to the new one, move by move. (On a loaded machine a backup may have been replaced before
the event, or a primary failed over: then the large NF it concerned is a primary or the spare the
scale-out takes, and the balancer moves slots to it.) Its decisions, read back from
`GET /lb/history` (each with its reason and inputs), become the phase's events at the times it
took them.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from topo.http_api import http_json, http_post
from topo.model import System
from topo.procs import wait_for

# the load balancer of the bench's configuration: the NAT primaries of the chain (2, 3) are small
# (any connection's packets make the one carrying it hot), every other NF large; it starts paused
# (the baseline phase) and the "balancer" event resumes it
SMALL_PPS, LARGE_PPS = 50.0, 1e6
LB_CONFIG: dict[str, Any] = {
    "enabled": True, "paused": True, "period_s": 0.5, "report_s": 0.5, "hot_for_s": 1.0,
    "nf_settle_s": 1.0, "slot_cooldown_s": 10.0, "scale_cooldown_s": 600.0,  # one scale-out
    "idle_for_s": 1e6,                # no scale-in
    "cpu_capacity_percent": 1e6,      # load = packet rate / capacity_pps (not the NFs' CPU)
}
LB_WAIT_S = 30.0   # the longest the balancer's event waits for its actions (a loaded machine)
LB_QUIET_S = 1.5   # its event ends when its last decision is this old (then it is paused)
MOVE_BURST_S = 1.0  # moves decided within this of each other are one event ("lb-moves")


Happened = list[tuple[str, float, str]]  # (event, monotonic time, what it did)


def lb_decisions(api: str, after: int) -> list[dict[str, Any]]:
    """The balancer's decisions with an id above `after` (`GET /lb/history`)."""
    return [d for d in http_json(f"{api}/lb/history")["decisions"] if d["id"] > after]


def lb_events(decisions: list[dict[str, Any]], offset: float) -> Happened:
    """The balancer's decisions as events at the time each was taken (`offset`: wall clock minus
    monotonic): a scale-out is one ("lb-scale-out"), moves decided less than `MOVE_BURST_S`
    apart are one ("lb-moves": how many slots, from which NFs to which, how many moved)."""
    out: Happened = []
    burst: list[dict[str, Any]] = []

    def flush() -> None:
        if burst:
            a = [d["action"] for d in burst]
            moved = sum(d["outcome"] == "moved" for d in burst)
            srcs = ",".join(str(x) for x in sorted({m["src"] for m in a}))
            dsts = ",".join(str(x) for x in sorted({m["dst"] for m in a}))
            out.append(("lb-moves", burst[0]["at"] - offset,
                        f"{len(a)} slots NF {srcs} -> NF {dsts}, {moved} moved "
                        f"(#{burst[0]['id']}: {a[0]['reason']})"))
            burst.clear()

    for d in sorted(decisions, key=lambda d: d["at"]):
        if d["kind"] in ("intra", "inter"):
            if burst and d["at"] - burst[-1]["at"] > MOVE_BURST_S:
                flush()
            burst.append(d)
            continue
        flush()
        what = d["detail"].get("new_primary", d["detail"].get("error", ""))
        out.append((f"lb-{d['kind'].replace('_', '-')}", d["at"] - offset,
                    f"{d['outcome']}: NF {what} ({d['detail'].get('seconds', '?')} s; "
                    f"#{d['id']}: {d['action']['reason']})"))
    flush()
    return out


def balancer_acts(sys_: System) -> Happened:
    """The load balancer is resumed (`POST /lb/resume`) and left to act on iperf3's load: it is
    paused again when one of its decisions was executed (a move, or a scale-out and the moves
    after it), none is under way and the last is `LB_QUIET_S` old, or after `LB_WAIT_S`; then
    the round under way ends (its moves run). Its decisions are the events, at the times it took
    them (`GET /lb/history`)."""
    api = sys_.api
    offset = time.time() - time.monotonic()
    history = http_json(f"{api}/lb/history")["decisions"]
    after = max((d["id"] for d in history), default=0)
    code, body = http_post(f"{api}/lb/resume")
    if code != 200:
        raise RuntimeError(f"lb resume: {code} {body}")

    def acted() -> bool:
        ds = lb_decisions(api, after)
        if not ds or any(d["outcome"] == "pending" for d in ds):
            return False
        if time.time() - max(d["at"] for d in ds) < LB_QUIET_S:
            return False
        moved = [d for d in ds if d["outcome"] == "moved"]
        scaled = [d for d in ds if d["kind"] == "scale_out" and d["ok"]]
        return bool(moved) and (not scaled or moved[-1]["at"] > scaled[0]["at"])

    def quiet() -> bool:  # after the pause: the round under way has ended
        ds = lb_decisions(api, after)
        return not any(d["outcome"] == "pending" for d in ds) and (
            not ds or time.time() - max(d["at"] for d in ds) >= LB_QUIET_S)

    try:  # what it did is recorded below; nothing at all fails the event
        with contextlib.suppress(TimeoutError):
            wait_for(acted, timeout=LB_WAIT_S, interval=0.2, what="the balancer's actions")
    finally:
        http_post(f"{api}/lb/pause")
        # (its decisions still pending after that are recorded as such)
        with contextlib.suppress(TimeoutError):
            wait_for(quiet, timeout=LB_WAIT_S, interval=0.2, what="the balancer's last round")
    decisions = lb_decisions(api, after)
    if not any(d["ok"] for d in decisions):  # a move that moved, a scale action done
        raise RuntimeError(f"the balancer executed nothing in {LB_WAIT_S:g} s: "
                           f"{[(d['kind'], d['outcome']) for d in decisions]}")
    return lb_events(decisions, offset)
