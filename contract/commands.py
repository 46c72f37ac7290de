"""The commands an NF's control server (`nf_host.control`, in its parent process) gives its worker
processes, one dataclass each, and their one decoder from the plain (name, arguments) form.

The gRPC calls of the NF control API (`contract/proto/nf_control.proto`) become these commands:
slot commands go to the worker that owns the slot, the others to every worker. The worker runs
them through a dispatch table (`nf_host.worker.Worker.run`); the peer policy learns its peers from
them (`nf_host.peer_policy.PeerPolicy.learn`). Tests and the simulation may give a command by
name and arguments (`Worker.command("release", {...})`): `decode` checks that form and makes the
command, raising `ValueError` for an unknown name or a missing or mistyped argument.

    name          command        arguments
    ping          Ping           -
    status        Status         -
    flows         Flows          slot
    set_role      SetRole        role (contract.roles.Role)
    set_backup    SetBackup      nf_id, address
    set_peers     SetPeers       peers: [(nf_id, address), ...]
    assign        Assign         slots: [(slot, epoch, next_seq or None), ...], as_backup, primary,
                                 adoption, from_nf, from_address
    adopt         Adopt          slot, epoch, from_nf, from_address
    cancel_adopt  CancelAdopt    slot, epoch, from_nf, from_address, copy_nf, copy_address
    release       Release        slot, to_nf, to_address, same_cluster, adopter_backup,
                                 adopter_backup_address
    arm_takeover  ArmTakeover    primary, successor, address
    switch_restarted  SwitchRestarted  -
    expect_give_back  ExpectGiveBack  slot, from_nf, from_address
    promote       Promote        slots, dead, backup, address, epochs: {slot: epoch}
    update_nf     UpdateNf       params, dry_run  (run by the worker process: it builds the NF)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Generic, TypeVar, cast

from contract.dispatch import DispatchTable
from contract.results import FenceResult, PromoteResult, ReleaseResult, SlotFlows, WorkerStatus
from contract.roles import Role

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class Returns(Generic[R_co]):
    """A command whose answer is an `R` (`RESULT` at run time; None: it answers nothing)."""

    __slots__ = ()
    RESULT: ClassVar[type[object]]
    NAME: ClassVar[str]


def answer(cmd: Returns[R], value: object) -> R:
    """`value` as `cmd`'s answer, checked against its `RESULT` (TypeError if it is not): the one
    place an answer that crossed a pipe or a dispatch table gets its type back."""
    if not isinstance(value, cmd.RESULT):
        raise TypeError(f"{cmd.NAME!r} answered a {type(value).__name__}, not a "
                        f"{cmd.RESULT.__name__}")
    return cast(R, value)


@dataclass(frozen=True, slots=True)
class Ping(Returns[None]):
    RESULT: ClassVar[type[object]] = type(None)
    NAME: ClassVar[str] = "ping"


@dataclass(frozen=True, slots=True)
class Status(Returns[WorkerStatus]):
    RESULT: ClassVar[type[object]] = WorkerStatus
    NAME: ClassVar[str] = "status"


@dataclass(frozen=True, slots=True)
class Flows(Returns[SlotFlows]):
    RESULT: ClassVar[type[object]] = SlotFlows
    NAME: ClassVar[str] = "flows"
    slot: int


@dataclass(frozen=True, slots=True)
class SetRole(Returns[None]):
    RESULT: ClassVar[type[object]] = type(None)
    NAME: ClassVar[str] = "set_role"
    role: Role


@dataclass(frozen=True, slots=True)
class SetBackup(Returns[None]):
    RESULT: ClassVar[type[object]] = type(None)
    NAME: ClassVar[str] = "set_backup"
    nf_id: int
    address: str


@dataclass(frozen=True, slots=True)
class SetPeers(Returns[None]):
    RESULT: ClassVar[type[object]] = type(None)
    NAME: ClassVar[str] = "set_peers"
    peers: list[tuple[int, str]]


@dataclass(frozen=True, slots=True)
class Assign(Returns[None]):
    RESULT: ClassVar[type[object]] = type(None)
    NAME: ClassVar[str] = "assign"
    slots: list[tuple[int, int, int | None]]
    as_backup: bool
    primary: int = 0  # with as_backup: the primary whose links the replication server accepts
    adoption: bool = False  # with as_backup: slots the primary is adopting (a move)
    # with adoption: the old owner, which sends copies of the tail it forwards here too (M18)
    from_nf: int = 0
    from_address: str = ""


@dataclass(frozen=True, slots=True)
class Adopt(Returns[None]):
    RESULT: ClassVar[type[object]] = type(None)
    NAME: ClassVar[str] = "adopt"
    slot: int
    epoch: int
    from_nf: int = 0
    from_address: str = ""


@dataclass(frozen=True, slots=True)
class CancelAdopt(Returns[FenceResult]):
    RESULT: ClassVar[type[object]] = FenceResult
    NAME: ClassVar[str] = "cancel_adopt"
    slot: int
    epoch: int
    from_nf: int = 0
    from_address: str = ""
    copy_nf: int = 0  # a copy of what is given back goes there too (M16)
    copy_address: str = ""


@dataclass(frozen=True, slots=True)
class Release(Returns[ReleaseResult]):
    RESULT: ClassVar[type[object]] = ReleaseResult
    NAME: ClassVar[str] = "release"
    slot: int
    to_nf: int
    to_address: str
    same_cluster: bool
    adopter_backup: int = 0  # may give the slot's copies back if the adopter dies (M14)
    adopter_backup_address: str = ""  # where copies of the forwarded tail go too (M18)


@dataclass(frozen=True, slots=True)
class ArmTakeover(Returns[None]):
    RESULT: ClassVar[type[object]] = type(None)
    NAME: ClassVar[str] = "arm_takeover"
    primary: int
    successor: int
    address: str


@dataclass(frozen=True, slots=True)
class ExpectGiveBack(Returns[None]):
    """`from_nf` may give back here what it buffered for its adoption of `slot` (M15)."""
    RESULT: ClassVar[type[object]] = type(None)
    NAME: ClassVar[str] = "expect_give_back"
    slot: int
    from_nf: int
    from_address: str = ""


@dataclass(frozen=True, slots=True)
class SwitchRestarted(Returns[None]):
    """The switch restarted: the output logged here that is known released is dropped."""
    RESULT: ClassVar[type[object]] = type(None)
    NAME: ClassVar[str] = "switch_restarted"


@dataclass(frozen=True, slots=True)
class Promote(Returns[PromoteResult]):
    RESULT: ClassVar[type[object]] = PromoteResult
    NAME: ClassVar[str] = "promote"
    slots: list[int]
    dead: int = 0
    backup: int = 0
    address: str = ""
    epochs: dict[int, int] = field(default_factory=dict)  # the switch's epoch of listed slots
    may_live: bool = False  # `dead` was declared down on silence alone (PromoteRequest)


@dataclass(frozen=True, slots=True)
class UpdateNf(Returns[None]):
    RESULT: ClassVar[type[object]] = type(None)
    NAME: ClassVar[str] = "update_nf"
    params: dict[str, object] = field(default_factory=dict)
    dry_run: bool = False


Command = (Ping | Status | Flows | SetRole | SetBackup | SetPeers | Assign | Adopt | CancelAdopt
           | Release | ArmTakeover | SwitchRestarted | ExpectGiveBack | Promote | UpdateNf)
COMMANDS = (Ping, Status, Flows, SetRole, SetBackup, SetPeers, Assign, Adopt, CancelAdopt, Release,
            ArmTakeover, SwitchRestarted, ExpectGiveBack, Promote, UpdateNf)
"""Every command class (an isinstance check that a value is a `Command`)."""


def as_command(cmd: Returns[object]) -> Command:
    """`cmd` as one of the commands (TypeError if it is none)."""
    if not isinstance(cmd, COMMANDS):
        raise TypeError(f"{cmd!r} is not a command")
    return cmd


# ---------------------------------------------------------------------------------- decoding
def _int(args: Mapping[str, object], key: str, default: int | None = None) -> int:
    v = args.get(key, default)
    if v is None and default is not None:
        return default
    if not isinstance(v, int) or isinstance(v, bool):
        raise ValueError(f"argument {key!r} is not an integer: {v!r}")
    return v


def _str(args: Mapping[str, object], key: str, default: str | None = None) -> str:
    v = args.get(key, default)
    if v is None and default is not None:
        return default
    if not isinstance(v, str):
        raise ValueError(f"argument {key!r} is not a string: {v!r}")
    return v


def _list(args: Mapping[str, object], key: str) -> list[object]:
    v = args.get(key)
    if not isinstance(v, list | tuple):
        raise ValueError(f"argument {key!r} is not a list: {v!r}")
    return list(v)


def _ints(items: object, n: int, what: str) -> tuple[object, ...]:
    if not isinstance(items, list | tuple) or len(items) != n:
        raise ValueError(f"{what} is not {n} values: {items!r}")
    return tuple(items)


def _params(args: Mapping[str, object]) -> dict[str, object]:
    v = args.get("params") or {}
    if not isinstance(v, Mapping) or not all(isinstance(k, str) for k in v):
        raise ValueError(f"argument 'params' is not a mapping by name: {v!r}")
    return {str(k): val for k, val in v.items()}


def _peer(item: object) -> tuple[int, str]:
    nf, address = _ints(item, 2, "a peer")
    return _int({"nf_id": nf}, "nf_id"), _str({"address": address}, "address")


def _slot_epoch(item: object) -> tuple[int, int, int | None]:
    slot, epoch, nxt = _ints(item, 3, "a slot assignment")
    return (_int({"slot": slot}, "slot"), _int({"epoch": epoch}, "epoch"),
            None if nxt is None else _int({"next_seq": nxt}, "next_seq"))


def _epochs(args: Mapping[str, object]) -> dict[int, int]:
    """A promotion's {slot: epoch} (absent: none given)."""
    v = args.get("epochs") or {}
    if not isinstance(v, Mapping):
        raise ValueError(f"argument 'epochs' is not a mapping: {v!r}")
    return {_int({"slot": s}, "slot"): _int({"epoch": e}, "epoch") for s, e in v.items()}


def _role(args: Mapping[str, object]) -> Role:
    try:
        return Role(_int(args, "role"))
    except ValueError:
        raise ValueError(f"role {args.get('role')!r} is not PRIMARY, BACKUP or IDLE") from None


_DECODE: dict[str, Callable[[Mapping[str, object]], Command]] = {
    "ping": lambda a: Ping(),
    "status": lambda a: Status(),
    "flows": lambda a: Flows(_int(a, "slot")),
    "set_role": lambda a: SetRole(_role(a)),
    "set_backup": lambda a: SetBackup(_int(a, "nf_id"), _str(a, "address")),
    "set_peers": lambda a: SetPeers([_peer(p) for p in _list(a, "peers")]),
    "assign": lambda a: Assign([_slot_epoch(s) for s in _list(a, "slots")],
                               bool(a.get("as_backup")), _int(a, "primary", 0),
                               bool(a.get("adoption")), _int(a, "from_nf", 0),
                               _str(a, "from_address", "")),
    "adopt": lambda a: Adopt(_int(a, "slot"), _int(a, "epoch"), _int(a, "from_nf", 0),
                             _str(a, "from_address", "")),
    "cancel_adopt": lambda a: CancelAdopt(_int(a, "slot"), _int(a, "epoch"), _int(a, "from_nf", 0),
                                          _str(a, "from_address", ""), _int(a, "copy_nf", 0),
                                          _str(a, "copy_address", "")),
    "release": lambda a: Release(_int(a, "slot"), _int(a, "to_nf"), _str(a, "to_address"),
                                 bool(a.get("same_cluster")), _int(a, "adopter_backup", 0),
                                 _str(a, "adopter_backup_address", "")),
    "arm_takeover": lambda a: ArmTakeover(_int(a, "primary"), _int(a, "successor"),
                                          _str(a, "address")),
    "switch_restarted": lambda a: SwitchRestarted(),
    "expect_give_back": lambda a: ExpectGiveBack(_int(a, "slot"), _int(a, "from_nf"),
                                                 _str(a, "from_address", "")),
    "promote": lambda a: Promote([_int({"slot": s}, "slot") for s in _list(a, "slots")],
                                 _int(a, "dead", 0), _int(a, "backup", 0), _str(a, "address", ""),
                                 _epochs(a)),
    "update_nf": lambda a: UpdateNf(_params(a), bool(a.get("dry_run"))),
}


def decode(name: str, args: Mapping[str, object] | None = None) -> Command:
    """The command of a (name, arguments) pair; ValueError if it is none."""
    make = _DECODE.get(name)
    if make is None:
        raise ValueError(f"unknown command {name!r}")
    return make(args or {})


# ---------------------------------------------------------------------------------- dispatch
class Dispatch(DispatchTable[Command, R]):
    """A runner's table: command type -> its handler, each registered with its own type
    (`contract.dispatch`); a command without a handler raises ValueError."""

    KINDS = COMMANDS
    ERROR = ValueError

    def describe(self, item: Command) -> str:
        return f"the command {item.NAME!r}"
