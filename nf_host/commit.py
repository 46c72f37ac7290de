"""Output commit: output of a batch leaves only after the backup acknowledged the batch's delta.

The worker fills a batch with the output of the packets it processes; the batch closes after B
packets or T microseconds. A closed batch's delta goes to the backup and the batch waits here,
with its output, until the backup acknowledges it. Acknowledgements are cumulative (the channel is
one ordered stream and the backup applies deltas in order), so an ack for batch b releases every
batch up to b, in order. Without a backup the output is released as soon as the batch closes.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from contract.replication import LoggedBatch


@dataclass
class Batch:
    id: int
    outputs: list[bytes | bytearray] = field(default_factory=list)
    packets: int = 0
    opened: float = 0.0
    slot_seqs: dict[int, int] = field(default_factory=dict)  # slot -> last seq processed in it
    # slots taken over with nothing to number (no flows or no packet yet): their whole state
    # (and owner generation) goes with the batch all the same (nf_host/promote_wait.py)
    replaced: set[int] = field(default_factory=set)
    # a promotion's output of the dead primary that it had already handed to its socket: sent
    # again at once (not held: it was released), and logged at the backup with this batch
    resent: list[bytes] = field(default_factory=list)

    def logged(self) -> list[LoggedBatch]:
        """What the backup logs of this batch (`[(id, frames)]`, nothing if no output)."""
        frames = [*self.resent, *self.outputs] if self.resent else self.outputs  # (no copy per batch)
        return [(self.id, frames)] if frames else []



@dataclass(slots=True)
class _Logged:
    """A batch's output a backup logs for its primary."""

    batch: int
    frames: list[bytes | bytearray]
    released_at: float | None = None  # when the primary's watermark first covered it


@dataclass
class OutputCommit:
    inflight: deque[Batch] = field(default_factory=deque)
    next_id: int = 1
    held_outputs: int = 0
    released_batches: int = 0

    def new_batch(self, now: float) -> Batch:
        b = Batch(self.next_id, opened=now)
        self.next_id += 1
        return b

    def hold(self, batch: Batch) -> None:
        self.inflight.append(batch)
        self.held_outputs += len(batch.outputs)

    def ack(self, batch_id: int) -> list[Batch]:
        """The backup holds every batch up to `batch_id`: return them, oldest first."""
        done: list[Batch] = []
        while self.inflight and self.inflight[0].id <= batch_id:
            b = self.inflight.popleft()
            self.held_outputs -= len(b.outputs)
            done.append(b)
        self.released_batches += len(done)
        return done

    def release_all(self) -> list[Batch]:
        return self.ack(self.next_id)

    @property
    def last_id(self) -> int:
        return self.next_id - 1


@dataclass
class OutputLog:
    """The backup's log of its primary's output that may not have gone through the switch yet.

    Every delta the backup receives carries the output of its batch and the primary's *released*
    watermark (the last batch whose output it handed to its socket); a (re)connection snapshot
    carries the output of every batch still waiting for an ack. Output handed to the socket can
    still wait in queues on its way into the switch's pipeline when the primary dies, while the
    promoted backup's own output, sent meanwhile on another port, reaches the switch first and
    moves its dedup watermark past it: the switch would then drop it as a duplicate. So the
    backup keeps a batch's output until `retain` seconds after the watermark first covered it
    (the primary handed it to its socket before it sent that watermark): `retain` is the bound
    on the switch's queues (`contract.timing.SWITCH_QUEUE_BOUND`), so by then it has been through
    the switch's pipeline (docs/protocols.md §2, "The output log"). On promotion the new primary
    sends what is left again, oldest first: output that had already been forwarded is dropped by
    the switch (which forwards each input's output once), the rest leaves for the first time.

    Memory: at most `max_frames` frames; past it the oldest released batches go first even if
    younger than `retain`, counted in `evicted` (their output is then unprotected, not silently).
    Kept per primary, with the primary's last watermark: `take_split` tells what it had released
    (sent again at once by the promoted backup) from what it may not have (sent after the next
    backup's ack).
    """

    # primary -> its batches in id order
    logs: dict[int, deque[_Logged]] = field(default_factory=dict)
    released: dict[int, int] = field(default_factory=dict)  # primary -> its last watermark
    covered: dict[int, int] = field(default_factory=dict)  # primary -> leading batches released
    frames: int = 0
    evicted: int = 0  # frames dropped by `max_frames` before they were `retain` old
    dropped_at_restart: int = 0  # released frames dropped on a switch restart's notice
    retain: float = 0.5
    max_frames: int = 1 << 17
    # (read when the log is made, not when this module is imported: the simulation's virtual
    # clock replaces time.monotonic for a run, and a clock bound at import read the real one,
    # so the same seed released different output in two processes)
    clock: Callable[[], float] = field(default_factory=lambda: time.monotonic)

    def record(self, primary: int, logged: Sequence[tuple[int, Sequence[bytes | bytearray]]],
               released: int | None, full: bool, now: float | None = None) -> None:
        """Log `logged` ([(batch id, [frame, ...]), ...]) of `primary`; forget what `released`
        (a batch id) covers once it has been covered `retain` seconds. A full snapshot re-sends
        every held batch: those already logged are not logged twice."""
        now = self.clock() if now is None else now
        log = self.logs.setdefault(primary, deque())
        known = {e.batch for e in log} if full else set()
        for bid, frames in logged:
            if not all(isinstance(f, bytes | bytearray) for f in frames):
                raise ValueError("logged output must be a list of frames")
            if bid in known:
                continue
            log.append(_Logged(bid, list(frames)))
            self.frames += len(frames)
        if released is not None:
            rel = self.released[primary] = max(self.released.get(primary, 0), released)
            n = self.covered.get(primary, 0)
            while n < len(log) and log[n].batch <= rel:
                log[n].released_at = now  # released by now: in the switch's queues at most `retain` more
                n += 1
            self.covered[primary] = n
        self._prune(primary, log, now)

    def _prune(self, primary: int, log: deque[_Logged], now: float) -> None:
        n = self.covered.get(primary, 0)
        while n:
            at = log[0].released_at
            young = at is not None and at > now - self.retain
            if young and self.frames <= self.max_frames:
                break
            frames = log.popleft().frames
            self.frames -= len(frames)
            if young:
                self.evicted += len(frames)
            n -= 1
        self.covered[primary] = n

    def forget_released_of(self, primary: int, released: int) -> None:
        """`primary` tells (`SwitchRestart`) that the switch restarted after it had released
        every batch up to `released`: those are dropped (`forget_released`)."""
        self.record(primary, [], released, False)
        self.forget_released()

    def forget_released(self) -> None:
        """Drop every batch a primary is known to have released (the switch restarted: it went
        through the switch before, or was lost in the restart; sent again, output that had
        passed would pass the emptied dedup registers a second time, P10), counted in
        `dropped_at_restart`."""
        dropped = 0
        for primary, log in self.logs.items():
            for _ in range(self.covered.get(primary, 0)):
                dropped += len(log.popleft().frames)
            self.covered[primary] = 0
        self.frames -= dropped
        self.dropped_at_restart += dropped
        if dropped:
            logging.getLogger("nf_host.worker").info(
                "the switch restarted: %d frames of released output dropped from the log", dropped)

    def take_split(self, primary: int) -> tuple[list[bytes], list[bytes]]:
        """Remove the logged output of `primary` and return it in order, split into what it had
        handed to its socket (batches up to its last watermark: released, it may be sent again
        at once) and the rest (maybe never released: it waits for the next backup's ack)."""
        rel = self.released.pop(primary, 0)
        self.covered.pop(primary, None)
        sent: list[bytes] = []
        rest: list[bytes] = []
        for e in self.logs.pop(primary, deque()):
            (sent if e.batch <= rel else rest).extend(bytes(f) for f in e.frames)
        self.frames -= len(sent) + len(rest)
        return sent, rest

    def take(self, primary: int) -> list[bytes]:
        """Remove and return the logged output of `primary` (of every primary if 0), in order."""
        out: list[bytes] = []
        for nf in [primary] if primary else sorted(self.logs):
            sent, rest = self.take_split(nf)
            out += sent + rest
        return out
