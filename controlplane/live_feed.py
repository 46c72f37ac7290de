"""The web view's live feed: snapshots of the running system and the timeline, as server-sent events.

`snapshot(view)` composes what the page shows from the controller's northbound views: the
controller (switch session, leadership, counts), every NF with its role, liveness, load and
protection, and the drop counters by place (switch pipeline by reason, switch ports, each NF by
reason). `slot_map(view)` is the owner of every slot, by stage (sent only when it changed).

`LiveFeed` is one producer for any number of readers (at most `max_clients`): while at least one
reader is connected it rebuilds the snapshot every `period` seconds, and at once (at most every
`min_gap` seconds) when the timeline records an event, and publishes it if it changed; the slot
map only when a slot may have changed owner, at most every `slots_min_gap` seconds. A view that
offers `brief_status()` and `slot_owners()` (`CheapViews`: the controller does) is read through
them: no list of every fail-over, no row per slot. Each reader
(`stream`) sends what it has not sent yet: the newest snapshot, the newest slot map, the timeline
events after the last one it sent. Nothing is queued per reader: a reader that falls behind skips
intermediate snapshots (never timeline events still in the timeline's bounded log), and one whose
connection does not take a write within `write_timeout` is dropped. The stream is a plain GET: it
changes nothing.

SSE framing (https://html.spec.whatwg.org/multipage/server-sent-events.html): `event: snapshot`,
`event: slots` and `event: timeline` (a JSON list, `id:` the last event's id, so a reconnecting
`EventSource` sends `Last-Event-ID` and gets only what it missed); a comment line every
`keepalive` seconds when nothing changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from aiohttp import web

from controlplane.timeline import Timeline

if TYPE_CHECKING:
    from controlplane.controller_view import ControllerView

MAX_CLIENTS = 16
PERIOD_S = 1.0        # a snapshot at least this often while someone watches
MIN_GAP_S = 0.1       # at most this often, however many events come
SLOTS_MIN_GAP_S = 1.0  # the slot map at most this often (65,536 slots: a list of that many)
KEEPALIVE_S = 10.0    # a comment line when nothing changed (finds readers that went away)
WRITE_TIMEOUT_S = 5.0
BACKLOG = 200         # timeline events a new reader gets

NF_FIELDS = ("id", "name", "node", "cluster", "role", "alive", "misses", "rtt_ms", "stage",
             "packet_rate", "cpu_percent", "queue_depth", "packets", "drops", "slots_owned",
             "backup")


@runtime_checkable
class CheapViews(Protocol):
    """What a view may offer besides `ControllerView` to be cheaper to watch (the controller
    does): `status()` without its list of every fail-over, and the slot map as one list."""

    def brief_status(self) -> dict[str, Any]: ...
    def slot_owners(self) -> tuple[int, list[int]]: ...


def protection(nfs: list[dict[str, Any]], pairs: dict[str, Any], orphans: list[int],
               armed: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Per NF: a primary is `protected` (its backup is alive), `armed` (protected, and its
    backup will take over by itself), `unprotected` (no backup, or a dead one) or `orphan` (it
    died with no live backup); a backup names its primary."""
    alive = {row["id"]: row["alive"] is not False for row in nfs}
    armed_by = {int(b) for b in armed}
    out: dict[int, dict[str, Any]] = {}
    for primary, backup in ((int(p), b) for p, b in pairs.items()):
        if primary in orphans:
            state = "orphan"
        elif backup is None or not alive.get(backup, False):
            state = "unprotected"
        else:
            state = "armed" if backup in armed_by else "protected"
        out[primary] = {"protection": state, "primary": True}
        if backup is not None:
            out.setdefault(backup, {})["backup_of"] = primary
    return out


def display_role(nf: dict[str, Any]) -> str:
    """The role an NF holds now: `primary` (a key of the pairs), `backup` (a primary's backup),
    else the registry's role, unless that is a role it lost (a failed-over primary, a replaced
    backup, until it is configured again): `idle`."""
    if nf.get("primary"):
        return "primary"
    if "backup_of" in nf:
        return "backup"
    role = str(nf.get("configured_role") or "idle")
    return "idle" if role in ("primary", "backup") else role


def snapshot(view: ControllerView) -> dict[str, Any]:
    """What the page shows but the slot map (see the module docstring)."""
    status = view.brief_status() if isinstance(view, CheapViews) else view.status()
    rows = view.nf_rows()
    prot = protection(rows, status.get("pairs", {}), status.get("orphans", []),
                      status.get("armed", {}))
    nfs = []
    for row in rows:
        nf = {k: row.get(k) for k in NF_FIELDS}
        nf["losses"] = row.get("losses", {})
        nf.update(prot.get(row["id"], {}))
        nf["configured_role"] = row.get("role")
        nf["role"] = display_role(nf)
        nfs.append(nf)
    lb = view.lb_view(0)
    switch = status.get("switch", {})
    return {
        "controller": {
            "switch": {k: switch.get(k) for k in ("address", "target", "primary", "election_id")},
            "leadership": status.get("leadership"),
            "uptime_s": status.get("uptime_s"),
            "slots": status.get("slots"),
            "stages": status.get("stages", []),
            "nfs": status.get("nfs", {}),
            "flows": status.get("flows", {}),
            "packets": status.get("packets"),
            "moves": status.get("moves", {}),
            "failovers": status.get("failover_count", len(status.get("failovers", []))),
            "orphans": status.get("orphans", []),
            "self_takeover": status.get("self_takeover"),
        },
        "nfs": nfs,
        "drops": {
            "switch": {k: v for k, v in (status.get("switch_drops") or {}).items() if v},
            "switch_ports": {k: v for k, v in (status.get("switch_ports") or {}).items() if v},
            "switch_stats_error": status.get("switch_stats_error"),
            "nfs": {str(nf["id"]): nf["losses"] for nf in nfs if nf["losses"]},
        },
        "lb": {k: lb.get(k) for k in ("enabled", "period_s", "rounds", "scaling", "draining")},
    }


def slot_map(view: ControllerView) -> dict[str, Any]:
    """The owner of every slot, by stage: {"stages": [{"id", "owners": [nf per stage slot]}]}."""
    if isinstance(view, CheapViews):
        per_stage, owners = view.slot_owners()
        return {"stages": [{"id": i // per_stage, "owners": owners[i:i + per_stage]}
                           for i in range(0, len(owners), per_stage)]}
    stages: dict[int, list[int]] = {}
    for row in view.slot_rows():
        owners = stages.setdefault(int(row.get("stage", 0)), [])
        local = int(row.get("stage_slot", row["slot"]))
        owners.extend([-1] * (local + 1 - len(owners)))
        owners[local] = int(row["owner"])
    return {"stages": [{"id": sid, "owners": owners} for sid, owners in sorted(stages.items())]}


def _slot_signature(snap: dict[str, Any], timeline: Timeline | None) -> str:
    """What changes when a slot changes owner: the counts per owner, the moves, the fail-overs."""
    c = snap["controller"]
    owned = {nf["id"]: nf["slots_owned"] for nf in snap["nfs"]}
    return json.dumps([owned, c["moves"], c["failovers"], timeline.last_id if timeline else 0])


def sse(event: str, data: str, event_id: int | None = None) -> bytes:
    head = f"event: {event}\n" + (f"id: {event_id}\n" if event_id is not None else "")
    return (head + "".join(f"data: {line}\n" for line in data.split("\n")) + "\n").encode()


class LiveFeed:
    """One producer of snapshots for at most `max_clients` readers (see the module docstring)."""

    def __init__(self, view: ControllerView, timeline: Timeline | None = None, *,
                 max_clients: int = MAX_CLIENTS, period: float = PERIOD_S,
                 min_gap: float = MIN_GAP_S, slots_min_gap: float = SLOTS_MIN_GAP_S,
                 keepalive: float = KEEPALIVE_S, write_timeout: float = WRITE_TIMEOUT_S) -> None:
        self.view = view
        self.timeline = timeline
        self.max_clients = max_clients
        self.period, self.min_gap, self.slots_min_gap = period, min_gap, slots_min_gap
        self.keepalive, self.write_timeout = keepalive, write_timeout
        self.clients = 0
        self.refused = 0        # readers refused: `max_clients` were connected
        self.dropped = 0        # readers dropped: a write timed out or failed
        self.snapshot = ""      # the newest snapshot (JSON), its version
        self.version = 0
        self.slots = ""         # the newest slot map (JSON), its version
        self.slots_version = 0
        self._slot_sig = ""
        self._slots_at = -math.inf  # time.monotonic() of the last slot map built
        self._told = 0          # the timeline's last event when readers were last woken
        self.closed = False
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None      # the producer's: a timeline event came
        self._published: asyncio.Event | None = None  # the readers': set (and replaced) per publish
        if timeline is not None:
            timeline.listeners.append(self._poke)

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    # -- the producer -----------------------------------------------------------------------------
    def publish(self) -> bool:
        """Build the snapshot (and the slot map, if a slot may have changed owner); True if
        either changed since the last publish (readers are woken)."""
        snap = snapshot(self.view)
        text = json.dumps(snap, separators=(",", ":"))
        changed = text != self.snapshot
        if changed:
            self.snapshot, self.version = text, self.version + 1
        sig = _slot_signature(snap, self.timeline)
        now = time.monotonic()
        if sig != self._slot_sig and now - self._slots_at >= self.slots_min_gap:
            self._slot_sig, self._slots_at = sig, now  # (else at a later publish)
            slots = json.dumps(slot_map(self.view), separators=(",", ":"))
            if slots != self.slots:
                self.slots, self.slots_version, changed = slots, self.slots_version + 1, True
        if self.timeline is not None and self.timeline.last_id != self._told:
            self._told, changed = self.timeline.last_id, True
        if changed:
            self._wake_readers()
        return changed

    def _wake_readers(self) -> None:
        if self._published is not None:
            self._published.set()
        self._published = asyncio.Event()

    async def _run(self) -> None:
        self._wake = asyncio.Event()
        while self.clients and not self.closed:
            started = time.monotonic()
            self._wake.clear()
            try:
                self.publish()
            except Exception as exc:  # a view that fails now (the switch away): said, not fatal
                self.snapshot = json.dumps({"error": f"{type(exc).__name__}: {exc}"})
                self.version += 1
                self._wake_readers()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.period)
            # many events in a burst (a fail-over's) make one snapshot per `min_gap`
            await asyncio.sleep(max(0.0, self.min_gap - (time.monotonic() - started)))
        self._task = None

    # -- the readers ------------------------------------------------------------------------------
    def admit(self) -> bool:
        """Take a reader's place (False: `max_clients` are connected); starts the producer."""
        if self.closed or self.clients >= self.max_clients:
            self.refused += 1
            return False
        self.clients += 1
        if self._published is None:
            self._published = asyncio.Event()
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="live-feed")
        return True

    def leave(self) -> None:
        self.clients -= 1

    async def close(self) -> None:
        """The server stops: every reader's stream ends, the producer too."""
        self.closed = True
        self._poke()
        self._wake_readers()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _pending(self, sent: list[int], cursor: int) -> tuple[bytes, int]:
        """What a reader has not sent yet; `sent` is [snapshot version, slot map version]."""
        out = b""
        if self.timeline is not None:
            events = self.timeline.since(cursor, BACKLOG)
            if events:
                cursor = events[-1].id
                body = json.dumps([e.to_json() for e in events], separators=(",", ":"))
                out += sse("timeline", body, cursor)
        if self.snapshot and self.version != sent[0]:
            out += sse("snapshot", self.snapshot)
            sent[0] = self.version
        if self.slots and self.slots_version != sent[1]:
            out += sse("slots", self.slots)
            sent[1] = self.slots_version
        return out, cursor

    async def stream(self, resp: web.StreamResponse, after: int = 0) -> None:
        """Send a reader everything new until the feed closes or the reader goes away."""
        sent, cursor = [0, 0], after
        while not self.closed:
            published = self._published
            chunk, cursor = self._pending(sent, cursor)
            try:
                await asyncio.wait_for(resp.write(chunk or b": keepalive\n\n"),
                                       self.write_timeout)
            except (TimeoutError, ConnectionError, RuntimeError):
                self.dropped += 1
                return
            if published is None or published is not self._published:
                continue  # published meanwhile
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(published.wait(), self.keepalive)

    def stats(self) -> dict[str, int]:
        return {"clients": self.clients, "max_clients": self.max_clients,
                "refused": self.refused, "dropped": self.dropped}
