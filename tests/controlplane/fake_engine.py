"""A tiny in-memory stand-in for the p4sim engine, so the controller can be tested against p4sim's
real P4Runtime service before (and independently of) the compiled data-plane program.

It stores table entries, counters, registers and multicast groups; it forwards no packets. The
P4Runtime server validates every request against the P4Info and checks entry existence itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from finsy.proto import p4i

from p4sim.server import entities
from p4sim.server.engine import ActionCall, TableEntry
from tests.support.fake_meters import FakeMeters


class FakeEngine(FakeMeters):
    def __init__(self, p4info: p4i.P4Info, config: bytes) -> None:
        super().__init__()
        self.p4info = p4info
        self._config = config
        self.tables: dict[int, dict[Any, TableEntry]] = {}
        self.defaults: dict[int, ActionCall | None] = {}
        self.counters: dict[tuple[int, int], tuple[int, int]] = {}
        self.registers: dict[tuple[int, int], int] = {}
        self.mcast: dict[int, list[tuple[int, int]]] = {}
        self.pending_digests: list[tuple[int, list[bytes]]] = []
        self.sizes = {c.preamble.id: c.size for c in p4info.counters}
        self.sizes.update({r.preamble.id: r.size for r in p4info.registers})

    def device_config(self) -> bytes:
        return self._config

    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        return []

    def take_digests(self) -> list[tuple[int, list[bytes]]]:
        out, self.pending_digests = self.pending_digests, []
        return out

    def set_trace(self, callback: Callable[[str], None] | None) -> None:
        pass

    def _key(self, e: TableEntry) -> Any:
        return entities.entry_key(e.match, e.priority)

    def table_insert(self, e: TableEntry) -> None:
        self.tables.setdefault(e.table_id, {})[self._key(e)] = e

    def table_modify(self, e: TableEntry) -> None:
        self.tables.setdefault(e.table_id, {})[self._key(e)] = e

    def table_delete(self, e: TableEntry) -> None:
        self.tables.get(e.table_id, {}).pop(self._key(e), None)

    def table_get(self, e: TableEntry) -> TableEntry | None:
        return self.tables.get(e.table_id, {}).get(self._key(e))

    def table_entries(self, table_id: int) -> list[TableEntry]:
        return list(self.tables.get(table_id, {}).values())

    def table_set_default(self, table_id: int, action: ActionCall | None) -> None:
        self.defaults[table_id] = action

    def table_get_default(self, table_id: int) -> ActionCall:
        for t in self.p4info.tables:
            if t.preamble.id == table_id:
                return self.defaults.get(table_id) or ActionCall(t.const_default_action_id, {})
        raise KeyError(table_id)

    def counter_read(self, counter_id: int, index: int) -> tuple[int, int]:
        return self.counters.get((counter_id, index), (0, 0))

    def counter_write(self, counter_id: int, index: int, packets: int, bytes_: int) -> None:
        self.counters[(counter_id, index)] = (packets, bytes_)

    def counter_size(self, counter_id: int) -> int:
        return int(self.sizes[counter_id])

    def register_read(self, register_id: int, index: int) -> int:
        return self.registers.get((register_id, index), 0)

    def register_write(self, register_id: int, index: int, value: int) -> None:
        self.registers[(register_id, index)] = value

    def register_size(self, register_id: int) -> int:
        return int(self.sizes[register_id])

    def mc_group_set(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        self.mcast[group_id] = list(replicas)

    def mc_group_delete(self, group_id: int) -> None:
        self.mcast.pop(group_id, None)

    def mc_groups(self) -> dict[int, list[tuple[int, int]]]:
        return dict(self.mcast)

    def clone_session_set(self, session_id: int, replicas: list[tuple[int, int]],
                          class_of_service: int = 0, truncate: int = 0) -> None:
        raise NotImplementedError

    def clone_session_delete(self, session_id: int) -> None:
        raise NotImplementedError

    def clone_sessions(self) -> dict[int, list[tuple[int, int]]]:
        return {}

    # action profiles: the contract's program has none
    def member_insert(self, profile_id: int, member_id: int, action: ActionCall) -> None:
        raise NotImplementedError

    def member_modify(self, profile_id: int, member_id: int, action: ActionCall) -> None:
        raise NotImplementedError

    def member_delete(self, profile_id: int, member_id: int) -> None:
        raise NotImplementedError

    def group_insert(self, profile_id: int, group_id: int, member_ids: list[int], max_size: int = 0) -> None:
        raise NotImplementedError

    def group_modify(self, profile_id: int, group_id: int, member_ids: list[int], max_size: int = 0) -> None:
        raise NotImplementedError

    def group_delete(self, profile_id: int, group_id: int) -> None:
        raise NotImplementedError

    def members(self, profile_id: int) -> dict[int, ActionCall]:
        return {}

    def groups(self, profile_id: int) -> dict[int, list[int]]:
        return {}

    def direct_counter_read(self, table_id: int, e: TableEntry) -> tuple[int, int]:
        return (e.packets, e.bytes)

    def direct_counter_write(self, table_id: int, e: TableEntry, packets: int, bytes_: int) -> None:
        e.packets, e.bytes = packets, bytes_


def fake_engine_factory(engines: list[FakeEngine]) -> Callable[[bytes, p4i.P4Info, int | None], FakeEngine]:
    def make(data: bytes, p4info: p4i.P4Info, cpu_port: int | None) -> FakeEngine:
        engine = FakeEngine(p4info, data)
        engines.append(engine)
        return engine

    return make
