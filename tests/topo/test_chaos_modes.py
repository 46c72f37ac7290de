"""topo/faults/chaos_modes.py and the injector's parts of the chaos modes: overlapping faults never
pick a pair a fault in flight put at risk; a zombie is hung, resumed once handled (never killed
or restarted) and must come back owning nothing; the draws are seeded and leave the schedule
without --zombies as it was; false fail-overs, moves and wedged flows are counted."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from typing import Any

import pytest

from topo.faults import chaos_modes
from topo.faults import injector as faults
from topo.faults.chaos import kind_table
from topo.faults.chaos_modes import (
    FailoverLog,
    false_failovers,
    modes_line,
    modes_summary,
    move_counts,
    overlapping,
    wedged_flows,
)
from topo.faults.injector import FaultInjector, FaultRecord
from topo.verify import BOTH, OUTAGE, LossWindow

pytestmark = pytest.mark.unit

# two pairs of one cluster, and a spare: 1 -> 2, 3 -> 4, 5 spare
ROWS = [{"id": 1, "alive": True, "role": "primary", "backup": 2, "cluster": "c", "node": "a",
         "slots": 3},
        {"id": 2, "alive": True, "role": "backup", "cluster": "c", "node": "b", "slots": 0},
        {"id": 3, "alive": True, "role": "primary", "backup": 4, "cluster": "c", "node": "b",
         "slots": 3},
        {"id": 4, "alive": True, "role": "backup", "cluster": "c", "node": "a", "slots": 0},
        {"id": 5, "alive": True, "role": "spare", "cluster": "c", "node": "a", "slots": 0}]


def _no_restart(nf: int) -> subprocess.Popen[bytes]:
    raise AssertionError(f"NF {nf} restarted")


def _rows(monkeypatch: pytest.MonkeyPatch, rows: list[dict[str, Any]]) -> None:
    monkeypatch.setattr(faults, "_get", lambda url: rows if url.endswith("/nfs") else {})


def test_a_claimed_nf_and_its_partner_are_never_picked(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [dict(r) for r in ROWS]
    _rows(monkeypatch, rows)
    inj = FaultInjector("http://ctl", {}, _no_restart, seed=3)
    assert inj.claim("primary", 1) == {1, 2}
    assert inj.claim("backup", 4) == {3, 4}
    assert inj.claim("spare", 5) == {5}
    assert inj.claim("controller", 0) == set()  # runs alone, claims nothing
    picked = {inj.pick(exclude={1, 2}) for _ in range(60)}
    assert picked == {("primary", 3), ("backup", 4), ("spare", 5)}
    # a claimed backup protects its primary from being picked, and the other way round
    assert {inj.pick(exclude={2}) for _ in range(60)} == {("primary", 3), ("backup", 4),
                                                           ("spare", 5)}
    assert {inj.pick(exclude={3}) for _ in range(60)} == {("primary", 1), ("backup", 2),
                                                           ("spare", 5)}
    assert {inj.pick(exclude={1, 2, 3, 5}) for _ in range(20)} == {None}
    # with faults in flight, a primary or a backup only as the controller pairs them (NF 4
    # here reports the role it had, being configured anew after a restart; NF 3 has no backup)
    monkeypatch.setattr(faults, "_get", lambda url: rows if url.endswith("/nfs")
                        else {"pairs": {"1": 2, "3": None}})
    assert {inj.pick(exclude={5}) for _ in range(60)} == {("primary", 1), ("backup", 2)}
    _rows(monkeypatch, rows)
    # only the kinds asked for (faults of other parts wait until none is in flight)
    assert {inj.pick(kinds=("spare",)) for _ in range(10)} == {("spare", 5)}


def test_the_pairs_a_fault_claimed_are_settled_once_protected_and_armed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [dict(r) for r in ROWS]
    status: dict[str, Any] = {"nfs": {"total": 5, "configured": 4}, "pairs": {"1": 2, "3": None},
                              "self_takeover": True, "armed": {"2": {"primary": 1}}}
    monkeypatch.setattr(faults, "_get", lambda url: rows if url.endswith("/nfs") else status)
    inj = FaultInjector("http://ctl", {}, _no_restart)
    assert inj.settled_for({1, 2})  # NF 3's pair and the configuration are not this fault's
    assert not inj.settled_for({3, 4})  # NF 3 has no backup, and spare 5 (node a) could be it
    assert inj.unsettled({3, 4}) == ["primary NF 3 without a backup while a spare could be one"]
    assert not inj.settled()
    assert inj.unsettled(None) == ["4 of 5 NFs configured"]
    status["pairs"]["3"] = 5
    assert not inj.settled_for({3, 4})  # 5 not armed yet
    assert inj.unsettled({3, 4}) == ["backup NF 5 not armed for primary NF 3"]
    status["armed"]["5"] = {"primary": 3}
    assert inj.settled_for({3, 4})
    rows[3]["alive"] = False
    assert not inj.settled_for({3, 4})  # the victim is not back yet
    assert inj.unsettled({3, 4}) == [f"NF {rows[3]['id']} not alive"]
    with pytest.raises(TimeoutError, match=r"protected again .*\(still: NF \d not alive\)"):
        inj.wait_settled({3, 4}, 0.1, "the pairs of NFs [3, 4] protected again")


class ZombieController:
    """A hung primary (NF 1) is failed over to NF 2 once stopped; resumed, it answers again and
    is made a spare owning nothing."""

    def __init__(self) -> None:
        self.rows = {r["id"]: dict(r) for r in ROWS}
        self.failovers: list[dict[str, Any]] = []
        self.signals: list[int] = []

    def signal(self, _proc: object, sig: int) -> None:
        self.signals.append(sig)
        if sig == signal.SIGSTOP:
            self.rows[1]["alive"] = False
            self.failovers.append({"dead": 1, "at": time.time(), "promoted": 2,
                                   "new_backup": 5, "ok": True, "error": "", "kind": "primary"})
        elif sig == signal.SIGCONT:
            self.rows[1].update(alive=True, role="spare", slots=0)

    def get(self, url: str) -> object:
        if url.endswith("/nfs"):
            return list(self.rows.values())
        if "/slots?nf=" in url:
            return [{"slot": s} for s in range(3)]
        return {"failovers": self.failovers}


def test_a_zombie_is_resumed_once_failed_over_and_comes_back_owning_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ctl = ZombieController()
    monkeypatch.setattr(faults, "_get", ctl.get)
    monkeypatch.setattr(faults, "_signal_group", ctl.signal)
    proc: Any = object()
    inj = FaultInjector("http://ctl", {1: proc}, _no_restart, zombies=1.0)
    assert inj.draw_zombie("primary") and not inj.draw_zombie("controller")
    rec = inj.inject("primary", 1, timeout=5, zombie=True)
    assert rec.ok, rec.error
    assert (rec.mode, rec.promoted, rec.new_backup) == ("zombie", 2, 5)
    assert ctl.signals == [signal.SIGSTOP, signal.SIGCONT]  # never killed, never restarted
    assert rec.back_ms is not None and inj.records == [rec] and inj.procs[1] is proc


def test_a_zombie_that_does_not_come_back_is_killed_restarted_and_not_handled(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ctl = ZombieController()
    monkeypatch.setattr(faults, "_get", ctl.get)
    signals: list[int] = []

    def stuck(proc: object, sig: int) -> None:  # resumed, it stays a primary with its slots
        signals.append(sig)
        if sig == signal.SIGSTOP:
            ctl.signal(proc, sig)
        elif sig == signal.SIGCONT:
            ctl.rows[1].update(alive=True)

    monkeypatch.setattr(faults, "_signal_group", stuck)
    restarted: list[int] = []

    class Gone:
        def wait(self, timeout: float) -> int:
            return 0

    def restart(nf: int) -> Any:
        restarted.append(nf)
        return Gone()

    inj = FaultInjector("http://ctl", {1: Gone()}, restart)  # type: ignore[dict-item]
    rec = inj.inject("primary", 1, timeout=0.3, zombie=True)
    assert not rec.ok and "zombie NF 1 back in the pool" in rec.error
    assert signals == [signal.SIGSTOP, signal.SIGCONT, signal.SIGKILL] and restarted == [1]


def test_zombie_draws_are_seeded_and_leave_the_schedule_as_it_was() -> None:
    def draws(seed: int, share: float) -> list[bool]:
        inj = FaultInjector("http://ctl", {}, _no_restart, seed=seed, zombies=share)
        return [inj.draw_zombie("backup") for _ in range(200)]

    assert draws(4, 0.3) == draws(4, 0.3) and 30 < sum(draws(4, 0.3)) < 90
    assert not any(draws(4, 0.0))
    a = FaultInjector("http://ctl", {}, _no_restart, seed=4, zombies=0.5)
    b = FaultInjector("http://ctl", {}, _no_restart, seed=4)
    [a.draw_zombie("primary") for _ in range(5)]
    assert [a.rng.random() for _ in range(5)] == [b.rng.random() for _ in range(5)]


def test_false_failovers_are_those_no_fault_explains() -> None:
    recs = [FaultRecord("primary", "kill", 1, at=100.0), FaultRecord("backup", "zombie", 4, at=200.0),
            FaultRecord("mgmt", "cut", 3, at=300.0, role="primary")]
    fos = [{"dead": 1, "kind": "primary", "at": 100.4},
           {"dead": 1, "kind": "primary", "at": 101.0},   # a second one: no fault left for it
           {"dead": 4, "kind": "backup", "at": 200.5},
           {"dead": 3, "kind": "primary", "at": 300.8},
           {"dead": 2, "kind": "primary", "at": 150.0},   # nobody faulted NF 2
           {"dead": 5, "kind": "backup", "at": 250.0},
           {"dead": 3, "kind": "protect", "at": 301.0},   # not a fail-over
           {"dead": 4, "kind": "primary", "at": 400.0}]  # long after NF 4's fault
    false = false_failovers(fos, recs)
    assert [(f["dead"], f["at"]) for f in false] == [(1, 101.0), (2, 150.0), (5, 250.0),
                                                      (4, 400.0)]
    modes = modes_summary(recs, [*fos, {"dead": 6, "kind": "lost", "at": 500.0}],
                          ([{"ok": True}, {"ok": False, "undone": True}, {"ok": False}], ["503"]))
    assert modes == {"moves": 3, "moves_done": 1, "moves_undone": 1, "moves_failed": 1,
                     "moves_refused": 1, "zombies": 1, "zombies_back": 0, "false_failovers": 3,
                     "false_backup_replacements": 1, "state_lost": 1}
    line = modes_line(modes)
    assert "moves 1 done, 1 undone" in line and "false fail-overs 3" in line
    assert "zombies 1" in line
    text = " ".join(str(kind_table(recs, {"lost": 0}, 0, modes).caption).split())
    assert "false backup replacements 1" in text
    assert "moves" not in modes_line(modes_summary(recs, []))  # no --moves: no moves counted


def test_move_counts_and_the_failover_log_keep_each_once() -> None:
    assert move_counts([], []) == {"moves": 0, "moves_done": 0, "moves_undone": 0,
                                   "moves_failed": 0, "moves_refused": 0}
    log = FailoverLog()
    log.add([{"dead": 1, "kind": "primary", "at": 1.0}, {"dead": 2, "kind": "backup", "at": 0.5}])
    log.add([{"dead": 1, "kind": "primary", "at": 1.0}])  # the same one, from another poll
    assert [f["dead"] for f in log.rows()] == [2, 1]


def test_a_flow_whose_last_packet_never_came_is_wedged() -> None:
    forward = {0: [(1, 1), (2, 3)], 1: [(1, 1)]}
    reverse = {0: [(1, 2), (2, 4)], 1: [(2, 2)]}
    assert wedged_flows((forward, reverse, {0: 2, 1: 2}, {0: 2, 1: 2})) == [(1, "forward")]
    assert wedged_flows((forward, reverse, {0: 2, 1: 1}, {0: 2, 1: 2})) == []
    # the last packet sent into a switch outage: the verdict's to judge, not a wedge
    outage = LossWindow(OUTAGE, 10.0, 20.0, BOTH)
    sent_at = ({0: [1.0, 2.0], 1: [1.0, 15.0]}, {0: [1.0, 2.0], 1: [1.0, 2.0]})
    assert wedged_flows((forward, reverse, {0: 2, 1: 2}, {0: 2, 1: 2}), sent_at, [outage]) == []
    sent_at[0][1][1] = 25.0  # sent after it ended
    assert wedged_flows((forward, reverse, {0: 2, 1: 2}, {0: 2, 1: 2}), sent_at,
                        [outage]) == [(1, "forward")]
    # sent while a fault was still in flight (its recovery outlived the traffic): not judged
    assert wedged_flows((forward, reverse, {0: 2, 1: 2}, {0: 2, 1: 2}), sent_at, [outage],
                        after=30.0) == []
    recs = [FaultRecord("primary", "kill", 1, at=100.0, ended=104.0),
            FaultRecord("primary", "kill", 2, at=101.0)]
    assert chaos_modes.faults_over(recs) == 104.0 and chaos_modes.faults_over([]) == 0.0


def test_overlapping_faults_run_side_by_side_on_pairs_none_shares(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two faults in flight at once, never on one pair: while NF 1's fault (claiming 1 and 2)
    is not over, the next victim is of the other pair or the spare."""
    rows = [dict(r) for r in ROWS]
    monkeypatch.setattr(faults, "_get", lambda url: rows if url.endswith("/nfs") else {})
    release = threading.Event()
    inflight: list[set[int]] = []
    seen: list[tuple[int, set[int]]] = []

    def inject(kind: str, nf: int, timeout: float | None = None, zombie: bool = False) -> Any:
        claim = inj.claim(kind, nf)
        seen.append((nf, set().union(*inflight) if inflight else set()))
        inflight.append(claim)
        release.wait(5)  # the first two faults stay in flight until both started
        return FaultRecord(kind, "kill", nf, at=time.time())

    inj = FaultInjector("http://ctl", {}, _no_restart, seed=2)
    monkeypatch.setattr(inj, "inject", inject)
    monkeypatch.setattr(inj, "settled_for", lambda claim: True)

    class Sender:
        def poll(self) -> int | None:
            if len(seen) >= 2:
                release.set()
            return None

    errors: list[str] = []
    overlapping(inj, Sender(), 0.01, time.monotonic() + 5, 2, FailoverLog(), errors,  # type: ignore[arg-type]
                max_inflight=2)
    assert not errors and len(seen) == 2
    (first, _), (second, busy) = seen
    assert busy == inj.claim("primary", first) or busy == {first} or first in busy
    assert second not in busy and chaos_modes.OVERLAP_MAX >= 2
    partner = {1: 2, 2: 1, 3: 4, 4: 3}.get(second)
    assert partner not in busy


def test_a_fault_of_another_part_waits_for_the_faults_in_flight_and_runs_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [dict(r) for r in ROWS]
    monkeypatch.setattr(faults, "_get", lambda url: rows if url.endswith("/nfs") else {})
    inj = FaultInjector("http://ctl", {}, _no_restart, seed=2)
    picks = iter([("primary", 1), ("controller", 0)])
    monkeypatch.setattr(inj, "pick", lambda exclude=frozenset(), kinds=None: next(picks, None))
    monkeypatch.setattr(inj, "settled_for", lambda claim: True)
    monkeypatch.setattr(inj, "wait_pool", lambda timeout=20.0: None)
    events: list[str] = []

    def inject(kind: str, nf: int, timeout: float | None = None, zombie: bool = False) -> Any:
        events.append(f"{kind} starts")
        if kind == "primary":
            time.sleep(0.3)  # in flight while the controller fault is drawn (the fault's length)
        events.append(f"{kind} ends")
        return FaultRecord(kind, "kill", nf, at=time.time())

    monkeypatch.setattr(inj, "inject", inject)

    class Sender:
        def poll(self) -> int | None:
            return 0 if events.count("controller ends") else None

    errors: list[str] = []
    overlapping(inj, Sender(), 0.01, time.monotonic() + 5, 0, FailoverLog(), errors)  # type: ignore[arg-type]
    assert not errors
    assert events == ["primary starts", "primary ends", "controller starts", "controller ends"]


def test_a_failover_a_later_leader_completed_is_not_a_failure() -> None:
    rows = [{"dead": 8, "kind": "primary", "at": 10.0, "ok": False, "error": "NotPrimaryError"},
            {"dead": 8, "kind": "primary", "at": 12.0, "ok": True},
            {"dead": 3, "kind": "primary", "at": 20.0, "ok": True},
            {"dead": 5, "kind": "primary", "at": 30.0, "ok": False, "error": "deadline"},
            {"dead": 5, "kind": "backup", "at": 31.0, "ok": True}]
    # NF 8's first attempt was done again; NF 5's never was (a backup replacement is not it)
    assert [f["dead"] for f in chaos_modes.unfinished_failovers(rows)] == [5]
    # backup 7's replacement failed (its primary 3 hung); 3 was failed over (to 7) after it
    moot = [{"dead": 7, "promoted": 3, "kind": "backup", "at": 1.0, "ok": False},
            {"dead": 3, "promoted": 7, "kind": "primary", "at": 2.0, "ok": True},
            {"dead": 9, "promoted": 4, "kind": "backup", "at": 3.0, "ok": False},
            {"dead": 5, "promoted": 6, "kind": "primary", "at": 4.0, "ok": True}]
    assert [f["dead"] for f in chaos_modes.unfinished_failovers(moot)] == [9]


class _SlowPool:
    """An injector whose system settles after `calls` waits have run out (each a timeout)."""

    def __init__(self, calls: int) -> None:
        self.calls = calls
        self.timeouts: list[float] = []

    def wait_pool(self, timeout: float = 20.0) -> None:
        self.timeouts.append(timeout)
        if len(self.timeouts) <= self.calls:
            raise TimeoutError(f"condition not met within {timeout} s")


def test_a_slow_settle_is_recorded_and_waited_for_and_only_a_settle_that_never_comes_is_an_error(
) -> None:
    slow: list[str] = []
    chaos_modes.settle(_SlowPool(0), slow)  # type: ignore[arg-type]
    assert slow == []
    pool = _SlowPool(1)
    chaos_modes.settle(pool, slow)  # type: ignore[arg-type]
    assert len(slow) == 1 and "over 20 s" in slow[0]
    assert pool.timeouts[0] == 20.0 and 0 < pool.timeouts[1] <= chaos_modes.SETTLE_LONGEST
    with pytest.raises(TimeoutError):
        chaos_modes.settle(_SlowPool(2), slow)  # type: ignore[arg-type]
    assert len(slow) == 1


def test_an_nf_that_owns_slots_is_never_picked_as_a_spare(monkeypatch: pytest.MonkeyPatch) -> None:
    """A leader that has not configured an NF yet reports its configured role: a primary of the
    slot map (slots_owned) shown as a spare is not hung as one."""
    rows = [dict(r) for r in ROWS]
    rows[4]["slots_owned"] = 1016
    _rows(monkeypatch, rows)
    inj = FaultInjector("http://ctl", {}, _no_restart, seed=3)
    assert {inj.pick("spare") for _ in range(10)} == {None}
    rows[4]["slots_owned"] = 0
    assert {inj.pick("spare") for _ in range(10)} == {("spare", 5)}
