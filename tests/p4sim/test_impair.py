"""p4sim's wire impairment (p4sim/io/impair.py): the seeded loss, duplication, delay and reordering
of what a port sends, against an oracle drawing from the same `random.Random(seed)`, with a fake
clock; its validation; and a port set's receive loop sending held frames when they fall due
(a `PortSet` on a socket pair: no interface, no namespace).

Run: .venv/bin/pytest tests/p4sim/test_impair.py
"""

from __future__ import annotations

import itertools
import os
import random
import socket
import threading
from collections.abc import Iterator

import pytest

from p4sim.io.impair import Impairer, Impairment, ImpairmentError, ImpairStats, PortImpairer
from p4sim.io.ports import PortSet, PortStats
from tests.support.procs import wait_for

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module", autouse=True)
def p4sim_engine() -> str:
    """No packet engine here (the parent conftest would run every test once per engine)."""
    return "none"


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def frames(n: int) -> list[bytes]:
    return [i.to_bytes(4, "big") for i in range(n)]


def test_a_seed_gives_exact_counts_as_its_draws_say() -> None:
    imp = Impairment(loss=0.1, duplicate=0.05, seed=7)
    stats = ImpairStats()
    im = Impairer(imp, stats, Clock())
    sent = [out for f in frames(2000) for out in im.offer(f)]
    rng, want, dropped, duplicated = random.Random(7), [], 0, 0  # the oracle: three draws a frame
    for f in frames(2000):
        lose, dup, _ = rng.random() < 0.1, rng.random() < 0.05, rng.random()
        copies = 1 + dup - lose
        dropped += copies == 0
        duplicated += copies == 2
        want += [f] * copies
    assert sent == want
    assert (stats.impair_dropped, stats.impair_duplicated) == (dropped, duplicated)
    assert 150 < dropped < 250 and 60 < duplicated < 140  # the probabilities are meant
    assert len(sent) == 2000 - stats.impair_dropped + stats.impair_duplicated
    assert (stats.impair_reordered, stats.impair_delayed, im.held) == (0, 0, 0)
    again = Impairer(imp, ImpairStats(), Clock())
    assert [o for f in frames(2000) for o in again.offer(f)] == sent  # deterministic
    other = Impairer(Impairment(loss=0.1, duplicate=0.05, seed=8), ImpairStats(), Clock())
    assert [o for f in frames(2000) for o in other.offer(f)] != sent


def test_loss_one_drops_all_and_duplicate_one_doubles() -> None:
    lossy = Impairer(Impairment(loss=1.0), clock=Clock())
    assert [o for f in frames(50) for o in lossy.offer(f)] == []
    assert lossy.counts.impair_dropped == 50
    doubling = Impairer(Impairment(duplicate=1.0), clock=Clock())
    assert [o for f in frames(50) for o in doubling.offer(f)] == [f for f in frames(50) for _ in "ab"]
    assert doubling.counts.impair_duplicated == 50
    both = Impairer(Impairment(loss=1.0, duplicate=1.0), clock=Clock())  # as netem: one copy
    assert [o for f in frames(5) for o in both.offer(f)] == frames(5)
    assert (both.counts.impair_dropped, both.counts.impair_duplicated) == (0, 0)
    clean = Impairer(Impairment(seed=3), clock=Clock())
    assert [o for f in frames(50) for o in clean.offer(f)] == frames(50)


def test_delayed_frames_leave_in_due_order_and_not_before_due() -> None:
    clock = Clock()
    im = Impairer(Impairment(delay_ms=10), clock=clock)
    f = frames(3)
    for i, frame in enumerate(f):
        clock.t = 100.0 + 0.003 * i
        assert im.offer(frame) == []
    assert (im.held, im.counts.impair_delayed) == (3, 3)
    assert im.next_due() == pytest.approx(100.010)
    clock.t = 100.0099
    assert im.due() == []
    clock.t = 100.010
    assert im.due() == [f[0]]
    clock.t = 100.0161
    assert im.due() == f[1:]
    assert (im.held, im.next_due()) == (0, None)
    im.offer(b"old")  # held 10 ms
    clock.t += 0.011
    assert im.offer(b"new") == [b"old"]  # what is due leaves first; the new one is held


def test_reorder_with_delay_sends_some_frames_ahead_of_held_ones() -> None:
    clock = Clock()
    im = Impairer(Impairment(delay_ms=1, reorder=0.3, seed=5), clock=clock)
    out: list[bytes] = []
    jumped: list[bytes] = []
    for i, f in enumerate(frames(200)):
        # ten frames a millisecond: about ten held at any time; then one every 2 ms: none held,
        # so a frame sent at once overtakes nothing
        clock.t += 0.0001 if i < 100 else 0.002
        now = im.offer(f)
        jumped += [f] if f in now else []
        out += now
    clock.t += 1.0
    out += im.due()
    assert sorted(out) == frames(200)  # nothing lost or repeated
    assert sum(1 for a, b in itertools.pairwise(out) if b < a) > 20  # out of order
    delayed = [f for f in out if f not in jumped]
    assert delayed == sorted(delayed)  # the held ones keep their order
    assert (len(jumped), im.counts.impair_delayed) == (200 - len(delayed), len(delayed))
    assert 40 < len(jumped) < 80
    # a frame sent at once counts as reordered when it overtook a frame still held
    overtook = [j for j in jumped if any(d < j and out.index(d) > out.index(j) for d in delayed)]
    assert im.counts.impair_reordered == len(overtook) > 0
    assert len(overtook) < len(jumped)  # the late ones overtook nothing


def test_clearing_sends_held_frames_in_order_and_closing_counts_them_dropped() -> None:
    clock = Clock()
    sent: list[bytes] = []
    stats = PortStats()
    port = PortImpairer(Impairment(delay_ms=50), stats, sent.append, clock)
    for f in frames(4):
        port.send(f)
    assert sent == [] and port.impairer.held == 4
    assert port.release() == 4 and sent == frames(4)
    port.send(b"after")  # released: straight through, no longer impaired
    assert sent[-1] == b"after" and stats.impair_delayed == 4
    assert port.counted() == {"impair_dropped": 0, "impair_duplicated": 0,
                              "impair_reordered": 0, "impair_delayed": 4}
    closing = PortImpairer(Impairment(delay_ms=50), stats, sent.append, clock)
    closing.send(b"held")
    assert closing.discard() == 1 and stats.impair_dropped == 1 and stats.lost == 1
    # its own share of the port's counters
    assert closing.counted() == {"impair_dropped": 1, "impair_duplicated": 0,
                                 "impair_reordered": 0, "impair_delayed": 1}
    closing.send(b"x")
    assert sent[-1] == b"x"


@pytest.mark.parametrize(("doc", "words"), [
    ({"loss": 1.5}, "loss must be a probability in [0, 1], got 1.5"),
    ({"duplicate": -0.1}, "duplicate must be a probability"),
    ({"delay_ms": 1001}, "delay_ms must be in [0, 1000] ms"),
    ({"reorder": 0.1}, "reorder needs a delay"),
    ({"loss": 0.1, "jitter": 1, "rate": 2}, "unknown keys 'jitter', 'rate' (known: loss"),
    ({"loss": True}, "loss must be a number, got True"),
    ({"loss": "0.1"}, "loss must be a number"),
    ({"seed": 1.5}, "seed must be an integer, got 1.5"),
    ([1, 2], "the body must be a JSON object"),
    (None, "the body must be a JSON object"),
])
def test_bad_impairments_are_refused_naming_what_is_wrong(doc: object, words: str) -> None:
    with pytest.raises(ImpairmentError) as exc:
        Impairment.from_json(doc)
    assert words in str(exc.value)


def test_a_good_impairment_round_trips() -> None:
    doc = {"loss": 0.01, "duplicate": 0.01, "reorder": 0.1, "delay_ms": 1, "seed": 7}
    imp = Impairment.from_json(doc)
    assert imp.to_json() == doc and Impairment.from_json({}) == Impairment()
    assert imp.describe() == "delay 1ms loss 1% duplicate 1% reorder 10% (seed 7)"


# ------------------------------------------------------------- a port set's receive loop
def pair_port_set() -> tuple[PortSet, socket.socket]:
    """A PortSet whose port 1 sends into one end of a datagram socket pair (the caller reads the
    other, and closes both): no interface to attach to; its receive loop has nothing to read but
    its wake-up."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    ports = PortSet({1: "nonexistent0"})
    ports._socks[1] = a
    ports.stats[1] = PortStats()
    ports._if_base[1] = (0, 0)
    ports._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
    b.settimeout(5.0)
    return ports, b


@pytest.fixture
def pair_ports() -> Iterator[tuple[PortSet, socket.socket]]:
    ports, b = pair_port_set()
    yield ports, b
    ports.close()
    b.close()


def test_the_receive_loop_sends_held_frames_when_due(pair_ports: tuple[PortSet, socket.socket]
                                                     ) -> None:
    ports, peer = pair_ports
    ports.start(lambda port, frame: None)
    ports.impair(1, Impairment(delay_ms=30))
    for f in frames(3):  # from this thread, not the loop's: the eventfd wakes it
        ports.send(1, f)
    assert ports.stats[1].tx == 0 and ports.snapshot()[1]["impair_held"] == 3
    got = [peer.recv(100) for _ in range(3)]  # (5 s timeout each)
    assert got == frames(3)
    assert (ports.stats[1].tx, ports.stats[1].impair_delayed) == (3, 3)
    wait_for(lambda: ports.snapshot()[1]["impair_held"] == 0, timeout=5, what="nothing held")


def test_clearing_a_port_sends_what_it_held_then_forwards_unimpaired(
        pair_ports: tuple[PortSet, socket.socket]) -> None:
    ports, peer = pair_ports
    entry = ports.impair(1, Impairment(delay_ms=1000, seed=1))
    assert entry["impair"] == Impairment(delay_ms=1000, seed=1).to_json()
    assert entry["ended"] is None  # no impairment before it
    ports.send(1, b"held-1")
    ports.send(1, b"held-2")
    assert ports.stats[1].tx == 0
    entry = ports.impair(1, None)
    assert (entry["impair"], entry["impair_held"], entry["tx"]) == (None, 0, 2)
    # what the impairment it ended counted over its own life
    assert entry["ended"] == {"impair_dropped": 0, "impair_duplicated": 0, "impair_reordered": 0,
                              "impair_delayed": 2}
    ports.send(1, b"plain")
    assert [peer.recv(100) for _ in range(3)] == [b"held-1", b"held-2", b"plain"]
    with pytest.raises(KeyError):
        ports.impair(2, Impairment())


def test_closing_counts_held_frames_as_dropped(pair_ports: tuple[PortSet, socket.socket]) -> None:
    ports, _ = pair_ports
    ports.impair(1, Impairment(delay_ms=1000))
    def send_all() -> None:
        for f in frames(5):
            ports.send(1, f)

    sender = threading.Thread(target=send_all)  # not the loop's thread
    sender.start()
    sender.join()
    ports.close()
    st = ports.stats[1]
    assert (st.impair_dropped, st.impair_delayed, st.tx, st.lost) == (5, 5, 0, 5)
