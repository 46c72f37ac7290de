"""An index of a P4Info message by id, with what the server needs to validate requests.

The server never trusts ids or widths sent by a client: an unknown id is INVALID_ARGUMENT, as in BMv2
(the message names the kind of object and the id).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from finsy.proto import p4i

from p4sim.server.errors import invalid

MATCH_KINDS = {
    p4i.MatchField.EXACT: "exact",
    p4i.MatchField.LPM: "lpm",
    p4i.MatchField.TERNARY: "ternary",
    p4i.MatchField.RANGE: "range",
    p4i.MatchField.OPTIONAL: "optional",
}


@dataclass(frozen=True)
class FieldInfo:
    id: int
    name: str
    bitwidth: int
    kind: str  # match kind for match fields, "" otherwise


@dataclass
class ActionInfo:
    id: int
    name: str
    params: dict[int, FieldInfo]


@dataclass
class TableInfo:
    id: int
    name: str
    fields: dict[int, FieldInfo]
    # action id -> scope (p4i.ActionRef.Scope)
    actions: dict[int, int]
    const_default: bool
    is_const: bool
    implementation_id: int
    direct_counter_id: int
    direct_meter_id: int
    size: int
    idle_timeout: bool = False

    @property
    def needs_priority(self) -> bool:
        return any(f.kind in ("ternary", "range", "optional") for f in self.fields.values())


@dataclass
class ProfileInfo:
    id: int
    name: str
    table_ids: list[int]
    with_selector: bool
    size: int
    max_group_size: int


@dataclass
class ArrayInfo:
    """An indexed extern: counter, register or meter."""

    id: int
    name: str
    size: int
    bitwidth: int = 0
    unit: int = 0


@dataclass
class DigestInfo:
    id: int
    name: str
    members: list[FieldInfo]


@dataclass
class Schema:
    """Everything of a P4Info the server looks up by id."""

    p4info: p4i.P4Info
    tables: dict[int, TableInfo] = field(default_factory=dict)
    actions: dict[int, ActionInfo] = field(default_factory=dict)
    profiles: dict[int, ProfileInfo] = field(default_factory=dict)
    counters: dict[int, ArrayInfo] = field(default_factory=dict)
    direct_counters: dict[int, int] = field(default_factory=dict)  # id -> table id
    registers: dict[int, ArrayInfo] = field(default_factory=dict)
    meters: dict[int, ArrayInfo] = field(default_factory=dict)
    digests: dict[int, DigestInfo] = field(default_factory=dict)
    packet_in: list[FieldInfo] = field(default_factory=list)
    packet_out: list[FieldInfo] = field(default_factory=list)

    @classmethod
    def build(cls, p4info: p4i.P4Info) -> Schema:
        s = cls(p4info)
        for a in p4info.actions:
            s.actions[a.preamble.id] = ActionInfo(
                a.preamble.id,
                a.preamble.name,
                {p.id: FieldInfo(p.id, p.name, p.bitwidth, "") for p in a.params},
            )
        direct_counter_by_table: dict[int, int] = {}
        for dc in p4info.direct_counters:
            s.direct_counters[dc.preamble.id] = dc.direct_table_id
            direct_counter_by_table[dc.direct_table_id] = dc.preamble.id
        direct_meter_by_table = {dm.direct_table_id: dm.preamble.id for dm in p4info.direct_meters}
        for t in p4info.tables:
            fields = {
                mf.id: FieldInfo(mf.id, mf.name, mf.bitwidth, MATCH_KINDS.get(mf.match_type, "?"))
                for mf in t.match_fields
            }
            s.tables[t.preamble.id] = TableInfo(
                id=t.preamble.id,
                name=t.preamble.name,
                fields=fields,
                actions={ref.id: ref.scope for ref in t.action_refs},
                const_default=t.const_default_action_id != 0,
                is_const=t.is_const_table,
                implementation_id=t.implementation_id,
                direct_counter_id=direct_counter_by_table.get(t.preamble.id, 0),
                direct_meter_id=direct_meter_by_table.get(t.preamble.id, 0),
                size=t.size,
                idle_timeout=t.idle_timeout_behavior == p4i.Table.NOTIFY_CONTROL,
            )
        for ap in p4info.action_profiles:
            s.profiles[ap.preamble.id] = ProfileInfo(
                ap.preamble.id,
                ap.preamble.name,
                list(ap.table_ids),
                ap.with_selector,
                ap.size,
                ap.max_group_size,
            )
        for c in p4info.counters:
            s.counters[c.preamble.id] = ArrayInfo(
                c.preamble.id, c.preamble.name, c.size, unit=c.spec.unit
            )
        for m in p4info.meters:
            s.meters[m.preamble.id] = ArrayInfo(m.preamble.id, m.preamble.name, m.size)
        for r in p4info.registers:
            width = r.type_spec.bitstring.bit.bitwidth or r.type_spec.bitstring.varbit.max_bitwidth
            s.registers[r.preamble.id] = ArrayInfo(r.preamble.id, r.preamble.name, r.size, width)
        for d in p4info.digests:
            s.digests[d.preamble.id] = DigestInfo(
                d.preamble.id, d.preamble.name, _digest_members(p4info, d)
            )
        for cpm in p4info.controller_packet_metadata:
            members = [FieldInfo(m.id, m.name, m.bitwidth, "") for m in cpm.metadata]
            if cpm.preamble.name == "packet_in":
                s.packet_in = members
            elif cpm.preamble.name == "packet_out":
                s.packet_out = members
        return s

    # lookups that raise the spec's error codes
    def table(self, table_id: int) -> TableInfo:
        t = self.tables.get(table_id)
        if t is None:
            raise invalid(f"unknown table id {table_id}")
        return t

    def action(self, action_id: int) -> ActionInfo:
        a = self.actions.get(action_id)
        if a is None:
            raise invalid(f"unknown action id {action_id}")
        return a

    def profile(self, profile_id: int) -> ProfileInfo:
        p = self.profiles.get(profile_id)
        if p is None:
            raise invalid(f"unknown action profile id {profile_id}")
        return p

    def counter(self, counter_id: int) -> ArrayInfo:
        c = self.counters.get(counter_id)
        if c is None:
            raise invalid(f"unknown counter id {counter_id}")
        return c

    def meter(self, meter_id: int) -> ArrayInfo:
        m = self.meters.get(meter_id)
        if m is None:
            raise invalid(f"unknown meter id {meter_id}")
        return m

    def register(self, register_id: int) -> ArrayInfo:
        r = self.registers.get(register_id)
        if r is None:
            raise invalid(f"unknown register id {register_id}")
        return r

    def digest(self, digest_id: int) -> DigestInfo:
        d = self.digests.get(digest_id)
        if d is None:
            raise invalid(f"unknown digest id {digest_id}")
        return d


def _digest_members(p4info: p4i.P4Info, d: p4i.Digest) -> list[FieldInfo]:
    """The members of a digest's struct type, in order, with their bit widths."""
    spec = d.type_spec
    if spec.HasField("struct"):
        struct = p4info.type_info.structs.get(spec.struct.name)
        if struct is None:
            return []
        out: list[FieldInfo] = []
        for i, m in enumerate(struct.members, start=1):
            width = m.type_spec.bitstring.bit.bitwidth or m.type_spec.bitstring.int.bitwidth
            out.append(FieldInfo(i, m.name, width, ""))
        return out
    if spec.HasField("bitstring"):
        return [FieldInfo(1, d.preamble.name, spec.bitstring.bit.bitwidth, "")]
    return []
