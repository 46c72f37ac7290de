"""One controller's StreamChannel: its role, election id and a bounded queue of outgoing messages."""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
from dataclasses import dataclass, field

from finsy.proto import p4r

from p4sim.server.errors import P4RuntimeError

# Outgoing messages waiting for a slow controller; beyond this, packet-ins and digests are dropped
# (and counted) rather than growing memory without bound.
QUEUE_LIMIT = 4096

_ids = itertools.count(1)


@dataclass(eq=False)
class ControllerStream:
    """The server's side of one StreamChannel call."""

    peer: str = ""
    id: int = field(default_factory=lambda: next(_ids))
    role: str = ""
    election_id: int | None = None
    arbitrated: bool = False
    dropped: int = 0
    _queue: queue.Queue[p4r.StreamMessageResponse | P4RuntimeError | None] = field(
        default_factory=lambda: queue.Queue(QUEUE_LIMIT)
    )
    _closed: threading.Event = field(default_factory=threading.Event)

    def send(self, msg: p4r.StreamMessageResponse, *, droppable: bool = False) -> bool:
        """Queue `msg`; a droppable message (packet-in, digest) is dropped when the queue is full."""
        if self._closed.is_set():
            return False
        try:
            if droppable:
                self._queue.put_nowait(msg)
            else:
                self._queue.put(msg, timeout=5.0)
        except queue.Full:
            self.dropped += 1
            return False
        return True

    def close(self, error: P4RuntimeError | None = None) -> None:
        """End the stream, with `error` as the call's status when given."""
        if self._closed.is_set():
            return
        self._closed.set()
        try:
            self._queue.put_nowait(error)
        except queue.Full:
            # make room for the end marker: the controller is gone or hopelessly behind
            with contextlib.suppress(queue.Empty):
                self._queue.get_nowait()
            self._queue.put_nowait(error)

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def next(
        self, timeout: float | None = None
    ) -> p4r.StreamMessageResponse | P4RuntimeError | None:
        """The next outgoing message; None (or an error) ends the stream."""
        return self._queue.get(timeout=timeout)
