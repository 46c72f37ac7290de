"""Who may use a worker's replication server, and for what: the bounds on what other NFs can make
a worker hold (docs/protocols.md §6 "Malformed input").

Every outgoing `Link` starts with a hello `{t: "h", nf, w, workers}` (`hello`). The server
(`ReplicationServer`) reads it within `HELLO_TIMEOUT` in a frame of at most `HELLO_MAX_FRAME`
bytes, and `PeerPolicy.admit` lets the connection in only if the sender is a *known peer* of this
NF: a member of its cluster (`SetClusterPeers`), an NF whose slots it backs up (`AssignSlots`
with `as_backup` and `primary_nf_id`), an NF it adopts a slot from (`Adopt.from_nf_id`), or one
that may give a slot back here (`ExpectGiveBack`); it
also checks that the sender runs the same number of workers, is the same worker index, and, when
its replication host is a known IP address, that the connection comes from that host. After the
hello, frames may be up to `max_frame` bytes (configured), and `check` decides per message:

- a delta (`d`) from a cluster peer or a primary it backs up: every slot must be one of this
  worker's (slot % workers == index), else the connection is refused (never skipped: acks are
  cumulative); from an NF it only adopts from (an inter-cluster move partner, whose first message
  is a snapshot of all its slots), only the entries of the slots adopted from it are kept, the
  others are dropped and counted (nothing of that NF's output waits for this ack);
- a transfer (`x`) or a forwarded packet (`f`): only for a slot adopted from the sender (or from
  a cluster peer when the adoption named no source), or given back by the NF it was released
  to or by that NF's backup (M11, M14), or by an adopter the controller said may give it back
  (`ExpectGiveBack`, M15: the NF holding the old owner's state may be of another cluster than
  the adopter); a released notice (`r`) only from a peer or a primary it backs up. Otherwise
  the message is dropped and counted.

The number of connections is bounded (`max_connections`). Every refusal is counted by reason in
`refused` (Status: `repl_refused`). The policy learns who is known from the control commands the
worker runs (`learn`). With `known_peers_only` off (in-process tests, benchmarks) a hello is
optional and only the frame, connection and worker-slot bounds apply.

The hello is a claim, not an authentication: the replication network must be trusted (see
docs/protocols.md §6). What the bound buys is that a stray or misconfigured sender cannot create
replicas, install state or inject packets, nor make a worker buffer large frames.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from contract.commands import Adopt, Assign, Command, ExpectGiveBack, Release, SetPeers
from contract.replication import (
    Delta,
    Forward,
    Hello,
    InputCopy,
    Message,
    Released,
    SlotState,
    Transfer,
)
from contract.shim import FRAME_SLOT
from nf_host.chunked import MAX_MESSAGE

log = logging.getLogger(__name__)

HELLO_MAX_FRAME = 4096
HELLO_TIMEOUT = 2.0

@dataclass
class PeerLimits:
    """What `nf-host run` configures (`--repl-max-frame-mb`, `--repl-max-connections`,
    `repl_known_peers_only`); the defaults here are the library's (in-process tests)."""

    max_frame: int = 64 * 1024 * 1024
    max_message: int = MAX_MESSAGE  # a message reassembled from fragments (nf_host/chunked.py)
    max_connections: int = 64
    known_peers_only: bool = False


class Refused(Exception):
    """A connection or message the policy refuses; `reason` names the counter."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def hello(nf_id: int, index: int, workers: int) -> Hello:
    """The first message of every link: who is sending."""
    return Hello(nf_id, index, workers)


def _same_host(expected: str, actual: str | None) -> bool:
    """Whether a connection from `actual` can come from an NF whose address host is `expected`
    (a host name, or an unspecified address, is not checked; loopback matches loopback)."""
    try:
        want = ipaddress.ip_address(expected.strip("[]"))
    except ValueError:
        return True
    if want.is_unspecified:
        return True
    if actual is None:
        return False
    try:
        got = ipaddress.ip_address(actual.split("%")[0])
    except ValueError:
        return False
    if isinstance(got, ipaddress.IPv6Address) and got.ipv4_mapped is not None:
        got = got.ipv4_mapped
    return got == want or (got.is_loopback and want.is_loopback)


class SlotSources:
    """Slot -> the NF (and its host) its packets may come from, with how many slots name each
    NF: an NF is known while any slot does."""

    def __init__(self) -> None:
        self._by_slot: dict[int, tuple[int, str]] = {}
        self._count: dict[int, int] = {}

    def set(self, slot: int, nf: int, host: str) -> None:
        old = self._by_slot.get(slot)
        if old is not None:
            self._count[old[0]] -= 1
            if not self._count[old[0]]:
                del self._count[old[0]]
        self._by_slot[slot] = (nf, host)
        self._count[nf] = self._count.get(nf, 0) + 1

    def get(self, slot: int) -> tuple[int, str] | None:
        return self._by_slot.get(slot)

    def nf_of(self, slot: int) -> int | None:
        src = self._by_slot.get(slot)
        return None if src is None else src[0]

    def names(self, nf: int) -> bool:
        return nf in self._count

    def hosts(self, nf: int) -> list[str]:
        return [h for src, h in self._by_slot.values() if src == nf and h]


def _host(address: str) -> str:
    return address.rpartition(":")[0].strip("[]")


class PeerPolicy:
    """See the module docstring."""

    def __init__(self, nf_id: int, index: int, workers: int, limits: PeerLimits) -> None:
        self.nf_id, self.index, self.workers = nf_id, index, workers
        self.limits = limits
        self.peers: dict[int, str] = {}  # cluster peers: nf id -> replication host
        self.primaries: set[int] = set()  # NFs whose slots this NF backs up
        self.adopting = SlotSources()  # slot -> (nf, host) it is adopted from
        # slot -> the NF it was last released to: that NF may give back the packets it buffered
        # for an adoption the move's fence cancelled (forwarded packets of that slot only)
        self.released_to: dict[int, int] = {}
        # slot -> the adopter's backup, which may give the slot's copies back (M14)
        self.released_to_backup: dict[int, int] = {}
        # slot -> (old owner, its host): the adoption our primary makes of it, whose forwarded
        # tail that old owner copies here (M18)
        self.tail_from = SlotSources()
        # slot -> the adopters (or their backups) the controller said may give it back here
        # (`ExpectGiveBack`, M15): at most every NF for every slot
        self.given_back_by: dict[int, set[int]] = {}
        self._givers: set[int] = set()  # every NF of those sets (`known` per message)
        self.refused: dict[str, int] = {}
        self._logged: set[tuple[str, int | None]] = set()
        # told the slots whose delta rows were dropped (their replicas are no longer whole)
        self.on_rows_dropped: Callable[[list[int]], None] | None = None

    # ------------------------------------------------------------------ learning
    def learn(self, cmd: Command) -> None:
        """Update the known peers from a control command (as the worker receives it)."""
        if isinstance(cmd, SetPeers):
            self.peers = {nf: _host(addr) for nf, addr in cmd.peers if nf != self.nf_id}
        elif isinstance(cmd, Assign) and cmd.as_backup and cmd.primary:
            self.primaries.add(cmd.primary)
            if cmd.adoption and cmd.from_nf:
                for slot, _epoch, _next in cmd.slots:
                    self.tail_from.set(slot, cmd.from_nf, _host(cmd.from_address))
        elif isinstance(cmd, Adopt):
            self.adopting.set(cmd.slot, cmd.from_nf, _host(cmd.from_address))
        elif isinstance(cmd, ExpectGiveBack):  # (as a release to it would: M15)
            self.given_back_by.setdefault(cmd.slot, set()).add(cmd.from_nf)
            self._givers.add(cmd.from_nf)
        elif isinstance(cmd, Release):
            self.released_to[cmd.slot] = cmd.to_nf
            if cmd.adopter_backup:
                self.released_to_backup[cmd.slot] = cmd.adopter_backup
            else:
                self.released_to_backup.pop(cmd.slot, None)

    def known(self, nf: int) -> bool:
        return (nf in self.peers or nf in self.primaries or self.adopting.names(nf)
                or nf in self.released_to.values() or nf in self.released_to_backup.values()
                or self.tail_from.names(nf)
                or nf in self._givers)

    def _trusted(self, nf: int | None) -> bool:
        """May send deltas of any of this worker's slots (a cluster peer, a primary backed up)."""
        return not self.limits.known_peers_only or nf in self.peers or nf in self.primaries

    # ------------------------------------------------------------------ counting
    def refuse(self, reason: str, sender: int | None, message: str) -> None:
        """Count a refusal; log the first of each (reason, sender)."""
        self.refused[reason] = self.refused.get(reason, 0) + 1
        key = (reason, sender)
        if key not in self._logged:
            self._logged.add(key)
            log.warning("replication: refused (%s): %s", reason, message)

    @property
    def refused_total(self) -> int:
        return sum(self.refused.values())

    # ------------------------------------------------------------------ decisions
    def admit(self, msg: Message, remote: str | None) -> int:
        """The sender of a connection whose first message is `msg` (a hello); raises Refused."""
        if not isinstance(msg, Hello):
            raise Refused("no_hello", f"first message from {remote} is {msg.T!r}, not a hello")
        nf, index, workers = msg.nf, msg.worker, msg.workers
        if workers != self.workers or index != self.index:
            raise Refused(
                "workers",
                f"NF {nf} worker {index} of {workers} connected to worker {self.index} of "
                f"{self.workers}: every NF must run the same number of workers",
            )
        if not self.limits.known_peers_only:
            return nf
        if not self.known(nf):
            raise Refused(
                "unknown_peer",
                f"NF {nf} (from {remote}) is not a cluster peer, a primary backed up here, "
                "or the source of a slot adopted here",
            )
        hosts = [h for n, h in self.peers.items() if n == nf]
        hosts += self.adopting.hosts(nf) + self.tail_from.hosts(nf)
        if hosts and not any(_same_host(h, remote) for h in hosts):
            raise Refused("wrong_address", f"NF {nf} connected from {remote}, expected {hosts[0]}")
        return nf

    def check(self, sender: int | None, msg: Message) -> Message | None:
        """The message to handle (a delta may lose entries), or None if it is dropped; raises
        Refused when the connection must be closed."""
        if sender is not None and self.limits.known_peers_only and not self.known(sender):
            raise Refused("unknown_peer", f"NF {sender} is no longer a known peer")
        if isinstance(msg, Delta):
            return self._check_delta(sender, msg)
        if isinstance(msg, Transfer | Forward):
            slot = self._slot_of(msg)
            if slot is None:
                return msg  # malformed: the worker's handler counts it and closes the connection
            fwd = isinstance(msg, Forward)
            # (a forwarded packet is input, as a copy is: one from a trusted sender, a cluster
            # peer or our primary, is what an undone move gives back to the NF that holds the
            # old owner's state now, its backup or the primary of its group, M15)
            # (or the tail an old owner forwards to the adopter we back up, copied here: M18)
            given_back = fwd and sender is not None and (self.released_to.get(slot) == sender
                                                         or self.released_to_backup.get(slot) == sender
                                                         or self.tail_from.nf_of(slot) == sender
                                                         or sender in self.given_back_by.get(slot, ())
                                                         or self._trusted(sender))
            if slot % self.workers != self.index or not (given_back or self._adopted_from(slot, sender)):
                self.refuse("slot", sender, f"{'forwarded packet' if fwd else 'transfer'} "
                                            f"of slot {slot} from NF {sender}, not adopted from it")
                return None
            return msg
        if isinstance(msg, InputCopy | SlotState) and not self._trusted(sender):
            self.refuse("slot", sender, f"input copy from NF {sender}, not a primary here")
            return None
        if isinstance(msg, Released) and not self._trusted(sender):
            self.refuse("slot", sender, f"release notice from NF {sender}, not a primary here")
            return None
        return msg

    def _check_delta(self, sender: int | None, msg: Delta) -> Delta | None:
        items = msg.rows
        if self._trusted(sender):
            for item in items:
                slot = item.slot
                if slot % self.workers != self.index:
                    raise Refused("slot", f"delta from NF {sender} for slot {slot}, which is not "
                                          f"handled by worker {self.index} of {self.workers}")
            return msg
        # an NF this one only adopts from: keep the adopted slots' entries, drop the rest
        keep = [item for item in items if self.adopting.nf_of(item.slot) == sender]
        dropped = [item.slot for item in items if self.adopting.nf_of(item.slot) != sender]
        if dropped:
            for _ in dropped:
                self.refuse("slot", sender, f"delta entries from NF {sender} for slots not "
                                            "adopted from it (dropped)")
            if self.on_rows_dropped is not None:  # those replicas now miss what the rows held
                self.on_rows_dropped(dropped)
            msg = replace(msg, rows=keep)
        return msg

    def _adopted_from(self, slot: int, sender: int | None) -> bool:
        if not self.limits.known_peers_only:
            return True
        src = self.adopting.get(slot)
        if src is None:
            return False
        return src[0] == sender or (src[0] == 0 and sender in self.peers)

    @staticmethod
    def _slot_of(msg: Transfer | Forward) -> int | None:
        if isinstance(msg, Transfer):
            return msg.slot
        frame = msg.frame
        if len(frame) < FRAME_SLOT + 2:
            return None
        return int.from_bytes(frame[FRAME_SLOT:FRAME_SLOT + 2], "big")
