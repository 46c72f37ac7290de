"""Serial-number arithmetic (RFC 1982) of the numbers the switch and the NFs compare.

Sequence numbers are 32 bits and wrap around (the switch's per-slot register does): a number is
"after" another when it is less than 2**31 ahead of it modulo 2**32. Epochs (a slot's ownership
version, the shim's 16-bit `epoch`) wrap the same way at 2**16; an owner is ordered by
(epoch, generation), the generation counting promotions within an epoch.
"""

from __future__ import annotations

SEQ_MASK = 0xFFFFFFFF
SEQ_HALF = 1 << 31
EPOCH_MASK = 0xFFFF
_EPOCH_HALF = 1 << 15


def seq_after(a: int, b: int) -> bool:
    """Whether sequence number `a` comes after `b` (serial arithmetic modulo 2**32)."""
    return 0 < ((a - b) & SEQ_MASK) < SEQ_HALF


def seq_next(a: int) -> int:
    return (a + 1) & SEQ_MASK


def seq_distance(a: int, b: int) -> int:
    """How many numbers `a` is after `b` (modulo 2**32)."""
    return (a - b) & SEQ_MASK


def older_owner(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether ownership generation a = (epoch, gen) is before b (epochs: 16-bit serial numbers)."""
    if a[0] != b[0]:
        return 0 < (b[0] - a[0]) & EPOCH_MASK < _EPOCH_HALF
    return a[1] < b[1]
