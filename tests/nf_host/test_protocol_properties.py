"""Randomized, seeded property test of the runtime's protocol invariants (docs/protocols.md P1-P4).

Workers run in-process on one event loop with the checker NF (wrapped to record every call and
the slot's state after it). The replication channel is simulated by `SimLink`: a link connects
some steps after it is created, messages queue per direction and the test decides when each is
delivered (acks are delayed at random), and it may cut a link (dropping what it holds, acks
included), which then reconnects and gets a full snapshot as a real `Link` does. The data path is
simulated too: the switch (`Switch`) stamps packets of several slots, starting at 1 or just before
the 32-bit wrap, and the test hands them to the primary and to the backup reordered within a
window, duplicated or lost, interleaved with batch closes, gap expiries and deliveries; some runs
have tiny reorder buffers and backup budgets. Output and move markers go back through the switch
the way they do on a real one: each NF's port has a FIFO queue at the switch, served at random
(one port's next frame at a time, so one NF's output can overtake another's), and a frame waits
at most `queue_bound` steps (1 to 64, per seed), the bound the backups' output logs are told to
keep released output for (`output_retain`, on a clock of steps). A dead primary's queued output
still goes through; the output dedup (`OutputDedup`) judges each frame as the switch serves it. At a random point the primary dies (a random prefix
of what it sent is delivered) and its backup is promoted (sometimes getting a new backup), or one
slot moves to a cluster peer (delta) or to another cluster (full state), or a move is refused, or
nothing happens; half the runs then move one slot on from its new owner.

The oracle, per slot: the *lineage* is what each owner processed in its turn (up to the hand-over
point: the backup's committed seq on promotion, the transfer's seq on a move). It checks P1: the
lineage is strictly increasing, a stamped number missing from it never reached its owner (or was
dropped by a counted overflow, or forwarded into a cut link), and each owner's gap count matches
(at least, for a dead one); P2: at every output, the sender's backup holds the state that produced
it (or the slot's new owner acknowledged it); P3: the promoted replica equals the dead primary's
recorded state at the committed seq, every output carries its flow's count in the lineage, and
the final state equals the lineage's counts; P4: a move ships every flow across clusters and
exactly the flows changed since the peer's acknowledged version within a cluster, and reports the
transfer's size. Outputs are released at most once and all of them eventually, except the
documented window (a primary that dies after its backup applied a batch it had no ack for).

On a failure the message names the seed: rerun it with `PROP_SEED=<seed>`; hunt further with
`PROP_FIRST=<first> PROP_SEEDS=<count>`.
"""

from __future__ import annotations

import asyncio
import os
import random
from typing import Any

import pytest

from contract.replication import encode
from contract.results import ReleaseResult
from contract.roles import Role, SlotRole
from contract.seq import SEQ_MASK
from nf_host.harness import checker_frame
from nf_host.state_store import FlowId, key_from_wire
from nf_host.worker import CommandError
from tests.nf_host.protocol_model import (
    INF,
    A,
    B,
    C,
    Node,
    P,
    Q,
    Sim,
)

pytestmark = pytest.mark.unit

SLOTS = (3, 7, 11)
ZOMBIE_SHARE = 0.3  # of promotions, those of a primary failed over while alive (see scenario)
SEEDS = 300
REGRESSION_SEEDS: list[int] = [0, 13, 32, 43, 76, 1305, 1027, 3393, 198, 3241, 133]
"""The first seed (of this generator: changing it renumbers them) that fails when each bug fixed
with this test is put back: 0 a backup copy in flight when its backup was promoted (or had moved
the slot on) was dropped as unowned; 13 a last/committed seq of 0 (the number before 1, or after
a 32-bit wrap) read as "none" (a move before the old owner's first packet lost its start; a
promoted backup could replay committed packets); 32 a reconnected backup's ack of a delta sent
ahead of its snapshot released batches it never received; 43 `release` sealed the slot before
yielding, so a packet processed meanwhile was missing from a delta transfer; 76 a snapshot left out
a slot whose transfer was unanswered, whose last output then left without the backup holding it;
1305 a peer kept flows of a dead primary's uncommitted batches in its replica, merged under the
promoted owner's deltas, and a later intra-cluster move (a delta against it) installed them.
Found with the exactly-once output protocol: 1027 the new owner's output reached the switch before
any of the old owner's (a move), whose output was then dropped as stale; 3393 a second move
started while the first move's old owner still held output of its epoch (release now returns once
that output has left); 198 and 3241 a primary failed over while alive (a "zombie") kept sending
deltas and (re)connection snapshots that overwrote its successor's replicas at the peers (deltas
now carry an owner generation, bumped by each promotion, and older ones are refused).
Found once the switch had port queues: 133 a backup kept its primary's released output too short a
time (with retention 0: the dead primary's output still queued at the switch was overtaken by the
promoted backup's newer output and dropped as a duplicate; the log now keeps it the switch's queue
bound after the release)."""


async def scenario(seed: int) -> tuple[Sim, str]:
    rng = random.Random(seed)
    start = rng.choice([1, 1, (-rng.randint(1, 40)) & SEQ_MASK])
    sim = Sim(rng, start)
    batch = rng.randint(1, 6)
    extra = random.Random(seed + 1_000_003)  # draws added later: the seeds above keep their runs
    tight = extra.random() < 0.2  # small reorder buffers and backup budgets: overflows, counted
    switch_rng = random.Random(seed + 3_000_003)
    sim.queue_bound = switch_rng.choice([1, 2, 4, 8, 16, 32, 64])
    serve_rate = switch_rng.choice([0.05, 0.1, 0.3])  # a port's frames also go at their bound
    reorder = extra.randint(1, 4) if tight else 4096
    copies = extra.randint(150, 1500) if tight else 1 << 20  # bytes (a frame is about 75)
    for nf in (A, B, P, Q, C):
        sim.nodes[nf] = Node(sim, nf, batch, reorder, copies)
    a, b, p, q, c = (sim.nodes[n] for n in (A, B, P, Q, C))
    slots = list(SLOTS[: rng.randint(1, len(SLOTS))])
    flows = {s: [s * 100 + i for i in range(rng.randint(1, 5))] for s in slots}
    for s in slots:
        sim.switch.next_seq[s] = start
        sim.route[s] = (A, B)
        sim.stamped[s] = []
    a.w.assign([(s, 1, start) for s in slots], as_backup=False)
    b.w.assign([(s, 1, start) for s in slots], as_backup=True)
    a.w.set_backup(B, b.addr)
    a.w.set_peers([(P, p.addr)])
    p.w.set_peers([(A, a.addr)])
    b.w.set_peers([(P, p.addr)])
    window = rng.randint(1, 6)
    p_loss, p_dup, p_cut = rng.choice([0.0, 0.02, 0.06]), rng.choice([0.0, 0.05]), rng.choice([0, 0.01])
    total = rng.randint(30, 120)
    event = rng.choice(["none", "promote", "promote", "move-intra", "move-inter"])
    if event == "none" and extra.random() < 0.5:
        event = "move-refused"

    event_at = rng.randint(total // 4, total - 5)
    desc = (
        f"seed={seed} start={start:#x} batch={batch} window={window} tight={tight} "
        f"event={event}@{event_at} queues={sim.queue_bound}"
    )
    loop = asyncio.get_running_loop()
    # per slot, its owners in turn: (nf, position of the last seq of its turn; INF: still owns)
    segments: dict[int, list[tuple[int, int, str]]] = {s: [(A, INF, "start")] for s in slots}
    moves: list[tuple[asyncio.Task[ReleaseResult], int, int, int, str]] = []  # task, slot, src, dst
    promote_at: int | None = None
    second = extra.random() < 0.5  # a second hand-over of one slot after the first one
    second_at = extra.randint(event_at + 1, total + 10) if second else -1
    desc += f" second@{second_at}" if second else ""
    epochs = dict.fromkeys(slots, 1)
    late = random.Random(seed + 2_000_003)  # draws added after `extra`'s
    mid_release = event == "promote" and late.random() < 0.4  # A dies inside a release
    # A lives on. Its backup refuses its deltas once promoted (StaleSender); its cluster peers
    # get the controller's new view of the cluster at the promotion and refuse them too
    zombie = event == "promote" and not mid_release and late.random() < ZOMBIE_SHARE
    reset_at, reset_done = -1, False

    def stamp() -> None:
        s = rng.choice(slots)
        flow = rng.choice(flows[s])
        no = sim.next_no[flow] = sim.next_no.get(flow, 0) + 1
        prim, back = sim.route[s]
        seq = sim.switch.next_seq[s]
        pf, bf = sim.switch.stamp(s, checker_frame(flow, no), prim, back)
        sim.stamped[s].append(seq)
        sim.flow_of[(s, seq)] = flow
        for node, frame in ((sim.nodes[prim], pf), (sim.nodes[back] if back else None, bf)):
            if node is None or frame is None or rng.random() < p_loss:
                continue
            node.inq.append(frame)
            if rng.random() < p_dup:
                node.inq.insert(rng.randint(0, len(node.inq)), frame)

    def hand_over(s: int, last: int | None, to: int, how: str) -> None:
        nf, _inf, kind = segments[s][-1]
        segments[s][-1] = (nf, sim.pos(last), kind)
        segments[s].append((to, INF, how))

    def promote() -> None:
        for s in slots:
            rep = b.w.replicas.get(s)
            last = rep.last_seq if rep is not None else None
            hand_over(s, last, B, "promote")
            if rep is not None and last is not None:
                state, _ = rep.to_slot_state()
                if state.flows != sim.history.get((A, s, last), {}):
                    sim.fail(f"P3: promoted replica of slot {s} at {last} != A's state there")
        if zombie:
            sim.fenced.add(A)  # the controller's new cluster view reaches every peer
        b.w.promote(slots, A)
        if rng.random() < 0.5:
            # the new backup: a spare, or (its own draw) the cluster peer, whose replicas were
            # built from A's deltas as a peer and become the backup's
            new = p if random.Random(seed + 4_000_003).random() < 0.3 and not p.dead else c
            new.w.assign([(s, 1, None) for s in slots], as_backup=True)
            b.w.set_backup(new.nf_id, new.addr)
            for s in slots:
                sim.route[s] = (B, new.nf_id)

    def move(s: int, src: Node, dst: Node) -> None:
        same = dst.nf_id != Q and src.nf_id != Q
        epochs[s] += 1
        dst.w.adopt(s, epochs[s])
        sim.route[s] = (dst.nf_id, 0)
        sim.switch.epochs[s] = epochs[s]
        task = loop.create_task(src.w.release(s, dst.nf_id, dst.addr, same))
        moves.append((task, s, src.nf_id, dst.nf_id, "intra" if same else "inter"))

    def moves_done() -> bool:
        return all(t.done() for t, *_ in moves)

    settled: set[int] = set()

    def settle_moves() -> None:  # a completed move hands the slot over at the transfer's seq
        for n, (task, s, _src, dst, _how) in enumerate(moves):
            if task.done() and n not in settled:
                settled.add(n)
                if task.exception() is None:
                    hand_over(s, int(task.result().last_seq), dst, "move")

    refused: asyncio.Task[ReleaseResult] | None = None
    p_cut_any = extra.choice([0.0, 0.0, 0.01, 0.03])

    def quiet() -> bool:  # nothing in flight: a gap now is a loss (see Known limits for RTTs)
        return all(not n.inq for n in sim.nodes.values() if not n.dead) and not any(
            link.out or link.back for link in sim.links if link.writer is not None
        )

    def step(final: bool) -> bool:
        """One random action; False when nothing was left to do."""
        sim.tick()
        # the switch serves one port's next frame (a dead NF's queued output too), at random
        # (its own generator: the draws below keep their seeds)
        queued = [nf for nf, queue in sim.ports.items() if queue]
        if queued and switch_rng.random() < serve_rate:
            sim.serve(switch_rng.choice(queued))
            queued = [nf for nf, queue in sim.ports.items() if queue]
        live = [n for n in sim.nodes.values() if not n.dead]
        actions: list[Any] = []
        actions += [lambda n=n: n.take(window) for n in live if n.inq]
        for link in sim.links:
            if link.out and link.writer is not None:
                actions.append(link.deliver)
            if link.back and link.writer is not None:
                actions.append(link.answer)
            if link.writer is None and not link.closed and not link.src.dead:
                actions.append(link.connect)
        if not actions:
            if queued:
                sim.serve(switch_rng.choice(queued))
                return True
            return False
        rng.choice(actions)()
        if rng.random() < 0.1:
            rng.choice(live).w.close_batch()
        if not final and rng.random() < p_cut and A in a.w.links and not a.dead:
            a.w.links[a.w.backup_id or B].cut()  # type: ignore[attr-defined]
        if not final and extra.random() < p_cut_any and moves_done() and (refused is None or refused.done()):
            # any link (peer, new backup) drops, with what it holds; not during a transfer, whose
            # loss only times out (Known limits)
            up = [link for link in sim.links if link.writer is not None and not link.src.dead]
            if up:
                extra.choice(up).cut()
        return True

    for i in range(total + 20):
        if i < total:
            stamp()
        for _ in range(rng.randint(0, 3) if i < total else 3):
            step(False)
            await asyncio.sleep(0)
        if rng.random() < 0.05 and quiet():
            for n in sim.nodes.values():
                if not n.dead:
                    n.w.expire_gaps(sim.later())
        if promote_at is not None and i >= promote_at:
            promote_at = None
            promote()
            if zombie:
                reset_at = i + late.randint(1, 10)
        if zombie and i == reset_at:  # the controller sees A again: a spare now, it forgets all
            a.w.set_role(Role.IDLE)
            sim.fenced.discard(A)  # a spare, back in the cluster's view
            reset_done = True
            for s in slots:  # what A processed after it was failed over belongs to no lineage
                hi = segments[s][0][1]  # A's turn ended at B's committed seq
                calls = sim.processed.get(A, {}).get(s, [])
                sim.processed.setdefault(A, {})[s] = [c for c in calls if sim.key(c[0]) <= hi]
            # and what reached it is forgotten with its state: for the slots' later owners a
            # packet only A had received is lost on the wire (a counted gap)
            sim.delivered[A] = {(s, q) for s, q in sim.delivered.get(A, set())
                                if sim.key(q) <= segments[s][0][1]}
        settle_moves()
        if 0 <= second_at <= i and promote_at is None and moves_done() and (
            a.dead or not mid_release) and (reset_done or not zombie) and (
            refused is None or refused.done()
        ) and not any(n.w.markers.parked for n in sim.nodes.values()):
            # once the first hand-over is complete (its adopter started: with the switch already
            # pointing at the next adopter, the first move's marker, still queued at the switch,
            # would reach that one instead and the first adopter would start only after its
            # marker wait): move one slot on from its current owner
            second_at = -2
            s = extra.choice(slots)
            owner = segments[s][-1][0]
            # (not to the owner's own backup: an adopter does not use the input copies it held
            # as the backup, so a packet only that copy brought is a counted gap, which this
            # oracle, for which the copy "reached the owner", does not allow; docs/protocols.md
            # Known limits)
            backup = sim.nodes[owner].w.backup_id
            # (nor to an NF whose backup's link is down: it refuses the transfer, and the
            # controller's undo of a refused move, which gives back what the adopter buffered,
            # is not modelled here; tests/sim runs it. Seed 117 met it once the schedule changed)
            choices = [n for n in (A, P, Q) if n not in (owner, backup) and not sim.nodes[n].dead
                       and _backup_linked(sim.nodes[n])]
            if choices:
                move(s, sim.nodes[owner], sim.nodes[extra.choice(choices)])
        dying_now = a.dying is not None and a.dying < 0 and not a.dead
        if mid_release and i == event_at:  # A dies after sending a few more outputs
            a.dying = late.randint(0, 2 * batch)
            desc += f" mid-release+{a.dying}"
        if zombie and i == event_at:
            desc += " zombie"
        if (i != event_at or event == "none" or mid_release) and not dying_now and not (
            mid_release and i == total - 1 and not a.dead
        ):
            continue
        if event == "promote" and zombie:
            # a false alarm: A is failed over while alive (it hung a moment). It keeps its queue
            # and its links; the switch sends it nothing more. Its backup, promoted, must refuse
            # its deltas, so nothing A processes from now on is ever released
            for s in slots:
                sim.route[s] = (B, 0)
            a.inq.clear()  # (what queued for it meanwhile is lost to it, as on a wire)
            promote_at = i + rng.randint(0, 5)
        elif event == "promote":
            a.dead = True
            for link in list(sim.links):
                if link.src is a:
                    for _ in range(rng.randint(0, len(link.out))):
                        link.deliver()
                    link.cut()
                    link.closed = True
            a.inq.clear()
            for s in slots:
                sim.route[s] = (B, 0)
            promote_at = i + rng.randint(0, 5)
        elif event == "move-refused":  # the other NF never adopted: the slot stays with A
            refused = loop.create_task(a.w.release(extra.choice(slots), Q, q.addr, False))
        else:
            move(rng.choice(slots), a, p if event == "move-intra" else q)
    if promote_at is not None:
        promote()
    # drain: every frame delivered, every message and ack, gaps expired, batches closed
    for _ in range(100_000):
        settle_moves()
        if step(True):
            await asyncio.sleep(0)
            continue
        if not moves_done() or (refused is not None and not refused.done()):
            await asyncio.sleep(0)
            continue
        busy = False
        for n in sim.nodes.values():
            if n.dead:
                continue
            before = len(sim.outputs), sum(len(link.out) for link in sim.links)
            n.w.expire_gaps(sim.later())
            n.w.close_batch()
            busy = busy or before != (len(sim.outputs), sum(len(link.out) for link in sim.links))
        if not busy and not any(sim.ports.values()) and not any(
            link.out or link.back for link in sim.links if link.writer
        ):
            break
    else:
        sim.fail("did not quiesce")
    settle_moves()
    if refused is not None:
        try:
            await refused
            sim.fail("a release to an NF that did not adopt succeeded")
        except CommandError:
            pass
    for task, *_ in moves:
        if task.exception() is not None:
            sim.fail(f"release failed: {task.exception()}")
    sim.segments = segments
    check(sim, slots, segments)
    for task, s, src, dst, how in moves:
        if task.exception() is None:
            check_move(sim, s, src, dst, how, task.result())
    return sim, desc


def check(sim: Sim, slots: list[int], segments: dict[int, list[tuple[int, int, str]]]) -> None:
    key = sim.key
    unprocessed: list[tuple[int, int]] = []  # (slot, seq) that reached the owner: overflows only
    released: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for nf, s, seq, flow, count in sim.outputs:
        released.setdefault((s, seq), []).append((nf, flow, count))
    for (s, seq), outs in released.items():
        if len(outs) > 1:
            sim.fail(f"P1: slot {s} seq {seq} output {len(outs)} times: {outs}")
    for s in slots:
        segs = segments[s]
        for nf in {seg[0] for seg in segs}:
            calls = sim.processed.get(nf, {}).get(s, [])
            ks = [key(seq) for seq, _f, _c in calls]
            if ks != sorted(set(ks)):
                sim.fail(f"P1: NF {nf} processed slot {s} out of order or twice: {[c[0] for c in calls]}")
        # the lineage: each owner's calls within its turn
        lineage: list[tuple[int, int, int]] = []
        turn: list[int] = []  # index of the segment of each lineage entry
        lo = -1
        for n, (nf, hi, _how) in enumerate(segs):
            for call in sim.processed.get(nf, {}).get(s, []):
                if lo < key(call[0]) <= hi:
                    lineage.append(call)
                    turn.append(n)
            lo = max(lo, hi)
        ks = [key(seq) for seq, _f, _c in lineage]
        if ks != sorted(set(ks)):
            sim.fail(f"P1: lineage of slot {s} not strictly in order: {[c[0] for c in lineage]}")
        # every output carries the count of its flow in the lineage (P3: state carried over)
        rank: dict[int, int] = {}
        expect: dict[int, int] = {}
        for seq, flow, _count in lineage:
            rank[flow] = rank.get(flow, 0) + 1
            expect[seq] = rank[flow]
            out = released.get((s, seq))
            if out and out[0][2] != rank[flow]:
                sim.fail(f"P3: slot {s} seq {seq} flow {flow}: count {out[0][2]}, lineage says {rank[flow]}")
        for (s2, seq), outs2 in released.items():
            if s2 == s and seq not in expect:
                sim.fail(f"P1: slot {s} seq {seq} output by NF {outs2[0][0]} but not in the lineage")
        # every output leaves, exactly once: also what a primary processed before it died (its
        # promoted backup sends the logged output again; the switch drops what had left)
        unreleased = [seq for seq, _f, _c in lineage if (s, seq) not in released]
        if unreleased:
            sim.fail(f"P2: slot {s}: processed but never output: {unreleased}")
        # P1: a number missing from the lineage was never available to its owner, and is counted
        # (a loss after the last packet processed is seen by nobody until a later packet comes)
        in_lineage = {seq for seq, _f, _c in lineage}
        tail = max((key(q) for q in in_lineage), default=-1)
        got: set[tuple[int, int]] = set()
        lo = -1
        for nf, hi, how in segs:
            # packets that reached the previous owner after a move are forwarded: available
            got = (got if how.startswith("move") else set()) | sim.delivered.get(nf, set())
            missing = [
                q for q in sim.stamped[s] if q not in in_lineage and lo < key(q) <= hi and key(q) < tail
            ]
            unprocessed += [(s, q) for q in missing if (s, q) in got and (s, q) not in sim.link_lost]
            rt = sim.nodes[nf].w.slots.get(s)
            once = [seg[0] for seg in segs].count(nf) == 1
            if once and rt is not None and (
                rt.seq.gaps < len(missing) or (not sim.nodes[nf].dead and rt.seq.gaps != len(missing))
            ):
                sim.fail(f"P1: slot {s}: {len(missing)} numbers missing in NF {nf}'s turn, "
                         f"it counted {rt.seq.gaps} gaps")
            lo = max(lo, hi)
        # final state of the owner = the lineage's counts (P3/P4: nothing lost in the hand-over)
        owner = sim.nodes[segs[-1][0]].w.slots[s]
        if owner.role != SlotRole.PRIMARY:
            sim.fail(f"slot {s} is {owner.role!r} at its final owner")
        final = {sim.keys[f]: n for f, n in rank.items()}
        have = {k: v["count"] for k, v in owner.state.flows.items() if v["count"]}
        if have != final:
            sim.fail(f"P3: final state of slot {s} {have} != lineage counts {final}")
    overflows = sum(n.w.c.overflows + n.w.inbuf.overflows for n in sim.nodes.values())
    if len(unprocessed) > overflows:
        sim.fail(f"P1: reached their owner but never processed ({overflows} overflows): {unprocessed}")


def check_move(sim: Sim, s: int, src: int, dst: int, how: str, res: ReleaseResult) -> None:
    """P4: what the transfer carried."""
    xfers = [m for f, m in sim.nodes[dst].transfers if f == src and m.slot == s]
    if not xfers:
        sim.fail(f"P4: no transfer of slot {s} from NF {src} to NF {dst}")
        return
    x = xfers[-1]
    src_state = sim.state_at(s, x.seq)
    shipped: set[FlowId] = {struct_key(e[0]) for e in x.flows}
    if how == "inter":
        if res.delta or len(shipped) != len(src_state):
            sim.fail(f"P4: inter-cluster move shipped {len(shipped)} of {len(src_state)} flows")
    elif res.delta:  # exactly the flows that changed after the version the peer acknowledged
        base_seq = sim.version_seq.get((src, s, x.base))
        ref = sim.state_at(s, base_seq)
        changed = {k for k, v in src_state.items() if ref.get(k) != v}
        if shipped != changed:
            sim.fail(f"P4: intra-cluster move shipped {shipped}, changed since the base {changed}")
    if res.bytes_shipped != len(encode(x)):
        sim.fail(f"P4: bytes_shipped {res.bytes_shipped} != transfer size {len(encode(x))}")


def struct_key(raw: object) -> FlowId:
    return key_from_wire(raw)


def _backup_linked(node: Node) -> bool:
    """Whether `node` has no backup, or its link to it is up (an adopter needs it)."""
    link = node.w.links.get(node.w.backup_id) if node.w.backup_id else None
    return not node.w.backup_id or (link is not None and link.writer is not None)


def run_seed(seed: int) -> tuple[Sim, str]:
    return asyncio.run(asyncio.wait_for(scenario(seed), 30))


def seeds() -> list[int]:
    env = os.environ.get("PROP_SEED")
    if env:
        return [int(env)]
    first = int(os.environ.get("PROP_FIRST", "0"))  # longer hunts: PROP_FIRST=1000 PROP_SEEDS=5000
    return REGRESSION_SEEDS + list(range(first, first + int(os.environ.get("PROP_SEEDS", SEEDS))))


def test_protocol_invariants_hold_for_random_schedules() -> None:
    failures = []
    for seed in seeds():
        sim, desc = run_seed(seed)
        if sim.errors:
            failures.append(f"{desc}: " + "; ".join(sim.errors[:3]))
    assert not failures, f"{len(failures)} seeds failed (rerun one with PROP_SEED=):\n" + "\n".join(
        failures[:10]
    )
