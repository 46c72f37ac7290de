"""Unit tests of the runtime's building blocks: sequencing, state versions, backup buffer,
output commit, the BPF filter, the replication codec and the configuration."""

from __future__ import annotations

import pytest

from contract.replication import (
    Delta,
    Forward,
    Fragment,
    Hello,
    ProtocolError,
    Released,
    SlotRow,
    Transfer,
    TransferAck,
    decode,
    encode,
)
from contract.shim import Kind, Shim, encap
from nf_host import fanout
from nf_host.backup import InputBuffer
from nf_host.commit import OutputCommit
from nf_host.config import ConfigError, load_config
from nf_host.harness import checker_frame, read_checker, udp_frame
from nf_host.nf_api import FlowKey
from nf_host.reorder import Offer, Sequencer
from nf_host.replication import MAX_FRAME, worker_address
from nf_host.state_store import (
    Replica,
    SlotState,
    entries_from_wire,
    flow_id,
    key_from_wire,
    key_to_wire,
)
from tests.nf_host.raw_frames import raw_frame

pytestmark = pytest.mark.unit


def test_sequencer_releases_in_order_and_refuses_duplicates() -> None:
    s: Sequencer[str] = Sequencer(next_expected=1)
    out: list[tuple[int, str]] = []
    assert s.offer(3, "c", 0.0, out) == Offer.BUFFERED
    assert s.offer(2, "b", 0.0, out) == Offer.BUFFERED
    assert s.offer(3, "c", 0.0, out) == Offer.DUPLICATE
    assert out == []
    assert s.offer(1, "a", 0.0, out) == Offer.READY
    assert out == [(1, "a"), (2, "b"), (3, "c")]
    assert s.offer(2, "b", 0.0, out) == Offer.DUPLICATE
    assert s.duplicates == 2 and s.next_expected == 4 and s.waiting_since is None


def test_sequencer_skips_an_old_gap_and_counts_it() -> None:
    s: Sequencer[int] = Sequencer(next_expected=1, gap_timeout=0.05)
    out: list[tuple[int, int]] = []
    s.offer(4, 4, 1.0, out)
    s.offer(5, 5, 1.01, out)
    assert s.expire(1.04, out) == 0 and out == []
    assert s.expire(1.06, out) == 3
    assert out == [(4, 4), (5, 5)] and s.gaps == 3 and s.next_expected == 6


def test_sequencer_bounded() -> None:
    s: Sequencer[int] = Sequencer(next_expected=1, capacity=2)
    out: list[tuple[int, int]] = []
    assert s.offer(2, 2, 0, out) == Offer.BUFFERED
    assert s.offer(3, 3, 0, out) == Offer.BUFFERED
    assert s.offer(4, 4, 0, out) == Offer.OVERFLOW and s.overflows == 1


def test_slot_state_versions_give_deltas() -> None:
    st = SlotState(7)
    k1, k2 = flow_id(FlowKey(1, 2, 3, 4, 6)), flow_id(FlowKey(5, 6, 7, 8, 17))
    st.flows[k1] = {"n": 1}
    st.flows[k2] = {"n": 1}
    st.dirty |= {k1, k2}
    assert len(st.seal()) == 2 and st.version == 1
    st.flows[k2]["n"] = 2
    st.dirty.add(k2)
    delta = st.seal()
    assert delta == [[key_to_wire(k2), {"n": 2}]] and st.version == 2
    assert st.since(1) == delta and len(st.since(0)) == 2 and len(st.everything()) == 2
    rep = Replica(7)
    wire = decode(encode(Delta(1, [SlotRow(7, 1, st.version, 10, st.since(0))]))[4:])
    assert isinstance(wire, Delta)
    rep.apply(wire.rows[0].entries, st.version, 10)
    assert rep.version == 2 and rep.last_seq == 10
    owned, bad = rep.to_slot_state()
    assert bad == 0 and owned.flows[k2] == {"n": 2} and owned.flows[k1] == {"n": 1}
    assert owned.since(2) == [] and len(owned.since(1)) == 2


def test_wire_keys_are_validated() -> None:
    assert key_from_wire(None) is None
    assert key_from_wire(key_to_wire((1, 2, 3, 4, 5))) == (1, 2, 3, 4, 5)
    for junk in ([1, 2, 3, 4, 5], b"short", "abcdefghijklm"):
        with pytest.raises(ValueError):
            key_from_wire(junk)
    with pytest.raises(ValueError):
        entries_from_wire([[None, "not a dict"]])
    rep = Replica(1)
    rep.apply([[b"x" * 13, {"ok": 1}], [b"bad", {}], [None, 5]], 1, 1)
    owned, bad = rep.to_slot_state()
    assert bad == 2 and list(owned.flows.values()) == [{"ok": 1}]
    with pytest.raises(TypeError):
        rep.apply([[[1, 2], {}]], 2, 2)  # an unhashable key: the receiver counts the message


def test_input_buffer_accounts_memory() -> None:
    buf = InputBuffer(max_bytes=100)
    assert buf.add(1, 1, b"x" * 40) and buf.add(1, 2, b"y" * 40)
    assert not buf.add(1, 3, b"z" * 40) and buf.overflows == 1
    assert not buf.add(1, 2, b"y") and buf.duplicates == 1
    assert buf.bytes_held == 80
    assert buf.drop_upto(1, 1) == 1 and buf.bytes_held == 40
    assert buf.add(1, 3, b"z" * 40)
    assert buf.take_beyond(1, 2) == [(3, b"z" * 40)] and buf.bytes_held == 0


def test_output_commit_acks_are_cumulative() -> None:
    oc = OutputCommit()
    batches = [oc.new_batch(0.0) for _ in range(3)]
    for b in batches:
        b.outputs.append(b"o%d" % b.id)
        oc.hold(b)
    assert oc.held_outputs == 3
    assert [b.id for b in oc.ack(2)] == [1, 2]
    assert oc.ack(2) == [] and oc.held_outputs == 1
    assert [b.id for b in oc.release_all()] == [3]


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_bpf_filter_sends_each_slot_to_exactly_one_worker(workers: int) -> None:
    inner = checker_frame(1, 1)
    for slot in range(20):
        frame = encap(Shim(Kind.PRIMARY, 0, slot, 1, 1, 1, 0x0800), inner)
        takers = [
            i for i in range(workers) if fanout.run_filter(fanout.worker_filter(i, workers), frame)
        ]
        assert takers == [slot % workers]
    for junk in (b"\x00" * 60, b"\x00" * 12 + b"\x88\xb5" + b"\x01"):
        takers = [
            i for i in range(workers) if fanout.run_filter(fanout.worker_filter(i, workers), junk)
        ]
        assert takers == [0], "worker 0 counts frames that are not shim frames"


def test_replication_codec_rejects_garbage() -> None:
    msg = Delta(3, [SlotRow(1, 1, 2, 9, [[None, {"a": b"x"}]], gen=2, deleted=[b"k" * 13])],
                sender=4, outputs=[(3, [b"frame"])], released=2)
    data = encode(msg)
    assert decode(data[4:]) == msg
    for other in (Transfer(5, 1, 2, None, 3, -1, [], sender=1), TransferAck(5, False, "no"),
                  Hello(1, 0, 2, watch=True), Released(7, 3), Forward(b"f"), Fragment(b"p", True)):
        assert decode(encode(other)[4:]) == other
    with pytest.raises(ProtocolError):
        decode(b"\xc1")
    bad = [{"x": 1}, {"t": "zz"}, {"t": "a"}, {"t": "a", "b": "1"}, {"t": "a", "b": True},
           {"t": "d", "b": 1, "s": [[1, 1]]}, {"t": "d", "b": 1, "s": {}}, {"t": "f", "f": "s"},
           {"t": "d", "b": 1, "s": [], "o": [[1, ["not bytes"]]]}, [1, 2]]
    for obj in bad:
        with pytest.raises(ProtocolError):
            decode(raw_frame(obj)[4:])
    assert MAX_FRAME >= 1 << 20
    assert worker_address("127.0.0.1:5000", 2) == "127.0.0.1:5002"


def test_config_names_the_bad_field(tmp_path) -> None:
    f = tmp_path / "nf.yaml"
    f.write_text("nf_id: 3\ninterface: eth9\nbatch_size: 0\n")
    with pytest.raises(ConfigError, match="batch_size"):
        load_config(f, {})
    cfg = load_config(f, {"batch_size": 16, "workers": 2})
    assert cfg.batch_size == 16 and cfg.worker_config(1).repl_port == 51001
    with pytest.raises(ConfigError, match="nf_id"):
        load_config(None, {"interface": "x"})


def test_harness_frames_match_scapy() -> None:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    frame = checker_frame(513, 7, reverse=True)
    pkt = Ether(frame)
    assert pkt[IP].src == "10.1.2.1" and pkt[IP].dst == "10.0.2.1" and pkt[UDP].dport == 1513
    original = pkt[IP].chksum
    del pkt[IP].chksum
    assert Ether(bytes(pkt))[IP].chksum == original, "harness IPv4 checksum agrees with scapy's"
    assert read_checker(frame) == (513, 7, 0)
    assert read_checker(udp_frame("1.1.1.1", "2.2.2.2", 1, 2, b"short")) is None


def test_sequence_numbers_wrap_around() -> None:
    top = 0xFFFFFFFF
    s: Sequencer[int] = Sequencer(next_expected=top - 1)
    out: list[tuple[int, int]] = []
    assert s.offer(1, 1, 0.0, out) == Offer.BUFFERED
    assert s.offer(0, 0, 0.0, out) == Offer.BUFFERED
    assert s.offer(top - 5, 9, 0.0, out) == Offer.DUPLICATE, "just behind: already released"
    assert s.offer(top, top, 0.0, out) == Offer.BUFFERED
    assert s.offer(top - 1, top - 1, 0.0, out) == Offer.READY
    assert [q for q, _ in out] == [top - 1, top, 0, 1] and s.next_expected == 2
    g: Sequencer[int] = Sequencer(next_expected=top, gap_timeout=0.01)
    g.offer(1, 1, 0.0, out)
    assert g.expire(1.0, out) == 2 and g.next_expected == 2  # top and 0 skipped
    buf = InputBuffer()
    for q in (top - 1, top, 0, 1):
        buf.add(3, q, b"x")
    assert buf.drop_upto(3, top) == 2
    assert [q for q, _ in buf.take_beyond(3, None)] == [0, 1]
    for q in (top, 0, 1):
        buf.add(4, q, b"y")
    assert [q for q, _ in buf.take_beyond(4, top)] == [0, 1]


def test_output_log_keeps_released_output_for_a_while() -> None:
    """Released output can still be queued on its way into the switch when the primary dies,
    behind the promoted backup's newer output: the backup keeps it `retain` seconds after it
    learnt of the release (not after it logged it), then drops it."""
    from nf_host.commit import OutputLog

    log = OutputLog(retain=0.5)
    log.record(1, [(1, [b"a"]), (2, [b"b"])], released=0, full=False, now=10.0)
    log.record(1, [(3, [b"c"])], released=1, full=False, now=10.2)  # 1 released at 10.2
    log.record(1, [], released=2, full=False, now=10.6)  # 2 released at 10.6; 1 only 0.4 s
    assert log.frames == 3
    log.record(1, [], released=2, full=True, now=10.7)  # a snapshot: 1 is 0.5 s released
    assert log.frames == 2
    log.record(1, [(3, [b"c"]), (4, [b"d"])], released=2, full=True, now=10.8)  # 3 not twice
    assert log.take_split(1) == ([b"b"], [b"c", b"d"]) and log.frames == 0
    assert log.evicted == 0


def test_output_log_is_bounded_and_counts_what_it_drops_early() -> None:
    """Past `max_frames` the oldest released batches go first, however young, and are counted;
    output not released yet is never dropped (the primary holds it: `--max-held` bounds it)."""
    from nf_host.commit import OutputLog

    log = OutputLog(retain=2.0, max_frames=3)
    log.record(1, [(1, [b"a", b"b"]), (2, [b"c"])], released=None, full=False, now=0.0)
    log.record(1, [(3, [b"d"])], released=1, full=False, now=0.1)
    assert log.frames == 2 and log.evicted == 2  # batch 1 released and over the bound
    log.record(1, [(4, [b"e"]), (5, [b"f"])], released=None, full=False, now=0.2)
    assert log.frames == 4 and log.evicted == 2  # nothing released to drop
    assert log.take(1) == [b"c", b"d", b"e", b"f"]


def test_takeover_clock_times_each_step_of_a_takeover(monkeypatch: pytest.MonkeyPatch) -> None:
    """A promotion's clock: the first packet of a promoted slot, the first sealed batch with
    output of one, the release; other slots and later marks do not move it."""
    import time

    import nf_host.worker_types as wt

    now = [100.0]
    monkeypatch.setattr(time, "time", lambda: now[0])
    clock = wt.TakeoverClock(100.0, {5, 6})
    now[0] = 100.001
    clock.processed(9)  # not a promoted slot
    clock.sealed({9: 1})
    now[0] = 100.002
    clock.processed(5)
    now[0] = 100.0025
    clock.sealed({9: 1, 6: 4})
    now[0] = 100.004
    clock.processed(6)  # later marks keep the first
    clock.sealed({5: 2})
    assert clock.steps(100.0105) == "processed +2.0 ms, sealed +0.5 ms, acked +8.0 ms"
    # replayed input only (nothing processed after the promotion): the missing step is shown
    assert wt.TakeoverClock(1.0, {1}).steps(1.003) == "processed -, sealed -, acked +3.0 ms"
    # the dead primary's logged output sealed at the promotion, a packet processed later: the
    # steps in the order they happened, never a negative step
    early = wt.TakeoverClock(1.0, {1})
    now[0] = 1.0001
    early.sealed({1: 3})
    now[0] = 1.005
    early.processed(1)
    assert early.steps(1.006) == "sealed +0.1 ms, processed +4.9 ms, acked +1.0 ms"


def test_freeze_startup_moves_the_objects_of_start_up_out_of_the_collector() -> None:
    import gc

    from nf_host.child_process import freeze_startup

    try:
        assert freeze_startup("test") > 1000  # (this test process's modules, pytest's, ...)
        assert gc.get_freeze_count() > 1000
    finally:
        gc.unfreeze()


def test_a_switch_restart_drops_released_output_from_the_log() -> None:
    """P10 (docs/protocols.md §9): output a primary had released before the switch restarted went
    through the switch or was lost with it; sent again by a promoted backup, it would pass the
    emptied dedup registers twice (simulation seed 45 of `SWITCH_RESTARTS`). On the controller's
    notice the log drops what it knows released, and what the primary tells it had been released
    by then; output not released yet stays."""
    from nf_host.commit import OutputLog

    log = OutputLog(retain=5.0)
    log.record(1, [(1, [b"a"]), (2, [b"b"]), (3, [b"c"])], released=1, full=False, now=1.0)
    log.record(2, [(7, [b"x"])], released=None, full=False, now=1.0)
    log.forget_released()  # the notice at the backup: batch 1 of NF 1 is known released
    assert log.dropped_at_restart == 1 and log.frames == 3
    log.forget_released_of(1, 2)  # NF 1's `SwitchRestart`: it had released up to batch 2
    assert log.dropped_at_restart == 2
    assert log.take_split(1) == ([], [b"c"]) and log.take(2) == [b"x"]


def test_the_switch_restart_message_goes_over_the_wire() -> None:
    from contract.replication import LEN, SwitchRestart, decode, encode

    msg = SwitchRestart(sender=4, released=123)
    assert decode(encode(msg)[LEN.size:]) == msg
