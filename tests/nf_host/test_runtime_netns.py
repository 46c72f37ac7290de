"""End-to-end tests of `nf-host run` processes in a private network namespace.

Each test starts real NF processes on veth pairs inside a namespace created for it, plays the
switch with `nf_host.harness` (numbering per slot, primary and backup copies) and asserts on the
frames that come back and on the NFs' status counters. Run one case with e.g.
    .venv/bin/pytest tests/nf_host/test_runtime_netns.py -k promotion
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import msgpack
import psutil
import pytest

from contract.proto import nf_control_pb2 as pb
from nf_host.harness import (
    CheckerSink,
    Netns,
    NfProcess,
    RawPort,
    Switch,
    assign,
    checker_frame,
    pair,
    read_checker,
    strip_shim,
    through_switch,
)
from tests.support.procs import free_port, wait_for

pytestmark = [pytest.mark.netns, pytest.mark.slow]

SLOT = 5


@dataclass
class Node:
    nf: NfProcess
    port: RawPort


class Lab:
    """A namespace with NF processes, each on its own veth, and the switch's ends of the veths."""

    def __init__(self, ns: Netns) -> None:
        self.ns = ns
        self.nodes: list[Node] = []

    def start(self, nf_id: int, **kw: object) -> Node:
        nf_side, sw_side = self.ns.veth()
        nf = NfProcess(self.ns.name, nf_id, nf_side, free_port(), **kw)  # type: ignore[arg-type]
        node = Node(nf, RawPort(self.ns.name, sw_side))
        self.nodes.append(node)
        nf.wait_ready()
        return node

    def close(self) -> None:
        for n in self.nodes:
            n.nf.stop()
            print(f"--- log of NF {n.nf.nf_id} ---\n{n.nf.log()}")  # shown by pytest on failure
            n.port.close()


@pytest.fixture
def lab() -> Iterator[Lab]:
    with Netns() as ns:
        lab = Lab(ns)
        try:
            yield lab
        finally:
            lab.close()


def send(sw: Switch, slot: int, flow: int, nos: range, a: Node, b: Node | None) -> None:
    for no in nos:
        p, c = sw.stamp(slot, checker_frame(flow, no), a.nf.nf_id, b.nf.nf_id if b else 0)
        a.port.send(p)
        if b is not None and c is not None:
            b.port.send(c)


def sink_of(*nodes: Node) -> CheckerSink:
    """The sink behind the switch: the nodes' output, deduplicated as the switch does."""
    sink = CheckerSink()
    for _nf, f in through_switch({n.nf.nf_id: n.port for n in nodes}):
        sink.feed(f)
    return sink


def forwarded(node: Node, *others: Node) -> int:
    """How many of `node`'s output frames the switch forwards, given the output of `others` (a
    promoted backup sends the dead primary's logged output again; the switch drops what had left)."""
    nodes = {n.nf.nf_id: n.port for n in (node, *others)}
    return sum(1 for nf, _f in through_switch(nodes) if nf == node.nf.nf_id)


def test_primary_backup_commit_checker_end_to_end(lab: Lab) -> None:
    a, b = lab.start(1), lab.start(2)
    pair(a.nf, b.nf, [SLOT])
    sw = Switch()
    for flow in (1, 2, 3):
        send(sw, SLOT, flow, range(1, 41), a, b)
    wait_for(lambda: a.port.count() == 120, 10, what="120 outputs")
    sink = sink_of(a)
    assert sink.errors == [] and sink.received == 120
    assert sink.last_count == {1: 40, 2: 40, 3: 40}
    assert b.port.count() == 0, "a backup never releases output"
    st = a.nf.slot(SLOT)
    assert st.committed_seq == 120 and st.next_expected == 121 and st.flows == 3
    # the backup holds the committed state and has dropped its input copies up to it
    wait_for(lambda: b.nf.slot(SLOT).committed_seq == 120, 5, what="backup committed")
    assert b.nf.status().slots[0].packets == 0
    dump = b.nf.stub.DumpSlot(pb.DumpSlotRequest(slot=SLOT), timeout=5)
    counts = sorted(s["count"] for _k, s in msgpack.unpackb(dump.flows))
    assert counts == [40, 40, 40]
    shim, _inner = strip_shim(a.port.outputs()[0])
    assert (shim.slot, shim.nf_id, shim.seq) == (SLOT, 1, 1)


def test_reordering_and_duplicates_processed_exactly_once_in_order(lab: Lab) -> None:
    a = lab.start(1)
    assign(a.nf, [SLOT])
    sw = Switch()
    frames = [sw.stamp(SLOT, checker_frame(9, no), 1)[0] for no in range(1, 31)]
    shuffled = [frames[i] for i in (2, 0, 1, 5, 4, 3)] + frames[6:]
    shuffled = [*shuffled[:10], frames[7], frames[1], *shuffled[10:], frames[29]]  # duplicates
    for f in shuffled:
        a.port.send(f)
    wait_for(lambda: a.port.count() == 30, 10, what="30 outputs")
    sink = sink_of(a)
    assert sink.errors == [] and sink.last_count == {9: 30}
    seqs = [strip_shim(f)[0].seq for f in a.port.outputs()]
    assert seqs == list(range(1, 31))
    wait_for(lambda: a.nf.status().load.duplicates == 3, 5, what="3 duplicates counted")


def test_gap_outliving_the_timeout_is_skipped_and_counted(lab: Lab) -> None:
    a = lab.start(1, extra=["--gap-timeout-ms", "30"])
    assign(a.nf, [SLOT])
    sw = Switch()
    frames = [sw.stamp(SLOT, checker_frame(4, no), 1)[0] for no in range(1, 11)]
    for i, f in enumerate(frames):
        if i not in (3, 4):  # seq 4 and 5 are lost on the wire
            a.port.send(f)
    wait_for(lambda: a.port.count() == 8, 10, what="8 outputs after the gap")
    seqs = [strip_shim(f)[0].seq for f in a.port.outputs()]
    assert seqs == [1, 2, 3, 6, 7, 8, 9, 10]
    st = a.nf.status()
    assert st.load.gaps == 2
    # the NF counted 8 packets: its count continues across the gap
    counts = [read_checker(strip_shim(f)[1]) for f in a.port.outputs()]
    assert [c[2] for c in counts if c] == list(range(1, 9))


def test_output_held_while_the_backup_does_not_acknowledge(lab: Lab) -> None:
    a, b = lab.start(1), lab.start(2)
    pair(a.nf, b.nf, [SLOT])
    sw = Switch()
    send(sw, SLOT, 1, range(1, 11), a, b)
    wait_for(lambda: a.port.count() == 10, 10, what="first outputs")
    b.nf.pause()  # the backup stops acknowledging (its socket still queues what arrives)
    try:
        send(sw, SLOT, 1, range(11, 31), a, b)
        wait_for(lambda: a.nf.status().load.packets == 30, 10, what="primary processed 30")
        wait_for(lambda: a.nf.status().load.queue_depth == 20, 5, what="20 outputs held")
        assert a.port.count() == 10, "no output may leave before the backup holds the state"
    finally:
        b.nf.resume()
    wait_for(lambda: a.port.count() == 30, 10, what="held output released after the ack")
    sink = sink_of(a)
    assert sink.errors == [] and sink.last_count == {1: 30}


def test_promotion_replays_buffered_input_and_keeps_counts_unbroken(lab: Lab) -> None:
    a, b = lab.start(1), lab.start(2)
    pair(a.nf, b.nf, [SLOT])
    sw = Switch()
    for flow in (1, 2):
        send(sw, SLOT, flow, range(1, 26), a, b)
    wait_for(lambda: a.port.count() == 50, 10, what="50 outputs from the primary")
    wait_for(lambda: b.nf.slot(SLOT).committed_seq == 50, 5, what="backup at the last commit")
    a.nf.kill()  # the primary dies; the switch's copies of the next packets reach only the backup
    for flow in (1, 2):
        for no in range(26, 36):
            _p, c = sw.stamp(SLOT, checker_frame(flow, no), 1, 2)
            assert c is not None
            b.port.send(c)
    wait_for(lambda: b.nf.status().slots[0].packets == 20, 5, what="20 copies buffered")
    assert b.port.count() == 0
    res = b.nf.stub.Promote(pb.PromoteRequest(slots=[SLOT], dead_nf_id=1), timeout=10)
    assert res.ok and res.replayed == 20 and list(res.slots) == [SLOT]
    wait_for(lambda: forwarded(b, a) == 20, 10, what="replayed output")
    # the new primary continues with fresh packets sent to it as primary
    for flow in (1, 2):
        send(sw, SLOT, flow, range(36, 41), b, None)
    wait_for(lambda: forwarded(b, a) == 30, 10, what="new primary's output")
    sink = sink_of(a, b)
    assert sink.errors == [], sink.errors[:5]
    assert sink.last_count == {1: 40, 2: 40}
    st = b.nf.slot(SLOT)
    assert st.role == pb.SLOT_PRIMARY and st.committed_seq == 80
    # the controller gives the new primary a new backup C: C receives the full state first
    node_c = lab.start(3)
    assign(node_c.nf, [SLOT], as_backup=True, primary=2)
    assert b.nf.stub.SetBackup(
        pb.SetBackupRequest(backup_nf_id=3, address=node_c.nf.repl), timeout=5
    ).ok
    send(sw, SLOT, 1, range(41, 43), b, node_c)
    wait_for(lambda: forwarded(b, a) == 32, 10, what="output protected by the new backup")
    wait_for(lambda: node_c.nf.slot(SLOT).committed_seq == 82, 5, what="new backup committed")
    dump = node_c.nf.stub.DumpSlot(pb.DumpSlotRequest(slot=SLOT), timeout=5)
    assert sorted(s["count"] for _k, s in msgpack.unpackb(dump.flows)) == [40, 42]


@pytest.mark.parametrize("same_cluster", [True, False], ids=["intra-cluster", "inter-cluster"])
def test_move_ships_delta_within_cluster_full_state_across(lab: Lab, same_cluster: bool) -> None:
    a, c = lab.start(1, batch_size=4), lab.start(3, batch_size=4)
    assign(a.nf, [SLOT])
    if same_cluster:
        # both ways (a replication server admits known peers only), C first so that A's link is
        # admitted at once; then wait for C's ack of A's first snapshot, so that the versions
        # below are those of deltas and not of a snapshot sealed on a later reconnection
        r = c.nf.stub.SetClusterPeers(
            pb.SetClusterPeersRequest(peers=[pb.Peer(nf_id=1, address=a.nf.repl)]), timeout=5
        )
        assert r.ok
        r = a.nf.stub.SetClusterPeers(
            pb.SetClusterPeersRequest(peers=[pb.Peer(nf_id=3, address=c.nf.repl)]), timeout=5
        )
        assert r.ok
        wait_for(lambda: 3 in a.nf.slot(SLOT).peer_versions, 5, what="peer link synchronised")
    sw = Switch()
    flows = 30
    for flow in range(1, flows + 1):
        send(sw, SLOT, flow, range(1, 5), a, None)
    wait_for(lambda: a.port.count() == 4 * flows, 10, what="outputs before the move")
    if same_cluster:
        version = a.nf.slot(SLOT).version
        wait_for(
            lambda: (c.nf.slot(SLOT) or pb.SlotStatus()).version == version,
            5,
            what="peer holds the last version",
        )
        wait_for(
            lambda: a.nf.slot(SLOT).peer_versions.get(3) == version,
            5,
            what="primary knows the version the peer holds",
        )
    # two flows change after the peer's last version
    send(sw, SLOT, 1, range(5, 7), a, None)
    send(sw, SLOT, 2, range(5, 6), a, None)
    wait_for(lambda: a.port.count() == 4 * flows + 3, 10, what="outputs after the peer's version")
    assert c.nf.stub.Adopt(
        pb.AdoptRequest(slot=SLOT, epoch=2, from_nf_id=1, from_address=a.nf.repl), timeout=5
    ).ok
    # packets of the new epoch reach the adopter before the state: it buffers them
    sw.epochs[SLOT] = 2
    send(sw, SLOT, 1, range(7, 9), c, None)
    # a late packet of the old epoch still reaches the old owner: it is forwarded
    late_p, _ = sw.stamp(SLOT, checker_frame(2, 6), 1)
    rel = a.nf.stub.Release(
        pb.ReleaseRequest(slot=SLOT, to_nf_id=3, to_address=c.nf.repl, same_cluster=same_cluster),
        timeout=15,
    )
    assert rel.ok, rel.error
    a.port.send(late_p)
    assert rel.last_seq == 4 * flows + 3
    if same_cluster:
        # only flows changed after the version the peer acknowledged (async replication may
        # already have delivered the last two, then nothing but the slot header is shipped)
        assert rel.delta and rel.flows_shipped <= 2
    else:
        assert not rel.delta and rel.flows_shipped == flows
    wait_for(lambda: c.port.count() == 3, 10, what="adopter output")
    sink = sink_of(a, c)
    assert sink.errors == [], sink.errors[:5]
    assert sink.last_count[1] == 8 and sink.last_count[2] == 6
    assert a.nf.slot(SLOT).role == pb.SLOT_RELEASED
    TestMoveBytes.shipped[same_cluster] = rel.bytes_shipped


class TestMoveBytes:
    """Filled by the move test above: intra-cluster must ship far fewer bytes than inter-cluster."""

    shipped: dict[bool, int] = {}

    def test_delta_is_smaller_than_full_state(self) -> None:
        if len(self.shipped) < 2:
            pytest.skip("needs both move tests in the same run")
        assert self.shipped[True] * 5 < self.shipped[False]


def test_malformed_frames_and_control_messages_are_counted_not_fatal(lab: Lab) -> None:
    a = lab.start(1)
    assign(a.nf, [SLOT])
    garbage = [
        b"\x00" * 10,  # shorter than Ethernet (padded: EtherType 0, foreign)
        bytes(12) + b"\x88\xb5" + b"\x01\x00",  # shim truncated
        bytes(12) + b"\x88\xb5" + bytes([9]) + bytes(15) + bytes(20),  # unknown kind
        bytes(12) + b"\x08\x00" + bytes(40),  # no shim at all: not nfcluster's, foreign
    ]
    for g in garbage:
        a.port.send(g.ljust(60, b"\x00") if len(g) < 14 else g)
    sw = Switch()
    bad_ip, _ = sw.stamp(SLOT, bytes(12) + b"\x08\x00" + b"\x45" + bytes(5), 1)  # truncated IPv4
    a.port.send(bad_ip)
    send(sw, SLOT, 1, range(2, 4), a, None)
    wait_for(lambda: a.port.count() == 3, 10, what="valid packets still processed")
    # the unknown kind and the truncated IPv4 body are malformed; the frames of another
    # EtherType are foreign, and no drop
    wait_for(lambda: a.nf.status().load.malformed == 2, 10, what="2 malformed counted")
    assert a.nf.status().load.foreign == 2
    wait_for(lambda: a.port.count() == 3, 10, what="valid packets still processed")
    stub = a.nf.stub
    assert (
        "16 bits"
        in stub.AssignSlots(
            pb.AssignSlotsRequest(slots=[pb.SlotEpoch(slot=70000)]), timeout=5
        ).error
    )
    rel = stub.Release(pb.ReleaseRequest(slot=77, to_nf_id=2, to_address="127.0.0.1:1"), timeout=5)
    assert not rel.ok and "not held here" in rel.error
    bad_role = pb.SetRoleRequest(role=99)  # type: ignore[arg-type]
    assert not stub.SetRole(bad_role, timeout=5).ok
    assert not stub.SetBackup(pb.SetBackupRequest(backup_nf_id=1, address="x"), timeout=5).ok
    # garbage on the replication port: the connection is closed, the NF keeps running
    host, port = a.nf.repl.split(":")

    def poke() -> None:
        with socket.create_connection((host, int(port)), timeout=2) as s:
            s.sendall(b"\xff\xff\xff\xff garbage")
            s.recv(10)

    from nf_host.port import in_netns

    in_netns(lab.ns.name, poke)
    assert stub.Heartbeat(pb.HeartbeatRequest(counter=7), timeout=5).counter == 7
    # (an oversized first frame, before any hello: refused and counted in Status)
    wait_for(lambda: a.nf.status().load.repl_refused == 1, 5, what="garbage refused and counted")


def test_two_workers_split_slots_in_the_kernel(lab: Lab, tmp_path: Path) -> None:
    cfg = tmp_path / "nf1.yaml"  # options from a file; the harness's flags override it
    cfg.write_text("cluster: 7\nworkers: 1\nreorder_capacity: 128\n")
    a = lab.start(1, workers=2, extra=["--config", str(cfg)])
    assert a.nf.status().cluster == 7 and a.nf.status().workers == 2
    slots = [4, 5, 6, 7]
    assign(a.nf, slots)
    sw = Switch()
    for s in slots:
        send(sw, s, s, range(1, 21), a, None)
    wait_for(lambda: a.port.count() == 80, 10, what="80 outputs")
    sink = sink_of(a)
    assert sink.errors == [] and sink.last_count == {s: 20 for s in slots}
    per_slot = {s.slot: s.packets for s in a.nf.status().slots}
    assert per_slot == {s: 20 for s in slots}


def test_input_pauses_when_too_much_output_waits_for_the_backup(lab: Lab) -> None:
    a, b = lab.start(1, extra=["--max-held", "8"]), lab.start(2)
    pair(a.nf, b.nf, [SLOT])
    sw = Switch()
    b.nf.pause()
    try:
        send(sw, SLOT, 1, range(1, 31), a, b)
        wait_for(lambda: a.nf.status().load.packets == 8, 10, what="first batch processed")
        wait_for(lambda: a.nf.status().load.queue_depth == 8, 5, what="8 outputs held")
        assert a.nf.status().load.packets == 8, "input paused: the rest waits in the kernel"
        assert a.port.count() == 0
    finally:
        b.nf.resume()
    wait_for(lambda: a.port.count() == 30, 10, what="all output after the backup caught up")
    sink = sink_of(a)
    assert sink.errors == [] and sink.last_count == {1: 30}


def test_heartbeat_fails_while_a_worker_does_not_answer(lab: Lab) -> None:
    a = lab.start(1, workers=2)
    hb = pb.HeartbeatRequest(counter=41)
    assert a.nf.stub.Heartbeat(hb, timeout=5).counter == 41
    workers = [  # the worker processes, forked and named `nf1.w<i>` (nf_host/child_process.py;
        # the heartbeat responder, `nf1.hb`, is the child at real-time priority)
        p for p in psutil.Process(a.nf.proc.pid).children()
        if p.name().startswith("nf1.w") and os.sched_getscheduler(p.pid) != os.SCHED_FIFO
    ]
    assert len(workers) == 2
    from contract import heartbeat
    from mgmt.pki import local_pki
    from mgmt.tls import heartbeat_key_path
    from nf_host.port import in_netns

    host, port = a.nf.repl.rsplit(":", 1)
    key = heartbeat_key_path(local_pki(), 1).read_bytes()  # (NF 1's: the controller's MAC)

    def udp_heartbeat(worker: int) -> tuple[int, int, int, int] | None:
        """A UDP heartbeat to `worker`, answered by the nf-host's responder (None: no answer)."""
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(0.5)
            s.sendto(heartbeat.request(7, key), (host, int(port) + worker))
            try:
                return heartbeat.parse_reply(s.recv(64), key)
            except TimeoutError:
                return None

    assert in_netns(lab.ns.name, lambda: udp_heartbeat(1)) is not None
    os.kill(workers[1].pid, signal.SIGSTOP)
    try:
        with pytest.raises(grpc.RpcError) as err:
            a.nf.stub.Heartbeat(hb, timeout=5)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        # the responder (a process of its own, still running) leaves the stopped worker's
        # heartbeats unanswered, and the other worker's answered
        assert in_netns(lab.ns.name, lambda: udp_heartbeat(1)) is None
        assert in_netns(lab.ns.name, lambda: udp_heartbeat(0)) is not None
    finally:
        os.kill(workers[1].pid, signal.SIGCONT)
    assert a.nf.stub.Heartbeat(hb, timeout=5).counter == 41
    assert a.nf.status().load.heartbeats_withheld >= 1


def test_a_slow_nf_with_a_backlog_still_answers_heartbeats(lab: Lab) -> None:
    """A merely slow NF is not failed over: with a second of work queued (2 ms per packet), its
    worker answers a UDP heartbeat while most of the backlog is still waiting, because one turn of
    its loop reads frames for a bounded time (`worker_process.TURN_BUDGET_S`)."""
    from contract import heartbeat
    from mgmt.pki import local_pki
    from mgmt.tls import heartbeat_key_path
    from nf_host.port import in_netns

    a = lab.start(1, extra=["--params", '{"work_us": 2000}'])
    assign(a.nf, [SLOT])
    sw = Switch()
    backlog = 500
    send(sw, SLOT, 1, range(1, backlog + 1), a, None)
    wait_for(lambda: a.port.count() > 0, 10, what="the first output")
    host, port = a.nf.repl.rsplit(":", 1)
    key = heartbeat_key_path(local_pki(), 1).read_bytes()  # (NF 1's: the controller's MAC)

    def beat() -> bytes:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(5)
            s.sendto(heartbeat.request(7, key), (host, int(port)))
            return s.recv(64)

    answer = heartbeat.parse_reply(in_netns(lab.ns.name, beat), key)
    assert answer is not None and answer[0] == 7 and answer[1] == 1
    answered_after = a.port.count()
    assert answered_after < backlog // 2, f"answered only after {answered_after} of {backlog} packets"
    wait_for(lambda: a.port.count() == backlog, 30, what="the whole backlog processed")


def test_backup_death_holds_output_until_a_new_backup_has_the_full_state(lab: Lab) -> None:
    a, b = lab.start(1), lab.start(2)
    pair(a.nf, b.nf, [SLOT])
    sw = Switch()
    send(sw, SLOT, 1, range(1, 11), a, b)
    wait_for(lambda: a.port.count() == 10, 10, what="first outputs")
    b.nf.kill()  # the replication link breaks
    send(sw, SLOT, 1, range(11, 21), a, None)
    wait_for(lambda: a.nf.status().load.packets == 20, 10, what="primary processed 20")
    wait_for(lambda: a.nf.status().load.queue_depth == 10, 5, what="10 outputs held")
    assert a.port.count() == 10
    c = lab.start(3)
    assign(c.nf, [SLOT], as_backup=True, primary=1)
    assert a.nf.stub.SetBackup(pb.SetBackupRequest(backup_nf_id=3, address=c.nf.repl), timeout=5).ok
    wait_for(lambda: a.port.count() == 20, 10, what="output released after the new backup's ack")
    assert c.nf.slot(SLOT).committed_seq == 20
    sink = sink_of(a)
    assert sink.errors == [] and sink.last_count == {1: 20}


def test_move_then_failover_of_the_adopter_keeps_counts_unbroken(lab: Lab) -> None:
    a, b = lab.start(1), lab.start(2)  # A primary, B its backup
    c, d = lab.start(3), lab.start(4)  # C adopts the slot, D backs C up
    pair(a.nf, b.nf, [SLOT])
    assign(d.nf, [SLOT], as_backup=True, primary=3)
    assert c.nf.stub.SetBackup(pb.SetBackupRequest(backup_nf_id=4, address=d.nf.repl), timeout=5).ok
    sw = Switch()
    send(sw, SLOT, 1, range(1, 21), a, b)
    wait_for(lambda: a.port.count() == 20, 10, what="A's output")
    assert c.nf.stub.Adopt(pb.AdoptRequest(slot=SLOT, epoch=2, from_nf_id=1, from_address=a.nf.repl),
                           timeout=5).ok
    sw.epochs[SLOT] = 2
    rel = a.nf.stub.Release(pb.ReleaseRequest(slot=SLOT, to_nf_id=3, to_address=c.nf.repl), timeout=15)
    assert rel.ok and rel.last_seq == 20
    send(sw, SLOT, 1, range(21, 31), c, d)
    wait_for(lambda: c.port.count() == 10, 10, what="C's output (protected by D)")
    wait_for(lambda: d.nf.slot(SLOT).committed_seq == 30, 5, what="D holds C's commits")
    c.nf.kill()
    for no in range(31, 36):  # copies that reach only D
        _p, copy = sw.stamp(SLOT, checker_frame(1, no), 3, 4)
        assert copy is not None
        d.port.send(copy)
    wait_for(lambda: d.nf.status().slots[0].packets == 5, 5, what="5 copies at D")
    res = d.nf.stub.Promote(pb.PromoteRequest(slots=[SLOT], dead_nf_id=3), timeout=10)
    assert res.ok and res.replayed == 5
    wait_for(lambda: forwarded(d, a, c) == 5, 10, what="D's replayed output")
    sink = sink_of(a, c, d)
    assert sink.errors == [], sink.errors[:5]
    assert sink.last_count == {1: 35}


def test_every_process_of_an_nf_freezes_its_start_up_objects(lab: Lab) -> None:
    """The `nf-host` parent, each worker and the heartbeat responder move start-up's objects out
    of the cyclic collector's reach (nf_host/child_process.py, freeze_startup): unfrozen, a full
    collection stopped a worker's loop for 15-130 ms every ~10 s under load."""
    a = lab.start(1, workers=2)
    whats = ("nf-host", "worker 0", "worker 1", "heartbeat responder")
    wait_for(lambda: all(f"{w} (pid " in a.nf.log() and "objects of start-up frozen" in a.nf.log()
                         for w in whats), 10, what="each process's freeze logged")
    pids = {}
    for w in whats:
        line = next(ln for ln in a.nf.log().splitlines() if f"{w} (pid " in ln and "frozen" in ln)
        pid, count = line.split(f"{w} (pid ")[1].split("): ")
        pids[w] = int(pid)
        assert int(count.split()[0]) > 1000, line
    assert len(set(pids.values())) == len(whats)  # four processes, each named with its own pid
    # the children carry their name as the process name too (ps, top, perf, the RSS table)
    comm = {w: Path(f"/proc/{pid}/comm").read_text().strip() for w, pid in pids.items()}
    assert (comm["worker 0"], comm["worker 1"], comm["heartbeat responder"]) == \
        ("nf1.w0", "nf1.w1", "nf1.hb")
