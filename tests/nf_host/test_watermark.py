"""Watermark frames (nf_host/watermark.py): an NF that drops inputs keeps the switch's output
dedup watermark of the slot within 2^30 of its numbers, so output after 2^31 dropped inputs in a
row still goes through the switch (modelled by `OutputDedup`, the P4 programs' rule; the P4 side
is `ptf_tests/test_output_dedup.py::WatermarkFrameMovesTheWatermark`)."""

from __future__ import annotations

import asyncio

import pytest

from contract.shim import ETH_HDR_LEN, Shim
from nf_host.global_state import MemoryStore
from nf_host.harness import OutputDedup, Switch, checker_frame
from nf_host.nf_api import Context, FlowState, NetworkFunction, Packet, Verdict
from nf_host.watermark import SPAN, first_span, is_watermark
from nf_host.worker import Worker, WorkerConfig

pytestmark = pytest.mark.unit

SLOT = 5
MASK = 0xFFFFFFFF


class Picky(NetworkFunction):
    """Forwards only the inputs whose seq is in `keep`."""

    name = "picky-test"

    def __init__(self, keep: set[int]) -> None:
        super().__init__()
        self.keep = keep

    def initial_state(self) -> FlowState:
        return {}

    def process(self, packet: Packet, state: FlowState, context: Context) -> Verdict:
        return Verdict.FORWARD if context.seq in self.keep else Verdict.DROP


def run(seqs: list[int], keep: set[int], gen: int = 0) -> list[bytes]:
    """Hand a worker (no backup: output leaves at once) the inputs `seqs` of SLOT, in order,
    skipping the numbers between them as gaps; return its output frames."""
    async def go() -> list[bytes]:
        out: list[bytes] = []
        w = Worker(WorkerConfig(nf_id=1, batch_size=1, batch_time=0), Picky(keep), MemoryStore(),
                   lambda f: out.append(bytes(f)))
        w.assign([(SLOT, 1, seqs[0])], as_backup=False)
        w.slots[SLOT].state.gen = gen
        switch = Switch()
        for n, seq in enumerate(seqs):
            switch.next_seq[SLOT] = seq
            prim, _ = switch.stamp(SLOT, checker_frame(1, n + 1), 1)
            w.on_frame(prim)
            w.expire_gaps(1e12 * (n + 1))  # the numbers in between never come: skipped, counted
        assert w.slots[SLOT].state.last_seq == seqs[-1]
        return out

    return asyncio.run(go())


def seqs_of(frames: list[bytes]) -> list[tuple[int, bool]]:
    return [(Shim.unpack(f, ETH_HDR_LEN).seq, is_watermark(f)) for f in frames]


def test_an_owner_sends_a_watermark_frame_at_a_drop_span_numbers_after_its_last_output() -> None:
    x = 1000
    got = seqs_of(run([x, x + 1, x + SPAN, x + SPAN + 1, x + SPAN + 2], keep={x}))
    assert got == [(x, False), (x + SPAN, True)]  # x + SPAN + 1, + 2: dropped, nothing sent


def test_before_its_first_output_an_owner_sends_one_first_span_after_its_first_packet() -> None:
    x = (-3) & MASK  # across the wrap
    for gen in (0, 1, 7, 29, 40):
        span = first_span(gen)
        first_mark = (x + span - 1) & MASK  # the number `span` after the one before the first
        seqs = sorted({x, first_mark, (first_mark + 1) & MASK}, key=lambda q: (q - x) & MASK)
        assert seqs_of(run(seqs, keep=set(), gen=gen)) == [(first_mark, True)], gen
    assert first_span(0) == 1 << 29 and first_span(1) == 1 << 28 and first_span(29) == 1


def test_output_after_two_to_the_31_dropped_inputs_goes_through_the_switch() -> None:
    """Without the watermark frames the last output compares as older than the watermark (the
    output of x) and the switch drops it as a duplicate."""
    x = 7
    last = (x + (1 << 31) + 5) & MASK
    seqs = [x, (x + (1 << 30)) & MASK, (x + (1 << 31)) & MASK, last]
    frames = run(seqs, keep={x, last})
    dedup = OutputDedup()
    passed = [Shim.unpack(f, ETH_HDR_LEN).seq for f in frames if dedup.offer(f)]
    assert passed == [x, last]
    assert dedup.watermarks >= 1 and dedup.dropped == 0


def test_after_a_switch_restart_the_owner_resends_its_watermarks_before_new_output() -> None:
    """The switch restarted (its dedup and `last_epoch` registers lost): the first packet of the
    slot comes flagged FIRST_OF_EPOCH again within the owner's epoch 3. Before its output the
    owner sends a watermark frame at (3, its last output) and one at (2, that packet's number -
    1), so output of epoch 3 or 2 sent again after the restart (a promoted backup's log) is
    dropped by the emptied dedup, and the new output still passes. Without them the old output
    passes twice (simulation seed 20 of `--set switch_restarts=0.5`)."""
    from contract.shim import FLAG_FIRST_OF_EPOCH, Kind, encap

    def frame(seq: int, flags: int, n: int) -> bytes:
        return encap(Shim(Kind.PRIMARY, flags, SLOT, 3, 1, seq, 0x0800), checker_frame(1, n))

    async def go() -> list[bytes]:
        out: list[bytes] = []
        w = Worker(WorkerConfig(nf_id=1, batch_size=1, batch_time=0), Picky({10, 11, 20}),
                   MemoryStore(), lambda f: out.append(bytes(f)))
        w.assign([(SLOT, 3, 10)], as_backup=False)
        w.on_frame(frame(10, FLAG_FIRST_OF_EPOCH, 1))  # epoch 3 begins: no watermark
        w.on_frame(frame(11, 0, 2))
        w.on_frame(frame(20, FLAG_FIRST_OF_EPOCH, 3))  # the restart (numbering resumed ahead)
        w.expire_gaps(1e12)
        return out

    out = asyncio.run(go())
    shims = [(Shim.unpack(f, ETH_HDR_LEN).epoch, Shim.unpack(f, ETH_HDR_LEN).seq, is_watermark(f))
             for f in out]
    assert shims == [(3, 10, False), (3, 11, False), (3, 11, True), (2, 19, True), (3, 20, False)]
    restarted = OutputDedup()  # the switch after its restart
    assert [restarted.offer(f) for f in out[2:]] == [False, False, True]
    old = [encap(Shim(Kind.OUTPUT, 0, SLOT, e, 1, q, 0x0800), checker_frame(1, 9))
           for e, q in ((3, 10), (3, 11), (2, 7))]
    assert [restarted.offer(f) for f in old] == [False, False, False]  # re-emitted: dropped
