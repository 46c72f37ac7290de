"""The controller's timeline: what happened to the system, in order, for the web view.

One bounded log (`Timeline`, the last `TIMELINE_SIZE` events) of the things an operator watches
happen: an NF declared down, answering again or restarted; a fail-over (or a dead backup replaced,
a backup given, a double fault's state lost); a slot move; a load-balancer decision. Each event has
an increasing id (a reader asks for the events after the last id it saw), the wall-clock time the
controller recorded it (`time.time()`: the moment the controller knew), a kind, one line of text
and the record it came from. Older events are only in the controller's other records (`moves`,
`failovers`, the balancer's history), which are bounded too.

Recording is synchronous and cheap (the controller's protocols call it on the event loop); the
live feed (controlplane/live_feed.py) is told through `listeners` and reads with `since()`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (only for the type hints: no import at run time, no circle)
    from controlplane.balancer_loop import Decision
    from controlplane.failover import FailoverResult
    from controlplane.migration import MoveResult
    from controlplane.nf_state import NfEvent

TIMELINE_SIZE = 500


@dataclass(frozen=True)
class TimelineEvent:
    id: int
    at: float                 # time.time() when the controller recorded it
    kind: str                 # nf_down | nf_up | nf_restarted | failover | move | lb
    text: str
    ok: bool = True
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "at": self.at, "kind": self.kind, "text": self.text,
                "ok": self.ok, "data": self.data}


class Timeline:
    """The bounded event log (see the module docstring)."""

    def __init__(self, size: int = TIMELINE_SIZE, clock: Callable[[], float] = time.time) -> None:
        self.events: deque[TimelineEvent] = deque(maxlen=size)
        self.last_id = 0
        self.clock = clock
        self.listeners: list[Callable[[], None]] = []  # told after every event (no argument)

    def add(self, kind: str, text: str, ok: bool = True,
            data: dict[str, Any] | None = None) -> TimelineEvent:
        self.last_id += 1
        event = TimelineEvent(self.last_id, self.clock(), kind, text, ok, data or {})
        self.events.append(event)
        for listener in self.listeners:
            listener()
        return event

    def since(self, after: int, limit: int | None = None) -> list[TimelineEvent]:
        """The events with an id above `after`, oldest first (the last `limit` of them)."""
        out = [e for e in self.events if e.id > after] if after else list(self.events)
        if limit is None:
            return out
        return out[-limit:] if limit else []

    # -- what the controller records --------------------------------------------------------------
    def nf_event(self, event: NfEvent) -> None:
        what = {"down": "declared down", "up": "answers again", "restarted": "restarted"}
        reason = f" ({event.reason})" if event.reason else ""
        self.add(f"nf_{event.kind}", f"NF {event.nf_id} {what.get(event.kind, event.kind)}{reason}",
                 ok=event.kind != "down", data={"nf": event.nf_id, "misses": event.misses})

    def failover(self, result: FailoverResult) -> None:
        r = result
        new = "no NF free" if r.new_backup is None else f"NF {r.new_backup}"
        if r.kind == "primary":
            text = (f"fail-over: NF {r.dead} -> NF {r.promoted} ({r.slots} slots, "
                    f"{r.seconds * 1000:.0f} ms), new backup: {new}")
        elif r.kind == "backup":
            text = f"backup NF {r.dead} of NF {r.promoted} replaced by {new}"
        elif r.kind == "protect":
            text = f"NF {r.promoted} given backup NF {r.new_backup}"
        else:
            text = f"NF {r.dead}: state of {r.slots} slots lost (no live backup)"
        if r.error:
            text += f": {r.error}"
        self.add("failover", text, ok=r.ok, data=r.to_json())

    def move(self, result: MoveResult) -> None:
        r = result
        how = "undone" if r.undone else "moved" if r.ok else "failed"
        text = (f"slot {r.slot} NF {r.from_nf} -> NF {r.to_nf}: {how} ({r.bytes_shipped} bytes, "
                f"{r.seconds * 1000:.0f} ms)")
        self.add("move", text + (f": {r.error}" if r.error else ""), ok=r.ok, data=r.to_json())

    def decision(self, decision: Decision) -> None:
        a = decision.action
        if a.get("action") == "move":
            what = f"slot {a['slot']} NF {a['src']} -> NF {a['dst']}"
        elif a.get("action") == "scale_out":
            what = f"a spare into cluster {a['cluster']}"
        else:
            what = f"drain NF {a.get('nf')}"
        reason = f" ({a['reason']})" if a.get("reason") else ""
        self.add("lb", f"balancer #{decision.id} {decision.kind}: {what}{reason}",
                 data={"id": decision.id, "kind": decision.kind, "action": a})
