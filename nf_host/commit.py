"""Output commit: output of a batch leaves only after the backup acknowledged the batch's delta.

The worker fills a batch with the output of the packets it processes; the batch closes after B
packets or T microseconds. A closed batch's delta goes to the backup and the batch waits here,
with its output, until the backup acknowledges it. Acknowledgements are cumulative (the channel is
one ordered stream and the backup applies deltas in order), so an ack for batch b releases every
batch up to b, in order. Without a backup the output is released as soon as the batch closes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass
class Batch:
    id: int
    outputs: list[bytes | bytearray] = field(default_factory=list)
    packets: int = 0
    opened: float = 0.0
    slot_seqs: dict[int, int] = field(default_factory=dict)  # slot -> last seq processed in it


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
