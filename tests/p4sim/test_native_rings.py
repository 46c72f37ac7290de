"""The native ring fast path's C API (`p4n_ring_run`, p4sim/native/ringloop.c) on hand-built
TPACKET_V3 receive blocks and transmit rings in bytearrays (no sockets: fd -1 sends nothing):
frames run from the ring memory, outputs land in the transmit slots of their ports, the ones left
to Python (CPU port, no ring, too long) come back, and every counter is exact.

Run one case: .venv/bin/pytest tests/p4sim/test_native_rings.py -k overflow
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from p4sim.io.pktring import (
    PACKET_OUTGOING,
    TP_STATUS_SEND_REQUEST,
    TP_STATUS_WRONG_FORMAT,
    TX_DATA_AT,
    TX_STATUS_AT,
    block_ready,
)
from p4sim.runtime.api_values import Match
from p4sim.runtime.switch import Switch
from tests.p4sim.harness import CPU_PORT, add, load
from tests.p4sim.server.test_ring_units import build_block

pytestmark = pytest.mark.unit

BLOCK = 4096
SLOT = 2048


@pytest.fixture(scope="module", autouse=True)
def p4sim_engine() -> str:
    """The fast path exists for the native engine only (the Python engine gives the expected
    outputs)."""
    return "native"


def ip_frame(dst: str, ttl: int = 64, pad: int = 0) -> bytes:
    return bytes(Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:09") / IP(src="1.1.1.1", dst=dst, ttl=ttl)
                 / UDP() / bytes(pad))


def routed(engine: str) -> Switch:
    sw = load("ipv4_forward.p4", engine)
    add(sw, "ipv4_lpm", {"dst_addr": Match("lpm", 0x0A000200, prefix_len=24)}, "ipv4_forward",
        {"dst_addr": 0x020000000002, "port": 2})
    add(sw, "ipv4_lpm", {"dst_addr": Match("lpm", 0x0A000900, prefix_len=24)}, "send_to_cpu")
    add(sw, "ipv4_lpm", {"dst_addr": Match("lpm", 0x0A000300, prefix_len=24)}, "ipv4_forward",
        {"dst_addr": 0x020000000003, "port": 3})
    add(sw, "ipv4_lpm", {"dst_addr": Match("lpm", 0x0A000100, prefix_len=24)}, "ipv4_forward",
        {"dst_addr": 0x020000000001, "port": 1})
    return sw


@dataclass
class Rings:
    """Receive and transmit rings of some ports in bytearrays, and their `p4n_ring`s."""

    sw: Any
    ports: list[int]
    blocks: int = 4
    slots: int = 8
    rx: dict[int, bytearray] = field(default_factory=dict)
    tx: dict[int, bytearray] = field(default_factory=dict)
    keep: list[Any] = field(default_factory=list)
    arr: Any = None

    def __post_init__(self) -> None:
        f = self.sw._ffi
        self.arr = f.new("p4n_ring[]", len(self.ports))
        for k, port in enumerate(self.ports):
            self.rx[port] = bytearray(BLOCK * self.blocks)
            self.tx[port] = bytearray(SLOT * self.slots)
            rb, tb = f.from_buffer(self.rx[port]), f.from_buffer(self.tx[port])
            self.keep += [rb, tb]
            r = self.arr[k]
            r.rxm, r.txm = f.cast("uint8_t *", rb), f.cast("uint8_t *", tb)
            r.fd, r.port, r.active = -1, port, 1
            r.block_size, r.nblocks, r.tx_frame_size, r.tx_frames = BLOCK, self.blocks, SLOT, self.slots
            r.tx_last = -1

    def ring(self, port: int) -> Any:
        return self.arr[self.ports.index(port)]

    def put_block(self, port: int, index: int, frames: list[tuple[bytes, int, int]]) -> None:
        self.rx[port][index * BLOCK:(index + 1) * BLOCK] = build_block(frames, BLOCK)

    def run(self, max_frames: int = 256) -> tuple[int, int, list[tuple[int, bytes]]]:
        for k in range(len(self.ports)):
            r = self.arr[k]
            r.rx = r.rx_truncated = r.tx = r.tx_errors = r.tx_overflows = 0
        result: tuple[int, int, list[tuple[int, bytes]]] = self.sw.ring_run(
            self.arr, len(self.ports), max_frames, CPU_PORT)
        return result

    def sent(self, port: int) -> list[bytes]:
        """The frames marked for sending in `port`'s transmit ring, slot order."""
        buf, out = self.tx[port], []
        for i in range(self.slots):
            off = i * SLOT
            if struct.unpack_from("=I", buf, off + TX_STATUS_AT)[0] == TP_STATUS_SEND_REQUEST:
                n = struct.unpack_from("=I", buf, off + 16)[0]
                out.append(bytes(buf[off + TX_DATA_AT:off + TX_DATA_AT + n]))
        return out


def test_frames_run_from_the_ring_into_the_transmit_ring_of_their_port() -> None:
    sw, ref = routed("native"), routed("python")
    rings = Rings(sw, [1, 2])
    frames = [ip_frame(f"10.0.2.{i}", pad=i) for i in range(1, 6)]
    rings.put_block(1, 0, [(f, 0, len(f)) for f in frames[:3]])
    rings.put_block(1, 1, [(f, 0, len(f)) for f in frames[3:]])
    got, sent, left = rings.run()
    assert (got, sent, left) == (5, 5, [])
    assert rings.sent(2) == [ref.process(1, f)[0][1] for f in frames]
    r1, r2 = rings.ring(1), rings.ring(2)
    assert (r1.rx, r1.rx_next, r2.tx, r2.tx_next, r2.tx_last, r2.unsent) == (5, 2, 5, 5, 4 * SLOT, 1)
    assert not block_ready(rings.rx[1], 0) and not block_ready(rings.rx[1], BLOCK)  # released
    [cid] = [c.preamble.id for c in sw.p4info.counters if c.preamble.name.endswith("port_packets")]
    assert sw.counter_read(cid, 1)[0] == 5
    assert rings.run() == (0, 0, [])  # nothing new


def test_outgoing_skipped_truncated_counted_and_left_to_python() -> None:
    sw, ref = routed("native"), routed("python")
    rings = Rings(sw, [1, 2])
    to_cpu, to_3, big = ip_frame("10.0.9.9"), ip_frame("10.0.3.3"), ip_frame("10.0.2.2", pad=2100)
    ok = ip_frame("10.0.2.7")
    rings.put_block(1, 0, [(ok, PACKET_OUTGOING, len(ok)), (ok[:60], 0, 1500), (to_cpu, 0, len(to_cpu)),
                           (to_3, 0, len(to_3)), (ok, 0, len(ok))])
    rings.put_block(2, 0, [(big, 0, len(big))])  # fits a block, not a transmit slot
    got, sent, left = rings.run()
    r1 = rings.ring(1)
    assert (got, sent, r1.rx, r1.rx_truncated) == (4, 1, 3, 1)
    assert left == [(CPU_PORT, ref.process(1, to_cpu)[0][1]), (3, ref.process(1, to_3)[0][1]),
                    (2, ref.process(2, big)[0][1])]
    assert rings.sent(2) == [ref.process(1, ok)[0][1]]


def test_a_full_transmit_ring_overflows_and_a_refused_slot_is_a_tx_error() -> None:
    sw = routed("native")
    rings = Rings(sw, [1, 2], slots=2)
    struct.pack_into("=I", rings.tx[2], SLOT + TX_STATUS_AT, TP_STATUS_WRONG_FORMAT)
    frames = [ip_frame(f"10.0.2.{i}") for i in range(1, 5)]
    rings.put_block(1, 0, [(f, 0, len(f)) for f in frames])
    got, sent, _ = rings.run()
    r2 = rings.ring(2)
    # two slots: the second had been refused by the kernel (counted, reused); then full (fd -1:
    # nothing is sent, the slots stay busy): two overflows
    assert (got, sent, r2.tx, r2.tx_errors, r2.tx_overflows) == (4, 2, 1, 1, 2)


def test_whole_blocks_until_max_frames_and_gone_ports_are_not_read() -> None:
    sw = routed("native")
    rings = Rings(sw, [1, 2, 3], slots=16)
    f = ip_frame("10.0.2.2")
    for b in range(3):
        rings.put_block(1, b, [(f, 0, len(f))] * 3)
    rings.put_block(3, 0, [(f, 0, len(f))])
    rings.ring(3).active = 0
    got, _, _ = rings.run(max_frames=4)
    assert (got, rings.ring(1).rx_next, rings.ring(3).rx) == (6, 2, 0)
    assert block_ready(rings.rx[3], 0)
    got, _, _ = rings.run(max_frames=4)
    assert (got, rings.ring(1).rx_next) == (3, 3)


def test_frames_back_to_the_port_they_came_from() -> None:
    sw = routed("native")
    rings = Rings(sw, [1])
    f = ip_frame("10.0.1.5")
    rings.put_block(1, 0, [(f, 0, len(f))] * 2)
    got, sent, left = rings.run()
    assert (got, sent, left, rings.ring(1).tx) == (2, 2, [], 2)


def test_an_impaired_ports_outputs_are_left_to_python_and_it_still_receives() -> None:
    """`tx_python` (rings.py sets it for a port under wire impairment, p4sim/io/impair.py): the C
    loop reads the port's receive ring as always but leaves every output to it to Python, in
    order; the other ports' outputs still go into their transmit rings."""
    sw, ref = routed("native"), routed("python")
    rings = Rings(sw, [1, 2, 3])
    rings.ring(2).tx_python = 1
    to_2 = [ip_frame(f"10.0.2.{i}") for i in range(1, 4)]
    to_3, back = ip_frame("10.0.3.3"), ip_frame("10.0.1.1")
    rings.put_block(1, 0, [(f, 0, len(f)) for f in [to_2[0], to_3, *to_2[1:]]])
    rings.put_block(2, 0, [(back, 0, len(back))])
    got, sent, left = rings.run()
    assert (got, sent) == (5, 2)
    assert left == [(2, ref.process(1, f)[0][1]) for f in to_2]
    assert rings.sent(2) == [] and rings.ring(2).tx == 0 and rings.ring(2).rx == 1
    assert rings.sent(3) == [ref.process(1, to_3)[0][1]]
    assert rings.sent(1) == [ref.process(2, back)[0][1]]
