"""Messages of any size on the replication channel: fragments, flow control and reassembly.

A message whose frame is larger than `CHUNK` (a (re)connection snapshot of a worker with a million
flows, a move's transfer of a large slot, the whole state an adopter gives its backup) leaves as a
run of fragment frames, each at most `CHUNK` bytes of the message's body:
    k   fragment {p: bytes, m: more fragments follow}  (`contract.replication.Fragment`)
The receiver appends the fragments of a connection in order and, at the last, decodes the body
and handles the message as if it had come in one frame: a snapshot is applied whole, once
complete, or not at all (a connection lost mid-stream loses its fragments with it; the sender
starts over with a new snapshot on the next connection). The reassembled size is bounded
(`MAX_MESSAGE` by default, the receiver's `repl_max_message_mb`); every fragment is bounded by the
receiver's frame limit like any frame.

Flow control: a `Pacer` writes the fragments one at a time and waits for the connection's writer
to drain (asyncio's write-buffer watermarks, so the receiver's reading pace) before the next, so at
most about one fragment plus the kernel's socket buffers are in flight, whatever the message's
size. Messages sent while a stream is under way queue behind it, in order (a delta never
overtakes the snapshot it follows).

Memory: the sender holds the message's encoded frame once until its last fragment left (the
snapshot's bytes; no copy of it beyond one fragment at a time), the receiver the body it
reassembles; neither holds more than one message's worth, and the in-flight part is one fragment.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections import deque
from collections.abc import Iterator

from contract.replication import Fragment, encode

CHUNK = 1 << 20  # bytes of a message's body per fragment
MAX_MESSAGE = 4 << 30  # the largest message a receiver reassembles, by default
_LEN = struct.Struct("!I")


class FragmentError(ValueError):
    """A fragment that is malformed or takes its message over the receiver's limit."""


def fragments(frame: bytes, chunk: int = CHUNK) -> Iterator[bytes]:
    """The fragment frames of one encoded message (`frame`: its length prefix, then its body)."""
    body = memoryview(frame)[_LEN.size:]
    for off in range(0, len(body), chunk):
        end = off + chunk
        yield encode(Fragment(bytes(body[off:end]), end < len(body)))


class Reassembly:
    """One connection's message being reassembled from its fragments."""

    def __init__(self, limit: int = MAX_MESSAGE) -> None:
        self.limit = limit
        self._buf = bytearray()
        self.messages = 0  # messages reassembled

    def add(self, msg: Fragment) -> bytes | None:
        """Take one fragment; the message's body once it is complete, else None."""
        part = msg.part
        if len(self._buf) + len(part) > self.limit:
            size = len(self._buf) + len(part)
            self._buf = bytearray()
            raise FragmentError(f"a fragmented message over {size} bytes exceeds {self.limit}")
        self._buf += part
        if msg.more:
            return None
        body, self._buf = bytes(self._buf), bytearray()
        self.messages += 1
        return body


class Pacer:
    """Writes frames to one connection in order, fragmenting those over `chunk`, each fragment
    after the writer has drained the one before (see the module docstring)."""

    def __init__(self, writer: asyncio.StreamWriter, chunk: int = CHUNK) -> None:
        self.writer, self.chunk = writer, chunk
        self._q: deque[bytes] = deque()
        self.queued = 0  # bytes of the (small) frames waiting behind a stream
        self.streams = 0  # messages sent in fragments
        self._task: asyncio.Task[None] | None = None

    @property
    def active(self) -> bool:
        return self._task is not None

    def big(self, frame: bytes) -> bool:
        return len(frame) > self.chunk + _LEN.size

    def push(self, frame: bytes) -> None:
        self._q.append(frame)
        if not self.big(frame):
            self.queued += len(frame)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        writer = self.writer
        try:
            while self._q:
                frame = self._q.popleft()
                if self.big(frame):
                    self.streams += 1
                    for part in fragments(frame, self.chunk):
                        if writer.is_closing():
                            return
                        writer.write(part)
                        await writer.drain()
                    del frame
                    continue
                self.queued -= len(frame)
                if writer.is_closing():
                    return
                writer.write(frame)
                await writer.drain()
        except (ConnectionError, RuntimeError):
            pass  # the connection ended: its owner starts over on the next one
        finally:
            self._task = None
            self._q.clear()
            self.queued = 0

    def cancel(self) -> None:
        """Forget what has not left (the connection is gone)."""
        self._q.clear()
        self.queued = 0
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def done(self) -> None:
        """Until everything pushed has been written (or the stream was cancelled)."""
        task = self._task
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(task)
