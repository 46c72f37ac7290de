"""P4Info name lookup by unique suffix, so the controller names objects the way the contract does.

The data-plane contract uses short names (`slot_owner`, `set_replica_group`, `slot_traffic`); the P4Info
holds fully qualified ones (`NfcIngress.slot_map.slot_owner`). `P4Names` resolves a short name to the
one object whose full name equals it or ends in `.<short>`, and fails with the candidates otherwise.
The same controller therefore drives p4sim, BMv2 and Tofino, whatever the control nesting.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from finsy import P4Schema


class P4NameError(LookupError):
    """A short name that matches no object, or more than one."""


def resolve_suffix(kind: str, short: str, names: Iterable[str]) -> str:
    """The one name in `names` equal to `short` or ending in `.short`."""
    names = list(names)
    if short in names:
        return short
    hits = [n for n in names if n.endswith("." + short)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise P4NameError(f"no {kind} named {short!r} in the P4Info (have: {', '.join(sorted(names))})")
    raise P4NameError(f"{kind} name {short!r} is ambiguous: {', '.join(sorted(hits))}")


@dataclass(frozen=True)
class TableNames:
    """The resolved names of one table, its match fields and one action with its params."""

    table: str
    fields: dict[str, str]
    action: str
    params: dict[str, str]


class P4Names:
    """Resolves contract names against one P4Info."""

    def __init__(self, schema: P4Schema) -> None:
        self.schema = schema

    def table(self, short: str) -> str:
        return resolve_suffix("table", short, (t.name for t in self.schema.tables))

    def action(self, short: str) -> str:
        return resolve_suffix("action", short, (a.name for a in self.schema.actions))

    def counter(self, short: str) -> str:
        return resolve_suffix("counter", short, (c.name for c in self.schema.counters))

    def register(self, short: str) -> str:
        return resolve_suffix("register", short, (r.name for r in self.schema.registers))

    def digest(self, short: str) -> str:
        return resolve_suffix("digest", short, (d.name for d in self.schema.digests))

    def table_action(self, table_short: str, fields: Iterable[str], action_short: str,
                     params: Iterable[str]) -> TableNames:
        """Resolve a table, its key fields, an action of the table and the action's params."""
        table_name = self.table(table_short)
        table = self.schema.tables[table_name]
        field_names = [f.name for f in table.match_fields]
        resolved_fields = {f: resolve_suffix(f"match field of {table_name}", f, field_names)
                           for f in fields}
        action_name = resolve_suffix(f"action of {table_name}", action_short,
                                     (a.name for a in table.actions))
        action = self.schema.actions[action_name]
        param_names = [p.name for p in action.params]
        resolved_params = {p: resolve_suffix(f"param of {action_name}", p, param_names)
                           for p in params}
        return TableNames(table_name, resolved_fields, action_name, resolved_params)
