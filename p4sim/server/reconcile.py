"""RECONCILE_AND_COMMIT to a different program: carry the controller-written state across.

Objects are matched by their P4Info names, not ids (a recompiled program may renumber them):
table entries (with their keys, actions and metadata), modified default actions, action profile
members and groups, multicast groups, clone sessions and digest configs are read from the running
pipeline, renamed to the new program's ids and written into the new pipeline. If any of them has no
counterpart (a table, field, action or parameter that is gone, or a width that no longer fits), the
whole reconcile fails with FAILED_PRECONDITION and the running pipeline stays. Counter and register
values are data-plane state and start from zero, as after a commit.
"""

from __future__ import annotations

from finsy.proto import p4r

from p4sim.server.errors import P4RuntimeError
from p4sim.server.pipeline import Pipeline
from p4sim.server.schema import Schema

_KINDS = (
    p4r.Entity(action_profile_member=p4r.ActionProfileMember()),
    p4r.Entity(action_profile_group=p4r.ActionProfileGroup()),
    p4r.Entity(table_entry=p4r.TableEntry()),
    p4r.Entity(
        packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
            multicast_group_entry=p4r.MulticastGroupEntry()
        )
    ),
    p4r.Entity(
        packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
            clone_session_entry=p4r.CloneSessionEntry()
        )
    ),
    p4r.Entity(digest_entry=p4r.DigestEntry()),
)


class _Renamer:
    """Maps ids of the old P4Info to ids of the new one through names."""

    def __init__(self, old: Schema, new: Schema) -> None:
        self.old, self.new = old, new
        self.tables = {n.name: i for i, n in new.tables.items()}
        self.actions = {n.name: i for i, n in new.actions.items()}
        self.profiles = {n.name: i for i, n in new.profiles.items()}
        self.digests = {n.name: i for i, n in new.digests.items()}

    def _fail(self, what: str) -> P4RuntimeError:
        return P4RuntimeError(
            "FAILED_PRECONDITION", f"cannot reconcile: {what} is not in the new program"
        )

    def table(self, old_id: int) -> int:
        name = self.old.tables[old_id].name
        if name not in self.tables:
            raise self._fail(f"table {name}")
        return self.tables[name]

    def action(self, a: p4r.Action) -> p4r.Action:
        old = self.old.actions[a.action_id]
        if old.name not in self.actions:
            raise self._fail(f"action {old.name}")
        new = self.new.actions[self.actions[old.name]]
        by_name = {p.name: p.id for p in new.params.values()}
        out = p4r.Action(action_id=new.id)
        for p in a.params:
            name = old.params[p.param_id].name
            if name not in by_name:
                raise self._fail(f"parameter {name} of action {old.name}")
            out.params.add(param_id=by_name[name], value=p.value)
        return out

    def table_entry(self, te: p4r.TableEntry) -> p4r.TableEntry:
        old_t = self.old.tables[te.table_id]
        new_t = self.new.tables[self.table(te.table_id)]
        fields = {f.name: f.id for f in new_t.fields.values()}
        out = p4r.TableEntry()
        out.CopyFrom(te)
        out.table_id = new_t.id
        for fm in out.match:
            name = old_t.fields[fm.field_id].name
            if name not in fields:
                raise self._fail(f"match field {name} of table {old_t.name}")
            fm.field_id = fields[name]
        if te.action.WhichOneof("type") == "action":
            out.action.action.CopyFrom(self.action(te.action.action))
        return out

    def profile(self, old_id: int) -> int:
        name = self.old.profiles[old_id].name
        if name not in self.profiles:
            raise self._fail(f"action profile {name}")
        return self.profiles[name]

    def entity(self, ent: p4r.Entity) -> p4r.Entity:
        kind = ent.WhichOneof("entity")
        if kind == "table_entry":
            return p4r.Entity(table_entry=self.table_entry(ent.table_entry))
        if kind == "action_profile_member":
            m = ent.action_profile_member
            return p4r.Entity(
                action_profile_member=p4r.ActionProfileMember(
                    action_profile_id=self.profile(m.action_profile_id),
                    member_id=m.member_id,
                    action=self.action(m.action),
                )
            )
        if kind == "action_profile_group":
            g = p4r.ActionProfileGroup()
            g.CopyFrom(ent.action_profile_group)
            g.action_profile_id = self.profile(g.action_profile_id)
            return p4r.Entity(action_profile_group=g)
        if kind == "digest_entry":
            name = self.old.digests[ent.digest_entry.digest_id].name
            if name not in self.digests:
                raise self._fail(f"digest {name}")
            return p4r.Entity(
                digest_entry=p4r.DigestEntry(
                    digest_id=self.digests[name], config=ent.digest_entry.config
                )
            )
        return ent  # PRE entries carry no P4Info ids


def carry_state(old: Pipeline, new: Pipeline) -> None:
    """Write the controller state of `old` into `new` (renamed by P4Info names), or raise."""
    renamer = _Renamer(old.schema, new.schema)
    updates: list[p4r.Update] = []
    try:
        for probe in _KINDS:
            for ent in old.read(probe):
                updates.append(p4r.Update(type=p4r.Update.INSERT, entity=renamer.entity(ent)))
        for table_id in sorted(old.defaults_written):
            probe = p4r.Entity(
                table_entry=p4r.TableEntry(table_id=table_id, is_default_action=True)
            )
            for default in old.read(probe):
                updates.append(p4r.Update(type=p4r.Update.MODIFY, entity=renamer.entity(default)))
        for update in updates:
            new.apply(update)
    except P4RuntimeError as exc:
        if exc.code == "FAILED_PRECONDITION":
            raise
        raise P4RuntimeError("FAILED_PRECONDITION", f"cannot reconcile: {exc.message}") from exc
