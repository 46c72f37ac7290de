"""What the frontend keeps to take a connection back from a failed backend, and how it rebuilds
the connection from it (docs/prism.md, "Backend failure").

At each hand-off the frontend keeps the state it shipped (`Held`: the TCP state as dumped, the
request it had read, the mode, when). Until the backend hands the connection back or reports
the client's close, the connection is "held" by that backend. When the backend fails (its
channel stops answering pings for `fail_after` seconds, or closes), the frontend restores each
held connection of mode "every" itself from `resumed_state`: the shipped state with the whole
response appended to the send queue *as already sent*. The client's next ACK tells the restored
socket how much of it the failed backend delivered; the kernel retransmits the rest (same bytes:
an object is a function of its request), so the client sees a stall, not a reset or a wrong byte.
The timestamp is moved forward by the time since the dump, so no segment carries a timestamp
older than the failed backend's last (the client's PAWS check would drop it).

Mode "once" with snapshots: before answering each later request the backend ships a live
snapshot of the connection (prism.repair.snapshot: dumped, left running) and the request, and
answers only once the frontend has it; the newest one replaces the Held copy, which is then
exactly what a mode "every" hand-off ships: the state before the pending request's answer. So
such a connection is resumed the same way. A snapshot's timestamp is advanced from the
frontend's receipt of it, later than the dump: the resumed timestamp is still ahead of the
failed backend's last segment, since recovery comes `fail_after` seconds after the crash.

What cannot be saved, and is counted (frontend records of kind "lost"):
  * mode "once" without snapshots: after its hand-off the connection's state (the requests
    served since) lives only on the backend; the frontend's copy is stale;
  * modes "every" and "once" with snapshots, a client whose next request the failed backend's kernel had acknowledged
    before the hand-back: the client will not send it again and the frontend never had it.
    The frontend waits `request_wait` seconds for a request on the recovered connection -- from
    when the resumed response is acknowledged: the client asks again only once it has it --
    then closes it (FIN, no reset) and records it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from prism.protocol import Request, object_bytes
from prism.repair import TcpState

PING_INTERVAL_S = 0.2
FAIL_AFTER_S = 2.0
REQUEST_WAIT_S = 5.0


@dataclass(frozen=True)
class Held:
    """A connection handed to a backend and not (yet) back: what the frontend shipped."""

    state: TcpState
    req: Request
    mode: str           # "once", "once+snapshots" or "every"
    dumped_at: float    # time.monotonic() at the dump (at a snapshot's arrival, for one)

    @property
    def resumable(self) -> bool:
        """The frontend's copy is the connection's state before `req`'s answer: true of every
        hand-off in mode "every" and of the newest snapshot (or the hand-off) with snapshots."""
        return self.mode != "once"


def resumed_state(held: Held, now: float | None = None) -> TcpState:
    """The connection as the frontend restores it after its backend failed: the shipped state,
    the response to the pending request in the send queue as sent (sequence numbers past it),
    the timestamp advanced by the milliseconds since the dump (plus one)."""
    elapsed_ms = int(((time.monotonic() if now is None else now) - held.dumped_at) * 1000) + 1
    response = object_bytes(held.req.size, held.req.seed)
    already = held.state.send_queue  # shipped bytes the client had not acknowledged yet
    return replace(held.state, send_seq=(held.state.send_seq + len(response)) & 0xFFFFFFFF,
                   send_queue=already + response, unsent=0,
                   timestamp=(held.state.timestamp + elapsed_ms) & 0xFFFFFFFF)
