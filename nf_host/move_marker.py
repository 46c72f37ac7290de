"""A slot move's in-band marker: the adopter's output of a slot must not overtake the old owner's.

The old owner A of slot s releases it only after its last output of s has been handed to its
data socket (P5), but that output may still wait in the switch's queue for A's port while the
adopter B's first output, on another port, is already through: the switch accepts output of both
epochs, so the edge would see B's packets of s before A's last ones. To close that window A sends,
right after its last output and on the same port, a marker frame (shim kind MARKER, the slot, A's
epoch, A's last seq). The switch passes a marker, unstamped, to the slot's current primary, which
is B since the move's `slot_owner` write. A switch serves a port's frames in order, so once B has
the marker every output of A sent before it has left the switch's ingress. B therefore keeps the
slot ADOPTING (input waits in its pending buffer, unprocessed: no output of B exists yet) until it
has both the transfer and the marker; a marker that does not come within `MARKER_WAIT` (A died
mid-move, or the switch's queues are that long) is counted in `marker_timeouts` and B starts
anyway. docs/protocols.md §5 (P6) has the argument and the tests.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from contract.shim import ETH_HDR_LEN, ETHERTYPE_NFC, Kind, Shim

MIN_FRAME = 60  # Ethernet's minimum frame without FCS: the marker is padded to it


def marker_frame(nf_id: int, slot: int, stage: int, epoch: int, seq: int) -> bytes:
    """The marker NF `nf_id` sends after its last output of slot index `slot` (of `stage`) at
    `epoch`, whose last processed packet was `seq`. No payload: EtherType 0 after the shim."""
    src = bytes([0x02, 0, 0, 0]) + (nf_id & 0xFFFF).to_bytes(2, "big")  # locally administered
    shim = Shim(int(Kind.MARKER), 0, slot, epoch, nf_id, seq & 0xFFFFFFFF, 0, stage)
    frame = b"\xff" * 6 + src + ETHERTYPE_NFC.to_bytes(2, "big") + shim.pack()
    assert len(frame) == ETH_HDR_LEN + 16
    return frame + bytes(MIN_FRAME - len(frame))


@dataclass
class Parked:
    """A transfer that arrived before its marker: what the adopter starts the slot from."""

    state: Any           # the SlotState built from the transfer
    next_seq: int | None
    since: float         # time.monotonic() of the transfer
    started: asyncio.Event = field(default_factory=asyncio.Event)  # set once the slot started


@dataclass
class MarkerWait:
    """Per slot being adopted by this worker: whether the old owner's marker has arrived, and a
    transfer parked until it does (or until `wait` seconds have passed since the transfer)."""

    wait: float
    seen: set[int] = field(default_factory=set)            # marker here, transfer not yet
    parked: dict[int, Parked] = field(default_factory=dict)  # transfer here, marker not yet
    markers: int = 0           # markers that completed or preceded an adoption
    timeouts: int = 0          # adoptions started without their marker
    unexpected: int = 0        # markers for a slot not being adopted (late, after a timeout)

    def forget(self, slot: int) -> None:
        """A new adoption of `slot`, or one cancelled: nothing of an earlier one counts."""
        self.seen.discard(slot)
        self.parked.pop(slot, None)

    def on_marker(self, slot: int, adopting: bool) -> Parked | None:
        """A marker for `slot` arrived; returns the parked transfer to start from, if any."""
        if not adopting:
            self.unexpected += 1
            return None
        self.markers += 1
        parked = self.parked.pop(slot, None)
        if parked is None:
            self.seen.add(slot)
        return parked

    def on_transfer(self, slot: int, parked: Parked) -> bool:
        """The transfer of `slot` arrived: True to start at once (its marker came first), False
        if it is parked until the marker comes."""
        if slot in self.seen:
            self.seen.discard(slot)
            return True
        self.parked[slot] = parked
        return False

    def due(self, now: float) -> list[tuple[int, Parked]]:
        """Parked transfers whose marker did not come in time (counted), to start anyway."""
        late = [(s, p) for s, p in self.parked.items() if now - p.since >= self.wait]
        for slot, _ in late:
            del self.parked[slot]
        self.timeouts += len(late)
        return late
