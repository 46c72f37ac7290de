"""Classic BPF programs that spread shim packets over a NF's worker processes in the kernel.

Each worker opens its own AF_PACKET socket on the data interface and attaches `worker_filter`:
the kernel runs the program on every frame and delivers to the worker only the frames whose shim
slot satisfies `slot % workers == index`, so no Python dispatcher touches a packet twice. Worker 0
also receives every frame that does not carry the shim, so malformed input is counted exactly once.

(PACKET_FANOUT with a cBPF selector was the other option; its selector picks a socket by its
position in the fanout group, which changes when a socket leaves, so a restarted worker would
receive another worker's slots. Per-socket filters keep the slot -> worker map fixed.)
"""

from __future__ import annotations

import ctypes
import socket
import struct

from contract.shim import ETHERTYPE_NFC, ETHERTYPE_OFFSET, FRAME_SLOT, SHIM_FRAME_LEN

SO_ATTACH_FILTER = 26

# classic BPF opcodes (linux/filter.h)
BPF_LD_H_ABS = 0x28  # A <- u16 at [k]
BPF_LD_W_LEN = 0x80  # A <- frame length
BPF_JGE_K = 0x35  # pc += (A >= k) ? jt : jf
BPF_JEQ_K = 0x15  # pc += (A == k) ? jt : jf
BPF_ALU_MOD_K = 0x94  # A <- A % k
BPF_RET_K = 0x06  # return k bytes of the frame (0: drop)

ACCEPT = 0x40000

Insn = tuple[int, int, int, int]


def worker_filter(index: int, workers: int) -> list[Insn]:
    """The program for worker `index` of `workers` (see the module docstring)."""
    if not 0 <= index < workers:
        raise ValueError(f"worker index {index} not in 0..{workers - 1}")
    non_shim = ACCEPT if index == 0 else 0
    return [
        (BPF_LD_W_LEN, 0, 0, 0),  # 0: frame length
        (BPF_JGE_K, 0, 7, SHIM_FRAME_LEN),  # 1: long enough? -> 2 else -> 9
        (BPF_LD_H_ABS, 0, 0, ETHERTYPE_OFFSET),  # 2: EtherType
        (BPF_JEQ_K, 0, 5, ETHERTYPE_NFC),  # 3: shim? -> 4 else -> 9
        (BPF_LD_H_ABS, 0, 0, FRAME_SLOT),  # 4: slot
        (BPF_ALU_MOD_K, 0, 0, workers),  # 5: slot % workers
        (BPF_JEQ_K, 0, 1, index),  # 6: ours? -> 7 else -> 8
        (BPF_RET_K, 0, 0, ACCEPT),  # 7
        (BPF_RET_K, 0, 0, 0),  # 8: another worker's slot
        (BPF_RET_K, 0, 0, non_shim),  # 9: not a (complete) shim frame: worker 0 counts it
    ]


def run_filter(prog: list[Insn], frame: bytes) -> int:
    """Interpret `prog` on `frame` like the kernel would (for tests); returns the accept length."""
    a = 0
    pc = 0
    while True:
        code, jt, jf, k = prog[pc]
        pc += 1
        if code == BPF_LD_H_ABS:
            if k + 2 > len(frame):
                return 0
            a = struct.unpack_from("!H", frame, k)[0]
        elif code == BPF_LD_W_LEN:
            a = len(frame)
        elif code == BPF_JEQ_K:
            pc += jt if a == k else jf
        elif code == BPF_JGE_K:
            pc += jt if a >= k else jf
        elif code == BPF_ALU_MOD_K:
            a %= k
        elif code == BPF_RET_K:
            return k
        else:
            raise ValueError(f"opcode {code:#x} not supported")


def attach(sock: socket.socket, prog: list[Insn]) -> None:
    """Attach a classic BPF program to a socket (SO_ATTACH_FILTER)."""
    raw = b"".join(struct.pack("HBBI", *insn) for insn in prog)
    buf = ctypes.create_string_buffer(raw)
    fprog = struct.pack("HL", len(prog), ctypes.addressof(buf))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
