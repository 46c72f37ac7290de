"""Memory-mapped AF_PACKET rings (PACKET_MMAP): a TPACKET_V3 receive ring and a transmit ring.

The kernel writes received frames into blocks of a shared ring; a block is handed to user space
when it is full or when its timer retires it (`timeout_ms`), and given back by writing
TP_STATUS_KERNEL into its status. One poll wake-up thus yields every frame of one or more blocks,
read without a system call each. Frames to send are written into the transmit ring's fixed-size
slots and marked TP_STATUS_SEND_REQUEST; one `send()` of zero bytes hands all of them to the
device (`flush`). The kernel's statistics (`PACKET_STATISTICS`, reset by every read) say how many
frames it dropped because the ring was full and how often the ring froze (every block in user
space).

Layouts (linux/if_packet.h), the offsets used here:

    tpacket_block_desc:  version u32 @0, offset_to_priv u32 @4, then tpacket_hdr_v1:
                         block_status u32 @8, num_pkts u32 @12, offset_to_first_pkt u32 @16,
                         blk_len u32 @20, seq_num u64 @24, timestamps @32..48
    tpacket3_hdr:        tp_next_offset u32 @0, tp_sec @4, tp_nsec @8, tp_snaplen @12,
                         tp_len @16, tp_status @20, tp_mac u16 @24, tp_net u16 @26, ... (48 bytes)
    sockaddr_ll:         right after the aligned header (@48); sll_pkttype u8 @48+10

The parsing functions work on any buffer (the mmap, or a bytearray in the unit tests).
"""

from __future__ import annotations

import errno
import mmap
import socket
import struct
from dataclasses import dataclass

SOL_PACKET = 263
PACKET_RX_RING = 5
PACKET_STATISTICS = 6
PACKET_VERSION = 10
PACKET_TX_RING = 13
PACKET_LOSS = 14
TPACKET_V3 = 2

TP_STATUS_KERNEL = 0
TP_STATUS_USER = 1
TP_STATUS_AVAILABLE = 0
TP_STATUS_SEND_REQUEST = 1
TP_STATUS_SENDING = 2
TP_STATUS_WRONG_FORMAT = 4

BLOCK_HDR = struct.Struct("=III")  # block_status, num_pkts, offset_to_first_pkt (at offset 8)
BLOCK_HDR_AT = 8
BLOCK_DESC_LEN = 48
FRAME_HDR = struct.Struct("=IIIIIIHH")  # next_offset, sec, nsec, snaplen, len, status, mac, net
FRAME_HDR_LEN = 48  # TPACKET_ALIGN(sizeof(struct tpacket3_hdr))
PKTTYPE_AT = FRAME_HDR_LEN + 10  # sockaddr_ll.sll_pkttype
TX_LEN_AT = 16
TX_STATUS_AT = 20
TX_DATA_AT = FRAME_HDR_LEN  # without PACKET_TX_HAS_OFF, data follows the aligned header
STATS_V3 = struct.Struct("=III")  # tp_packets, tp_drops, tp_freeze_q_cnt
REQ3 = struct.Struct("=IIIIIII")  # block size, blocks, frame size, frames, tov ms, priv, features
U32 = struct.Struct("=I")
PACKET_OUTGOING = 4

PAGE = mmap.PAGESIZE


@dataclass(frozen=True)
class RingConfig:
    """Sizes of one port's rings. The receive ring holds `rx_blocks` blocks of `block_size`
    bytes (a frame larger than a block is truncated: counted); the transmit ring `tx_frames`
    slots of `tx_frame_size` bytes (a larger frame is sent with a plain `send`).

    The kernel retires a block `timeout_ms` after it opened it even when it is not full, so at
    low rates most blocks hold a few frames: the ring's depth in time is about `rx_blocks` x
    `timeout_ms`. Hence many small blocks (one page each): 2048 of them ride out two seconds of
    a stalled switch at any rate the timer decides, and a block still takes ~20 small frames
    at high rates."""

    block_size: int = PAGE
    rx_blocks: int = 2048
    timeout_ms: int = 1
    tx_frame_size: int = 1 << 11
    tx_frames: int = 512

    def __post_init__(self) -> None:
        if self.block_size % PAGE or self.block_size <= 0:
            raise ValueError(f"ring block size {self.block_size} is not a multiple of the page size "
                             f"{PAGE}")
        if self.rx_blocks < 2 or self.tx_frames < 1:
            raise ValueError(f"ring needs at least 2 receive blocks and 1 transmit frame, got "
                             f"{self.rx_blocks} and {self.tx_frames}")
        if self.tx_frame_size % 16 or PAGE % self.tx_frame_size:
            raise ValueError(f"transmit frame size {self.tx_frame_size} must divide the page size "
                             "and be a multiple of 16")

    @classmethod
    def sized(cls, megabytes: float) -> RingConfig:
        """A receive ring of about `megabytes` MiB (blocks of one page)."""
        blocks = max(2, int(megabytes * (1 << 20)) // PAGE)
        return cls(rx_blocks=blocks)

    @property
    def rx_bytes(self) -> int:
        return self.block_size * self.rx_blocks

    @property
    def tx_bytes(self) -> int:
        return self.tx_frame_size * self.tx_frames


@dataclass
class RxFrame:
    data: bytes
    outgoing: bool  # a frame this host sent (kernels without PACKET_IGNORE_OUTGOING)
    truncated: bool  # longer than the room in the block: only `snaplen` bytes were kept


def block_ready(buf: memoryview | bytearray | mmap.mmap, base: int) -> bool:
    """The block at `base` belongs to user space (the kernel retired it)."""
    return bool(U32.unpack_from(buf, base + BLOCK_HDR_AT)[0] & TP_STATUS_USER)


def block_frames(buf: memoryview | bytearray | mmap.mmap, base: int) -> list[RxFrame]:
    """Every frame of the retired block at `base`, copied out, in arrival order."""
    _status, count, first = BLOCK_HDR.unpack_from(buf, base + BLOCK_HDR_AT)
    out: list[RxFrame] = []
    off = base + first
    unpack = FRAME_HDR.unpack_from
    for _ in range(count):
        nxt, _s, _ns, snaplen, length, _st, mac, _net = unpack(buf, off)
        start = off + mac
        out.append(RxFrame(bytes(buf[start:start + snaplen]), buf[off + PKTTYPE_AT] == PACKET_OUTGOING,
                           snaplen < length))
        if not nxt:
            break
        off += nxt
    return out


def release_block(buf: memoryview | bytearray | mmap.mmap, base: int) -> None:
    """Give the block at `base` back to the kernel."""
    U32.pack_into(buf, base + BLOCK_HDR_AT, TP_STATUS_KERNEL)


def tx_slot_status(buf: memoryview | bytearray | mmap.mmap, off: int) -> int:
    return int(U32.unpack_from(buf, off + TX_STATUS_AT)[0])


def tx_write(buf: memoryview | bytearray | mmap.mmap, off: int, data: bytes) -> None:
    """Fill the transmit slot at `off` with `data` and mark it for sending (status last)."""
    n = len(data)
    buf[off + TX_DATA_AT:off + TX_DATA_AT + n] = data
    U32.pack_into(buf, off + TX_LEN_AT, n)  # (tp_next_offset stays 0: the ring starts zeroed)
    U32.pack_into(buf, off + TX_STATUS_AT, TP_STATUS_SEND_REQUEST)


def parse_stats_v3(raw: bytes) -> tuple[int, int, int]:
    """(packets, drops, freezes) from PACKET_STATISTICS of a TPACKET_V3 socket."""
    packets, drops, freezes = STATS_V3.unpack(raw)
    return packets, drops, freezes


class PacketRing:
    """The two rings of one AF_PACKET socket (bound, non-blocking), mapped into this process.

    Not thread-safe: one thread receives; transmissions are serialised by the caller.
    """

    def __init__(self, sock: socket.socket, cfg: RingConfig) -> None:
        self.sock, self.cfg = sock, cfg
        # every frame in flight is charged to the send buffer: with the default (~200 KiB) a
        # batch to one port can exhaust it, and the kernel then stops early (see `flush`)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V3)
        # a malformed transmit frame is skipped and marked, not an error that stops the ring
        sock.setsockopt(SOL_PACKET, PACKET_LOSS, 1)
        # V3's frame count is only checked against the block size: any consistent value will do
        rx = REQ3.pack(cfg.block_size, cfg.rx_blocks, 2048, cfg.rx_blocks * (cfg.block_size // 2048),
                       cfg.timeout_ms, 0, 0)
        sock.setsockopt(SOL_PACKET, PACKET_RX_RING, rx)
        tx_block = max(PAGE, cfg.tx_frame_size)
        per_block = tx_block // cfg.tx_frame_size
        tx_blocks = -(-cfg.tx_frames // per_block)
        self.tx_frames = tx_blocks * per_block
        tx = REQ3.pack(tx_block, tx_blocks, cfg.tx_frame_size, self.tx_frames, 0, 0, 0)
        sock.setsockopt(SOL_PACKET, PACKET_TX_RING, tx)
        self.tx_base = cfg.rx_bytes
        self.map = mmap.mmap(sock.fileno(), cfg.rx_bytes + tx_block * tx_blocks, mmap.MAP_SHARED,
                             mmap.PROT_READ | mmap.PROT_WRITE)
        self.rx_next = 0  # the next block to look at
        self.tx_next = 0  # the next transmit slot to fill
        self.tx_last = -1  # offset of the slot filled last (-1: none yet)
        self.tx_pending = 0  # slots filled since the last flush
        self.max_tx = cfg.tx_frame_size - TX_DATA_AT
        self.malformed = 0  # transmit slots the kernel refused (TP_STATUS_WRONG_FORMAT)

    # ---------------------------------------------------------------- receive
    def receive(self, max_frames: int) -> tuple[list[RxFrame], int]:
        """Frames of the retired blocks, whole blocks until at least `max_frames` frames (or no
        block is ready), and how many blocks were read."""
        frames: list[RxFrame] = []
        m, size, n = self.map, self.cfg.block_size, self.cfg.rx_blocks
        blocks = 0
        while len(frames) < max_frames:
            base = self.rx_next * size
            if not block_ready(m, base):
                break
            frames += block_frames(m, base)
            release_block(m, base)
            self.rx_next = (self.rx_next + 1) % n
            blocks += 1
        return frames, blocks

    # --------------------------------------------------------------- transmit
    def put(self, data: bytes) -> bool:
        """Queue one frame; False when every slot is still busy (the caller counts the loss)."""
        off = self.tx_base + self.tx_next * self.cfg.tx_frame_size
        status = tx_slot_status(self.map, off)
        if status == TP_STATUS_WRONG_FORMAT:  # the kernel refused what this slot held: lost
            self.malformed += 1
        elif status != TP_STATUS_AVAILABLE:
            return False
        tx_write(self.map, off, data)
        self.tx_last = off
        self.tx_next = (self.tx_next + 1) % self.tx_frames
        self.tx_pending += 1
        return True

    def flush(self) -> bool:
        """Hand the queued frames to the device; True when every one was taken. The kernel
        stops early, without an error, when the socket's send buffer is full (frames in flight
        not yet freed by the device): the rest stays queued, in order, for the next `flush`.
        Raises OSError (ENETDOWN, ENXIO, ...) when the device refused them (`abandon` them)."""
        self.tx_pending = 0
        if self.tx_last < 0:
            return True
        try:
            self.sock.send(b"", socket.MSG_DONTWAIT)
        except OSError as exc:
            if exc.errno not in (errno.ENOBUFS, errno.EAGAIN):
                raise
        return not self.unsent()

    def unsent(self) -> bool:
        """Frames are still waiting in the ring (frames are taken in order: the last one
        filled tells)."""
        return self.tx_last >= 0 and tx_slot_status(self.map, self.tx_last) == TP_STATUS_SEND_REQUEST

    def abandon(self) -> int:
        """Give up every slot still waiting to be sent (after an error): how many there were."""
        lost = 0
        for i in range(self.tx_frames):
            off = self.tx_base + i * self.cfg.tx_frame_size
            if U32.unpack_from(self.map, off + TX_STATUS_AT)[0] == TP_STATUS_SEND_REQUEST:
                U32.pack_into(self.map, off + TX_STATUS_AT, TP_STATUS_AVAILABLE)
                lost += 1
        return lost

    def stats(self) -> tuple[int, int, int]:
        """(packets, drops, freezes) since the last call (the kernel resets them on read)."""
        return parse_stats_v3(self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, STATS_V3.size))

    def close(self) -> None:
        self.map.close()
