"""One committed forwarding pipeline: the engine instance plus the P4Runtime state kept beside it.

`Pipeline.apply` performs one `p4r.Update` and returns the function that undoes it (used by the
ROLLBACK_ON_ERROR and DATAPLANE_ATOMIC modes); `Pipeline.read` answers one read entity, wildcards
included (`p4sim.server.pipeline_reads`). Engine errors (`P4simError`) become `P4RuntimeError`s with the same code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TypeVar

from finsy.proto import p4i, p4r

from p4sim.runtime.meters import MeterConfig
from p4sim.server import bytestrings, entities
from p4sim.server.digests import DigestBatcher, DigestConfig
from p4sim.server.engine import ActionCall, P4simError, SwitchLike, TableEntry
from p4sim.server.errors import P4RuntimeError, invalid, not_found, unimplemented
from p4sim.server.pipeline_reads import REGISTERS_REFUSED, PipelineReads
from p4sim.server.schema import ArrayInfo, Schema, TableInfo

Undo = Callable[[], None]
_V = TypeVar("_V")

_INSERT = p4r.Update.INSERT
_MODIFY = p4r.Update.MODIFY
_DELETE = p4r.Update.DELETE



def _noop() -> None:
    return None


@dataclass
class Pipeline(PipelineReads):
    """A P4 program running in the engine, with its P4Info, cookie and device config."""

    switch: SwitchLike
    p4info: p4i.P4Info
    device_config: bytes
    cookie: int
    schema: Schema = field(init=False)
    digests: DigestBatcher = field(init=False)
    _mc_meta: dict[int, tuple[bytes, bool]] = field(default_factory=dict)  # metadata, port-as-bytes
    _clone_meta: dict[int, tuple[int, int, bool]] = field(default_factory=dict)
    _group_max: dict[tuple[int, int], int] = field(default_factory=dict)
    # the opaque `metadata` bytes of table entries, which the engine does not keep
    _entry_meta: dict[tuple[int, entities.EntryKey], bytes] = field(default_factory=dict)
    # tables whose default action the controller changed (carried over by a reconcile)
    defaults_written: set[int] = field(default_factory=set)
    # False: register reads and writes are refused as BMv2's P4Runtime server refuses them
    # (UNIMPLEMENTED, p4lang/PI#376), so a controller can be checked against that on p4sim
    serve_registers: bool = True

    def __post_init__(self) -> None:
        self.schema = Schema.build(self.p4info)
        struct_ids = {d.preamble.id for d in self.p4info.digests if d.type_spec.HasField("struct")}
        self.digests = DigestBatcher(struct_ids)

    # ------------------------------------------------------------------ writes
    def apply(self, update: p4r.Update) -> Undo:
        try:
            return self._apply(update)
        except P4simError as exc:
            raise P4RuntimeError(exc.code, str(exc)) from exc

    def _apply(self, update: p4r.Update) -> Undo:
        kind = update.entity.WhichOneof("entity")
        op = update.type
        if op not in (_INSERT, _MODIFY, _DELETE):
            raise invalid("update type must be INSERT, MODIFY or DELETE")
        ent = update.entity
        if kind == "table_entry":
            return self._write_table(op, ent.table_entry)
        if kind == "action_profile_member":
            return self._write_member(op, ent.action_profile_member)
        if kind == "action_profile_group":
            return self._write_group(op, ent.action_profile_group)
        if kind == "counter_entry":
            return self._write_counter(op, ent.counter_entry)
        if kind == "direct_counter_entry":
            return self._write_direct_counter(op, ent.direct_counter_entry)
        if kind == "register_entry":
            if not self.serve_registers:
                raise unimplemented(f"Register writes are not supported yet {REGISTERS_REFUSED}")
            return self._write_register(op, ent.register_entry)
        if kind == "meter_entry":
            return self._write_meter(op, ent.meter_entry)
        if kind == "packet_replication_engine_entry":
            pre = ent.packet_replication_engine_entry
            if pre.WhichOneof("type") == "multicast_group_entry":
                return self._write_mc(op, pre.multicast_group_entry)
            if pre.WhichOneof("type") == "clone_session_entry":
                return self._write_clone(op, pre.clone_session_entry)
            raise invalid("empty packet replication engine entry")
        if kind == "digest_entry":
            return self._write_digest(op, ent.digest_entry)
        if kind is None:
            raise invalid("empty entity")
        raise unimplemented(f"writing {kind} is not supported by p4sim")


    def _write_table(self, op: int, te: p4r.TableEntry) -> Undo:
        table = self.schema.table(te.table_id)
        if te.is_default_action:
            return self._write_default(op, table, te)
        if table.is_const:
            raise P4RuntimeError("PERMISSION_DENIED", f"table {table.name} is const")
        entry = entities.table_entry_from_p4(self.schema, te, with_action=op != _DELETE)
        self._check_profile_refs(table, entry)
        sw = self.switch
        key = entities.entry_key(entry.match, entry.priority)
        mkey = (te.table_id, key)
        old_meta = self._entry_meta.get(mkey)
        counts = self._direct_counts(table, te)
        if op == _INSERT:
            sw.table_insert(entry)  # the engine refuses a duplicate key (ALREADY_EXISTS)
            if counts is not None:  # the entry's direct counter starts from the given data
                sw.direct_counter_write(table.id, entry, *counts)
            self._set_meta(mkey, te.metadata)

            def undo_insert() -> None:
                sw.table_delete(entry)
                self._set_meta(mkey, None)

            return undo_insert
        old = sw.table_get(entry)
        if old is None:
            raise not_found(f"table {table.name}: no such entry")
        if op == _MODIFY:
            if not te.HasField("counter_data"):
                entry.packets, entry.bytes = old.packets, old.bytes
            before = replace(old)
            sw.table_modify(entry)
            if counts is not None:
                sw.direct_counter_write(table.id, entry, *counts)
            self._set_meta(mkey, te.metadata)

            def undo_modify() -> None:
                sw.table_modify(before)
                if counts is not None:
                    sw.direct_counter_write(table.id, before, before.packets, before.bytes)
                self._set_meta(mkey, old_meta)

            return undo_modify
        sw.table_delete(entry)
        self._set_meta(mkey, None)

        def undo_delete() -> None:
            sw.table_insert(old)
            self._set_meta(mkey, old_meta)

        return undo_delete

    @staticmethod
    def _direct_counts(table: TableInfo, te: p4r.TableEntry) -> tuple[int, int] | None:
        """The (packets, bytes) an INSERT or MODIFY sets the entry's direct counter to, when it
        carries `counter_data`; a table without a direct counter refuses it."""
        if not te.HasField("counter_data"):
            return None
        if not table.direct_counter_id:
            raise invalid(f"table {table.name} has no direct counter: counter_data is not allowed")
        return te.counter_data.packet_count, te.counter_data.byte_count

    def _set_meta(self, mkey: tuple[int, entities.EntryKey], meta: bytes | None) -> None:
        if meta:
            self._entry_meta[mkey] = meta
        else:
            self._entry_meta.pop(mkey, None)

    def _check_profile_refs(self, table: TableInfo, entry: TableEntry) -> None:
        pid = table.implementation_id
        if entry.member_id is not None and entry.member_id not in self.switch.members(pid):
            raise not_found(f"table {table.name}: no action profile member {entry.member_id}")
        if entry.group_id is not None and entry.group_id not in self.switch.groups(pid):
            raise not_found(f"table {table.name}: no action profile group {entry.group_id}")

    def _write_default(self, op: int, table: TableInfo, te: p4r.TableEntry) -> Undo:
        if op != _MODIFY:
            raise invalid(f"table {table.name}: the default entry can only be modified")
        if te.match or te.priority:
            raise invalid(f"table {table.name}: a default entry has no match key or priority")
        if table.const_default:
            raise P4RuntimeError(
                "PERMISSION_DENIED", f"table {table.name}: default action is const"
            )
        if table.implementation_id:
            raise invalid(f"table {table.name}: default entry of an action profile table")
        action: ActionCall | None = None
        if te.HasField("action"):
            if te.action.WhichOneof("type") != "action":
                raise invalid(f"table {table.name}: the default entry needs a direct action")
            action = entities.action_from_p4(self.schema, te.action.action, table, default=True)
        old = self.switch.table_get_default(table.id)
        was_written = table.id in self.defaults_written
        sw = self.switch
        sw.table_set_default(table.id, action)
        if action is None:
            self.defaults_written.discard(table.id)
        else:
            self.defaults_written.add(table.id)

        def undo() -> None:
            sw.table_set_default(table.id, old)
            if not was_written:
                self.defaults_written.discard(table.id)

        return undo

    def _write_member(self, op: int, m: p4r.ActionProfileMember) -> Undo:
        prof = self.schema.profile(m.action_profile_id)
        sw = self.switch
        members = sw.members(prof.id)
        old = members.get(m.member_id)
        if op == _DELETE:
            if old is None:
                raise not_found(f"action profile {prof.name}: no member {m.member_id}")
            sw.member_delete(prof.id, m.member_id)
            return lambda: sw.member_insert(prof.id, m.member_id, old)
        tables = [self.schema.tables[t] for t in prof.table_ids if t in self.schema.tables]
        table = tables[0] if tables else None
        action = entities.action_from_p4(self.schema, m.action, table, default=False)
        if op == _INSERT:
            if old is not None:
                raise P4RuntimeError(
                    "ALREADY_EXISTS", f"action profile {prof.name}: member {m.member_id} exists"
                )
            sw.member_insert(prof.id, m.member_id, action)
            return lambda: sw.member_delete(prof.id, m.member_id)
        if old is None:
            raise not_found(f"action profile {prof.name}: no member {m.member_id}")
        sw.member_modify(prof.id, m.member_id, action)
        return lambda: sw.member_modify(prof.id, m.member_id, old)

    def _write_group(self, op: int, g: p4r.ActionProfileGroup) -> Undo:
        prof = self.schema.profile(g.action_profile_id)
        if not prof.with_selector:
            raise invalid(f"action profile {prof.name} has no selector: no groups")
        sw = self.switch
        old = sw.groups(prof.id).get(g.group_id)
        old_max = self._group_max.get((prof.id, g.group_id), 0)
        if op == _DELETE:
            if old is None:
                raise not_found(f"action profile {prof.name}: no group {g.group_id}")
            sw.group_delete(prof.id, g.group_id)
            self._group_max.pop((prof.id, g.group_id), None)
            return lambda: self._restore_group(prof.id, g.group_id, old, old_max, insert=True)
        member_ids: list[int] = []
        known = sw.members(prof.id)
        for gm in g.members:
            if gm.member_id not in known:
                raise not_found(f"action profile {prof.name}: no member {gm.member_id}")
            if gm.member_id in member_ids:
                raise invalid(f"action profile {prof.name}: member {gm.member_id} given twice")
            if gm.weight < 0:
                raise invalid(f"action profile {prof.name}: negative weight")
            member_ids.extend([gm.member_id] * max(1, gm.weight))
        limit = g.max_size or prof.max_group_size
        if prof.max_group_size and g.max_size > prof.max_group_size:
            raise P4RuntimeError(
                "RESOURCE_EXHAUSTED", f"action profile {prof.name}: max_size too big"
            )
        if limit and len(member_ids) > limit:
            raise P4RuntimeError("RESOURCE_EXHAUSTED", f"action profile {prof.name}: group too big")
        if op == _INSERT:
            if old is not None:
                raise P4RuntimeError(
                    "ALREADY_EXISTS", f"action profile {prof.name}: group {g.group_id} exists"
                )
            sw.group_insert(prof.id, g.group_id, member_ids, g.max_size)
            self._group_max[(prof.id, g.group_id)] = g.max_size

            def undo_insert() -> None:
                sw.group_delete(prof.id, g.group_id)
                self._group_max.pop((prof.id, g.group_id), None)

            return undo_insert
        if old is None:
            raise not_found(f"action profile {prof.name}: no group {g.group_id}")
        sw.group_modify(prof.id, g.group_id, member_ids, g.max_size)
        self._group_max[(prof.id, g.group_id)] = g.max_size
        return lambda: self._restore_group(prof.id, g.group_id, old, old_max, insert=False)

    def _restore_group(
        self, pid: int, gid: int, members: list[int], max_size: int, *, insert: bool
    ) -> None:
        if insert:
            self.switch.group_insert(pid, gid, members, max_size)
        else:
            self.switch.group_modify(pid, gid, members, max_size)
        self._group_max[(pid, gid)] = max_size

    def _write_cells(self, info: ArrayInfo, has_index: bool, index: int, kind: str,
                     read: Callable[[int], _V], write: Callable[[int, _V], None], value: _V) -> Undo:
        """Write `value` into one cell of an indexed extern, or every cell when no index is
        given; the undo writes back what each cell held."""
        olds = []
        for i in self._indices(info, has_index, index, kind):
            olds.append((i, read(i)))
            write(i, value)

        def undo() -> None:
            for i, old in olds:
                write(i, old)

        return undo

    def _write_counter(self, op: int, c: p4r.CounterEntry) -> Undo:
        if op != _MODIFY:
            raise invalid("counter entries can only be modified")
        if c.counter_id == 0:
            raise invalid("counter id 0 in a write")
        info = self.schema.counter(c.counter_id)
        sw = self.switch
        return self._write_cells(
            info, c.HasField("index"), c.index.index, "counter",
            lambda i: sw.counter_read(info.id, i),
            lambda i, v: sw.counter_write(info.id, i, *v),
            (c.data.packet_count, c.data.byte_count))

    def _write_meter(self, op: int, m: p4r.MeterEntry) -> Undo:
        """MODIFY only; with `config` the cells are configured (buckets full), without it they
        are reset (every packet green). No index: every cell of the meter."""
        if op != _MODIFY:
            raise invalid("meter entries can only be modified")
        if m.meter_id == 0:
            raise invalid("meter id 0 in a write")
        info = self.schema.meter(m.meter_id)
        c = m.config
        config = MeterConfig(c.cir, c.cburst, c.pir, c.pburst) if m.HasField("config") else None
        sw = self.switch
        return self._write_cells(
            info, m.HasField("index"), m.index.index, "meter",
            lambda i: sw.meter_read(info.id, i), lambda i, v: sw.meter_write(info.id, i, v), config)

    def _write_direct_counter(self, op: int, d: p4r.DirectCounterEntry) -> Undo:
        if op != _MODIFY:
            raise invalid("direct counter entries can only be modified")
        table = self.schema.table(d.table_entry.table_id)
        if not table.direct_counter_id:
            raise invalid(f"table {table.name} has no direct counter")
        probe = entities.table_entry_from_p4(self.schema, d.table_entry, with_action=False)
        old = self.switch.table_get(probe)
        if old is None:
            raise not_found(f"table {table.name}: no such entry")
        sw = self.switch
        before = (old.packets, old.bytes)
        sw.direct_counter_write(table.id, old, d.data.packet_count, d.data.byte_count)
        return lambda: sw.direct_counter_write(table.id, old, *before)

    def _write_register(self, op: int, r: p4r.RegisterEntry) -> Undo:
        if op != _MODIFY:
            raise invalid("register entries can only be modified")
        if r.register_id == 0:
            raise invalid("register id 0 in a write")
        info = self.schema.register(r.register_id)
        if r.data.WhichOneof("data") != "bitstring":
            raise invalid(f"register {info.name}: data must be a bitstring")
        value = bytestrings.decode(r.data.bitstring, info.bitwidth, f"register {info.name}")
        sw = self.switch
        return self._write_cells(
            info, r.HasField("index"), r.index.index, "register",
            lambda i: sw.register_read(info.id, i), lambda i, v: sw.register_write(info.id, i, v),
            value)

    def _write_mc(self, op: int, g: p4r.MulticastGroupEntry) -> Undo:
        gid = g.multicast_group_id
        if gid == 0:
            raise invalid("multicast group id 0")
        sw = self.switch
        old = sw.mc_groups().get(gid)
        old_meta = self._mc_meta.get(gid, (b"", False))
        if op == _DELETE:
            if old is None:
                raise not_found(f"no multicast group {gid}")
            sw.mc_group_delete(gid)
            self._mc_meta.pop(gid, None)

            def undo_delete() -> None:
                sw.mc_group_set(gid, old)
                self._mc_meta[gid] = old_meta

            return undo_delete
        replicas, as_bytes = entities.replicas_from_p4(list(g.replicas), f"multicast group {gid}")
        if op == _INSERT and old is not None:
            raise P4RuntimeError("ALREADY_EXISTS", f"multicast group {gid} exists")
        if op == _MODIFY and old is None:
            raise not_found(f"no multicast group {gid}")
        sw.mc_group_set(gid, replicas)
        self._mc_meta[gid] = (g.metadata, as_bytes)

        def undo() -> None:
            if old is None:
                sw.mc_group_delete(gid)
                self._mc_meta.pop(gid, None)
            else:
                sw.mc_group_set(gid, old)
                self._mc_meta[gid] = old_meta

        return undo

    def _write_clone(self, op: int, c: p4r.CloneSessionEntry) -> Undo:
        sid = c.session_id
        if sid == 0:
            raise invalid("clone session id 0")
        sw = self.switch
        old = sw.clone_sessions().get(sid)
        old_meta = self._clone_meta.get(sid, (0, 0, False))
        if op == _DELETE:
            if old is None:
                raise not_found(f"no clone session {sid}")
            sw.clone_session_delete(sid)
            self._clone_meta.pop(sid, None)

            def undo_delete() -> None:
                sw.clone_session_set(sid, old, old_meta[0], old_meta[1])
                self._clone_meta[sid] = old_meta

            return undo_delete
        if c.packet_length_bytes < 0:
            raise invalid(f"clone session {sid}: negative packet_length_bytes")
        replicas, as_bytes = entities.replicas_from_p4(list(c.replicas), f"clone session {sid}")
        if op == _INSERT and old is not None:
            raise P4RuntimeError("ALREADY_EXISTS", f"clone session {sid} exists")
        if op == _MODIFY and old is None:
            raise not_found(f"no clone session {sid}")
        sw.clone_session_set(sid, replicas, c.class_of_service, c.packet_length_bytes)
        self._clone_meta[sid] = (c.class_of_service, c.packet_length_bytes, as_bytes)

        def undo() -> None:
            if old is None:
                sw.clone_session_delete(sid)
                self._clone_meta.pop(sid, None)
            else:
                sw.clone_session_set(sid, old, old_meta[0], old_meta[1])
                self._clone_meta[sid] = old_meta

        return undo

    def _write_digest(self, op: int, d: p4r.DigestEntry) -> Undo:
        info = self.schema.digest(d.digest_id)
        old = self.digests.configs.get(info.id)
        if op == _INSERT and old is not None:
            raise P4RuntimeError("ALREADY_EXISTS", f"digest {info.name} is already configured")
        if op != _INSERT and old is None:
            raise not_found(f"digest {info.name} is not configured")
        if op == _DELETE:
            self.digests.configure(info.id, None)
        else:
            if (
                d.config.max_timeout_ns < 0
                or d.config.ack_timeout_ns < 0
                or d.config.max_list_size < 0
            ):
                raise invalid(f"digest {info.name}: negative config value")
            self.digests.configure(info.id, DigestConfig.from_p4(d.config))
        return lambda: self.digests.configure(info.id, old)
