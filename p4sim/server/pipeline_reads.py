"""The reads of a committed pipeline (P4Runtime Read): one entity, wildcards included, answered
from the engine and the P4Runtime state kept beside it.

`PipelineReads` is a base of `p4sim.server.pipeline.Pipeline`, which holds that state.
"""

from __future__ import annotations

from collections.abc import Iterator

from finsy.proto import p4d, p4i, p4r

from p4sim.server import bytestrings, entities
from p4sim.server.digests import DigestBatcher
from p4sim.server.engine import P4simError, SwitchLike
from p4sim.server.errors import P4RuntimeError, invalid, unimplemented
from p4sim.server.schema import ArrayInfo, Schema

# said after BMv2's own words when p4sim runs with --no-register-access
REGISTERS_REFUSED = "(p4sim --no-register-access, as BMv2: p4lang/PI#376)"


class PipelineReads:
    """Read of a pipeline's entities (`Pipeline` holds the fields declared here)."""

    switch: SwitchLike
    p4info: p4i.P4Info
    schema: Schema
    digests: DigestBatcher
    _mc_meta: dict[int, tuple[bytes, bool]]
    _clone_meta: dict[int, tuple[int, int, bool]]
    _group_max: dict[tuple[int, int], int]
    _entry_meta: dict[tuple[int, entities.EntryKey], bytes]
    serve_registers: bool

    def _indices(self, info: ArrayInfo, has_index: bool, index: int, kind: str) -> list[int]:
        if not has_index:
            return list(range(info.size))
        if index < 0 or index >= info.size:
            raise P4RuntimeError(
                "OUT_OF_RANGE", f"{kind} {info.name}: index {index} not in 0..{info.size - 1}"
            )
        return [index]


    def read(self, entity: p4r.Entity) -> Iterator[p4r.Entity]:
        try:
            yield from self._read(entity)
        except P4simError as exc:
            raise P4RuntimeError(exc.code, str(exc)) from exc

    def _read(self, ent: p4r.Entity) -> Iterator[p4r.Entity]:
        kind = ent.WhichOneof("entity")
        if kind == "table_entry":
            yield from self._read_tables(ent.table_entry)
        elif kind == "action_profile_member":
            yield from self._read_members(ent.action_profile_member)
        elif kind == "action_profile_group":
            yield from self._read_groups(ent.action_profile_group)
        elif kind == "counter_entry":
            yield from self._read_counters(ent.counter_entry)
        elif kind == "direct_counter_entry":
            te = ent.direct_counter_entry.table_entry
            for out in self._read_tables(te, force_counter=True):
                e = out.table_entry
                yield p4r.Entity(
                    direct_counter_entry=p4r.DirectCounterEntry(
                        table_entry=p4r.TableEntry(
                            table_id=e.table_id, match=e.match, priority=e.priority
                        ),
                        data=e.counter_data,
                    )
                )
        elif kind == "register_entry":
            if not self.serve_registers:
                raise unimplemented(f"Register reads are not supported yet {REGISTERS_REFUSED}")
            yield from self._read_registers(ent.register_entry)
        elif kind == "meter_entry":
            yield from self._read_meters(ent.meter_entry)
        elif kind == "packet_replication_engine_entry":
            yield from self._read_pre(ent.packet_replication_engine_entry)
        elif kind == "digest_entry":
            d = ent.digest_entry
            ids = (
                [self.schema.digest(d.digest_id).id]
                if d.digest_id
                else sorted(self.digests.configs)
            )
            for i in ids:
                cfg = self.digests.configs.get(i)
                if cfg is not None:
                    yield p4r.Entity(digest_entry=p4r.DigestEntry(digest_id=i, config=cfg.to_p4()))
        elif kind is None:
            raise invalid("empty entity in read")
        else:
            raise unimplemented(f"reading {kind} is not supported by p4sim")

    def _read_tables(
        self, te: p4r.TableEntry, *, force_counter: bool = False
    ) -> Iterator[p4r.Entity]:
        if te.is_default_action:
            table = self.schema.table(te.table_id)
            if table.implementation_id:
                return
            call = self.switch.table_get_default(table.id)
            out = p4r.TableEntry(table_id=table.id, is_default_action=True)
            out.action.action.CopyFrom(entities.action_to_p4(call))
            yield p4r.Entity(table_entry=out)
            return
        tables = (
            [self.schema.table(te.table_id)] if te.table_id else list(self.schema.tables.values())
        )
        key: entities.EntryKey | None = None
        if te.match:
            if not te.table_id:
                raise invalid("a read with match fields needs a table id")
            match = entities.key_from_p4(tables[0], te)
            key = entities.entry_key(match, te.priority)
        for table in tables:
            with_counter = bool(table.direct_counter_id) and (
                te.HasField("counter_data") or force_counter
            )
            if force_counter and not table.direct_counter_id:
                if te.table_id:
                    raise invalid(f"table {table.name} has no direct counter")
                continue
            for e in self.switch.table_entries(table.id):
                ekey = entities.entry_key(e.match, e.priority)
                if key is not None and ekey != key:
                    continue
                if key is None and te.priority and e.priority != te.priority:
                    continue
                out = entities.table_entry_to_p4(e, with_counter=with_counter)
                meta = self._entry_meta.get((table.id, ekey))
                if meta:
                    out.metadata = meta
                yield p4r.Entity(table_entry=out)

    def _profiles(self, profile_id: int) -> list[int]:
        return [self.schema.profile(profile_id).id] if profile_id else sorted(self.schema.profiles)

    def _read_members(self, m: p4r.ActionProfileMember) -> Iterator[p4r.Entity]:
        for pid in self._profiles(m.action_profile_id):
            for mid, call in sorted(self.switch.members(pid).items()):
                if m.member_id and mid != m.member_id:
                    continue
                yield p4r.Entity(
                    action_profile_member=p4r.ActionProfileMember(
                        action_profile_id=pid, member_id=mid, action=entities.action_to_p4(call)
                    )
                )

    def _read_groups(self, g: p4r.ActionProfileGroup) -> Iterator[p4r.Entity]:
        for pid in self._profiles(g.action_profile_id):
            if not self.schema.profiles[pid].with_selector:
                continue
            for gid, member_ids in sorted(self.switch.groups(pid).items()):
                if g.group_id and gid != g.group_id:
                    continue
                weights: dict[int, int] = {}
                for mid in member_ids:
                    weights[mid] = weights.get(mid, 0) + 1
                yield p4r.Entity(
                    action_profile_group=p4r.ActionProfileGroup(
                        action_profile_id=pid,
                        group_id=gid,
                        members=[
                            p4r.ActionProfileGroup.Member(member_id=mid, weight=w)
                            for mid, w in weights.items()
                        ],
                        max_size=self._group_max.get((pid, gid), 0),
                    )
                )

    def _read_counters(self, c: p4r.CounterEntry) -> Iterator[p4r.Entity]:
        ids = (
            [self.schema.counter(c.counter_id).id] if c.counter_id else sorted(self.schema.counters)
        )
        for cid in ids:
            info = self.schema.counters[cid]
            for i in self._indices(info, c.HasField("index"), c.index.index, "counter"):
                packets, bytes_ = self.switch.counter_read(cid, i)
                yield p4r.Entity(
                    counter_entry=p4r.CounterEntry(
                        counter_id=cid,
                        index=p4r.Index(index=i),
                        data=p4r.CounterData(packet_count=packets, byte_count=bytes_),
                    )
                )

    def _read_meters(self, m: p4r.MeterEntry) -> Iterator[p4r.Entity]:
        ids = [self.schema.meter(m.meter_id).id] if m.meter_id else sorted(self.schema.meters)
        for mid in ids:
            info = self.schema.meters[mid]
            for i in self._indices(info, m.HasField("index"), m.index.index, "meter"):
                config = self.switch.meter_read(mid, i)
                out = p4r.MeterEntry(meter_id=mid, index=p4r.Index(index=i))
                if config is not None:
                    out.config.CopyFrom(p4r.MeterConfig(
                        cir=config.cir, cburst=config.cburst, pir=config.pir, pburst=config.pburst))
                yield p4r.Entity(meter_entry=out)

    def _read_registers(self, r: p4r.RegisterEntry) -> Iterator[p4r.Entity]:
        ids = (
            [self.schema.register(r.register_id).id]
            if r.register_id
            else sorted(self.schema.registers)
        )
        for rid in ids:
            info = self.schema.registers[rid]
            for i in self._indices(info, r.HasField("index"), r.index.index, "register"):
                value = self.switch.register_read(rid, i)
                yield p4r.Entity(
                    register_entry=p4r.RegisterEntry(
                        register_id=rid,
                        index=p4r.Index(index=i),
                        data=p4d.P4Data(bitstring=bytestrings.encode(value)),
                    )
                )

    def _read_pre(self, pre: p4r.PacketReplicationEngineEntry) -> Iterator[p4r.Entity]:
        kind = pre.WhichOneof("type")
        if kind == "multicast_group_entry":
            want = pre.multicast_group_entry.multicast_group_id
            for gid, replicas in sorted(self.switch.mc_groups().items()):
                if want and gid != want:
                    continue
                meta, as_bytes = self._mc_meta.get(gid, (b"", False))
                yield p4r.Entity(
                    packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                        multicast_group_entry=p4r.MulticastGroupEntry(
                            multicast_group_id=gid,
                            replicas=entities.replicas_to_p4(replicas, as_bytes),
                            metadata=meta,
                        )
                    )
                )
        elif kind == "clone_session_entry":
            want = pre.clone_session_entry.session_id
            for sid, replicas in sorted(self.switch.clone_sessions().items()):
                if want and sid != want:
                    continue
                cos, length, as_bytes = self._clone_meta.get(sid, (0, 0, False))
                yield p4r.Entity(
                    packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                        clone_session_entry=p4r.CloneSessionEntry(
                            session_id=sid,
                            replicas=entities.replicas_to_p4(replicas, as_bytes),
                            class_of_service=cos,
                            packet_length_bytes=length,
                        )
                    )
                )
        else:
            raise invalid("empty packet replication engine entry in read")
