"""The in-process API of p4sim: a loaded program, its tables and externs written, packets run.

A program is loaded by `p4sim.runtime.engine_loader`; the values this API takes and returns are
`p4sim.runtime.api_values`, its PRE part `switch_pre` and its name lookups `switch_names`.

All ids are P4Info ids and all values are unsigned Python ints bounded by the field's bit width.
One re-entrant lock guards the whole switch, so a table write is atomic with respect to packets.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Callable, Sequence

from finsy.proto import p4i

from p4sim.backend.p4info import build_p4info
from p4sim.runtime.api_values import (
    ActionCall,
    Match,
    P4simError,
    PackedOutputs,
    TableEntry,
    TableRef,
    bad,
    check_value,
)
from p4sim.runtime.meters import MeterArray, MeterConfig
from p4sim.runtime.model import Program
from p4sim.runtime.switch_names import NameLookup
from p4sim.runtime.switch_pre import PreApi
from p4sim.runtime.tables import BoundAction, Entry
from p4sim.runtime.v1model import V1Model


class Switch(PreApi, NameLookup):
    """One loaded program on the Python engine (`p4sim.runtime.engine_loader` chooses the engine)."""

    p4info: p4i.P4Info
    engine = "python"
    native_fallback: str | None = None  # why the native engine was asked for but is not running

    @property
    def warnings(self) -> list[str]:
        """Compiler warnings (``file:line:col: warning: ...``) about this program."""
        return [str(w) for w in self.prog.warnings]

    def __init__(self, prog: Program, config: bytes, p4info: p4i.P4Info | None = None,
                 cpu_port: int | None = None) -> None:
        self._lock = threading.RLock()
        self.prog = prog
        self._config = config
        self.p4info = p4info if p4info is not None else build_p4info(prog)
        self.cpu_port = cpu_port
        self.v1 = V1Model(prog, cpu_port)
        try:
            self._index()
        except KeyError as exc:
            raise bad(f"the P4Info does not describe this program: {exc} is not in it") from None
        self._install_const_entries()

    def device_config(self) -> bytes:
        return self._config

    def _index(self) -> None:
        info = self.p4info
        prog = self.prog
        self._actions: dict[int, str] = {a.preamble.id: a.preamble.name for a in info.actions}
        self._action_ids = {v: k for k, v in self._actions.items()}
        self._action_params: dict[int, list[tuple[int, str, int]]] = {
            a.preamble.id: [(p.id, p.name, p.bitwidth) for p in a.params] for a in info.actions}
        self._tables: dict[int, TableRef] = {}
        for t in info.tables:
            ti = prog.tables.get(t.preamble.name)
            if ti is None:
                raise bad(f"P4Info table {t.preamble.name} is not in the program")
            ref = TableRef(ti, ti.table, t.preamble.id, t.preamble.name, [mf.id for mf in t.match_fields])
            for ar in t.action_refs:
                ref.action_ids[ar.id] = self._actions[ar.id]
            self._tables[t.preamble.id] = ref
        self._profiles = {p.preamble.id: prog.profiles[p.preamble.name] for p in info.action_profiles}
        self._counters = {c.preamble.id: prog.counters[c.preamble.name] for c in info.counters}
        self._direct_counters = {c.preamble.id: prog.direct_counters[c.preamble.name] for c in info.direct_counters}
        self._registers = {r.preamble.id: prog.registers[r.preamble.name] for r in info.registers}
        self._meters = {m.preamble.id: prog.meters[m.preamble.name] for m in info.meters}
        self._digest_ids = {d.preamble.name: d.preamble.id for d in info.digests}
        self._digest_widths = {d.name: [m.width for m in d.members] for d in prog.digests.values()}

    def _install_const_entries(self) -> None:
        for ref in self._tables.values():
            ce = ref.info.const_entries
            if not ce:
                continue
            for c in ce:
                match = {}
                for fid, (kind, v, extra) in zip(ref.field_ids, c.specs, strict=True):
                    if kind == "lpm":
                        m = Match("lpm", v, prefix_len=extra)
                        if extra == 0:
                            continue
                    elif kind == "ternary":
                        if extra == 0:
                            continue
                        m = Match("ternary", v, mask=extra)
                    elif kind == "range":
                        m = Match("range", v, high=extra)
                    elif kind == "optional":
                        if not extra:
                            continue
                        m = Match("optional", v)
                    else:
                        m = Match("exact", v)
                    match[fid] = m
                aid = self._action_ids[c.action]
                params = {p[0]: v for p, v in zip(self._action_params[aid], c.args, strict=True)}
                prio = c.priority
                if ref.table.needs_priority and prio == 0:
                    prio = len(ce) - ce.index(c)
                e = TableEntry(ref.id, match, ActionCall(aid, params), priority=prio)
                self._insert(ref, e, check_const=False)

    # ------------------------------------------------------------------ packets
    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        with self._lock:
            return self.v1.process(port, bytes(data))

    def process_batch(self, packets: Sequence[tuple[int, bytes]]) -> list[list[tuple[int, bytes]]]:
        """The outputs of each of many (port, bytes) packets (one engine call on the native engine)."""
        with self._lock:
            return [self.v1.process(port, bytes(data)) for port, data in packets]

    def process_packed(self, packets: Sequence[tuple[int, bytes]]) -> PackedOutputs:
        """The outputs of many packets as two flat buffers (no Python object per output packet
        on the native engine: the cheapest way through either engine)."""
        data = bytearray()
        meta = array("I")
        with self._lock:
            for i, (port, pkt) in enumerate(packets):
                for out_port, out in self.v1.process(port, bytes(pkt)):
                    meta.extend((i, out_port, len(data), len(out)))
                    data += out
        return PackedOutputs(bytes(data), meta)

    def take_digests(self) -> list[tuple[int, list[bytes]]]:
        with self._lock:
            ctx = self.prog.ctx
            out = []
            for name, vals in ctx.digests:
                widths = self._digest_widths[name]
                out.append((self._digest_ids[name],
                            [int(v).to_bytes((w + 7) // 8, "big") for v, w in zip(vals, widths, strict=True)]))
            ctx.digests.clear()
            return out

    def set_trace(self, callback: Callable[[str], None] | None) -> None:
        with self._lock:
            self.v1.trace = callback
            self.prog.namespace["_T"] = callback
            self.prog.ctx.trace = callback

    # ------------------------------------------------------------------ tables
    def _table(self, table_id: int) -> TableRef:
        ref = self._tables.get(table_id)
        if ref is None:
            raise P4simError("NOT_FOUND", f"no table with id {table_id:#x}")
        return ref

    def _specs(self, ref: TableRef, e: TableEntry) -> tuple[object, ...]:
        info = ref.info
        specs: list[tuple[str, int, int | None]] = []
        for fid in e.match:
            if fid not in ref.field_ids:
                raise bad(f"table {ref.name}: no match field with id {fid}")
        for fid, k in zip(ref.field_ids, info.keys, strict=True):
            m = e.match.get(fid)
            what = f"table {ref.name} field {k.name}"
            full = (1 << k.width) - 1
            if m is None:
                if k.kind == "exact":
                    raise bad(f"{what}: exact match field is missing")
                specs.append({"lpm": ("lpm", 0, 0), "ternary": ("ternary", 0, 0), "range": ("range", 0, full),
                              "optional": ("optional", 0, 0)}[k.kind])
                continue
            if m.kind != k.kind:
                raise bad(f"{what}: is {k.kind}, got a {m.kind} match")
            check_value(what, m.value, k.width)
            if k.kind == "exact":
                specs.append(("exact", m.value, None))
            elif k.kind == "lpm":
                plen = m.prefix_len if m.prefix_len is not None else k.width
                if not 0 <= plen <= k.width:
                    raise bad(f"{what}: prefix length {plen} out of range")
                if m.value & ((1 << (k.width - plen)) - 1):
                    raise bad(f"{what}: value has bits set beyond the prefix length {plen}")
                specs.append(("lpm", m.value, plen))
            elif k.kind == "ternary":
                mask = full if m.mask is None else m.mask
                check_value(what + " mask", mask, k.width)
                if m.value & ~mask:
                    raise bad(f"{what}: value has bits set outside the mask")
                specs.append(("ternary", m.value, mask))
            elif k.kind == "range":
                high = m.value if m.high is None else m.high
                check_value(what + " high", high, k.width)
                if high < m.value:
                    raise bad(f"{what}: range low {m.value} is above high {high}")
                specs.append(("range", m.value, high))
            else:
                specs.append(("optional", m.value, 1))
        return ref.table.normalize(specs)

    def _bind_action(self, ref: TableRef, call: ActionCall, default: bool) -> tuple[BoundAction, tuple[int, ...]]:
        name = ref.action_ids.get(call.action_id)
        if name is None:
            raise bad(f"table {ref.name}: action id {call.action_id:#x} is not one of its actions")
        ba = ref.table.actions[name]
        if default and ba.scope == "TABLE_ONLY":
            raise bad(f"table {ref.name}: action {name} is @tableonly and cannot be the default")
        if not default and ba.scope == "DEFAULT_ONLY":
            raise bad(f"table {ref.name}: action {name} is @defaultonly and cannot be used in entries")
        return ba, self._action_args(name, call)

    def _action_args(self, name: str, call: ActionCall) -> tuple[int, ...]:
        params = self._action_params[call.action_id]
        known = {p[0] for p in params}
        for pid in call.params:
            if pid not in known:
                raise bad(f"action {name}: no parameter with id {pid}")
        args = []
        for pid, pname, width in params:
            if pid not in call.params:
                raise bad(f"action {name}: parameter {pname} is missing")
            v = call.params[pid]
            check_value(f"action {name} parameter {pname}", v, width)
            args.append(v)
        return tuple(args)

    def _make_entry(self, ref: TableRef, e: TableEntry) -> Entry:
        tbl = ref.table
        norm = self._specs(ref, e)
        if tbl.needs_priority:
            if e.priority <= 0:
                raise bad(f"table {ref.name}: entries need a priority > 0")
        elif e.priority != 0:
            raise bad(f"table {ref.name}: priority must be 0 for a table without ternary/range/optional keys")
        ent = Entry(norm, e.priority)
        if tbl.profile is not None:
            if e.action is not None:
                raise bad(f"table {ref.name}: entries of a table with an action profile name a member or group")
            if (e.member_id is None) == (e.group_id is None):
                raise bad(f"table {ref.name}: give exactly one of member_id and group_id")
            if e.member_id is not None and e.member_id not in tbl.profile.members:
                raise P4simError("NOT_FOUND", f"table {ref.name}: no member {e.member_id}")
            if e.group_id is not None:
                if not tbl.profile.selector:
                    raise bad(f"table {ref.name}: its action profile has no selector (no groups)")
                if e.group_id not in tbl.profile.groups:
                    raise P4simError("NOT_FOUND", f"table {ref.name}: no group {e.group_id}")
            ent.member_id, ent.group_id = e.member_id, e.group_id
        else:
            if e.action is None:
                raise bad(f"table {ref.name}: entry has no action")
            ba, args = self._bind_action(ref, e.action, False)
            ent.set_action(ba, args)
        return ent

    def _insert(self, ref: TableRef, e: TableEntry, check_const: bool = True) -> None:
        if check_const and ref.table.const_entries:
            raise bad(f"table {ref.name} has const entries and cannot be written")
        ent = self._make_entry(ref, e)
        if ent.key in ref.table.entries:
            raise P4simError("ALREADY_EXISTS", f"table {ref.name}: an entry with this key already exists")
        if len(ref.table.entries) >= ref.table.size:
            raise P4simError("RESOURCE_EXHAUSTED", f"table {ref.name} is full ({ref.table.size} entries)")
        ref.table.add(ent)
        ref.api[ent.key] = TableEntry(e.table_id, dict(e.match), e.action, e.member_id, e.group_id, e.priority)

    def table_insert(self, e: TableEntry) -> None:
        with self._lock:
            self._insert(self._table(e.table_id), e)

    def table_modify(self, e: TableEntry) -> None:
        with self._lock:
            ref = self._table(e.table_id)
            if ref.table.const_entries:
                raise bad(f"table {ref.name} has const entries and cannot be written")
            ent = self._make_entry(ref, e)
            old = ref.table.entries.get(ent.key)
            if old is None:
                raise P4simError("NOT_FOUND", f"table {ref.name}: no entry with this key")
            old.fn, old.args, old.res, old.action = ent.fn, ent.args, ent.res, ent.action
            old.member_id, old.group_id = ent.member_id, ent.group_id
            ref.api[ent.key] = TableEntry(e.table_id, dict(e.match), e.action, e.member_id, e.group_id, e.priority)

    def table_delete(self, e: TableEntry) -> None:
        with self._lock:
            ref = self._table(e.table_id)
            if ref.table.const_entries:
                raise bad(f"table {ref.name} has const entries and cannot be written")
            norm = self._specs(ref, e)
            key = (norm, e.priority)
            if key not in ref.table.entries:
                raise P4simError("NOT_FOUND", f"table {ref.name}: no entry with this key")
            ref.table.remove(key)
            ref.api.pop(key, None)

    def table_get(self, e: TableEntry) -> TableEntry | None:
        """The installed entry with the key (match and priority) of `e`, or None; O(1)."""
        with self._lock:
            ref = self._table(e.table_id)
            key = (self._specs(ref, e), e.priority)
            api = ref.api.get(key)
            if api is None:
                return None
            ent = ref.table.entries[key]
            return TableEntry(api.table_id, dict(api.match), api.action, api.member_id, api.group_id,
                              api.priority, ent.packets, ent.bytes)

    def table_entries(self, table_id: int) -> list[TableEntry]:
        with self._lock:
            ref = self._table(table_id)
            out = []
            for key, api in ref.api.items():
                ent = ref.table.entries[key]
                out.append(TableEntry(api.table_id, dict(api.match), api.action, api.member_id, api.group_id,
                                      api.priority, ent.packets, ent.bytes))
            return out

    def table_set_default(self, table_id: int, action: ActionCall | None) -> None:
        with self._lock:
            ref = self._table(table_id)
            info = ref.info
            if action is None:
                ref.table.set_default(ref.table.actions[info.default_action], info.default_args)
                return
            if info.const_default:
                raise bad(f"table {ref.name}: the default action is const")
            ba, args = self._bind_action(ref, action, True)
            ref.table.set_default(ba, args)

    def table_get_default(self, table_id: int) -> ActionCall:
        with self._lock:
            ref = self._table(table_id)
            name = ref.table.default_name
            aid = self._action_ids[name]
            params = {p[0]: v for p, v in zip(self._action_params[aid], ref.table.default_args, strict=True)}
            return ActionCall(aid, params)

    # ------------------------------------------------------------------ action profiles
    def _profile(self, profile_id: int) -> object:
        p = self._profiles.get(profile_id)
        if p is None:
            raise P4simError("NOT_FOUND", f"no action profile with id {profile_id:#x}")
        return p

    def _member_action(self, profile_id: int, action: ActionCall) -> tuple[BoundAction, tuple[int, ...]]:
        pi = self._profiles[profile_id]
        for tname in pi.tables:
            ref = next(r for r in self._tables.values() if r.name == tname)
            if action.action_id in ref.action_ids:
                return self._bind_action(ref, action, False)
        raise bad(f"action profile {pi.fqname}: action id {action.action_id:#x} is not an action of its tables")

    def member_insert(self, profile_id: int, member_id: int, action: ActionCall) -> None:
        with self._lock:
            self._profile(profile_id)
            prof = self._profiles[profile_id].profile
            if member_id in prof.members:
                raise P4simError("ALREADY_EXISTS", f"member {member_id} exists")
            if len(prof.members) >= prof.size:
                raise P4simError("RESOURCE_EXHAUSTED", f"action profile {prof.name} is full")
            prof.members[member_id] = self._member_action(profile_id, action)

    def member_modify(self, profile_id: int, member_id: int, action: ActionCall) -> None:
        with self._lock:
            self._profile(profile_id)
            prof = self._profiles[profile_id].profile
            if member_id not in prof.members:
                raise P4simError("NOT_FOUND", f"no member {member_id}")
            prof.members[member_id] = self._member_action(profile_id, action)

    def member_delete(self, profile_id: int, member_id: int, action: ActionCall | None = None) -> None:
        with self._lock:
            self._profile(profile_id)
            prof = self._profiles[profile_id].profile
            if member_id not in prof.members:
                raise P4simError("NOT_FOUND", f"no member {member_id}")
            if any(member_id in g for g in prof.groups.values()):
                raise P4simError("FAILED_PRECONDITION", f"member {member_id} is in a group")
            del prof.members[member_id]

    def members(self, profile_id: int) -> dict[int, ActionCall]:
        with self._lock:
            self._profile(profile_id)
            prof = self._profiles[profile_id].profile
            out = {}
            for mid, (ba, args) in prof.members.items():
                aid = self._action_ids[ba.name]
                out[mid] = ActionCall(aid, {p[0]: v for p, v in zip(self._action_params[aid], args, strict=True)})
            return out

    def _group_check(self, profile_id: int, member_ids: list[int], max_size: int) -> None:
        prof = self._profiles[profile_id].profile
        if not prof.selector:
            raise bad(f"action profile {prof.name} has no selector")
        for m in member_ids:
            if m not in prof.members:
                raise P4simError("NOT_FOUND", f"no member {m}")
        if max_size and len(member_ids) > max_size:
            raise P4simError("RESOURCE_EXHAUSTED", f"group has {len(member_ids)} members, max_size {max_size}")

    def group_insert(self, profile_id: int, group_id: int, member_ids: list[int], max_size: int = 0) -> None:
        with self._lock:
            self._profile(profile_id)
            prof = self._profiles[profile_id].profile
            if group_id in prof.groups:
                raise P4simError("ALREADY_EXISTS", f"group {group_id} exists")
            self._group_check(profile_id, member_ids, max_size)
            prof.groups[group_id] = list(member_ids)
            prof.group_max[group_id] = max_size

    def group_modify(self, profile_id: int, group_id: int, member_ids: list[int], max_size: int = 0) -> None:
        with self._lock:
            self._profile(profile_id)
            prof = self._profiles[profile_id].profile
            if group_id not in prof.groups:
                raise P4simError("NOT_FOUND", f"no group {group_id}")
            self._group_check(profile_id, member_ids, max_size or prof.group_max.get(group_id, 0))
            prof.groups[group_id] = list(member_ids)

    def group_delete(self, profile_id: int, group_id: int, member_ids: list[int] | None = None,
                     max_size: int = 0) -> None:
        with self._lock:
            self._profile(profile_id)
            prof = self._profiles[profile_id].profile
            if group_id not in prof.groups:
                raise P4simError("NOT_FOUND", f"no group {group_id}")
            del prof.groups[group_id]
            prof.group_max.pop(group_id, None)

    def groups(self, profile_id: int) -> dict[int, list[int]]:
        with self._lock:
            self._profile(profile_id)
            return {g: list(m) for g, m in self._profiles[profile_id].profile.groups.items()}

    # ------------------------------------------------------------------ counters and registers
    def _counter(self, counter_id: int, index: int) -> tuple[list[int], list[int]]:
        c = self._counters.get(counter_id)
        if c is None:
            raise P4simError("NOT_FOUND", f"no counter with id {counter_id:#x}")
        if not 0 <= index < c.size:
            raise P4simError("OUT_OF_RANGE", f"counter {c.fqname}: index {index} out of range (size {c.size})")
        return c.packets, c.bytes

    def counter_read(self, counter_id: int, index: int) -> tuple[int, int]:
        with self._lock:
            p, b = self._counter(counter_id, index)
            return p[index], b[index]

    def counter_write(self, counter_id: int, index: int, packets: int, bytes_: int) -> None:
        with self._lock:
            p, b = self._counter(counter_id, index)
            p[index], b[index] = packets, bytes_

    def counter_size(self, counter_id: int) -> int:
        with self._lock:
            c = self._counters.get(counter_id)
            if c is None:
                raise P4simError("NOT_FOUND", f"no counter with id {counter_id:#x}")
            return c.size

    def _direct_entry(self, table_id: int, e: TableEntry) -> Entry:
        ref = self._table(table_id)
        if ref.info.direct_counter is None:
            raise bad(f"table {ref.name} has no direct counter")
        key = (self._specs(ref, e), e.priority)
        ent = ref.table.entries.get(key)
        if ent is None:
            raise P4simError("NOT_FOUND", f"table {ref.name}: no entry with this key")
        return ent

    def direct_counter_read(self, table_id: int, e: TableEntry) -> tuple[int, int]:
        with self._lock:
            ent = self._direct_entry(table_id, e)
            return ent.packets, ent.bytes

    def direct_counter_write(self, table_id: int, e: TableEntry, packets: int, bytes_: int) -> None:
        with self._lock:
            ent = self._direct_entry(table_id, e)
            ent.packets, ent.bytes = packets, bytes_

    def _register(self, register_id: int) -> object:
        r = self._registers.get(register_id)
        if r is None:
            raise P4simError("NOT_FOUND", f"no register with id {register_id:#x}")
        return r

    def register_read(self, register_id: int, index: int) -> int:
        with self._lock:
            self._register(register_id)
            r = self._registers[register_id]
            if not 0 <= index < r.size:
                raise P4simError("OUT_OF_RANGE", f"register {r.fqname}: index {index} out of range (size {r.size})")
            return int(r.values[index])

    def register_write(self, register_id: int, index: int, value: int) -> None:
        with self._lock:
            self._register(register_id)
            r = self._registers[register_id]
            if not 0 <= index < r.size:
                raise P4simError("OUT_OF_RANGE", f"register {r.fqname}: index {index} out of range (size {r.size})")
            check_value(f"register {r.fqname}", value, r.width)
            r.values[index] = value

    def _meter(self, meter_id: int, index: int) -> MeterArray:
        mt = self._meters.get(meter_id)
        if mt is None:
            raise P4simError("NOT_FOUND", f"no meter with id {meter_id:#x}")
        if not 0 <= index < mt.size:
            raise P4simError("OUT_OF_RANGE", f"meter {mt.fqname}: index {index} out of range (size {mt.size})")
        return mt.meters

    def meter_read(self, meter_id: int, index: int) -> MeterConfig | None:
        """The configuration of one meter cell (None: unconfigured, every packet green)."""
        with self._lock:
            return self._meter(meter_id, index).config(index)

    def meter_write(self, meter_id: int, index: int, config: MeterConfig | None) -> None:
        """Configure one meter cell (its buckets full), or reset it with None."""
        with self._lock:
            meters = self._meter(meter_id, index)
            if config is not None:
                try:
                    config.check(f"meter {self._meters[meter_id].fqname}[{index}]")
                except ValueError as exc:
                    raise bad(str(exc)) from None
            meters.configure(index, config)

    def register_size(self, register_id: int) -> int:
        with self._lock:
            self._register(register_id)
            return self._registers[register_id].size

