"""`RunHistory`: what this controller did, for the API and the web view: the last moves and
fail-overs (bounded; older ones only counted) and the timeline of NF events, fail-overs, moves
and balancer decisions."""

from __future__ import annotations

from collections import deque

from controlplane.failover import FailoverResult
from controlplane.migration import MoveResult
from controlplane.timeline import Timeline

HISTORY = 1000  # moves and fail-overs a controller keeps for the API (bounded memory)


class RunHistory:
    """The moves and fail-overs recorded, and the timeline they go into."""

    def __init__(self) -> None:
        # the last HISTORY moves and fail-overs, for the API; older ones are only counted
        self.moves: deque[MoveResult] = deque(maxlen=HISTORY)
        self.move_counts = {"total": 0, "ok": 0, "undone": 0}
        self.failovers: deque[FailoverResult] = deque(maxlen=HISTORY)
        # what happened, in order (NF events, fail-overs, moves, balancer decisions): the web view
        self.timeline = Timeline()

    def record_move(self, result: MoveResult) -> None:
        self.moves.append(result)
        self.timeline.move(result)
        self.move_counts["total"] += 1
        self.move_counts["ok"] += int(result.ok)
        self.move_counts["undone"] += int(result.undone)

    def record_failover(self, result: FailoverResult) -> None:
        """A fail-over, a dead backup replaced, a backup given or a double fault's state lost."""
        self.failovers.append(result)
        self.timeline.failover(result)
