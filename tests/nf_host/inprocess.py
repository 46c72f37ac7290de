"""The in-process worker tests' scaffolding: `Node`s (a `Worker` each, replicating over real
loopback TCP, fed frames directly, output collected; a move's marker handed to the other nodes as
the switch would), the usual set-ups of a slot (an owner alone, a primary with its backup) and
`HeldAcks` (a backup's acks held back, the order output leaves in recorded)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from contract.replication import Ack, Message
from contract.shim import Kind
from nf_host.global_state import MemoryStore
from nf_host.harness import Switch, checker_frame, strip_shim
from nf_host.nfs import make_nf
from nf_host.replication import Link
from nf_host.worker import Worker, WorkerConfig
from tests.support.procs import free_port

SLOT = 3


NODES: dict[int, Node] = {}  # the test's NFs by id: where the "switch" takes a move's marker


class Node:
    def __init__(self, nf_id: int, batch: int = 4, marker_wait: float = 0.5) -> None:
        self.out: list[bytes | bytearray] = []
        self.markers: list[bytes] = []  # move markers this NF sent
        self.port = free_port()
        self.w = Worker(
            WorkerConfig(nf_id=nf_id, batch_size=batch, batch_time=0, repl_port=self.port,
                         marker_wait=marker_wait),
            make_nf("checker"),
            MemoryStore(),
            self.tx,
        )
        NODES[nf_id] = self

    def tx(self, frame: bytes | bytearray) -> None:
        """Output goes to `out`; a move's marker, as the switch does, to the slot's new owner
        (here: every other NF, which ignores it unless it adopts the slot)."""
        if frame[14] == Kind.MARKER:
            self.markers.append(bytes(frame))
            for other in list(NODES.values()):
                if other is not self:
                    other.w.on_frame(bytes(frame))
            return
        self.out.append(frame)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"


async def until(cond: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    async def poll() -> None:
        while not cond():
            await asyncio.sleep(0.002)

    try:
        await asyncio.wait_for(poll(), timeout)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


def owner_of_slot(a: Node, packets: int) -> Switch:
    """`a` owns SLOT (epoch 1, from seq 1), alone, and has processed packets 1..`packets` of flow
    1; returns the switch that numbered them."""
    a.w.assign([(SLOT, 1, 1)], as_backup=False)
    sw = Switch()
    for no in range(1, packets + 1):
        a.w.on_frame(sw.stamp(SLOT, checker_frame(1, no), 1)[0])
    return sw


async def primary_with_backup(a: Node, b: Node) -> None:
    """`a` owns SLOT (epoch 1, from seq 1) and replicates to `b` (NF 2), which backs it up; returns
    once the replication link is up."""
    a.w.assign([(SLOT, 1, 1)], as_backup=False)
    b.w.assign([(SLOT, 1, 1)], as_backup=True)
    a.w.set_backup(2, b.addr)
    await until(lambda: 2 in a.w.links and a.w.links[2].writer is not None, "backup link")


def to_primary_and_backup(sw: Switch, a: Node, b: Node, numbers: range, slot: int = SLOT,
                          flow: int = 1) -> None:
    """Packets `numbers` of checker flow `flow` in `slot`, stamped by `sw` and handed as the switch
    does: the primary copy to `a` (port 1), the backup copy to `b` (port 2)."""
    for no in numbers:
        prim, copy = sw.stamp(slot, checker_frame(flow, no), 1, 2)
        assert copy is not None
        a.w.on_frame(prim)
        b.w.on_frame(copy)


@contextlib.asynccontextmanager
async def running(*nodes: Node) -> AsyncIterator[None]:
    """`nodes` started for the block, stopped after it, whatever it raised."""
    for n in nodes:
        await n.w.start()
    try:
        yield
    finally:
        for n in nodes:
            await n.w.stop()


def run(coro: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(coro(), 30))


class HeldAcks:
    """The order in which output leaves A (NF 1) and P (NF 3), as (nf, seq of the input) in
    `wire`, with A's move marker handed to P as the switch would; and the acks A's backup sends,
    held back in `held` (the backup is slow or hung) until `let_go`."""

    def __init__(self, a: Node, p: Node) -> None:
        self.wire: list[tuple[int, int]] = []
        self.held: list[tuple[Link, Message]] = []
        self.hold = True
        self.on_message = a.w.linkset.on_message
        a.w.tx = lambda f: p.w.on_frame(bytes(f)) if f[14] == Kind.MARKER \
            else self.wire.append((1, strip_shim(f)[0].seq))
        p.w.tx = lambda f: self.wire.append((3, strip_shim(f)[0].seq))
        a.w.linkset.on_message = self._acks_held  # type: ignore[method-assign]

    def _acks_held(self, link: Link, msg: Message) -> None:
        if self.hold and isinstance(msg, Ack):
            self.held.append((link, msg))
        else:
            self.on_message(link, msg)

    def let_go(self) -> None:
        """The backup answers again: the held acks arrive, and later ones pass."""
        self.hold = False
        for link, msg in self.held:
            self.on_message(link, msg)
