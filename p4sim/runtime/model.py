"""The compiled program as the runtime, the P4Info generator and the switch API see it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from p4sim.frontend import ast as A
from p4sim.runtime.meters import MeterArray
from p4sim.runtime.tables import Profile, Table


@dataclass
class KeyInfo:
    name: str
    kind: str
    width: int
    annotations: list[A.Annotation] = field(default_factory=list)


@dataclass
class ParamInfo:
    name: str
    width: int
    annotations: list[A.Annotation] = field(default_factory=list)


@dataclass
class ActionInfo:
    fqname: str
    params: list[ParamInfo]
    annotations: list[A.Annotation] = field(default_factory=list)


@dataclass
class ActionRefInfo:
    fqname: str
    scope: str  # TABLE_AND_DEFAULT, TABLE_ONLY, DEFAULT_ONLY
    annotations: list[A.Annotation] = field(default_factory=list)
    fn_name: str = ""  # generated function bound for this table


@dataclass
class ConstEntry:
    specs: list[tuple[str, int, int | None]]
    priority: int
    action: str
    args: tuple[int, ...]


@dataclass
class TableInfo:
    fqname: str
    keys: list[KeyInfo]
    actions: list[ActionRefInfo]
    default_action: str
    default_args: tuple[int, ...]
    const_default: bool
    size: int
    annotations: list[A.Annotation]
    table: Table
    const_entries: list[ConstEntry] | None = None
    implementation: str | None = None
    direct_counter: str | None = None
    selector_keys: int = 0


@dataclass
class CounterInfo:
    fqname: str
    size: int
    unit: str  # PACKETS, BYTES, BOTH
    packets: list[int]
    bytes: list[int]
    annotations: list[A.Annotation] = field(default_factory=list)


@dataclass
class DirectCounterInfo:
    fqname: str
    table: str
    unit: str
    annotations: list[A.Annotation] = field(default_factory=list)


@dataclass
class MeterInfo:
    fqname: str
    size: int
    unit: str  # PACKETS or BYTES
    meters: MeterArray
    annotations: list[A.Annotation] = field(default_factory=list)


@dataclass
class RegisterInfo:
    fqname: str
    size: int
    width: int
    values: list[int]
    annotations: list[A.Annotation] = field(default_factory=list)


@dataclass
class ProfileInfo:
    fqname: str
    tables: list[str]
    size: int
    selector: bool
    profile: Profile
    annotations: list[A.Annotation] = field(default_factory=list)


@dataclass
class DigestInfo:
    name: str
    members: list[ParamInfo]


@dataclass
class ControllerHeaderInfo:
    name: str  # "packet_in" / "packet_out"
    header: str
    fields: list[ParamInfo]


@dataclass
class Program:
    """Everything the v1model runtime needs to run packets through the compiled program."""

    source: str  # the generated Python module
    namespace: dict[str, Any]
    template: list[Any]
    errors: list[str]
    sm: dict[str, int]  # standard_metadata field -> slot
    hidden: dict[str, int]
    parser: Callable[..., Any]
    verify: Callable[..., Any]
    ingress: Callable[..., Any]
    egress: Callable[..., Any]
    compute: Callable[..., Any]
    deparser: Callable[..., Any]
    tables: dict[str, TableInfo]
    actions: dict[str, ActionInfo]
    counters: dict[str, CounterInfo]
    direct_counters: dict[str, DirectCounterInfo]
    registers: dict[str, RegisterInfo]
    meters: dict[str, MeterInfo]
    profiles: dict[str, ProfileInfo]
    digests: dict[str, DigestInfo]
    controller_headers: dict[str, ControllerHeaderInfo]
    field_lists: dict[int, list[int]]  # @field_list index -> metadata slots to preserve
    ctx: Any
    warnings: list[Any] = field(default_factory=list)  # diagnostics.Warning_
    # the user metadata's and standard_metadata's slots (an E2E clone starts with them reset)
    metadata_slots: tuple[range, ...] = ()
    # serializable enums: name -> (underlying width, member -> value), for P4Info's type_info
    ser_enums: dict[str, tuple[int, dict[str, int]]] = field(default_factory=dict)
