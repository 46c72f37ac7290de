"""The switch state the controller wants, as finsy entities, and the diff against what the switch holds.

Pure logic, no I/O: `EntityBuilder` turns the configuration, the current primary/backup pairs and the
slot map into the entries of the contract's tables (`port_role`, `nf_port`, `edge_forward`,
`slot_owner`, and the service chains' `nf_stage`, `edge_chain`, `stage_next`) and one multicast group
per primary ({primary port, rid 1}, {backup port, rid 2});
`diff()` compares two entity sets by their P4Runtime encoding and returns the inserts, modifies and
deletes that turn the actual state into the desired one (reconciliation after a reconnect).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from finsy import P4MulticastGroupEntry, P4Schema, P4TableAction, P4TableEntry, P4TableMatch
from finsy.p4entity import P4Replica

from contract.seq import SEQ_MASK
from controlplane.config import ControllerConfig, mac_to_int
from controlplane.p4names import P4Names
from controlplane.slot_map import SlotEntry, SlotMap

ROLE_EDGE = 1
ROLE_NF = 2
ROLE_CPU = 3
RID_PRIMARY = 1
RID_BACKUP = 2
SLOT_COUNTER = "slot_traffic"  # packets stamped per slot index (the numbering's count)

MANAGED_TABLES = ("port_role", "nf_port", "edge_forward", "slot_owner", "nf_stage", "edge_chain",
                  "stage_next")


@dataclass
class DesiredState:
    """Everything the controller installs: table entries and multicast groups."""

    tables: list[P4TableEntry] = field(default_factory=list)
    groups: list[P4MulticastGroupEntry] = field(default_factory=list)


@dataclass
class Diff:
    """Updates that make the switch equal to the desired state."""

    insert: list[P4TableEntry | P4MulticastGroupEntry] = field(default_factory=list)
    modify: list[P4TableEntry | P4MulticastGroupEntry] = field(default_factory=list)
    delete: list[P4TableEntry | P4MulticastGroupEntry] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.insert or self.modify or self.delete)

    def counts(self) -> dict[str, int]:
        return {"insert": len(self.insert), "modify": len(self.modify), "delete": len(self.delete)}


class EntityBuilder:
    """Builds contract entities with names resolved through the P4Info."""

    def __init__(self, names: P4Names, slot_count: int) -> None:
        self.names = names
        self.slot_count = slot_count  # slots per stage (1 << switch.slot_bits)
        self.port_role_t = names.table_action("port_role", ["port"], "set_port_role", ["role"])
        self.slot_owner_t = names.table_action(
            "slot_owner", ["stage", "slot"], "set_replica_group",
            ["group", "epoch", "primary", "seq_base"]
        )
        self.nf_stage_t = names.table_action("nf_stage", ["port"], "set_nf_stage", ["stage"])
        self.edge_chain_t = names.table_action("edge_chain", ["port"], "enter_chain",
                                               ["stage", "reverse"])
        self.stage_next_t = names.table_action("stage_next", ["stage", "reverse"], "to_stage",
                                               ["stage", "rehash"])
        self.nf_port_t = names.table_action("nf_port", ["port"], "set_nf_target", ["nf_id", "nf_mac"])
        self.edge_t = names.table_action(
            "edge_forward", ["dst_addr"], "forward_to_edge", ["port", "dst_mac"]
        )

    def port_role(self, port: int, role: int) -> P4TableEntry:
        t = self.port_role_t
        return P4TableEntry(
            t.table,
            match=P4TableMatch({t.fields["port"]: port}),
            action=P4TableAction(t.action, **{t.params["role"]: role}),
        )

    def nf_target(self, port: int, nf_id: int, mac: str) -> P4TableEntry:
        t = self.nf_port_t
        return P4TableEntry(
            t.table,
            match=P4TableMatch({t.fields["port"]: port}),
            action=P4TableAction(
                t.action, **{t.params["nf_id"]: nf_id, t.params["nf_mac"]: mac_to_int(mac)}
            ),
        )

    def edge_forward(self, prefix: str, port: int, mac: str) -> P4TableEntry:
        t = self.edge_t
        return P4TableEntry(
            t.table,
            match=P4TableMatch({t.fields["dst_addr"]: prefix}),
            action=P4TableAction(
                t.action, **{t.params["port"]: port, t.params["dst_mac"]: mac_to_int(mac)}
            ),
        )

    def slot_owner(self, entry: SlotEntry, group: int | None = None,
                   seq_base: int = 0) -> P4TableEntry:
        """The slot's entry, pointing at replica group `group` (default: its owner's id), with
        the `seq_base` the switch adds to the slot's count of stamped packets; the key is
        (stage, slot) of the slot index `entry.slot` (stage << slot_bits | slot)."""
        t = self.slot_owner_t
        stage, slot = divmod(entry.slot, self.slot_count)
        return P4TableEntry(
            t.table,
            match=P4TableMatch({t.fields["stage"]: stage, t.fields["slot"]: slot}),
            action=P4TableAction(
                t.action,
                **{
                    t.params["group"]: entry.owner if group is None else group,
                    t.params["epoch"]: entry.epoch,
                    t.params["primary"]: entry.owner,
                    t.params["seq_base"]: seq_base & SEQ_MASK,
                },
            ),
        )

    def nf_stage(self, port: int, stage: int) -> P4TableEntry:
        t = self.nf_stage_t
        return P4TableEntry(t.table, match=P4TableMatch({t.fields["port"]: port}),
                            action=P4TableAction(t.action, **{t.params["stage"]: stage}))

    def edge_chain(self, port: int, stage: int, reverse: bool) -> P4TableEntry:
        t = self.edge_chain_t
        return P4TableEntry(t.table, match=P4TableMatch({t.fields["port"]: port}),
                            action=P4TableAction(t.action, **{t.params["stage"]: stage,
                                                              t.params["reverse"]: int(reverse)}))

    def stage_next(self, stage: int, reverse: bool, to: int, rehash: bool) -> P4TableEntry:
        t = self.stage_next_t
        return P4TableEntry(
            t.table, match=P4TableMatch({t.fields["stage"]: stage, t.fields["reverse"]: int(reverse)}),
            action=P4TableAction(t.action, **{t.params["stage"]: to, t.params["rehash"]: int(rehash)}))

    def chain_entries(self, cfg: ControllerConfig) -> list[P4TableEntry]:
        """The chains' steering: each NF port's stage, each edge host's entry stage and
        direction, each stage's next stage per direction (none without chains: the
        program's defaults are stage 0, forward, then the edge)."""
        if not cfg.chains:
            return []
        stages = cfg.stages()
        out = [self.nf_stage(nf.port, cfg.stage_of(nf.id)) for nf in cfg.nfs]
        hosts = {h.name: h for h in cfg.edge}
        for chain in cfg.chains:
            mine = [st for st in stages if st.chain == chain.name]
            out += [self.edge_chain(hosts[h].port, mine[0].id, False) for h in chain.inside]
            out += [self.edge_chain(hosts[h].port, mine[-1].id, True) for h in chain.outside]
            for here, there in itertools.pairwise(mine):
                # leaving a stage that rewrites addresses, the slot is computed again
                out.append(self.stage_next(here.id, False, there.id, here.rewrites_addresses))
                out.append(self.stage_next(there.id, True, here.id, there.rewrites_addresses))
        return out

    @staticmethod
    def group(primary_id: int, primary_port: int, backup_port: int | None) -> P4MulticastGroupEntry:
        replicas = [P4Replica(primary_port, instance=RID_PRIMARY)]
        if backup_port is not None:
            replicas.append(P4Replica(backup_port, instance=RID_BACKUP))
        return P4MulticastGroupEntry(primary_id, replicas=replicas)

    def desired(
        self, cfg: ControllerConfig, pairs: Mapping[int, int | None], slot_map: SlotMap,
        groups: Mapping[int, int] | None = None, seq_bases: Mapping[int, int] | None = None,
    ) -> DesiredState:
        """The full state for `cfg`, primary->backup `pairs`, `slot_map`, each primary's
        replica group (`groups`; default: a primary's group id is its NF id) and each slot's
        `seq_bases` (default 0)."""
        groups = groups or {}
        seq_bases = seq_bases or {}
        state = DesiredState()
        for host in cfg.edge:
            state.tables.append(self.port_role(host.port, ROLE_EDGE))
        for nf in cfg.nfs:
            state.tables.append(self.port_role(nf.port, ROLE_NF))
        state.tables.append(self.port_role(cfg.switch.cpu_port, ROLE_CPU))
        for nf in cfg.nfs:
            state.tables.append(self.nf_target(nf.port, nf.id, nf.mac))
        for host in cfg.edge:
            for prefix in host.prefixes:
                state.tables.append(self.edge_forward(prefix, host.port, host.mac))
        state.tables.extend(self.chain_entries(cfg))
        for primary, backup in sorted(pairs.items()):
            backup_port = None if backup is None else cfg.nf(backup).port
            state.groups.append(
                self.group(groups.get(primary, primary), cfg.nf(primary).port, backup_port))
        state.tables.extend(
            self.slot_owner(e, groups.get(e.owner, e.owner), seq_bases.get(e.slot, 0))
            for e in slot_map.entries())
        return state


def _table_key(entry: P4TableEntry, schema: P4Schema) -> tuple[bytes, bytes]:
    msg = entry.encode_entry(schema)
    key = type(msg)(table_id=msg.table_id, priority=msg.priority)
    key.match.extend(sorted(msg.match, key=lambda m: m.field_id))
    return key.SerializeToString(deterministic=True), msg.action.SerializeToString(deterministic=True)


def _group_key(entry: P4MulticastGroupEntry) -> tuple[int, tuple[tuple[int, int], ...]]:
    return entry.multicast_group_id, tuple(replica_pairs(entry))


def replica_pairs(entry: P4MulticastGroupEntry) -> list[tuple[int, int]]:
    """A group's replicas as sorted (port, rid) pairs."""
    return sorted((r.port, r.instance) for r in _replicas(entry))


def entry_match(entry: P4TableEntry | P4MulticastGroupEntry) -> dict[str, Any]:
    """A table entry's match as a plain dict ({} for groups and default entries)."""
    if isinstance(entry, P4TableEntry) and entry.match is not None:
        return dict(entry.match)
    return {}


def entry_args(entry: P4TableEntry | P4MulticastGroupEntry) -> dict[str, Any]:
    """A table entry's direct action arguments ({} when it has none)."""
    if isinstance(entry, P4TableEntry) and isinstance(entry.action, P4TableAction):
        return dict(entry.action.args)
    return {}


def _replicas(entry: P4MulticastGroupEntry) -> list[P4Replica]:
    out = []
    for r in entry.replicas:
        if isinstance(r, P4Replica):
            out.append(r)
        elif isinstance(r, tuple):
            out.append(P4Replica(r[0], instance=r[1]))
        else:
            out.append(P4Replica(r))
    return out


def diff(
    desired: DesiredState,
    actual_tables: Iterable[P4TableEntry],
    actual_groups: Iterable[P4MulticastGroupEntry],
    schema: P4Schema,
) -> Diff:
    """What to write so that the switch's managed tables and groups equal `desired`."""
    out = Diff()
    have = {}
    for entry in actual_tables:
        if entry.is_default_action:
            continue
        key, action = _table_key(entry, schema)
        have[key] = (action, entry)
    for entry in desired.tables:
        key, action = _table_key(entry, schema)
        if key not in have:
            out.insert.append(entry)
        else:
            if have[key][0] != action:
                out.modify.append(entry)
            del have[key]
    out.delete.extend(entry for _, entry in have.values())
    groups = {g.multicast_group_id: _group_key(g) for g in actual_groups}
    for g in desired.groups:
        current = groups.pop(g.multicast_group_id, None)
        if current is None:
            out.insert.append(g)
        elif current != _group_key(g):
            out.modify.append(g)
    out.delete.extend(P4MulticastGroupEntry(gid) for gid in sorted(groups))
    return out
