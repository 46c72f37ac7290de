"""The replication channel under bad input, in-process (workers on one loop, real loopback TCP):
a delta that cannot be applied, and what the server refuses (docs/protocols.md §6)."""

from __future__ import annotations

import pytest

from nf_host.harness import Switch, checker_frame, read_checker, strip_shim
from nf_host.replication import Message
from tests.nf_host.test_worker_inprocess import SLOT, Node, run, until

pytestmark = pytest.mark.unit


def test_a_delta_that_cannot_be_applied_breaks_the_link_and_no_later_ack_covers_it() -> None:
    """A bad delta followed by a good one: the good one's (cumulative) ack must not release the
    bad one's output. The link breaks instead, and the snapshot after reconnection releases it."""

    async def body() -> None:
        a, b = Node(1), Node(2)
        for n in (a, b):
            await n.w.start()
        try:
            a.w.assign([(SLOT, 1, 1)], as_backup=False)
            b.w.assign([(SLOT, 1, 1)], as_backup=True)
            a.w.set_backup(2, b.addr)
            await until(lambda: a.w.links[2].writer is not None and not a.w.commit.inflight,
                        "backup link synchronised")
            assert b.w.server is not None
            apply = b.w.server.handler
            refused: list[int] = []

            def handler(msg: Message) -> Message | None:
                if msg["t"] == "d" and not msg.get("full") and not refused:
                    refused.append(msg["b"])
                    raise ValueError("injected: this delta cannot be applied")
                return apply(msg)

            b.w.server.handler = handler
            unprotected: list[str] = []

            def tx(frame: bytes | bytearray) -> None:
                # at release, the backup must hold the state that produced the frame
                rec = read_checker(strip_shim(frame)[1])
                assert rec is not None
                flow, _no, count = rec
                rep = b.w.replicas.get(SLOT)
                state = rep.to_slot_state()[0].flows if rep is not None else {}
                held = [s["count"] for k, s in state.items() if k and 1000 + flow in (k[2], k[3])]
                if not held or held[0] < count:
                    unprotected.append(f"flow {flow} count {count} released, backup holds {held}")
                a.out.append(frame)

            a.w.tx = tx
            sw = Switch()
            for flow in range(1, 9):  # two batches of 4 (flows 1-4, then 5-8)
                a.w.on_frame(sw.stamp(SLOT, checker_frame(flow, 1), 1)[0])
            await until(lambda: len(a.out) == 8, "all output released after the resync")
            assert refused and b.w.server.errors == 1
            assert unprotected == []
            rep = b.w.replicas[SLOT]
            assert rep.last_seq == 8 and len(rep.flows) == 8
        finally:
            for n in (a, b):
                await n.w.stop()

    run(body)
