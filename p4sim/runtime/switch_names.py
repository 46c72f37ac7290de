"""Names to P4Info ids for the in-process API: tables, actions, match fields, parameters, externs.

`NameLookup` is a base of `p4sim.runtime.switch.Switch`; a name is the full name, a suffix after a
dot, or the alias.
"""

from __future__ import annotations

from finsy.proto import p4i

from p4sim.runtime.api_values import P4simError


class NameLookup:
    """Ids by name in a switch's P4Info (`Switch` sets `p4info` and `_action_params`)."""

    p4info: p4i.P4Info
    _action_params: dict[int, list[tuple[int, str, int]]]

    def table_id(self, name: str) -> int:
        return self._lookup(self.p4info.tables, name, "table")

    def action_id(self, name: str) -> int:
        return self._lookup(self.p4info.actions, name, "action")

    def _lookup(self, items: object, name: str, what: str) -> int:
        hits = [x.preamble.id for x in items  # type: ignore[attr-defined]
                if x.preamble.name == name or x.preamble.name.endswith("." + name) or x.preamble.alias == name]
        if len(hits) != 1:
            raise P4simError("NOT_FOUND", f"{what} {name}: {'ambiguous' if hits else 'not found'}")
        return int(hits[0])

    def field_id(self, table_id: int, name: str) -> int:
        for t in self.p4info.tables:
            if t.preamble.id == table_id:
                for mf in t.match_fields:
                    if mf.name == name:
                        return int(mf.id)
        raise P4simError("NOT_FOUND", f"match field {name}")

    def param_id(self, action_id: int, name: str) -> int:
        for pid, pname, _w in self._action_params.get(action_id, []):
            if pname == name:
                return pid
        raise P4simError("NOT_FOUND", f"action parameter {name}")

    def entity_id(self, kind: str, name: str) -> int:
        """Id of a counter/register/meter/direct_counter/action_profile/digest by (suffix of its) name."""
        items = {"counter": self.p4info.counters, "register": self.p4info.registers,
                 "meter": self.p4info.meters,
                 "direct_counter": self.p4info.direct_counters, "action_profile": self.p4info.action_profiles,
                 "digest": self.p4info.digests}[kind]
        return self._lookup(items, name, kind)
