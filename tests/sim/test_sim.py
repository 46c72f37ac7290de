"""The deterministic simulation (sim/): runs replay exactly, the checks catch what they claim to,
the seeds pass, and the findings still open stay pinned as expected failures. (Not strict: a
seed is one interleaving, and any change to the code under test can send it down another path
that passes while the limit stays open, as seeds 48, 3, 9, 28 and 87 did; a limit is closed by
its fix and a regression seed that fails without it, never by a seed that stopped failing.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from contract.shim import Kind, Shim, encap
from nf_host.harness import checker_frame
from sim import loop
from sim.__main__ import main, outcomes, scenario
from sim.checks import check_delivery
from sim.switch import Delivered
from sim.system import Scenario, run_seed

pytestmark = pytest.mark.unit

CI_SEEDS = int(os.environ.get("SIM_SEEDS", "40"))
JOBS = int(os.environ.get("SIM_JOBS", "2"))  # processes the seeds run in
# the scenario CI runs: moves, crashes and restarts, hangs (zombies), management cuts and slow
# port queues, overlapping; replies lost after the call acted have their own scenarios below
CI = Scenario()


def delivered(flow: int, no: int, count: int) -> Delivered:
    frame = bytearray(checker_frame(flow, no))
    frame[-4:] = count.to_bytes(4, "big")  # the checker record's count (its last field)
    return Delivered(slot=flow, epoch=1, seq=no, frame=bytes(frame))


def test_virtual_time_jumps_timers_without_waiting() -> None:
    import asyncio
    import time

    async def body() -> float:
        t0 = time.monotonic()
        await asyncio.sleep(3600)
        return time.monotonic() - t0

    wall = time.perf_counter()
    assert loop.run(body()) == 3600
    assert time.perf_counter() - wall < 5  # (the real clock is back after the run)


def test_the_delivery_check_names_each_kind_of_wrong_delivery() -> None:
    ok = [delivered(1, 1, 1), delivered(1, 2, 2)]
    assert check_delivery(ok, {1: 2}) == []
    lost = check_delivery([delivered(1, 1, 1)], {1: 2})
    assert lost and "lost [2]" in lost[0]
    dup = check_delivery([*ok, delivered(1, 2, 2)], {1: 2})
    assert "duplicated [2]" in dup[0]
    reordered = check_delivery([delivered(1, 2, 2), delivered(1, 1, 1)], {1: 2})
    assert "out of order [1]" in reordered[0]
    # a state update applied twice: every packet arrives, but the count is off
    twice = check_delivery([delivered(1, 1, 1), delivered(1, 2, 3)], {1: 2})
    assert twice and "state lost or applied twice" in twice[0]
    shim = encap(Shim(Kind.OUTPUT, 0, 1, 1, 1, 1, 0x0800), checker_frame(1, 1))
    assert check_delivery([Delivered(1, 1, 1, shim[:20])], {}) != []  # no record


def test_a_seed_replays_exactly() -> None:
    a, b = run_seed(7, CI), run_seed(7, CI)
    assert [str(e) for e in a.trace] == [str(e) for e in b.trace]
    # and in another process (a clock bound at import read the real time there: seed 2 of
    # the default scenario released different output in two processes)
    c, _ = outcomes([7, 2], CI, jobs=2)
    assert [str(e) for e in a.trace] == [str(e) for e in c.trace]
    assert (a.stamped, a.delivered, a.moves, a.failovers) == (b.stamped, b.delivered, b.moves,
                                                             b.failovers)
    assert a.stamped > 1000 and a.moves > 5  # (the run did something)


@pytest.mark.timeout(900)  # (tens of seconds on 2 idle cores; a loaded machine takes longer)
def test_seeds_pass() -> None:
    failed = {}
    for o in outcomes(range(1, CI_SEEDS + 1), CI, jobs=JOBS):
        if not o.ok:
            failed[o.seed] = o.problems[:3]
    assert failed == {}, f"failing seeds (replay: python -m sim --seed S --trace): {failed}"


MOVE_REPLIES_LOST = Scenario(lost_replies=0.15, lost_reply_calls="Release,Adopt,CancelAdopt")
"""Replies of the move's calls lost after the call acted (a reset or a partition)."""
ALL_REPLIES_LOST = Scenario(lost_replies=0.15)
"""Also the replies of the fail-over's and the configuration's calls."""
LEADER_KILLS = Scenario(leader_kills=1.0)
"""The leading controller dies (now, or before its next switch write, slot etcd write, journal
write or move/fail-over call to an NF); the standby is elected and takes over."""
SWITCH_RESTARTS = Scenario(switch_restarts=0.5)
"""The switch restarts (its tables, groups, registers and counters lost) and is reconciled."""
ETCD_OUTAGES = Scenario(etcd_outages=0.5)
"""etcd loses its quorum for up to 1.5 s: writes wait, the leader may lose its lease."""
ADOPTER_KILLS = Scenario(adopter_kills=0.5, kills=0.0, hangs=0.0, cuts=0.0, peer_policy=True)
"""Half the moves' adopters die in their first 30 ms: before the old owner's transfer reaches
them, or just after they started the slot (docs/protocols.md §5, M14)."""
LONG_QUEUES = Scenario(max_queue=1.0, moves=6.0, kills=0.0, hangs=1.0, cuts=0.0)
"""Port queues that hold frames up to a second (p4sim's under overload), moves twice as often
and hung NFs resumed (zombies): an adopter must not start before the old owner's last output
has been through the switch (`contract.timing.MARKER_WAIT`)."""
LEADER_SEEDS = int(os.environ.get("SIM_LEADER_SEEDS", "10"))
STALLS = Scenario(stalls=8.0, kills=0.0, hangs=0.0, cuts=0.0, moves=0.0, peer_policy=True)
"""A busy host: NFs stall for up to 0.8 s eight times a second, overlapping each other and
anything else (no NF dies: nothing may be lost), so live NFs are failed over in chains, their
backups promoted while the primary, only slow, goes on (docs/protocols.md, "Chained false
fail-overs")."""
STALL_SEEDS = int(os.environ.get("SIM_STALL_SEEDS", "12"))
STALLS_WITH_MOVES = Scenario(stalls=8.0, kills=0.0, hangs=0.0, cuts=0.0)
"""The same with moves: both ends of a move stall, each taken for dead (the replication servers
admit any NF here; with the peer policy, see `STALLED_MOVES_POLICY`)."""
STALLED_MOVES_POLICY = Scenario(stalls=8.0, kills=0.0, hangs=0.0, cuts=0.0, peer_policy=True)
# adopters killed mid-move on a busy host (every NF stalls now and then), under the peer policy
ADOPTER_KILLS_STALLED = Scenario(adopter_kills=0.5, stalls=8.0, kills=0.0, hangs=0.0, cuts=0.0,
                                 peer_policy=True)

# Seeds that found a bug, each fixed (docs/simulation.md lists them): they must keep passing. A
# change of the code can change a seed's path, so each is also a plain seed of its scenario.
REGRESSIONS = [
    (55, CI),                 # a suspected backup of a move's adopter never told of the slot
    (84, CI),                 # a slow port's queue: the adopter skipped the old owner's tail
    (5, MOVE_REPLIES_LOST),   # a primary restarted before its fail-over was configured empty
    (43, MOVE_REPLIES_LOST),  # a call to a process that died waited for its whole deadline
    (2, MOVE_REPLIES_LOST), (7, MOVE_REPLIES_LOST), (19, MOVE_REPLIES_LOST),
    (23, MOVE_REPLIES_LOST), (26, MOVE_REPLIES_LOST),  # lost move replies (the fence decides)
    (9, ALL_REPLIES_LOST),    # a move that did not start left its slot backed up at B's backup
    (18, ALL_REPLIES_LOST),   # a cancelled move's empty replica refused the old owner's deltas
    (68, MOVE_REPLIES_LOST), (98, MOVE_REPLIES_LOST),  # a silent Release held the move lock
    (16, ALL_REPLIES_LOST),   # a cancelled adoption dropped what it buffered (now given back, M11)
    (4, LEADER_KILLS),        # a leader died after Adopt, before the journal: the adoption stayed (M12)
    (27, LEADER_KILLS),       # a backup's self-takeover while no leader led, configured as a backup
    (28, LEADER_KILLS),       # a self-takeover took a slot its dying primary was releasing
    # a fail-over not persisted in an etcd outage, rolled back by the next leader (L3: the
    # fail-over journal; 6 and 40 fail without it, 3 found it and passes either way now)
    (3, ETCD_OUTAGES), (6, ETCD_OUTAGES), (40, ETCD_OUTAGES),
    (2, SWITCH_RESTARTS),     # a fail-over half-done (group write refused by the restarting
                              # switch): A and A' both owned A's slots (L3's `pending`)
    (15, SWITCH_RESTARTS),    # a cut-off primary's numbers given again (the unread margin, §9)
    (20, SWITCH_RESTARTS),    # output re-emitted after a restart passed the emptied dedup (P10)
    # an adopter died before it started the slot: its backup promoted it empty (counts from 1)
    # and the copies it held were lost (M14): 20 of seeds 1-30 failed before, 2 after (below)
    (26, ADOPTER_KILLS), (1, ADOPTER_KILLS), (9, ADOPTER_KILLS), (12, ADOPTER_KILLS),
    (43, ETCD_OUTAGES),       # a fence asked of a restarted adopter whose backup had taken the
                              # slot over: undone to A's old state (M14 asks the backup too)
    (11, ADOPTER_KILLS),      # a Release asked again for 11 s while its adopter was dead: the
                              # move lock held the fail-overs past the run's end (M10: `moot`,
                              # and a restarted NF not settled by a false alarm meanwhile)
    (21, ADOPTER_KILLS),      # an old owner killed as its move began: the adopter's buffered
                              # packets went back to the dead NF, not to its backup (M15)
    # a journalled move whose old owner died: B's packets went back to A's NF id, not to the
    # primary of A's group (M15; these two take other paths since and passed without the fix:
    # kept as plain seeds of the limit, tests/nf_host/test_give_back_to_group.py reproduces it)
    (11, SWITCH_RESTARTS), (32, ETCD_OUTAGES),
    # an adopter started when its marker wait (0.5 s) ended, before the old owner's last output
    # had come through a port queue of up to a second: 10 of seeds 5000-5099 failed, none since
    # `MARKER_WAIT` is the switch queue bound (2 s)
    (5009, LONG_QUEUES), (5054, LONG_QUEUES), (5124, LONG_QUEUES),
    # then: a slot moved again while its last adopter still waited for the old owner's marker;
    # the second switch write sent the marker to the new adopter, the first waited it out and
    # its release was undone with a gap (`migration.MOVE_AGAIN_AFTER`)
    (5107, LONG_QUEUES),
    # and: a move undone while its old owner was suspected down (hung): the adopter gave its
    # packets to the old owner's backup, the undo gave the slot to the old owner (a false
    # alarm), which skipped them as a gap (M16: to the old owner, and a copy to its backup)
    (5002, LONG_QUEUES),
    # a self-takeover given up (not in its Promote) left replicas at its own, newer owner
    # generation, at itself and at its peers: they refused every delta of the slot's real owner
    # and closed the link its moves' transfers rode on (slots wedged, 150 packets lost)
    (61, ADOPTER_KILLS),
    # the adopter's backup gave its copies back to the old owner while its link came up: a copy
    # arriving in that wait was neither kept nor followed (counted unowned), a gap at the owner
    (106, ADOPTER_KILLS), (37, ADOPTER_KILLS), (77, ADOPTER_KILLS),
    # an adopter killed after it accepted the transfer, the old owner's tail still on its way:
    # the tail went to the dead adopter only, its backup promoted skipped it as lost, released
    # output ahead of the old owner's last, and (adopting in its place) left its own backup
    # nothing to promote (M18)
    (78, ADOPTER_KILLS), (96, ADOPTER_KILLS), (100, ADOPTER_KILLS), (126, ADOPTER_KILLS),
    (123, ADOPTER_KILLS),
    # output re-emitted after a switch restart by the backup of a primary that died right after
    # it (the residual case of P10): the controller now tells every NF of the restart before its
    # reconcile, and the log drops what was released (45 was a known limit; 2 hit it once a
    # promotion waited longer for a slow primary, whose released output it logged meanwhile)
    (45, SWITCH_RESTARTS), (2, SWITCH_RESTARTS),
    # a stalled adopter, taken for dead, its move decided without it: (60, 95) its backup gave
    # the copies back and the move was undone, then it went on and started the slot beside the
    # old owner (its backup no longer acknowledges that slot's state) or kept it ADOPTING (told
    # `CancelAdopt` once it answers); (91) the old owner, given the slot back, skipped as a gap
    # the packets the adopter gave back a second later (it waits `tail_wait` now); (163) they
    # reached only the old owner's backup, the old owner being stalled too (they follow later)
    (60, STALLED_MOVES_POLICY), (95, STALLED_MOVES_POLICY), (91, STALLS_WITH_MOVES),
    (163, STALLS_WITH_MOVES),
    # both ends of a move stalled, under the peer policy: what the adopter (or its backup) gave
    # back to the NF holding the old owner's state came from another cluster, no peer of that
    # NF's, and was refused (the fence announces it now: `ExpectGiveBack`, M15)
    (44, STALLED_MOVES_POLICY), (58, STALLED_MOVES_POLICY), (91, STALLED_MOVES_POLICY),
    (163, STALLED_MOVES_POLICY),
    # a promotion that waited for a snapshot its live primary did not know it owed, extended
    # while that primary's deltas kept coming, until the NF being promoted died (only a hole is
    # waited for past `promote_wait` now)
    (59, CI),
    # a stalled adopter whose backup cancelled its adoption, back after a false alarm: the
    # "down"'s own pass found it still declared down, and its "up" told it nothing, so it held
    # the slot ADOPTING for good (told `CancelAdopt` on its "up" now)
    (201, STALLED_MOVES_POLICY),
    # an adopter killed mid-move, restarted: (1) its backup, stalled, did not answer the fence,
    # taken for "cancelled": the move was undone without the copies that backup held (2.3 s of
    # the slot); (2) its own fail-over found that backup silent and took its state for lost at
    # once (the restarted primary now waits for a backup only silent, `ORPHAN_PATIENCE`);
    # (98) that waiting primary's flapping "up" marked it configured (its slots wedged)
    (213, ADOPTER_KILLS_STALLED), (98, ADOPTER_KILLS_STALLED),
    # the leader lost its lease mid-move: the switch write refused, etcd out, the journal entry
    # not cleared, yet the adopter's adoption cancelled; the next leader took the entry for a
    # move under way and sent the slot to an adopter that dropped its packets as not owned (an
    # entry not cleared now keeps the adoption, and the move is finished)
    (242, ETCD_OUTAGES), (249, ETCD_OUTAGES), (250, ETCD_OUTAGES), (258, ETCD_OUTAGES),
    # a delta move against a peer's replica that had lost rows: the peer policy dropped the old
    # owner's deltas while it was not trusted (its view of the cluster changing), and the later
    # ones raised the replica's version over the hole; the adopter started two flows 21 and 17
    # counts short (a delta transfer is refused against a slot with holes now, `BackupSlots.holes`)
    (80, ADOPTER_KILLS_STALLED),
]
SCENARIOS = {"CI": CI, "MOVE_REPLIES_LOST": MOVE_REPLIES_LOST,
             "ALL_REPLIES_LOST": ALL_REPLIES_LOST, "LEADER_KILLS": LEADER_KILLS,
             "SWITCH_RESTARTS": SWITCH_RESTARTS, "ETCD_OUTAGES": ETCD_OUTAGES,
             "ADOPTER_KILLS": ADOPTER_KILLS, "LONG_QUEUES": LONG_QUEUES,
             "STALLS_WITH_MOVES": STALLS_WITH_MOVES, "STALLED_MOVES_POLICY": STALLED_MOVES_POLICY,
             "ADOPTER_KILLS_STALLED": ADOPTER_KILLS_STALLED}


@pytest.mark.timeout(900)
def test_regression_seeds() -> None:
    failed = {}
    for name, sc in SCENARIOS.items():
        seeds = [seed for seed, s in REGRESSIONS if s is sc]
        failed.update({(o.seed, name): o.problems[:3]
                       for o in outcomes(seeds, sc, jobs=JOBS) if not o.ok})
    assert failed == {}, f"failing regression seeds: {failed}"


@pytest.mark.timeout(900)
def test_stall_seeds_pass() -> None:
    """Chained false fail-overs of live NFs on a busy host lose nothing (without moves: with
    them, a stalled adopter is a known limit, `STALLS_WITH_MOVES`)."""
    failed = {o.seed: o.problems[:3]
              for o in outcomes(range(1, STALL_SEEDS + 1), STALLS, jobs=JOBS) if not o.ok}
    assert failed == {}, f"failing seeds (replay: python -m sim --seed S --trace --set " \
                         f"stalls=8 --set kills=0 --set hangs=0 --set cuts=0 --set moves=0 " \
                         f"--set peer_policy=true): {failed}"


@pytest.mark.timeout(900)
def test_leader_kill_seeds_pass() -> None:
    """Leader changes overlapping moves, fail-overs, crashes, hangs and cuts (the real election,
    journal and reconcile against the in-memory etcd and the switch model)."""
    failed = {o.seed: o.problems[:3]
              for o in outcomes(range(1, LEADER_SEEDS + 1), LEADER_KILLS, jobs=JOBS) if not o.ok}
    assert failed == {}, f"failing seeds (replay: python -m sim --seed S --trace --set " \
                         f"leader_kills=1.0): {failed}"


# Findings not fixed yet (docs/protocols.md, "Known limits"): expected failures (see the module
# docstring for why not strict).
# (seed 48 of MOVE_REPLIES_LOST, "an adopter that dies during the old epoch's tail", took another
# path once the controller ran as two processes over etcd and passes: the limit is still open by
# reading, docs/protocols.md, and no seed of the current runs reproduces it)


# found by the new fault kinds (docs/protocols.md, "Known limits"): 79, one packet lost in an
# etcd outage, not diagnosed (it passes by another path since 2026-11-28)
UNDIAGNOSED = [(79, "ETCD_OUTAGES"),
               # seeds past the first ones (docs/protocols.md, "Found by the simulation past its
               # first seeds"): overlapping switch restarts with the controller cut from an NF
               # (it passes by another path since 2026-11-28, the leader's protection of its
               # unprotected primaries at each reconcile changing the schedule)
               (202, "SWITCH_RESTARTS")]
@pytest.mark.xfail(strict=False, reason="known limit (docs/protocols.md, Known limits)")
@pytest.mark.parametrize(("seed", "name"), UNDIAGNOSED)
def test_limit_not_diagnosed_yet(seed: int, name: str) -> None:
    o = run_seed(seed, SCENARIOS[name])
    assert o.ok, o.problems[:2]


def test_the_cli_runs_seeds_and_names_a_wrong_setting(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--seeds", "2"]) == 0
    assert "sim: 2 passed, 0 failed" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["--set", "nosuch=1"])
    assert exc.value.code == 2
    assert "NAME one of" in capsys.readouterr().err
    assert scenario(["moves=0", "flows=3"]) == Scenario(moves=0.0, flows=3)
    assert scenario(["peer_policy=true"]) == Scenario(peer_policy=True)
    with pytest.raises(ValueError, match="not true or false"):
        scenario(["peer_policy=yes please"])


def test_the_cli_names_a_missing_pki_before_any_seed(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Run where `make pki` was not (a fresh clone): one clear error, not every seed failing
    with "timed out waiting for the first leader"."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(["--seeds", "2"])
    assert exc.value.code == 2 and "make pki" in capsys.readouterr().err


def test_the_delivery_check_excuses_only_packets_lost_in_a_switch_restart() -> None:
    # packet 2's input was lost inside a restarting switch: 3 comes with count 2, and that is all
    got = [delivered(1, 1, 1), delivered(1, 3, 2)]
    assert check_delivery(got, {1: 3}, excused=[(1, 2)]) == []
    # only its output lost: the count went on
    assert check_delivery([delivered(1, 1, 1), delivered(1, 3, 3)], {1: 3}, excused=[(1, 2)]) == []
    # not excused: the same is a loss
    assert check_delivery(got, {1: 3}) != []
    # an excuse does not cover a count lagging by more than the packets excused
    assert check_delivery([delivered(1, 1, 1), delivered(1, 3, 1)], {1: 3}, excused=[(1, 2)])


def test_the_in_memory_etcd_elects_one_leader_and_expires_its_lease() -> None:
    import asyncio
    import random

    from controlplane.leader import Leadership
    from sim.etcd import SimEtcd
    from sim.network import SimNet

    async def body() -> tuple[int, int | None, float]:
        net = SimNet(random.Random(1))
        etcd = SimEtcd(net, random.Random(2))
        for name in ("a", "b"):
            net.node(name)
        a = Leadership("127.0.0.1:2379", "/t", "a", 1.0, client=etcd.client("a"))
        b = Leadership("127.0.0.1:2379", "/t", "b", 1.0, client=etcd.client("b"))
        term_a = await net.spawn("a", a.campaign())
        waiting = net.spawn("b", b.campaign())
        await asyncio.sleep(0.5)
        assert not waiting.done() and b.leader == "a"  # a's lease holds
        net.kill("a")  # a dies: nothing renews its lease
        t0 = asyncio.get_running_loop().time()
        term_b = await asyncio.wait_for(waiting, 5.0)  # (virtual seconds: fails, never hangs)
        return term_a, term_b, asyncio.get_running_loop().time() - t0

    term_a, term_b, took = loop.run(body())
    assert term_b is not None and term_b > term_a  # terms only grow
    assert 0.4 < took < 1.5  # b won once a's 1 s lease expired


def test_an_etcd_outage_times_calls_out() -> None:
    import random

    from mgmt.etcd_endpoints import with_retries
    from sim.etcd import SimEtcd
    from sim.network import SimNet

    async def body() -> bool:
        net = SimNet(random.Random(1))
        net.node("a")
        etcd = SimEtcd(net, random.Random(2))
        client = etcd.client("a")
        etcd.outage(3.0)
        try:
            await net.spawn("a", with_retries(lambda: client.put(b"k", b"v"), 1.0))
        except TimeoutError:
            return b"k" not in etcd.kv
        return False

    assert loop.run(body())
