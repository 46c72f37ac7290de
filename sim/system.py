"""One simulated nfcluster: two real controller processes (one leads), the in-memory etcd, real
NF workers, the switch model, traffic, and the events of one seeded run (moves, kills, hangs,
cuts, lost replies, leader deaths, switch restarts, etcd outages), overlapping.

A run is a pure function of its `Scenario` and seed: the same seed takes the same steps, so a
failing seed replays exactly (`python -m sim --seed N --trace`).

The cluster (`CONFIG`): cluster c1 with primaries 1 and 2 (backups 3 and 4) and spare 5; cluster
c2 with primary 6 (backup 7) and spare 8; four nodes, so every pair is on two nodes and a spare
can replace either side. Every NF runs the checker NF, which writes its running per-flow count into
each packet: the sink's check of (packet number, count) per flow is the end-to-end proof of
exactly-once processing with no state lost (docs/protocols.md, P6).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import random
from dataclasses import dataclass, field
from typing import Any

from controlplane.config import ControllerConfig, parse_config
from controlplane.controller import Controller
from controlplane.migration import MoveError
from nf_host import replication
from nf_host.harness import checker_frame
from sim import network
from sim.checks import MAX_PROBLEMS, check, last_delivered
from sim.controllers import SimController
from sim.etcd import SimEtcd
from sim.loop import run
from sim.network import SimNet
from sim.nf import SimNf
from sim.switch import SwitchModel

LOG = logging.getLogger("sim")

NODES = {1: "a", 2: "b", 3: "b", 4: "a", 5: "c", 6: "c", 7: "d", 8: "a"}
CLUSTER = {1: "c1", 2: "c1", 3: "c1", 4: "c1", 5: "c1", 6: "c2", 7: "c2", 8: "c2"}
ROLES = {1: ("primary", 3), 2: ("primary", 4), 3: ("backup", None), 4: ("backup", None),
         5: ("spare", None), 6: ("primary", 7), 7: ("backup", None), 8: ("spare", None)}


def host_of(nf_id: int) -> str:
    """The NF's (simulated) management address: nothing is ever sent to it for real."""
    return f"127.0.1.{nf_id}"


def config(slot_bits: int) -> ControllerConfig:
    def nf(i: int) -> dict[str, Any]:
        role, backup = ROLES[i]
        return {"id": i, "name": f"nf{i}", "node": NODES[i], "cluster": CLUSTER[i], "role": role,
                "backup": backup, "port": i, "mac": f"02:00:00:00:01:{i:02x}",
                "mgmt": f"{host_of(i)}:50000", "replication": f"{host_of(i)}:7000"}
    return parse_config({
        "switch": {"slot_bits": slot_bits},
        "clusters": [{"name": "c1"}, {"name": "c2"}],
        "nfs": [nf(i) for i in sorted(ROLES)],
        # (the start-up grace pinned: the seeds' paths do not follow the real machine's default,
        # which is tuned to start-up stalls a simulated NF does not have)
        "heartbeat": {"interval_ms": 50, "misses": 3, "timeout_ms": 40,
                      "confirm_timeout_ms": 200, "transport": "grpc",
                      "startup_grace_ms": 3000, "startup_confirm_timeout_ms": 1000},
        "etcd": {"leader_ttl_s": 1.0},
        "security": {"etcd_tls": False},  # (the in-memory etcd: sim/etcd.py)
    })


@dataclass
class Scenario:
    """What one run does (the defaults are CI's)."""

    duration: float = 4.0          # seconds of traffic and events (virtual)
    settle: float = 6.0            # then no new event: everything heals, the system settles
    flows: int = 24
    rate: float = 400.0            # packets/s over all flows
    slot_bits: int = 3             # 8 slots: moves and fail-overs meet the same slots often
    moves: float = 3.0             # slot moves per second (the API's migrate)
    kills: float = 0.4             # NF crashes per second (at most one NF down at a time)
    hangs: float = 0.3             # NF hangs per second (then resumed: a zombie)
    cuts: float = 0.3              # controller <-> NF management cuts per second
    lost_replies: float = 0.0      # probability that a call's reply is lost after it acted...
    lost_reply_calls: str = "Release,Adopt,CancelAdopt,AssignSlots,Promote"  # ...for these calls
    slow_ports: float = 0.2        # per second: a port queue that stalls up to `max_queue`
    max_queue: float = 0.5         # seconds a port queue can hold a frame (the docs admit 1 s)
    leader_kills: float = 0.0      # per second: the leading controller dies (at a chosen step)
    switch_restarts: float = 0.0   # per second: the switch restarts (its state lost)
    etcd_outages: float = 0.0      # per second: etcd loses its quorum for a while
    etcd_outage_max: float = 1.5   # seconds an etcd outage lasts at most
    adopter_kills: float = 0.0     # probability that a move's adopter dies in its first 30 ms
    peer_policy: bool = False      # replication servers admit known peers only (as nf-host run)
    stalls: float = 0.0            # per second: an NF stalls (a busy host), overlapping anything
    stall_max: float = 0.8         # seconds a stall lasts at most (then the NF goes on: a zombie)


@dataclass
class Event:
    at: float
    what: str

    def __str__(self) -> str:
        return f"{self.at:9.4f}  {self.what}"


@dataclass
class Outcome:
    """What a run shows: the trace of events and what the checks found."""

    seed: int
    trace: list[Event] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    stamped: int = 0
    delivered: int = 0
    moves: int = 0
    moves_ok: int = 0
    failovers: int = 0
    faults: int = 0
    virtual_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


class System:
    """The parts of one run, wired (see the module docstring)."""

    def __init__(self, seed: int, sc: Scenario) -> None:
        self.seed, self.sc = seed, sc
        self.rng = random.Random(seed)
        self.net = SimNet(random.Random(self.rng.getrandbits(64)))
        self.outcome = Outcome(seed)
        self.cfg = config(sc.slot_bits)
        self.switch = SwitchModel(random.Random(self.rng.getrandbits(64)), self._to_nf)
        self.switch.step = self._step
        self.nfs = {i: SimNf(self.net, i, host_of(i), 7000, self.switch.from_port,
                             peer_policy=sc.peer_policy)
                    for i in sorted(ROLES)}
        self._lose = random.Random(self.rng.getrandbits(64))
        self.etcd = SimEtcd(self.net, random.Random(self.rng.getrandbits(64)), self._step)
        self.ctls = [SimController(f"ctl{i}", self.cfg, self.net, self.nfs, self.switch,
                                   self.etcd, self._lose_reply, self._step, self._exited)
                     for i in (1, 2)]
        self.sent: dict[int, int] = {}  # flow -> packets sent
        self.down: set[int] = set()  # NFs dead or hung now (the run keeps it to one)
        self.events_on = False  # replies are lost only once the system is up
        self._pending: dict[asyncio.Task[Any], None] = {}  # the events' own tasks
        # a controller death armed to strike at a step of the leader: (what, node, deadline)
        self.armed: tuple[str, str, float] | None = None

    @property
    def ctl(self) -> Controller:
        """The controller that leads now, else the most recent one."""
        lead = self.leader()
        if lead is not None:
            assert lead.ctl is not None
            return lead.ctl
        return max((c for c in self.ctls if c.ctl is not None),
                   key=lambda c: c.ctl.started if c.ctl else 0).ctl  # type: ignore[return-value]

    def leader(self) -> SimController | None:
        for c in self.ctls:
            if c.leading:
                return c
        return None

    def controllers(self) -> list[Controller]:
        """Every controller instance of the run (each process's incarnations)."""
        return [ctl for c in self.ctls for ctl in c.history]

    # -- wiring -------------------------------------------------------------------------------
    def _to_nf(self, port: int, frame: bytes) -> None:
        nf = self.nfs.get(port)
        if nf is not None:
            nf.on_frame(frame)

    def _lose_reply(self, nf_id: int, call: str) -> str:
        if self.events_on and call in self.sc.lost_reply_calls.split(",") \
                and self._lose.random() < self.sc.lost_replies:
            how = self._lose.choice(("reset", "silent"))
            self.log(f"the reply of {call} to NF {nf_id} is lost ({how}; the call took effect)")
            return how
        return ""

    def log(self, what: str) -> None:
        self.outcome.trace.append(Event(asyncio.get_running_loop().time(), what))

    # -- the run ------------------------------------------------------------------------------
    async def run(self) -> Outcome:
        loop = asyncio.get_running_loop()
        loop.set_task_factory(self._task_factory)
        loop.set_exception_handler(self._loop_error)
        for nf in self.nfs.values():
            await nf.start()
        # the first process is elected, reconciles the switch and configures the NFs; the
        # second stands by
        first, second = self.ctls
        first.start()
        await self._until(lambda: first.leading, 5.0, "the first leader")
        second.start()
        await self._until(lambda: len(self.ctl.nfs_configured) == len(self.nfs), 5.0,
                          "configured")
        self.events_on = True
        drivers = [asyncio.ensure_future(d) for d in (
            self._traffic(), self._moves(), self._faults())]
        await asyncio.sleep(self.sc.duration)
        for d in drivers:
            d.cancel()
        await asyncio.gather(*drivers, return_exceptions=True)
        self.events_on = False
        await self._heal()
        await asyncio.sleep(self.sc.settle)
        await self._final_packets()
        self.outcome.virtual_s = loop.time()
        for c in self.ctls:
            c.kill()
        return self.outcome

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """An exception nobody retrieved (a task of the controller or of a worker that died of
        a bug) is a finding, with its trace: the stock handler would only log it."""
        exc = context.get("exception")
        what = f"{type(exc).__name__}: {exc}" if exc is not None else context.get("message", "")
        task = context.get("future") or context.get("task")
        where = getattr(task, "get_name", lambda: "")()
        self.log(f"unhandled exception in {where or 'a callback'}: {what}")
        self.outcome.problems.append(f"an exception nobody handled ({where}): {what}")
        loop.default_exception_handler(context)

    def _later(self, coro: Any) -> None:
        # (in no node's context: a task of the run, not of the process that triggered it)
        task = asyncio.get_running_loop().create_task(coro, context=contextvars.Context())
        self._pending[task] = None
        task.add_done_callback(lambda t: self._pending.pop(t, None))

    def _task_factory(self, loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> Any:
        task = asyncio.Task(coro, loop=loop, **kw)
        self.net.track(task, kw.get("context"))
        return task

    async def _until(self, cond: Any, timeout: float, what: str) -> bool:
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while not cond():
            if loop.time() > end:
                self.outcome.problems.append(f"timed out waiting for {what}")
                return False
            await asyncio.sleep(0.01)
        return True

    # -- drivers ------------------------------------------------------------------------------
    def _send(self, flow: int) -> None:
        no = self.sent.get(flow, 0) + 1
        slot = flow % self.ctl.slot_map.slot_count
        if self.switch.ingress(slot, checker_frame(flow, no)) is not None:
            self.sent[flow] = no
            self.outcome.stamped += 1

    async def _traffic(self) -> None:
        rng = random.Random(self.rng.getrandbits(64))
        while True:
            await asyncio.sleep(rng.expovariate(self.sc.rate))
            self._send(rng.randrange(1, self.sc.flows + 1))

    async def _moves(self) -> None:
        if self.sc.moves <= 0:
            return
        rng = random.Random(self.rng.getrandbits(64))
        while True:
            await asyncio.sleep(rng.expovariate(self.sc.moves))
            ctl = self.ctl
            slot = rng.randrange(ctl.slot_map.slot_count)
            stage = self.cfg.stage_of_slot(slot)
            targets = sorted(p for p in ctl.pairs if self.cfg.stage_of(p) == stage
                             and p != ctl.slot_map.owner(slot))
            if not targets:
                continue
            to = rng.choice(targets)
            lead = self.leader()
            if lead is None:
                continue
            self.log(f"move slot {slot} from NF {ctl.slot_map.owner(slot)} to NF {to}"
                     f" ({lead.name})")
            task = self.net.spawn(lead.name, self._move(ctl, slot, to))
            self._pending[task] = None
            task.add_done_callback(lambda t: self._pending.pop(t, None))
            if rng.random() < self.sc.adopter_kills and self._protected():
                # mid-move: after its Adopt, before or after the old owner's transfer reaches it
                self._later(self._kill_adopter(to, rng.uniform(0.001, 0.03), rng))

    async def _kill_adopter(self, nf: int, after: float, rng: random.Random) -> None:
        await asyncio.sleep(after)
        # a single fault: not the old owner of a move still undecided (the only holder of that
        # slot's state: its death with the adopter's is a double fault)
        if self._protected() and not any(m.src == nf for m in self.ctl.open_moves.values()):
            self.log(f"kill NF {nf} (the adopter of a move)")
            self.outcome.faults += 1
            self._kill(nf, rng)

    async def _move(self, ctl: Controller, slot: int, to: int) -> None:
        try:
            results = await ctl.migrate([slot], to)
        except MoveError as exc:
            self.log(f"move of slot {slot} to NF {to} refused: {exc}")
            return
        for r in results:
            self.outcome.moves += 1
            self.outcome.moves_ok += r.ok
            self.log(f"move of slot {slot} to NF {to}: ok={r.ok} epoch={r.epoch}"
                     f"{' undone' if r.undone else ''} {r.error}")

    async def _faults(self) -> None:
        sc = self.sc
        rates = {"kill": sc.kills, "hang": sc.hangs, "cut": sc.cuts, "slow": sc.slow_ports,
                 "leader": sc.leader_kills, "switch": sc.switch_restarts,
                 "etcd": sc.etcd_outages, "stall": sc.stalls}
        total = sum(rates.values())
        if total <= 0:
            return
        rng = random.Random(self.rng.getrandbits(64))
        kinds = sorted(rates)
        while True:
            await asyncio.sleep(rng.expovariate(total))
            kind = rng.choices(kinds, [rates[k] for k in kinds])[0]
            nf = rng.choice(sorted(self.nfs))
            self.outcome.faults += 1
            if kind == "slow":
                self._slow_port(nf, rng.uniform(0.01, sc.max_queue))
                continue
            if kind == "leader":
                self._kill_leader(rng)
                continue
            if kind == "switch":
                downtime = rng.uniform(0.01, 0.5)
                self.log(f"the switch restarts (down {downtime:.3f} s)")
                self.switch.restart(downtime)
                continue
            if kind == "etcd":
                length = rng.uniform(0.05, sc.etcd_outage_max)
                self.log(f"etcd loses its quorum for {length:.3f} s")
                self.etcd.outage(length)
                continue
            if kind == "stall":
                # (whatever else is down or under way: a busy host starving its processes; no
                # NF dies, so nothing may be lost)
                self._hang(nf, rng.uniform(0.05, sc.stall_max), "stall")
                continue
            if not self._protected():
                continue  # one fault at a time for each pair (double faults lose state by design)
            if kind == "kill":
                self.log(f"kill NF {nf}")
                self._kill(nf, rng)
            elif kind == "hang":
                self._hang(nf, rng.uniform(0.05, 1.0), "hang")
            else:
                lead = self.leader()
                if lead is None:
                    continue
                length = rng.uniform(0.05, 1.0)
                self.log(f"cut the controller ({lead.name}) from NF {nf} for {length:.3f} s")
                self.net.cut(lead.name, self.nfs[nf].name)
                self._later(self._heal_later(lead.name, nf, length))

    def _hang(self, nf: int, length: float, what: str) -> None:
        """NF `nf` stops for `length` seconds, then goes on (a zombie)."""
        if nf in self.down:
            return  # (dead or stopped already)
        self.log(f"{what} NF {nf} for {length:.3f} s")
        self.down.add(nf)
        self.net.hang(self.nfs[nf].name)
        self._later(self._resume_later(nf, length))

    def _kill(self, nf: int, rng: random.Random) -> None:
        self.down.add(nf)
        self.nfs[nf].kill()
        self._later(self._restart_later(nf, rng.uniform(0.3, 1.5)))

    def _protected(self) -> bool:
        """Every NF up and configured, every primary with a live backup: a crash or hang now is
        a single fault, which the system must survive without loss. (A fault while a primary has
        no backup is a double fault: its state is lost by design, `failover.state_lost`.) Only
        while a controller leads (a fault of an NF while none does is acted on late, not lost)."""
        lead = self.leader()
        if lead is None or lead.ctl is None:
            return False
        ctl = lead.ctl
        if self.down or any(not nf.alive for nf in self.nfs.values()):
            return False
        if len(ctl.nfs_configured) < len(self.nfs) or ctl.orphans:
            return False
        return all(b is not None and not ctl.registry.nfs[b].declared_down
                   for b in ctl.pairs.values())

    def _slow_port(self, nf: int, seconds: float) -> None:
        self.log(f"port {nf}'s queues hold frames up to {seconds:.3f} s")
        self.switch.slow_ports[nf] = (seconds / 2, seconds)
        loop = asyncio.get_running_loop()
        loop.call_later(seconds * 2, self.switch.slow_ports.pop, nf, None)

    async def _restart_later(self, nf: int, after: float) -> None:
        await asyncio.sleep(after)
        if self.nfs[nf].alive:
            return  # (restarted already: the events ended)
        self.log(f"NF {nf} restarts (a new process)")
        await self.nfs[nf].start()
        self.down.discard(nf)

    async def _resume_later(self, nf: int, after: float) -> None:
        await asyncio.sleep(after)
        self.log(f"NF {nf} resumes")
        self.net.resume(self.nfs[nf].name)
        self.down.discard(nf)

    async def _heal_later(self, ctl: str, nf: int, after: float) -> None:
        await asyncio.sleep(after)
        self.log(f"the cut between the controller ({ctl}) and NF {nf} heals")
        self.net.heal(ctl, self.nfs[nf].name)

    # -- controller deaths --------------------------------------------------------------------
    STEPS = ("now", "switch write", "slot etcd write", "journal write", "move call")

    def _kill_leader(self, rng: random.Random) -> None:
        """The leader dies now or at a chosen step of its own (before the step takes effect):
        its next switch write, its next etcd write of a slot (a move's, after its switch
        write), of the move journal, or its next call of a move or a fail-over to an NF. Only
        while the other process stands by (alive), one armed death at a time."""
        lead = self.leader()
        if lead is None or self.armed is not None or not all(c.alive for c in self.ctls):
            return
        at = rng.choice(self.STEPS)
        now = asyncio.get_running_loop().time()
        if at == "now":
            self._kill_ctl(lead, "now")
            return
        self.log(f"the leader ({lead.name}) will die at its next step: {at}")
        self.armed = (at, lead.name, now + 1.0)
        self._later(self._disarm_later(lead, 1.0))

    async def _disarm_later(self, lead: SimController, after: float) -> None:
        await asyncio.sleep(after)
        if self.armed is not None and self.armed[1] == lead.name:
            self.armed = None
            if lead.alive:
                self._kill_ctl(lead, "no such step within 1 s: now")

    def _step(self, node: str, what: str) -> None:
        """The hook every controller step passes (`sim.etcd`, `SimSession`, `SimRegistry`)."""
        armed = self.armed
        if armed is None or armed[1] != node:
            return
        at = armed[0]
        hit = ((at == "switch write" and what == "switch write")
               or (at == "slot etcd write" and ("/slots/s/" in what and what[:3] in ("put", "txn")))
               or (at == "journal write" and "/slots/moves/" in what)
               or (at == "move call" and what in ("Adopt", "Release", "CancelAdopt", "Promote",
                                                 "AssignSlots")))
        if hit:
            self.armed = None
            ctl = next(c for c in self.ctls if c.name == node)
            self._kill_ctl(ctl, f"before {what}")

    def _kill_ctl(self, c: SimController, how: str) -> None:
        self.log(f"kill the controller {c.name} ({how})")
        self.outcome.faults += 1
        c.kill()
        self._later(self._restart_ctl_later(c, 0.3 + self._lose.random()))

    def _exited(self, c: SimController) -> None:
        """A controller process stopped by itself (it lost its lease): a supervisor starts it
        again, as a standby."""
        self.log(f"the controller {c.name} stops (exit status {c.exit_status})")
        self._later(self._restart_ctl_later(c, 0.3 + self._lose.random()))

    async def _restart_ctl_later(self, c: SimController, after: float) -> None:
        await asyncio.sleep(after)
        if not c.alive:
            self.log(f"the controller {c.name} starts again (a standby)")
            c.start()

    async def _heal(self) -> None:
        """End of the events: every cut healed, every hung NF resumed, every dead one restarted."""
        self.log("events end: everything heals")
        for key in list(self.net.cuts):
            a, b = sorted(key)
            self.net.heal(a, b)
        for nf_id, nf in self.nfs.items():
            node = self.net.nodes.get(nf.name)
            if node is not None and node.hung:
                self.net.resume(nf.name)
            if not nf.alive:
                await nf.start()
            self.down.discard(nf_id)
        self.switch.slow_ports.clear()
        self.armed = None
        self.etcd.recover()
        for c in self.ctls:
            if not c.alive:
                self.log(f"the controller {c.name} starts again (a standby)")
                c.start()

    async def _final_packets(self) -> None:
        """After the settle time, one more packet per flow: each must come out (no slot wedged)."""
        self.log("a last packet on every flow")
        for flow in range(1, self.sc.flows + 1):
            self._send(flow)
        want = dict(self.sent)
        await self._until(lambda: self._delivered_upto(want), 10.0,
                          "the last packet of every flow (a wedged slot?)")

    def _delivered_upto(self, want: dict[int, int]) -> bool:
        got = last_delivered(self.switch.edge)
        return all(got.get(f, 0) >= n for f, n in want.items())


def run_seed(seed: int, sc: Scenario | None = None) -> Outcome:
    """One run of `sc` with `seed`, checked (sim.checks)."""
    system = System(seed, sc or Scenario())
    saved = replication.TRANSPORT
    replication.TRANSPORT = system.net
    try:
        outcome = run(system.run())
    except Exception as exc:  # a crash of the run is a finding too, with its trace
        outcome = system.outcome
        outcome.problems.append(f"the run raised {type(exc).__name__}: {exc}")
    finally:
        replication.TRANSPORT = saved
    outcome.delivered = len(system.switch.edge)
    outcome.failovers = sum(len(c.failovers) for c in system.controllers())
    outcome.problems += check(system)
    del outcome.problems[MAX_PROBLEMS:]
    return outcome


__all__ = ["Outcome", "Scenario", "System", "network", "run_seed"]
