"""A worker's replication links: opening one to another NF, the full snapshot every (re)connected
backup or peer gets first, and the answers that come back on it (acks, transfer answers), with
what each peer acknowledged. A part of the worker (`nf_host.worker` describes the whole), given a
narrow view of it (`LinkHost`) when it is built; what is sent on the links otherwise (deltas) is
`nf_host.commit_pipeline`'s.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from contract.replication import (
    Ack,
    Delta,
    LoggedBatch,
    Message,
    SlotRow,
    SlotStateAck,
    TransferAck,
)
from contract.roles import SlotRole
from nf_host.adopt_commit import AdoptCommit
from nf_host.commit import Batch, OutputCommit
from nf_host.move_marker import MarkerWait
from nf_host.peer_policy import hello
from nf_host.replication import Link, worker_address
from nf_host.transfers import Transfers
from nf_host.worker_types import PartHost, WorkerConfig


class LinkHost(PartHost, Protocol):
    """What `Links` sees of the worker: its configuration, the owned slots (a snapshot), the
    output commit (an ack releases batches), the adoptions and transfers an answer completes,
    and the sealing of the open batch before a snapshot."""

    @property
    def cfg(self) -> WorkerConfig: ...
    @property
    def commit(self) -> OutputCommit: ...
    @property
    def adopt_commit(self) -> AdoptCommit: ...
    @property
    def transfers(self) -> Transfers: ...
    def close_batch(self) -> None: ...
    def release_batch(self, batch: Batch) -> None: ...
    def maybe_resume(self) -> None: ...
    def for_backup(self, msg: Delta, logged: list[LoggedBatch]) -> Delta: ...
    @property
    def peer_ids(self) -> set[int]: ...
    @property
    def markers(self) -> MarkerWait: ...


class Links:
    """The worker's replication links (see the module docstring)."""

    def __init__(self, host: LinkHost) -> None:
        self._w = host
        self.links: dict[int, Link] = {}
        self.bytes_to: dict[int, int] = {}  # replication bytes sent, by destination NF (all links)
        self.pending_versions: dict[int, dict[int, dict[int, int]]] = {}  # nf -> batch -> slot->ver
        self.acked_versions: dict[int, dict[int, int]] = {}  # nf -> slot -> version it holds
        self.syncing: Link | None = None  # a link being sent its snapshot (see on_connected)

    def on_message(self, link: Link, msg: Message) -> None:
        """An answer on one of our links: an ack of our deltas, an adopter's answer to a
        transfer, our backup's ack of an adopted slot's state; anything else is counted."""
        if isinstance(msg, Ack):
            self._on_ack(link, msg)
        elif isinstance(msg, SlotStateAck) and link.nf_id == self._w.backup_id:
            self._w.adopt_commit.acked(msg.id)
        elif isinstance(msg, TransferAck):
            self._w.transfers.answered(msg)  # decides the slot, whoever still waits
        else:
            self._w.c.repl_errors += 1

    def _on_ack(self, link: Link, msg: Ack) -> None:
        bid = msg.batch
        pend = self.pending_versions.get(link.nf_id, {})
        acked = self.acked_versions.setdefault(link.nf_id, {})
        for b in sorted(x for x in pend if x <= bid):
            for slot, ver in pend.pop(b).items():
                acked[slot] = max(acked.get(slot, 0), ver)
        if link.nf_id == self._w.backup_id:
            for batch in self._w.commit.ack(bid):
                self._w.release_batch(batch)
            self._w.maybe_resume()

    def on_connected(self, link: Link) -> None:
        """A (re)connected backup or peer gets the full state of every slot we own (a sync).

        The snapshot is the first message on the new connection: the open batch is closed without
        sending its delta to this link (the snapshot includes it). Otherwise the link's ack of that
        delta, cumulative, would release earlier batches sent while the link was down before the
        snapshot covering them is applied."""
        if link.nf_id != self._w.backup_id and link.nf_id not in self._w.peer_ids:
            # a move's partner in another cluster (or a link only packets are forwarded on):
            # no delta goes to it, and it drops the rows of slots it did not adopt from us.
            # Such a link stays after its move; once its NF refuses us (no longer a partner),
            # each reconnection, every second, sent it a snapshot of every slot we own and
            # kept that snapshot's versions waiting for an ack that never came: 44 MiB in
            # 10 minutes at 1,012 slots (the soak of 2026-11-27)
            return
        self.syncing = link
        try:
            self._w.close_batch()
        finally:
            self.syncing = None
        batch = self._w.commit.new_batch(time.monotonic())
        rows: list[SlotRow] = []
        versions: dict[int, int] = {}
        for slot, rt in self._w.slots.items():
            parked = self._w.markers.parked.get(slot) if rt.role == SlotRole.ADOPTING else None
            st = rt.state
            if parked is not None:
                # adopted, its marker not in yet: the state it starts from is ours to protect
                # (an adopter's backup adopting in its place, M18: its own backup promoted the
                # slot from nothing when it died too; simulation, adopter kills, seed 123)
                st = parked.state
            # a slot whose transfer is unanswered is still ours (it stays if the move fails), and
            # its last batches' output waits for this link's ack: its state is in the snapshot
            elif rt.role == SlotRole.PRIMARY:
                st.seal()  # new flows since the last batch get a version too
            elif rt.role != SlotRole.RELEASED or rt.forward is not None or rt.given_back:
                continue  # (given back: never owned here, nothing to sync)
            elif rt.release is not None and rt.release.to_nf == link.nf_id:
                continue  # not to the adopter: one that started the slot refuses it (StaleSender)
            versions[slot] = st.version
            rows.append(SlotRow(slot, rt.epoch, st.version, st.last_seq, st.everything(), False,
                                st.gen))
            if parked is None and st.last_seq is not None:  # (nothing processed here yet)
                batch.slot_seqs[slot] = st.last_seq
        msg = Delta(batch.id, rows, True, self._w.cfg.nf_id)
        if link.nf_id == self._w.backup_id:
            # the batches still waiting for an ack may have reached no backup at all (a new
            # one, or the old link's frames were lost): the new backup logs their output too
            held = [entry for b in self._w.commit.inflight for entry in b.logged()]
            msg = self._w.for_backup(msg, held)
        link.send(msg)
        # the snapshot covers every batch sent on an earlier connection, which no ack will come
        # for now (acks come on the connection that carried the batch): only its versions wait
        self.pending_versions[link.nf_id] = {batch.id: versions}
        if link.nf_id == self._w.backup_id:
            self._w.commit.hold(batch)

    def link(self, nf_id: int, address: str) -> Link:
        """Our link to `nf_id` at `address` (made if new, remade if the address changed). Only
        our backup and our cluster peers get a snapshot on connecting (`on_connected`): a
        link to another NF carries a move's messages or forwarded packets (the tail's copies
        to an adopter's backup, M18, whose NF holds the adopter's newer state of the released
        slot and refused the slot's row as a stale sender's, closing the link they ride on)."""
        link = self.links.get(nf_id)
        addr = worker_address(address, self._w.cfg.index)
        if link is not None and link.address == addr:
            return link
        if link is not None:
            asyncio.get_running_loop().create_task(link.close())
        self.pending_versions.pop(nf_id, None)
        self.acked_versions.pop(nf_id, None)
        link = Link(nf_id, addr, self.on_message, self.on_connected,
                    hello=hello(self._w.cfg.nf_id, self._w.cfg.index, self._w.cfg.workers),
                    tally=self.bytes_to, chunk=self._w.cfg.repl_chunk)
        self.links[nf_id] = link
        return link
