"""Translation between P4Runtime messages and the engine's values, with the spec's validation.

Everything a client sends is checked here against the P4Info (`Schema`): ids, match kinds, widths,
LPM/ternary canonical forms, priorities, action parameters. Values that come back to the client are
always encoded as canonical bytestrings.
"""

from __future__ import annotations

from finsy.proto import p4r

from p4sim.server import bytestrings
from p4sim.server.engine import ActionCall, Match, TableEntry
from p4sim.server.errors import P4RuntimeError, invalid
from p4sim.server.schema import ActionInfo, FieldInfo, Schema, TableInfo

# A table entry's identity for lookups: the sorted match tuples plus the priority.
EntryKey = tuple[tuple[tuple[int, str, int, int, int, int], ...], int]

_SCOPE_TABLE_ONLY = 1
_SCOPE_DEFAULT_ONLY = 2


def match_from_p4(field: FieldInfo, fm: p4r.FieldMatch, table: str) -> Match | None:
    """One key field; None when the field is a don't-care that must be omitted."""
    what = f"table {table}, field {field.name}"
    kind = fm.WhichOneof("field_match_type")
    if kind is None:
        raise invalid(f"{what}: no match value")
    if kind != field.kind:
        raise invalid(f"{what}: match kind {kind} given, P4Info says {field.kind}")
    width = field.bitwidth
    if kind == "exact":
        return Match("exact", bytestrings.decode(fm.exact.value, width, what))
    if kind == "optional":
        return Match("optional", bytestrings.decode(fm.optional.value, width, what))
    if kind == "lpm":
        plen = fm.lpm.prefix_len
        value = bytestrings.decode(fm.lpm.value, width, what)
        if plen <= 0 or plen > width:
            raise invalid(f"{what}: prefix length {plen} not in 1..{width} (omit a /0 match)")
        host_bits = bytestrings.full_mask(width - plen)
        if value & host_bits:
            raise invalid(f"{what}: LPM value has bits set beyond the /{plen} prefix")
        return Match("lpm", value, prefix_len=plen)
    if kind == "ternary":
        value = bytestrings.decode(fm.ternary.value, width, what)
        mask = bytestrings.decode(fm.ternary.mask, width, what + " mask")
        if mask == 0:
            raise invalid(f"{what}: ternary mask is zero (omit a don't-care match)")
        if value & ~mask:
            raise invalid(f"{what}: ternary value has bits set outside the mask")
        return Match("ternary", value, mask=mask)
    if kind == "range":
        low = bytestrings.decode(fm.range.low, width, what + " low")
        high = bytestrings.decode(fm.range.high, width, what + " high")
        if low > high:
            raise invalid(f"{what}: range low {low} > high {high}")
        if low == 0 and high == bytestrings.full_mask(width):
            raise invalid(f"{what}: full range (omit a don't-care match)")
        return Match("range", low, high=high)
    raise P4RuntimeError("UNIMPLEMENTED", f"{what}: match kind {kind} not supported")


def match_to_p4(field_id: int, m: Match) -> p4r.FieldMatch:
    enc = bytestrings.encode
    if m.kind == "exact":
        return p4r.FieldMatch(field_id=field_id, exact=p4r.FieldMatch.Exact(value=enc(m.value)))
    if m.kind == "optional":
        return p4r.FieldMatch(
            field_id=field_id, optional=p4r.FieldMatch.Optional(value=enc(m.value))
        )
    if m.kind == "lpm":
        return p4r.FieldMatch(
            field_id=field_id,
            lpm=p4r.FieldMatch.LPM(value=enc(m.value), prefix_len=m.prefix_len or 0),
        )
    if m.kind == "ternary":
        return p4r.FieldMatch(
            field_id=field_id,
            ternary=p4r.FieldMatch.Ternary(value=enc(m.value), mask=enc(m.mask or 0)),
        )
    return p4r.FieldMatch(
        field_id=field_id, range=p4r.FieldMatch.Range(low=enc(m.value), high=enc(m.high or 0))
    )


def key_from_p4(table: TableInfo, te: p4r.TableEntry) -> dict[int, Match]:
    """The match key of an entry: every id known, no duplicates, every exact field present."""
    out: dict[int, Match] = {}
    for fm in te.match:
        field = table.fields.get(fm.field_id)
        if field is None:
            raise invalid(f"table {table.name}: unknown match field id {fm.field_id}")
        if fm.field_id in out:
            raise invalid(f"table {table.name}: match field {field.name} given twice")
        m = match_from_p4(field, fm, table.name)
        if m is not None:
            out[fm.field_id] = m
    for field in table.fields.values():
        if field.kind == "exact" and field.id not in out:
            raise invalid(f"table {table.name}: exact match field {field.name} is missing")
    return out


def entry_key(match: dict[int, Match], priority: int) -> EntryKey:
    return (
        tuple(
            sorted(
                (fid, m.kind, m.value, m.mask or 0, m.prefix_len or 0, m.high or 0)
                for fid, m in match.items()
            )
        ),
        priority,
    )


def action_from_p4(
    schema: Schema, action: p4r.Action, table: TableInfo | None, *, default: bool
) -> ActionCall:
    """An action call, checked against the table's action refs and the action's parameters."""
    info: ActionInfo = schema.action(action.action_id)
    if table is not None:
        scope = table.actions.get(action.action_id)
        if scope is None:
            raise invalid(f"table {table.name}: action {info.name} is not one of its actions")
        if default and scope == _SCOPE_TABLE_ONLY:
            raise invalid(f"table {table.name}: action {info.name} is @tableonly")
        if not default and scope == _SCOPE_DEFAULT_ONLY:
            raise invalid(f"table {table.name}: action {info.name} is @defaultonly")
    params: dict[int, int] = {}
    for p in action.params:
        pinfo = info.params.get(p.param_id)
        if pinfo is None:
            raise invalid(f"action {info.name}: unknown parameter id {p.param_id}")
        if p.param_id in params:
            raise invalid(f"action {info.name}: parameter {pinfo.name} given twice")
        params[p.param_id] = bytestrings.decode(
            p.value, pinfo.bitwidth, f"action {info.name}, parameter {pinfo.name}"
        )
    missing = [pi.name for pid, pi in info.params.items() if pid not in params]
    if missing:
        raise invalid(f"action {info.name}: missing parameter(s) {', '.join(missing)}")
    return ActionCall(action.action_id, params)


def action_to_p4(call: ActionCall) -> p4r.Action:
    return p4r.Action(
        action_id=call.action_id,
        params=[
            p4r.Action.Param(param_id=pid, value=bytestrings.encode(v))
            for pid, v in sorted(call.params.items())
        ],
    )


def table_entry_from_p4(schema: Schema, te: p4r.TableEntry, *, with_action: bool) -> TableEntry:
    """A (non-default) table entry; `with_action` is False for DELETE, where the action is ignored."""
    table = schema.table(te.table_id)
    match = key_from_p4(table, te)
    if table.needs_priority:
        if te.priority <= 0:
            raise invalid(f"table {table.name}: entries need a priority > 0")
    elif te.priority != 0:
        raise invalid(f"table {table.name}: priority must be 0 (no ternary/range/optional key)")
    if te.HasField("meter_config") or te.HasField("meter_counter_data"):
        raise P4RuntimeError("UNIMPLEMENTED", "meters are not supported by p4sim")
    if te.idle_timeout_ns:
        if not table.idle_timeout:
            raise invalid(f"table {table.name} does not support idle timeouts")
        raise P4RuntimeError("UNIMPLEMENTED", "idle timeouts are not supported by p4sim")
    entry = TableEntry(table_id=te.table_id, match=match, priority=te.priority)
    if te.HasField("counter_data"):
        entry.packets = te.counter_data.packet_count
        entry.bytes = te.counter_data.byte_count
    if not with_action:
        return entry
    kind = te.action.WhichOneof("type")
    if table.implementation_id:
        if kind == "action_profile_member_id":
            entry.member_id = te.action.action_profile_member_id
        elif kind == "action_profile_group_id":
            entry.group_id = te.action.action_profile_group_id
        elif kind == "action_profile_action_set":
            raise P4RuntimeError("UNIMPLEMENTED", "one-shot action selector programming")
        else:
            raise invalid(f"table {table.name}: needs an action profile member or group id")
    else:
        if kind != "action":
            raise invalid(f"table {table.name}: needs a direct action")
        entry.action = action_from_p4(schema, te.action.action, table, default=False)
    return entry


def table_entry_to_p4(e: TableEntry, *, with_counter: bool) -> p4r.TableEntry:
    out = p4r.TableEntry(
        table_id=e.table_id,
        match=[match_to_p4(fid, m) for fid, m in sorted(e.match.items())],
        priority=e.priority,
    )
    if e.member_id is not None:
        out.action.action_profile_member_id = e.member_id
    elif e.group_id is not None:
        out.action.action_profile_group_id = e.group_id
    elif e.action is not None:
        out.action.action.CopyFrom(action_to_p4(e.action))
    if with_counter:
        out.counter_data.packet_count = e.packets
        out.counter_data.byte_count = e.bytes
    return out


def replicas_from_p4(replicas: list[p4r.Replica], what: str) -> tuple[list[tuple[int, int]], bool]:
    """[(port, instance)] and whether the client used the `port` bytes form (P4Runtime >= 1.4)."""
    out: list[tuple[int, int]] = []
    as_bytes = False
    for r in replicas:
        kind = r.WhichOneof("port_kind")
        if kind == "port":
            port = bytestrings.decode(r.port, 32, f"{what} replica port")
            as_bytes = True
        else:
            port = r.egress_port
        if r.backup_replicas:
            raise P4RuntimeError("UNIMPLEMENTED", f"{what}: backup replicas")
        if (port, r.instance) in out:
            raise invalid(f"{what}: replica (port {port}, instance {r.instance}) given twice")
        out.append((port, r.instance))
    return out, as_bytes


def replicas_to_p4(replicas: list[tuple[int, int]], as_bytes: bool) -> list[p4r.Replica]:
    if as_bytes:
        return [p4r.Replica(port=bytestrings.encode(p), instance=i) for p, i in replicas]
    return [p4r.Replica(egress_port=p, instance=i) for p, i in replicas]
