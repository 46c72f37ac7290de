"""The native ring fast path of `p4sim run --io ring`: one C call per wake-up of the port loop.

`NativeRingPath.run` is the `RingPortSet.fast` hook. When the committed pipeline runs on the
native engine (and no pcap tap is set), it takes the device lock (as `Device.inject_batch` does:
a P4Runtime Write waits for the batch, and a pipeline change is never half seen) and every
port's transmit lock (packet-outs from the stream thread write into the same transmit rings),
copies each `PacketRing`'s positions into a `p4n_ring` and calls `p4n_ring_run`
(p4sim/native/ringloop.c): every retired receive block of every port is walked in C, each frame
runs through the pipeline straight from the ring memory, its outputs are written into the
transmit rings, one `send()` per port. No Python object per packet. Then the positions and the
counters (rx, rx_truncated, tx, tx_errors, tx_overflows) come back into the `PacketRing`s and
the ports' `PortStats`, the device's packets_in/packets_out and the digests as on the Python
path. Outputs the C loop leaves (to the CPU port: packet-ins; to a port without a ring; to an
impaired port, whose ring gets `tx_python`: the port set's impairment, p4sim/io/impair.py, decides
what is sent, so an unimpaired port costs nothing more per packet; longer than a transmit slot)
are handed to `Device.deliver` like any batch's outputs.

Otherwise (the Python engine, a tap, no pipeline yet) `run` returns False and the port loop
takes the frames the Python way (`RingPortSet._take`, `Device.inject_batch`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from p4sim.io.pktring import PacketRing
from p4sim.io.ring_ports import BATCH_FRAMES, RingPortSet
from p4sim.native.engine import NativeSwitch, ffi

if TYPE_CHECKING:
    from p4sim.server.device import Device

LOG = logging.getLogger("p4sim.ports")

MAX_RINGS = 256  # p4n_ring_run serves at most this many ports (more: the Python path)


def fill_ring(r: Any, ring: PacketRing, port: int, fd: int) -> None:
    """Describe `ring`'s memory in the `p4n_ring` `r` (positions are set by `sync_in`). The
    mapping must outlive every call that gets it (the port set closes its rings after its
    receive thread stopped)."""
    f = ffi()
    buf = f.from_buffer(ring.map)
    base = int(f.cast("uintptr_t", buf))
    f.release(buf)  # the address stays valid while the mmap is open; closing it stays possible
    r.rxm = f.cast("uint8_t *", base)
    r.txm = f.cast("uint8_t *", base + ring.tx_base)
    r.fd, r.port, r.active = fd, port, 1
    r.block_size, r.nblocks = ring.cfg.block_size, ring.cfg.rx_blocks
    r.tx_frame_size, r.tx_frames = ring.cfg.tx_frame_size, ring.tx_frames


def sync_in(r: Any, ring: PacketRing, active: bool, impaired: bool = False) -> None:
    """The ring's positions into the C struct, its counters zeroed; an `impaired` port's outputs
    are left to Python (they go through its impairment)."""
    r.active = int(active)
    r.tx_python = int(impaired)
    r.rx_next, r.tx_next = ring.rx_next, ring.tx_next
    r.tx_last = ring.tx_last - ring.tx_base if ring.tx_last >= 0 else -1
    r.rx = r.rx_truncated = r.tx = r.tx_errors = r.tx_overflows = 0
    r.last_errno = 0
    r.unsent = 0


class NativeRingPath:
    """The fast path of one `RingPortSet` behind one `Device` (see the module docstring)."""

    def __init__(self, ports: RingPortSet, device: Device) -> None:
        self.ports, self.device = ports, device
        self._order: list[int] = []
        self._rings: Any = None  # p4n_ring[len(_order)]
        self.runs = 0  # wake-ups handled in C (tests and the curious)

    def _structs(self) -> Any:
        ports = self.ports
        if self._rings is None or len(self._order) != len(ports._rings):
            f = ffi()
            self._order = sorted(ports._rings)
            arr = f.new("p4n_ring[]", max(1, len(self._order)))
            for k, port in enumerate(self._order):
                fill_ring(arr + k, ports._rings[port], port, ports._socks[port].fileno())
            self._rings = arr
        return self._rings

    def run(self) -> bool:
        """One wake-up in C; False (nothing done) when the pipeline is not native."""
        dev, ports = self.device, self.ports
        with dev.lock:
            pipeline = dev.pipeline
            sw = pipeline.switch if pipeline is not None else None
            if (pipeline is None or not isinstance(sw, NativeSwitch) or dev.tap is not None
                    or len(ports._rings) > MAX_RINGS):
                return False
            arr = self._structs()
            locks = [ports._tx_locks[p] for p in self._order]
            for lock in locks:
                lock.acquire()
            try:
                impaired = ports._impair
                for k, port in enumerate(self._order):
                    sync_in(arr[k], ports._rings[port], not ports.stats[port].gone,
                            port in impaired)
                got, sent, left = self._call(sw, arr)
            finally:
                for lock in locks:
                    lock.release()
            dev.stats.packets_in += got
            dev.stats.packets_out += sent
            lists = dev._digest_lists(pipeline)
        if not self.runs:
            LOG.info("port loop: the native ring fast path runs the batches")
        self.runs += 1
        if left or lists:
            try:
                dev.deliver(pipeline, left, lists)
            except Exception:
                LOG.exception("the outputs of a batch to Python (%d) failed", len(left))
        return True

    def _call(self, sw: NativeSwitch, arr: Any) -> tuple[int, int, list[tuple[int, bytes]]]:
        ports = self.ports
        got, sent, left = sw.ring_run(arr, len(self._order), BATCH_FRAMES, self.device.cpu_port)
        for k, port in enumerate(self._order):
            r, ring, st = arr[k], ports._rings[port], ports.stats[port]
            ring.rx_next, ring.tx_next = int(r.rx_next), int(r.tx_next)
            ring.tx_last = ring.tx_base + int(r.tx_last) if r.tx_last >= 0 else -1
            ring.tx_pending = 0
            st.rx += int(r.rx)
            st.rx_truncated += int(r.rx_truncated)
            st.tx += int(r.tx)
            st.tx_errors += int(r.tx_errors)
            st.tx_overflows += int(r.tx_overflows)
            if r.unsent:
                ports._dirty.add(port)
            if r.last_errno and r.last_errno not in ports._GONE:  # (gone: no warning)
                LOG.warning("send on port %d failed: errno %d", port, r.last_errno)
        return got, sent, left
