"""The generic P4Runtime base test of the PTF suite.

`P4RuntimeTest` connects once per ptf process to the switch named by the test params
(`grpc_addr`, `device_id`, `p4info`, `device_config`, `cpu_port`), becomes primary, pushes
the pipeline when the switch does not already run it (compared by cookie), and gives each
test case:

* generic writes that undo themselves in tearDown (`insert_table_entry`, `insert_mc_group`,
  `insert_digest_entry`), so every case starts from the same empty tables;
* reads of counters and registers by name;
* packet-out, packet-in and digest receipt through the stream channel;
* `receive`: wait for a packet matching a mask on a port and return its bytes (for fields
  such as sequence numbers that a test reads rather than predicts).
"""

from __future__ import annotations

import atexit
import queue
import time
import zlib
from collections.abc import Callable
from typing import Any

import ptf
import ptf.testutils as testutils
from finsy.proto import p4r
from ptf.base_tests import BaseTest

from ptf_tests.lib.p4runtime_client import (
    P4Info,
    P4RuntimeClient,
    P4RuntimeError,
    PipelineFiles,
    decode_value,
    encode_value,
)

MatchValue = int | tuple[int, int] | tuple[int, int, str]

_SESSION: tuple[P4RuntimeClient, P4Info] | None = None


def _param(name: str, default: Any = None) -> Any:
    value = testutils.test_param_get(name, default)
    if value is None:
        raise RuntimeError(f"PTF test parameter {name!r} is missing (see ptf_tests/run.py)")
    return value


def session() -> tuple[P4RuntimeClient, P4Info]:
    """The process-wide P4Runtime session, created (and the pipeline pushed) on first use."""
    global _SESSION
    if _SESSION is None:
        files = PipelineFiles(_param("p4info"), _param("device_config"))
        info, config = files.load()
        client = P4RuntimeClient(
            _param("grpc_addr"),
            int(_param("device_id", 1)),
            election_id=(0, int(_param("election_id", 1))),
        )
        client.connect()
        cookie = zlib.crc32(info.SerializeToString(deterministic=True) + config)
        if client.pipeline_cookie() != cookie:
            client.set_pipeline(info, config, cookie)
        _SESSION = (client, P4Info(info))
        atexit.register(client.close)
    return _SESSION


class P4RuntimeTest(BaseTest):  # type: ignore[misc]
    """Base of every nfcluster packet test (see the module docstring)."""

    def setUp(self) -> None:
        BaseTest.setUp(self)
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()
        self.client, self.p4info = session()
        self.cpu_port = int(_param("cpu_port", 510))
        self._undo: list[Callable[[], None]] = []
        P4RuntimeClient.drain(self.client.packet_ins)
        self.drain_digests()

    def tearDown(self) -> None:
        failures: list[str] = []
        while self._undo:
            undo = self._undo.pop()
            try:
                undo()
            except P4RuntimeError as exc:
                failures.append(str(exc))
        self.drain_digests()  # a list of this case's digests delivered late is no other case's
        BaseTest.tearDown(self)
        if failures:
            raise AssertionError(f"cleanup failed: {failures}")

    # -- tables ----------------------------------------------------------------------------

    def table_entry(
        self,
        table: str,
        match: dict[str, MatchValue],
        action: str | None = None,
        params: dict[str, int] | None = None,
        priority: int = 0,
    ) -> p4r.TableEntry:
        """A TableEntry built by names. Match values: int (exact), (value, prefix_len) (lpm)."""
        t = self.p4info.table(table)
        entry = p4r.TableEntry(table_id=t.preamble.id, priority=priority)
        for name, value in match.items():
            field = self.p4info.match_field(t, name)
            fm = p4r.FieldMatch(field_id=field.id)
            if isinstance(value, tuple):
                fm.lpm.value = encode_value(value[0], field.bitwidth)
                fm.lpm.prefix_len = value[1]
            else:
                fm.exact.value = encode_value(value, field.bitwidth)
            entry.match.append(fm)
        if action is not None:
            a = self.p4info.action(action)
            entry.action.action.action_id = a.preamble.id
            for pname, pvalue in (params or {}).items():
                p = self.p4info.action_param(a, pname)
                entry.action.action.params.append(
                    p4r.Action.Param(param_id=p.id, value=encode_value(pvalue, p.bitwidth))
                )
        return entry

    def insert_table_entry(
        self,
        table: str,
        match: dict[str, MatchValue],
        action: str,
        params: dict[str, int] | None = None,
        priority: int = 0,
    ) -> p4r.TableEntry:
        entry = self.table_entry(table, match, action, params, priority)
        self.client.write_entity(p4r.Update.INSERT, p4r.Entity(table_entry=entry))
        key = self.table_entry(table, match, priority=priority)
        self._undo.append(
            lambda: self.client.write_entity(p4r.Update.DELETE, p4r.Entity(table_entry=key))
        )
        return entry

    def modify_table_entry(
        self,
        table: str,
        match: dict[str, MatchValue],
        action: str,
        params: dict[str, int] | None = None,
        priority: int = 0,
    ) -> p4r.TableEntry:
        """MODIFY an entry this test inserted (its insert's undo still deletes it)."""
        entry = self.table_entry(table, match, action, params, priority)
        self.client.write_entity(p4r.Update.MODIFY, p4r.Entity(table_entry=entry))
        return entry

    def set_default_action(self, table: str, action: str, restore: str) -> None:
        """Set a table's default action (no parameters); the undo sets `restore`."""
        def write(name: str) -> None:
            entry = self.table_entry(table, {}, name)
            entry.is_default_action = True
            self.client.write_entity(p4r.Update.MODIFY, p4r.Entity(table_entry=entry))
        write(action)
        self._undo.append(lambda: write(restore))

    # -- packet replication engine ---------------------------------------------------------

    def insert_mc_group(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        """A multicast group of (egress port, replication id) pairs."""
        group = p4r.MulticastGroupEntry(
            multicast_group_id=group_id,
            replicas=[p4r.Replica(egress_port=port, instance=rid) for port, rid in replicas],
        )
        entity = p4r.Entity(
            packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                multicast_group_entry=group
            )
        )
        self.client.write_entity(p4r.Update.INSERT, entity)
        key = p4r.Entity(
            packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                multicast_group_entry=p4r.MulticastGroupEntry(multicast_group_id=group_id)
            )
        )
        self._undo.append(lambda: self.client.write_entity(p4r.Update.DELETE, key))

    def modify_mc_group(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        """Rewrite a multicast group in place (the controller's fail-over: one write)."""
        group = p4r.MulticastGroupEntry(
            multicast_group_id=group_id,
            replicas=[p4r.Replica(egress_port=port, instance=rid) for port, rid in replicas],
        )
        self.client.write_entity(p4r.Update.MODIFY, p4r.Entity(
            packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                multicast_group_entry=group)))

    # -- counters and registers ------------------------------------------------------------

    def read_counter(self, name: str, index: int) -> tuple[int, int]:
        """(packets, bytes) of one cell of an indirect counter."""
        c = self.p4info.counter(name)
        entity = p4r.Entity(
            counter_entry=p4r.CounterEntry(counter_id=c.preamble.id, index=p4r.Index(index=index))
        )
        for e in self.client.read(entity):
            if e.counter_entry.index.index == index:
                data = e.counter_entry.data
                return int(data.packet_count), int(data.byte_count)
        raise AssertionError(f"counter {name}[{index}] not returned by the switch")

    def wait_counter(
        self, name: str, index: int, min_packets: int, timeout: float = 2.0
    ) -> tuple[int, int]:
        """Poll a counter cell until it counts at least `min_packets`; return (packets, bytes)."""
        deadline = time.monotonic() + timeout
        value = self.read_counter(name, index)
        while value[0] < min_packets and time.monotonic() < deadline:
            time.sleep(0.02)
            value = self.read_counter(name, index)
        return value

    def set_meter(self, name: str, index: int, cir: int, cburst: int, pir: int, pburst: int) -> None:
        """Configure one cell of an indirect meter (rates per second, bursts in its unit); the
        undo leaves the cell with rates no test reaches (BMv2 may not reset a cell)."""
        m = self.p4info.meter(name)

        def write(c: int, cb: int, p: int, pb: int) -> None:
            entry = p4r.MeterEntry(
                meter_id=m.preamble.id, index=p4r.Index(index=index),
                config=p4r.MeterConfig(cir=c, cburst=cb, pir=p, pburst=pb))
            self.client.write_entity(p4r.Update.MODIFY, p4r.Entity(meter_entry=entry))
        write(cir, cburst, pir, pburst)
        self._undo.append(lambda: write(1_000_000, 1_000_000, 1_000_000, 1_000_000))

    # -- digests ---------------------------------------------------------------------------

    def drain_digests(self) -> None:
        """Acknowledge and forget digest lists until none arrives for `digest_quiet_s` (a test
        parameter: BMv2 delivers lists on a timer, so an earlier case's list can arrive late;
        p4sim delivers at once)."""
        quiet = float(_param("digest_quiet_s", 0.05))
        while True:
            try:
                digest = self.client.digests.get(timeout=quiet)
            except queue.Empty:
                return
            self.client.ack_digest(digest)

    def insert_digest_entry(self, name: str) -> int:
        """Ask the switch to stream digest `name` (one digest per list); returns its id."""
        d = self.p4info.digest(name)
        entry = p4r.DigestEntry(
            digest_id=d.preamble.id,
            config=p4r.DigestEntry.Config(max_timeout_ns=0, max_list_size=1, ack_timeout_ns=0),
        )
        self.client.write_entity(p4r.Update.INSERT, p4r.Entity(digest_entry=entry))
        key = p4r.Entity(digest_entry=p4r.DigestEntry(digest_id=d.preamble.id))
        self._undo.append(lambda: self.client.write_entity(p4r.Update.DELETE, key))
        return int(d.preamble.id)

    def get_digest_members(self, digest_id: int, timeout: float = 2.0) -> list[list[int]]:
        """The members (as ints) of every digest data in the next digest list of `digest_id`."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no digest list for digest id {digest_id} in {timeout} s")
            try:
                digest = self.client.digests.get(timeout=remaining)
            except queue.Empty:
                continue
            self.client.ack_digest(digest)
            if digest.digest_id != digest_id:
                continue
            return [[decode_value(m.bitstring) for m in d.struct.members] for d in digest.data]

    def assert_no_digest(self, timeout: float = 0.3) -> None:
        try:
            digest = self.client.digests.get(timeout=timeout)
        except queue.Empty:
            return
        self.client.ack_digest(digest)
        raise AssertionError(f"unexpected digest list: {digest}")

    # -- packet I/O ------------------------------------------------------------------------

    def packet_metadata(self, header: str, values: dict[str, int]) -> list[p4r.PacketMetadata]:
        meta = self.p4info.packet_metadata(header)
        out = []
        for m in meta.metadata:
            if m.name in values:
                out.append(
                    p4r.PacketMetadata(
                        metadata_id=m.id, value=encode_value(values[m.name], m.bitwidth)
                    )
                )
        return out

    def send_packet_out(self, payload: bytes, egress_port: int) -> None:
        """Send `payload` from `egress_port` (every metadata field given: BMv2 wants them all)."""
        self.client.send_packet_out(
            payload, self.packet_metadata("packet_out", {"egress_port": egress_port, "_pad": 0})
        )

    def get_packet_in(
        self, match: Callable[[bytes], bool] = lambda _p: True, timeout: float = 2.0
    ) -> tuple[bytes, dict[str, int]]:
        """The next packet-in whose payload satisfies `match`: (payload, metadata by name)."""
        names = {m.id: m.name for m in self.p4info.packet_metadata("packet_in").metadata}
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no matching packet-in within {timeout} s")
            try:
                pkt = self.client.packet_ins.get(timeout=remaining)
            except queue.Empty:
                continue
            if match(pkt.payload):
                meta = {names.get(m.metadata_id, str(m.metadata_id)): decode_value(m.value) for m in pkt.metadata}
                return bytes(pkt.payload), meta

    def receive(self, port: int, expected: Any, timeout: float | None = None) -> bytes:
        """Wait for a packet matching `expected` (packet or Mask) on `port`; return its bytes."""
        result = testutils.dp_poll(
            self, device_number=0, port_number=port, timeout=timeout or 2.0, exp_pkt=expected
        )
        if isinstance(result, self.dataplane.PollFailure):
            self.fail(f"expected packet not received on port {port}.\n{result.format()}")
        return bytes(result.packet)
