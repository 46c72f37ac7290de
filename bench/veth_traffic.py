"""Traffic for the veth benchmarks: senders and receivers run as `python -c SCRIPT ...` inside a
host's network namespace (`ip netns exec`), each printing its packet count at the end.

Two kinds, compared by `bench.p4sim_server --traffic`:

* `python`: one `send()` per frame and one `recv()` per frame from a raw socket (the first
  benchmark's; on 2 cores its per-packet Python work competes with p4sim for the CPU);
* `ring` (default): a TPACKET_V2 transmit ring of 4096 slots all filled once with the frame, so
  a round only marks a run of 256 free slots for sending (one numpy store) and hands them to the
  kernel with one `send()`; the receiver reads a TPACKET_V3 receive ring of 1 MiB blocks and only
  adds each retired block's `num_pkts` (no per-packet Python work at all).

Usage: SENDERS[kind] IFACE FRAME_HEX SECONDS; RECEIVERS[kind] IFACE DST_MAC_HEX SECONDS (prints
"ready" once bound, then the count).
"""

from __future__ import annotations

PY_SENDER = r"""
import socket, sys, time
iface, frame, seconds = sys.argv[1], bytes.fromhex(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
n, end = 0, time.monotonic() + seconds
while time.monotonic() < end:
    for _ in range(100):
        try:
            s.send(frame); n += 1
        except OSError:
            pass
print(n, flush=True)
"""

PY_RECEIVER = r"""
import socket, sys, time, select
iface, dst, seconds = sys.argv[1], bytes.fromhex(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((iface, 0))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
print("ready", flush=True)
n, end = 0, time.monotonic() + seconds
while time.monotonic() < end:
    r, _, _ = select.select([s], [], [], 0.1)
    if r:
        data = s.recv(65536)
        if data[:6] == dst:
            n += 1
print(n, flush=True)
"""

# TPACKET_V2 transmit ring: tpacket2_hdr is status u32 @0, len u32 @4, ...; without
# PACKET_TX_HAS_OFF the frame follows the aligned header (32 bytes). The slots keep their frame
# and length: the kernel only sets the status back to available (0) once the frame is sent.
RING_SENDER = r"""
import mmap, socket, struct, sys, time
import numpy as np
iface, frame, seconds = sys.argv[1], bytes.fromhex(sys.argv[2]), float(sys.argv[3])
SOL_PACKET, FS, NF, RUN = 263, 256, 4096, 256
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
s.bind((iface, 0))
s.setsockopt(SOL_PACKET, 10, 1)  # PACKET_VERSION: TPACKET_V2
s.setsockopt(SOL_PACKET, 20, 1)  # PACKET_QDISC_BYPASS
s.setsockopt(socket.SOL_SOCKET, 32, 64 << 20)  # SO_SNDBUFFORCE: every slot may be in flight
s.setsockopt(SOL_PACKET, 13, struct.pack("IIII", 1 << 16, FS * NF >> 16, FS, NF))  # TX_RING
m = mmap.mmap(s.fileno(), FS * NF, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
for i in range(NF):
    m[i * FS + 32:i * FS + 32 + len(frame)] = frame
    struct.pack_into("I", m, i * FS + 4, len(frame))
status = np.frombuffer(m, dtype=np.uint32)[0::FS // 4]
marked, nxt, end = 0, 0, time.monotonic() + seconds
while time.monotonic() < end:
    run = status[nxt:nxt + RUN]
    if not (run & 3).any():  # available (0) or refused (4): free again
        run[:] = 1  # TP_STATUS_SEND_REQUEST
        marked += RUN
        nxt = (nxt + RUN) % NF
    try:
        s.send(b"", socket.MSG_DONTWAIT)
    except OSError:
        pass
left = int((status == 1).sum())
print(marked - left, flush=True)
"""

RING_RECEIVER = r"""
import mmap, select, socket, struct, sys, time
iface, dst, seconds = sys.argv[1], bytes.fromhex(sys.argv[2]), float(sys.argv[3])
SOL_PACKET, BS, NB = 263, 1 << 20, 32
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((iface, 0))
s.setsockopt(SOL_PACKET, 10, 2)  # TPACKET_V3
s.setsockopt(SOL_PACKET, 5, struct.pack("IIIIIII", BS, NB, 2048, BS // 2048 * NB, 10, 0, 0))
m = mmap.mmap(s.fileno(), BS * NB, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
p = select.poll()
p.register(s, select.POLLIN)
print("ready", flush=True)
n, i, end = 0, 0, time.monotonic() + seconds
while time.monotonic() < end:
    p.poll(100)
    while struct.unpack_from("I", m, i * BS + 8)[0] & 1:  # TP_STATUS_USER: retired
        n += struct.unpack_from("I", m, i * BS + 12)[0]  # num_pkts
        struct.pack_into("I", m, i * BS + 8, 0)
        i = (i + 1) % NB
print(n, flush=True)
"""

SENDERS = {"python": PY_SENDER, "ring": RING_SENDER}
RECEIVERS = {"python": PY_RECEIVER, "ring": RING_RECEIVER}
