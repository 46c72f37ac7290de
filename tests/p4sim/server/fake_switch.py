"""A small stand-in for `p4sim.runtime.switch.Switch` with a hand-written P4Info (fake_p4info.txt).

It implements the in-process API contract with plain dictionaries, so the server's P4Runtime
semantics can be tested where the real engine is not the simplest oracle. Its data plane:
a packet from the CPU port goes out of the port named by its packet_out header; any other packet
bumps `port_counter[port]`, emits a `learn_t` digest (port, source MAC), and is handled by table
`forward` (exact on ingress port): `set_egress(port)`, `send_to_cpu` (with a packet_in header), or
dropped. A `set_egress` to a multicast port 0x1FF is not modelled.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from finsy import pbutil
from finsy.proto import p4i

from p4sim.server.engine import ActionCall, Match, P4simError, TableEntry
from tests.support.fake_meters import FakeMeters

P4INFO_PATH = Path(__file__).with_name("fake_p4info.txt")
DEVICE_CONFIG = b"p4sim-fake-switch"

FORWARD = 33554433
ROUTES = 33554434
ACL = 33554435
ECMP = 33554436
SET_EGRESS = 16777217
DROP = 16777218
SEND_TO_CPU = 16777219
MISS = 16777220
SELECTOR = 285212673
PORT_COUNTER = 302011393
FORWARD_COUNTER = 318767105
REG = 369098753
LEARN = 385875969
PACKET_IN = 67146229
PACKET_OUT = 67121543


def load_p4info() -> p4i.P4Info:
    return pbutil.from_text(P4INFO_PATH.read_text(), p4i.P4Info)


def _key(e: TableEntry) -> tuple[object, ...]:
    return (
        tuple(
            sorted((f, m.kind, m.value, m.mask, m.prefix_len, m.high) for f, m in e.match.items())
        ),
        e.priority,
    )


class FakeSwitch(FakeMeters):
    """Dictionaries behind the contract; enough data plane to test packet-in/out and digests."""

    def __init__(self, p4info: p4i.P4Info, cpu_port: int | None = 510) -> None:
        super().__init__()
        self.p4info = p4info
        self.cpu_port = cpu_port
        self.lock = threading.RLock()
        self.tables: dict[int, dict[tuple[object, ...], TableEntry]] = {
            t.preamble.id: {} for t in p4info.tables
        }
        self.defaults: dict[int, ActionCall] = {t: ActionCall(DROP, {}) for t in self.tables}
        self.counters = {PORT_COUNTER: [(0, 0)] * 512}
        self.registers = {REG: [0] * 16}
        self._members: dict[int, dict[int, ActionCall]] = {SELECTOR: {}}
        self._groups: dict[int, dict[int, list[int]]] = {SELECTOR: {}}
        self._mc: dict[int, list[tuple[int, int]]] = {}
        self._clone: dict[int, list[tuple[int, int]]] = {}
        self._digests: list[tuple[int, list[bytes]]] = []
        self._trace: Callable[[str], None] | None = None

    @classmethod
    def factory(cls, data: bytes, p4info: p4i.P4Info, cpu_port: int | None) -> FakeSwitch:
        if data != DEVICE_CONFIG:
            raise P4simError("INVALID_ARGUMENT", "not a fake-switch device config")
        return cls(p4info, cpu_port)

    def device_config(self) -> bytes:
        return DEVICE_CONFIG

    def set_trace(self, callback: Callable[[str], None] | None) -> None:
        self._trace = callback

    # packets
    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        with self.lock:
            if port == self.cpu_port:
                if len(data) < 2:
                    return []
                egress = int.from_bytes(data[:2], "big") >> 7
                return [(egress, data[2:])]
            if len(data) < 14:
                return []
            p, b = self.counters[PORT_COUNTER][port]
            self.counters[PORT_COUNTER][port] = (p + 1, b + len(data))
            self._digests.append((LEARN, [port.to_bytes(2, "big"), data[6:12]]))
            action = self.defaults[FORWARD]
            for e in self.tables[FORWARD].values():
                if e.match[1].value == port:
                    e.packets += 1
                    e.bytes += len(data)
                    action = e.action or action
            if self._trace is not None:
                self._trace(f"port {port}: action {action.action_id}")
            if action.action_id == SET_EGRESS:
                return [(action.params[1], data)]
            if action.action_id == SEND_TO_CPU and self.cpu_port is not None:
                return [(self.cpu_port, (port << 7).to_bytes(2, "big") + data)]
            return []

    def take_digests(self) -> list[tuple[int, list[bytes]]]:
        with self.lock:
            out, self._digests = self._digests, []
            return out

    # tables
    def table_insert(self, e: TableEntry) -> None:
        with self.lock:
            t = self.tables[e.table_id]
            if _key(e) in t:
                raise P4simError("ALREADY_EXISTS", "entry exists")
            t[_key(e)] = e

    def table_modify(self, e: TableEntry) -> None:
        with self.lock:
            t = self.tables[e.table_id]
            if _key(e) not in t:
                raise P4simError("NOT_FOUND", "no such entry")
            t[_key(e)] = e

    def table_delete(self, e: TableEntry) -> None:
        with self.lock:
            t = self.tables[e.table_id]
            if _key(e) not in t:
                raise P4simError("NOT_FOUND", "no such entry")
            del t[_key(e)]

    def table_get(self, e: TableEntry) -> TableEntry | None:
        with self.lock:
            return self.tables[e.table_id].get(_key(e))

    def table_entries(self, table_id: int) -> list[TableEntry]:
        with self.lock:
            return list(self.tables[table_id].values())

    def table_set_default(self, table_id: int, action: ActionCall | None) -> None:
        with self.lock:
            self.defaults[table_id] = action or ActionCall(DROP, {})

    def table_get_default(self, table_id: int) -> ActionCall:
        return self.defaults[table_id]

    # action profiles
    def member_insert(self, profile_id: int, member_id: int, action: ActionCall) -> None:
        self._members[profile_id][member_id] = action

    def member_modify(self, profile_id: int, member_id: int, action: ActionCall) -> None:
        self._members[profile_id][member_id] = action

    def member_delete(self, profile_id: int, member_id: int) -> None:
        for members in self._groups[profile_id].values():
            if member_id in members:
                raise P4simError("FAILED_PRECONDITION", "member is in a group")
        del self._members[profile_id][member_id]

    def group_insert(
        self, profile_id: int, group_id: int, member_ids: list[int], max_size: int = 0
    ) -> None:
        self._groups[profile_id][group_id] = list(member_ids)

    def group_modify(
        self, profile_id: int, group_id: int, member_ids: list[int], max_size: int = 0
    ) -> None:
        self._groups[profile_id][group_id] = list(member_ids)

    def group_delete(self, profile_id: int, group_id: int) -> None:
        del self._groups[profile_id][group_id]

    def members(self, profile_id: int) -> dict[int, ActionCall]:
        return dict(self._members[profile_id])

    def groups(self, profile_id: int) -> dict[int, list[int]]:
        return {g: list(m) for g, m in self._groups[profile_id].items()}

    # externs
    def counter_read(self, counter_id: int, index: int) -> tuple[int, int]:
        return self.counters[counter_id][index]

    def counter_write(self, counter_id: int, index: int, packets: int, bytes_: int) -> None:
        self.counters[counter_id][index] = (packets, bytes_)

    def counter_size(self, counter_id: int) -> int:
        return len(self.counters[counter_id])

    def direct_counter_read(self, table_id: int, e: TableEntry) -> tuple[int, int]:
        cur = self.tables[table_id][_key(e)]
        return cur.packets, cur.bytes

    def direct_counter_write(self, table_id: int, e: TableEntry, packets: int, bytes_: int) -> None:
        cur = self.tables[table_id][_key(e)]
        cur.packets, cur.bytes = packets, bytes_

    def register_read(self, register_id: int, index: int) -> int:
        return self.registers[register_id][index]

    def register_write(self, register_id: int, index: int, value: int) -> None:
        self.registers[register_id][index] = value

    def register_size(self, register_id: int) -> int:
        return len(self.registers[register_id])

    # packet replication engine
    def mc_group_set(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        self._mc[group_id] = list(replicas)

    def mc_group_delete(self, group_id: int) -> None:
        del self._mc[group_id]

    def mc_groups(self) -> dict[int, list[tuple[int, int]]]:
        return {g: list(r) for g, r in self._mc.items()}

    def clone_session_set(
        self,
        session_id: int,
        replicas: list[tuple[int, int]],
        class_of_service: int = 0,
        truncate: int = 0,
    ) -> None:
        self._clone[session_id] = list(replicas)

    def clone_session_delete(self, session_id: int) -> None:
        del self._clone[session_id]

    def clone_sessions(self) -> dict[int, list[tuple[int, int]]]:
        return {s: list(r) for s, r in self._clone.items()}


__all__ = ["ActionCall", "FakeSwitch", "Match", "TableEntry", "load_p4info"]
