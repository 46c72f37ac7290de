"""Batched port I/O (`p4sim run --io ring`): memory-mapped packet rings, one poll loop, batches.

`RingPortSet` is `PortSet` with a `PacketRing` (p4sim/io/pktring.py: a TPACKET_V3 receive ring and
a transmit ring) on every interface. The one receive thread polls every port; each wake-up takes
retired blocks from each readable ring (about `BATCH_FRAMES` frames at most), hands all their frames to the pipeline
as one batch (processed back to back under one lock), and then flushes every transmit ring that
got frames: one `send()` per port and batch instead of one per frame.

With the native engine a wake-up is one C call instead (`fast`, set by `p4sim run`: see
p4sim/native/rings.py): every ring's retired blocks are walked, run through the pipeline and
written into the transmit rings in C, without a Python object per packet; the same counters.

Transmission from another thread (packet-outs from the P4Runtime stream) is queued and flushed at
once, under the port's transmit lock. A frame that finds its transmit ring full after a flush is
lost and counted (`tx_overflows`); one that is too big for a ring slot goes out with a plain
`send()`. The kernel's receive drops and ring freezes come from `PACKET_STATISTICS`.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from p4sim.io.pktring import PacketRing, RingConfig
from p4sim.io.ports import IDLE_POLL_MS, Deliver, PortSet

LOG = logging.getLogger("p4sim.ports")

BATCH_FRAMES = 256  # frames taken from one ring per wake-up (whole blocks; bounds a batch and
# the time it holds the device lock)

DeliverBatch = Callable[[list[tuple[int, bytes]]], None]


@dataclass
class RingPortSet(PortSet):
    """`PortSet` on memory-mapped rings, receiving and transmitting in batches."""

    ring: RingConfig = field(default_factory=RingConfig)
    _rings: dict[int, PacketRing] = field(default_factory=dict)
    _tx_locks: dict[int, threading.Lock] = field(default_factory=dict)
    _dirty: set[int] = field(default_factory=set)  # ports with frames queued since the last flush
    # a wake-up's fast path (p4sim/native/rings.py: every ring in C with the native engine);
    # returns False when it does not apply, and the frames are taken here
    fast: Callable[[], bool] | None = None

    io = "ring"

    def _setup(self, port: int, sock: socket.socket) -> None:
        self._rings[port] = PacketRing(sock, self.ring)
        self._tx_locks[port] = threading.Lock()

    def _kernel_counts(self, port: int) -> tuple[int, int, int]:
        return self._rings[port].stats()

    # --------------------------------------------------------------- transmit
    def _transmit(self, port: int, data: bytes) -> None:
        ring, st = self._rings.get(port), self.stats.get(port)
        if ring is None or st is None:
            return  # a port with no interface drops, like an unconnected BMv2 port
        if len(data) > ring.max_tx:
            super()._transmit(port, data)
            return
        # the receive thread's sends wait for the batch's flush
        in_loop = threading.get_ident() == self._loop_ident
        with self._tx_locks[port]:
            if not ring.put(data):
                self._flush_locked(port, ring)
                if not ring.put(data):
                    st.tx_overflows += 1
                    return
            st.tx += 1
            if in_loop:
                self._dirty.add(port)
                return
            # another thread (a packet-out): sent now; a full send buffer drains in microseconds
            for _ in range(100):
                if self._flush_locked(port, ring):
                    return
                time.sleep(0.0002)
            LOG.warning("port %d: a packet-out still waits in the transmit ring", port)

    def flush(self) -> None:
        """Send what the last batch queued, one system call per port; a port whose ring the
        kernel did not empty (its send buffer was full) stays due for the next round."""
        due = set()
        for port in self._dirty:
            with self._tx_locks[port]:
                if not self._flush_locked(port, self._rings[port]):
                    due.add(port)
        self._dirty = due

    def _flush_locked(self, port: int, ring: PacketRing) -> bool:
        """Flush one port's ring; False when frames are still waiting in it."""
        st = self.stats[port]
        done = True
        try:
            done = ring.flush()
        except OSError as exc:
            lost = ring.abandon()
            st.tx_errors += lost
            st.tx -= lost
            if exc.errno not in self._GONE:
                LOG.warning("send on port %d failed: %s", port, exc)
        if ring.malformed:
            st.tx_errors += ring.malformed
            st.tx -= ring.malformed
            ring.malformed = 0
        return done

    # ---------------------------------------------------------------- receive
    def start(self, deliver: Deliver, deliver_batch: DeliverBatch | None = None) -> None:
        """Receive on every port in a background thread; each wake-up's frames go to
        `deliver_batch` as one list (or one by one to `deliver` without it)."""
        if deliver_batch is None:
            def one_by_one(batch: list[tuple[int, bytes]]) -> None:
                for port, frame in batch:
                    deliver(port, frame)
            deliver_batch = one_by_one
        self._thread = threading.Thread(
            target=self._ring_loop, args=(deliver_batch,), name="p4sim-ports", daemon=True
        )
        self._thread.start()

    def _ring_loop(self, deliver_batch: DeliverBatch) -> None:
        self._loop_ident = threading.get_ident()
        poller = self._poller()
        while not self._stop.is_set():
            self._maybe_refresh()
            batch: list[tuple[int, bytes]] = []
            ready: list[int] = []
            # frames still waiting in a transmit ring: come back for them within a millisecond;
            # a held frame of an impaired port: when it is due
            idle = self._poll_timeout(IDLE_POLL_MS)
            for fd, events in self._poll(poller, min(idle, 1) if self._dirty else idle):
                port = self._by_fd.get(fd)
                if port is None:
                    continue
                if events & (select.POLLERR | select.POLLNVAL | select.POLLHUP):
                    self._error(port, events, poller)
                    if self.stats[port].gone:
                        continue
                ready.append(port)
            if ready and not self._fast():
                for port in ready:
                    self._take(port, batch)
            if batch:
                try:
                    deliver_batch(batch)
                except Exception:
                    LOG.exception("a batch of %d packets failed", len(batch))
            self._send_due()  # into the transmit rings, flushed now
            if self._dirty:
                self.flush()

    def _fast(self) -> bool:
        if self.fast is None:
            return False
        try:
            return self.fast()
        except Exception:  # never stop the loop: the frames are taken the Python way instead
            LOG.exception("the ring fast path failed; falling back to the Python path for good")
            self.fast = None
            return False

    def _take(self, port: int, batch: list[tuple[int, bytes]]) -> None:
        st = self.stats[port]
        frames, _blocks = self._rings[port].receive(BATCH_FRAMES)
        for f in frames:
            if f.outgoing:
                continue
            if f.truncated:  # longer than a ring block: the rest of it is gone
                st.rx_truncated += 1
                continue
            st.rx += 1
            batch.append((port, f.data))

    def close(self) -> None:
        super().close()
        for ring in self._rings.values():
            with contextlib.suppress(BufferError, ValueError):
                ring.close()
        self._rings.clear()
