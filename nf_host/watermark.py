"""Watermark frames: an NF that drops input keeps the switch's output dedup up with its numbers.

The switch forwards an output of a slot only if its seq is after the last one it forwarded for
that slot and epoch parity, in 32-bit serial arithmetic: less than 2^31 ahead (docs/dataplane.md
"Output dedup"). Only output moves that watermark, and an input whose verdict is DROP has none:
after 2^31 dropped inputs in a row, the slot's next output would compare as older than the
watermark and be dropped as a duplicate. So where the runtime drops an input, it sometimes sends
a **watermark frame** instead (shim kind OUTPUT, flag WATERMARK, the input's slot, epoch and seq,
no packet: EtherType 0 after the shim): the switch checks it like output, which moves the
watermark, and never forwards it (counted in `nf_output_drops[watermark]`). It is output for the
output commit too: held until the backup's ack, logged there, sent again by a promoted backup.

When (invariant: at the switch, every output or watermark frame of the slot's epoch is less than
2^31 after the watermark): an owner sends one at a dropped input `SPAN` (2^30) numbers after its
last output or watermark frame. Before its first one, it does not know the watermark: it may
have inherited a lag from the owners of the same epoch before it (a fail-over keeps the epoch;
an adoption starts a new one, whose first output the switch takes whatever its seq). An owner of
generation g (promotions within the epoch so far, `SlotState.gen`) sends one at a dropped input
`first_span(g)` = 2^29 >> g numbers after its first packet: the lags inherited add up to less
than 2^30 over any number of promotions (each owner either sent one, leaving less than `SPAN`
behind its last commit, or added less than its own first span), so every frame reaches the
switch less than 2^30 + 2^29 after the watermark. In practice the frames are rare: one per 2^30
dropped inputs, plus one after 2^29 >> g drops at the start of an ownership.

**After a switch restart** (docs/protocols.md §9, P10) the switch's dedup registers are empty:
the first output of each slot and parity passes whatever its seq, so output forwarded before
the restart and sent again after it (a promoted backup re-emits its dead primary's log) would
pass twice. The switch's `last_epoch` register is lost too, so the first packet of each slot
after the restart comes flagged FIRST_OF_EPOCH although its epoch did not change: an owner
that had processed packets of that epoch knows from it that the switch restarted, and before
that packet's output it sends (`restart_marks`) a frame at its epoch and its last output (or
watermark) number, and one at the epoch before (the other parity) and the number before the
packet's: every output of that epoch was numbered before this epoch's first packet, and none
is still to come once this owner processes packets of its own epoch (the old owner's tail is
over). The frames are output: they leave after the outputs before them, are logged at the
backup and sent again, in order, by a promoted backup.
"""

from __future__ import annotations

from contract.shim import (
    ETHERTYPE_NFC,
    FLAG_WATERMARK,
    FRAME_FLAGS,
    FRAME_KIND,
    SHIM_FRAME_LEN,
    Kind,
    Shim,
)

SPAN = 1 << 30
"""Numbers after an owner's last output or watermark frame at which it sends one."""
MIN_FRAME = 60


def first_span(gen: int) -> int:
    """Numbers after its first packet at which an owner of generation `gen` sends its first."""
    return max(1, (1 << 29) >> gen)


def watermark_frame(nf_id: int, slot: int, stage: int, epoch: int, seq: int, flags: int = 0
                    ) -> bytes:
    """NF `nf_id`'s watermark frame for slot index `slot` (of `stage`) at `epoch`, at `seq`."""
    src = bytes([0x02, 0, 0, 0]) + (nf_id & 0xFFFF).to_bytes(2, "big")  # locally administered
    shim = Shim(int(Kind.OUTPUT), FLAG_WATERMARK | flags, slot, epoch, nf_id, seq & 0xFFFFFFFF, 0,
                stage)
    frame = b"\xff" * 6 + src + ETHERTYPE_NFC.to_bytes(2, "big") + shim.pack()
    assert len(frame) == SHIM_FRAME_LEN
    return frame + bytes(MIN_FRAME - len(frame))


def is_watermark(frame: bytes | bytearray) -> bool:
    """Whether an NF's output frame (with its shim) is a watermark frame."""
    return frame[FRAME_KIND] == Kind.OUTPUT and bool(frame[FRAME_FLAGS] & FLAG_WATERMARK)


def restart_marks(nf_id: int, slot: int, stage: int, epoch: int, out_mark: int | None,
                  seq: int) -> list[bytes]:
    """The frames an owner of `slot` at `epoch` sends when the switch restarted (see the module
    docstring): at `epoch` and its last output or watermark number `out_mark` (None: it sent
    none), and at the epoch before (the other parity; none before epoch 1) and `seq` - 1, `seq`
    being the number of the first packet after the restart."""
    frames = []
    if out_mark is not None:
        frames.append(watermark_frame(nf_id, slot, stage, epoch, out_mark))
    before = (epoch - 1) & 0xFFFF
    if before:
        frames.append(watermark_frame(nf_id, slot, stage, before, (seq - 1) & 0xFFFFFFFF))
    return frames
