"""Chaos: faults of the control plane's own parts, beside the NF faults of `topo.faults.injector`.

`make chaos` (`nfc-topo run --chaos ...`) and `make soak` mix, from one seeded schedule and one
at a time, the NF faults (a primary, backup or spare killed; with `hang`, stopped) with:

* **controller**: the leading `nfc-controller` is SIGKILLed. Detection: until the standby says
  it is elected (its lease campaign won, once the dead leader's lease expired); recovery: until
  it is the switch's primary and has reconciled. The killed one is started again as the new
  standby. The data plane forwards meanwhile (nothing on the switch changes). A controller that
  stopped by itself (a leader whose lease could not be renewed exits with status 3) is started
  again before the next fault, and counted (`topo.launch.controllers.Controllers.revived`).
* **etcd**: one member of the three is SIGKILLed and, `ETCD_DOWN_S` later, started again.
  Detection: none needed (the clients ride over it); recovery: until the member reports a
  healthy cluster again. The controller must keep leading throughout (checked).

* **switch**: the switch process (p4sim, or BMv2) SIGKILLed and started again at once (same
  ports). Recovery: until the leading controller has reconnected, pushed the pipeline and
  reconciled every entry and group, having first set each slot's numbering back to where the
  NFs are. Packets sent during the outage, from the kill to that reconcile, are lost on the
  wire (`window`); the verdict excuses those, and only those (topo/faults/loss_evidence.py).
* **netem**: `tc netem` (1 ms delay, 1 % loss, 1 % duplication, 10 % reordering) for
  `NETEM_S` on the switch's side of a primary's data link, that is on everything the switch sends
  it. The NF's sequencer puts reordered packets back in order and drops duplicates; a packet the
  wire lost is a gap the NF skips and counts. The record keeps what netem dropped (`wire_lost`)
  and the gaps the NF counted meanwhile: the run's losses are the wire's, never the system's.
  Where the kernel has no `sch_netem` and the switch is p4sim, p4sim's own wire impairment of
  that switch port does the same (`POST /ports/{port}/impair` on its status server, p4sim/
  impair.py; mode `p4sim`, target `p4sim:port N`): `wire_lost` is then what the impairment
  dropped over its life, and `impair` all it counted (the answer that ends it says). Its
  `window` and `slots` (the primary's, as it began) tie what it dropped to the flows it crossed.

* **mgmt** (the NF faults' injector, `topo.faults.injector.FaultInjector.cut_mgmt`, with
  `topo.faults.mgmt_cut`): an NF's management link cut for twice the heartbeat deadline
  (`heartbeat_deadline_s`), then restored; the NF comes back as a spare that owns nothing.

Each fault is a `FaultRecord` (kind, mode, target, detection and recovery times); the memory of
the run's processes is topo/faults/memory.py's.
"""

from __future__ import annotations

import functools
import re
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.table import Table

from topo.etcd import EtcdCluster
from topo.faults.injector import FaultInjector, percentiles
from topo.faults.loss_evidence import system_line
from topo.faults.losses import queued_in_switch
from topo.http_api import api_status, http_json
from topo.procs import wait_for

if TYPE_CHECKING:
    from topo.launch.controllers import Controllers
    from topo.model import System

ETCD_DOWN_S = 2.0
NETEM = "delay 1ms loss 1% duplicate 1% reorder 10%"
NETEM_CALM = "delay 1ms"  # NETEM without loss or duplication: what it has dropped stays counted
IMPAIR = {"delay_ms": 1, "loss": 0.01, "duplicate": 0.01, "reorder": 0.1}  # NETEM, for p4sim
NETEM_S = 3.0


@dataclass
class ControlFault:
    """A controller or etcd fault and what it cost (same fields as an NF's `FaultRecord`)."""

    kind: str
    mode: str
    nf: int  # the etcd member's index; 0 for a controller
    at: float
    target: str = ""
    detection_ms: float | None = None
    takeover_ms: float | None = None  # recovery: see the module docstring
    ok: bool = False
    error: str = ""
    slots: list[int] = field(default_factory=list)
    promoted: int | None = None
    new_backup: int | None = None
    wire_lost: int = 0  # netem: packets the link dropped
    gaps: int = 0  # netem: sequence numbers the NF skipped meanwhile
    # switch: the outage; netem: the impairment (time.time() from, to): topo.faults.loss_evidence
    window: tuple[float, float] | None = None
    impair: dict[str, int] = field(default_factory=dict)  # netem by p4sim: what it counted
    held: int | None = None  # switch: frames queued in its sockets at its kill (None: not read)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "mode": self.mode, "nf": self.nf, "target": self.target,
                "at": self.at, "detection_ms": self.detection_ms, "takeover_ms": self.takeover_ms,
                "ok": self.ok, "error": self.error, "slots": len(self.slots), "promoted": None,
                "new_backup": None, "wire_lost": self.wire_lost, "gaps": self.gaps,
                "window": self.window, "impair": self.impair, "held": self.held,
                "slot_ids": self.slots}


def kill_leader(ctls: Controllers, timeout: float = 30.0) -> ControlFault:
    """SIGKILL the leading controller; wait for the standby to lead and reconcile; start the
    killed one again as the standby."""
    leader = ctls.leader()
    rec = ControlFault("controller", "kill", 0, time.time(), target=leader or "?")
    if leader is None:
        rec.error = "no controller leads"
        return rec
    with ctls.held(leader):  # started again at the end, as the standby
        proc = ctls.procs[leader]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        _await_takeover(ctls, leader, rec, timeout)
    return rec


def _await_takeover(ctls: Controllers, leader: str, rec: ControlFault, timeout: float) -> None:
    """After `leader` was killed: a standby elected (detection), then primary and reconciled
    (takeover), each timed in `rec`; a timeout is `rec`'s error."""
    others = [n for n in ctls.apis if n != leader]
    try:
        def elected() -> str | None:
            for n in others:
                st = api_status(ctls.apis[n])
                if st is not None and st["leadership"]["elected"]:
                    return n
            return None

        new = wait_for(elected, timeout=timeout, interval=0.02, what="a standby elected")
        rec.detection_ms = (time.time() - rec.at) * 1000

        def reconciled() -> bool:
            st = api_status(ctls.apis[new])
            return bool(st and st["switch"]["primary"] and st["switch"]["last_reconcile"] is not None
                        and st["nfs"]["configured"] == st["nfs"]["total"])

        wait_for(reconciled, timeout=timeout, interval=0.02, what=f"{new} primary and reconciled")
        rec.takeover_ms = (time.time() - rec.at) * 1000
        rec.ok = True
    except TimeoutError as exc:
        rec.error = str(exc)


def kill_etcd_member(cluster: EtcdCluster, index: int, ctls: Controllers,
                     timeout: float = 30.0) -> ControlFault:
    """SIGKILL etcd member `index`, start it again ETCD_DOWN_S later, wait until it is healthy;
    a controller must lead throughout."""
    rec = ControlFault("etcd", "kill", index, time.time(), target=f"etcd-{index}")
    cluster.kill(index)
    time.sleep(ETCD_DOWN_S)  # the fault's duration, not synchronisation
    led = ctls.leader() is not None
    cluster.start(index)
    try:
        wait_for(lambda: cluster.healthy(index), timeout=timeout, interval=0.05,
                 what=f"etcd member {index} healthy")
        rec.takeover_ms = (time.time() - rec.at) * 1000
        rec.ok = led
        rec.error = "" if led else "no controller led while the member was down"
    except TimeoutError as exc:
        rec.error = str(exc)
    return rec


def restart_switch(switch: Any, ctls: Controllers, stats: str | None = None,
                   timeout: float = 30.0) -> ControlFault:
    """SIGKILL the switch process and start it again; wait for the leader's next reconcile.
    `stats`: p4sim's status server, whose count of the frames queued in its sockets, read just
    before the kill, is how many of the packets sent before it the kill may have lost."""
    inside = queued_in_switch(stats)
    rec = ControlFault("switch", "restart", 0, time.time(), target=str(switch.name))
    switch.proc.kill()
    switch.proc.wait(timeout=10)
    try:
        switch.start([])
        rec.detection_ms = (time.time() - rec.at) * 1000  # the switch serves again

        def reconciled() -> bool:
            name = ctls.leader()
            st = api_status(ctls.apis[name]) if name is not None else None
            return bool(st and st["switch"]["primary"]
                        and (st["switch"].get("reconciled_at") or 0) > rec.at)

        wait_for(reconciled, timeout=timeout, interval=0.02, what="the switch reconciled again")
        rec.takeover_ms = (time.time() - rec.at) * 1000
        rec.ok = True
    except (TimeoutError, RuntimeError) as exc:
        rec.error = str(exc)
    # packets sent until the entries were back are lost, and those inside the killed switch:
    # counted just before the kill (`held`: sent before the window, at most that many), else
    # the window opens 0.2 s before the kill
    if inside is None:
        rec.window = (rec.at - 0.2, time.time())
    else:
        rec.held, since = inside
        rec.window = (since, time.time())
    return rec


def heartbeat_deadline_s(sys_: System) -> float:
    """How long the controller waits before it acts on a silent NF, from this run's heartbeat
    settings: `misses` intervals, the last heartbeat's own deadline, and the confirming probe."""
    hb, opts = sys_.cfg.heartbeat, sys_.opts
    interval = opts.heartbeat_ms or hb.interval_ms
    timeout = opts.heartbeat_ms or hb.timeout_ms
    confirm = opts.confirm_ms or hb.confirm_timeout_ms
    return (interval * (opts.heartbeat_misses or hb.misses) + timeout + confirm) / 1000


def injector(sys_: System) -> FaultInjector:
    """The run's fault injector: NF faults (kill, hang, restart as a spare), the control-plane
    faults above, and `mgmt` cuts (topo.faults.mgmt_cut) of twice the heartbeat deadline."""
    opts, cfg = sys_.opts, sys_.cfg
    by_id = dict(zip(sorted(nf.id for nf in cfg.nfs), sys_.nf_procs, strict=True))
    # with random moves, a fail-over may wait for the move lock: a Release that never answers
    # holds it for its deadline, 19 s (docs/protocols.md, Known limits)
    faults = FaultInjector(sys_.api, by_id, sys_.restart_nf, seed=opts.seed, hang=opts.hang,
                           kinds=opts.fault_kinds, etcd_members=len(sys_.etcd.members),
                           zombies=opts.zombies, timeout=30.0 if opts.moves else 15.0)
    ctls, switch_node = sys_.ctls, sys_.net.get(sys_.topo.switch_name)
    def control_fault(kind: str, target: int) -> ControlFault:
        if kind == "controller":
            return kill_leader(ctls)
        if kind == "etcd":
            return kill_etcd_member(sys_.etcd, target, ctls)
        if kind == "switch":
            return restart_switch(switch_node, ctls, sys_.switch_stats)
        port = cfg.nf(target).port
        # the losses it may excuse: those of the slots the NF owned when it began, and of those
        # moved or failed over to it while it lasted (owned at its end; its count bounds them)
        slots = owned_slots(faults.leading(), target)
        if not netem_available() and sys_.switch_stats is not None:  # p4sim does it
            seed = opts.seed * 1000 + len(faults.records)
            rec = impair_on_data_link(sys_.switch_stats, port, target, faults.leading, seed)
        else:
            intf = switch_node.intfs[port].name
            rec = netem_on_data_link(switch_node.cmd, intf, target, faults.leading)
        rec.slots = sorted(set(slots) | set(owned_slots(faults.leading(), target)))
        return rec

    faults.control = control_fault
    faults.follow = ctls.leader_api
    faults.between = ctls.revive
    cuts = sys_.cuts
    if cuts is not None:
        faults.cut = lambda nf, on: cuts.cut(nf) if on else cuts.restore(nf)
        faults.cut_s = 2 * heartbeat_deadline_s(sys_)
    return faults


@functools.cache
def netem_available() -> bool:
    """Whether this kernel has the netem qdisc (tried on the loopback of a new namespace, once
    per process: `nfc-topo chaos` asks before the run and at each netem fault)."""
    try:
        probe = subprocess.run(["unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root",
                                "netem", "delay", "1ms"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def owned_slots(api: str, nf: int) -> list[int]:
    """The slots NF `nf` owns as a primary now ([] if the controller does not say: then no
    loss can be tied to its link, and the verdict excuses none)."""
    try:
        return sorted(int(r["slot"]) for r in http_json(f"{api}/slots?nf={nf}"))
    except (OSError, ValueError, KeyError, TypeError):
        return []


def _gaps(api: str, nf: int) -> int:
    return next(int(r.get("gaps", 0)) for r in http_json(f"{api}/nfs") if r["id"] == nf)


def netem_on_data_link(run: Callable[[str], str], intf: str, nf: int, api: Callable[[], str],
                       gap_settle_s: float = 1.0) -> ControlFault:
    """netem on `intf` (the switch's side of NF `nf`'s data link; `run` runs a shell command
    where that interface is) for NETEM_S; the link's drops and the NF's gaps meanwhile."""
    rec = ControlFault("netem", "netem", nf, time.time(), target=intf)
    before = _gaps(api(), nf)
    out = run(f"tc qdisc replace dev {intf} root netem {NETEM}")
    if out.strip():
        rec.error = f"tc: {out.strip()}"
        return rec
    time.sleep(NETEM_S)  # the fault's duration, not synchronisation
    # losses off before the count is read (a frame dropped between the read and the removal
    # would be the system's loss); the delay stays, so nothing overtakes what the qdisc holds
    calmed = run(f"tc qdisc change dev {intf} root netem {NETEM_CALM}")
    stats = run(f"tc -s qdisc show dev {intf}")
    run(f"tc qdisc del dev {intf} root")
    if calmed.strip():
        rec.error = f"tc (losses off before the count): {calmed.strip()}"
        return rec
    # "Sent 181262 bytes 1795 pkt (dropped 17, overlimits 0 requeues 0)"
    dropped = re.search(r"\bdropped (\d+)", stats)
    rec.wire_lost = int(dropped.group(1)) if dropped else 0
    rec.window = (rec.at, time.time())
    # a lost number is skipped once a later one has waited out the NF's gap timeout
    time.sleep(gap_settle_s)  # (the NF's gap timeout is 200 ms in the scenario)
    rec.gaps = _gaps(api(), nf) - before
    rec.takeover_ms = NETEM_S * 1000
    rec.ok = True
    return rec


def p4sim_impair(stats: str, port: int, body: dict[str, Any] | None) -> dict[str, Any]:
    """Set (`body`) or clear (None) p4sim's wire impairment of `port` through its status server
    at `stats` (host:port); the port's entry, with its counters. OSError if refused or out of
    reach."""
    from p4sim.server.stats import impair_call

    return impair_call(stats, port, "POST" if body is not None else "DELETE", body)


def impair_on_data_link(stats: str, port: int, nf: int, api: Callable[[], str], seed: int = 0,
                        gap_settle_s: float = 1.0) -> ControlFault:
    """`netem_on_data_link` by p4sim (a kernel without sch_netem): p4sim's wire impairment of
    switch port `port` (NF `nf`'s data link; `stats`: p4sim's status server) with netem's
    parameters for NETEM_S; `wire_lost` is what the impairment dropped over its life, from the
    answer that ends it (`ended`: the port's counters read around the fault would miss what it
    dropped while the answer that set it was written; frames still held for their delay when it
    ends are sent, not dropped)."""
    rec = ControlFault("netem", "p4sim", nf, time.time(), target=f"p4sim:port {port}")
    before = _gaps(api(), nf)
    try:
        p4sim_impair(stats, port, {**IMPAIR, "seed": seed})
    except (OSError, ValueError) as exc:
        rec.error = f"p4sim impairment: {exc}"
        return rec
    time.sleep(NETEM_S)  # the fault's duration, not synchronisation
    try:
        ended = p4sim_impair(stats, port, None).get("ended")
    except (OSError, ValueError) as exc:
        rec.error = f"p4sim impairment not cleared: {exc}"
        return rec
    if not isinstance(ended, dict):
        rec.error = f"p4sim impairment of port {port}: gone before the fault ended it"
        return rec
    rec.impair = {k: int(v) for k, v in ended.items()}
    rec.wire_lost = rec.impair["impair_dropped"]
    rec.window = (rec.at, time.time())
    time.sleep(gap_settle_s)  # as netem_on_data_link: the NF's gap timeout (200 ms) passes
    rec.gaps = _gaps(api(), nf) - before
    rec.takeover_ms = NETEM_S * 1000
    rec.ok = True
    return rec


def kind_table(faults: list[Any], losses: dict[str, Any], host_drops: int,
               modes: dict[str, int] | None = None) -> Table:
    """One row per fault kind: count, handled, detection and recovery p50/p99, zombies, and the
    run's losses (by the system; by the wire and the end hosts), duplicates, reorderings,
    repeats, wedged flows; with `modes` (topo/faults/chaos_modes.py), the moves done and undone, the
    zombies and the false fail-overs."""
    table = Table(title="faults by kind (recovery: NFs, the first packet delivered after the "
                        "fault on the dead NF's slots (mgmt: of a cut primary); controller, the "
                        "standby primary and reconciled; etcd, the member healthy again)")
    for col in ("kind", "faults", "handled", "detect p50", "detect p99", "recover p50",
                "recover p99", "zombies"):
        table.add_column(col, justify="right")

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    for kind in sorted({f.kind for f in faults}):
        fs = [f for f in faults if f.kind == kind]
        det = percentiles([f.detection_ms for f in fs if f.detection_ms is not None])
        rec = percentiles([f.takeover_ms for f in fs if f.takeover_ms is not None])
        table.add_row(kind, str(len(fs)), str(sum(f.ok for f in fs)), ms(det["p50"]),
                      ms(det["p99"]), ms(rec["p50"]), ms(rec["p99"]),
                      str(sum(getattr(f, "mode", "") == "zombie" for f in fs)))
    if losses:
        wire = sum(getattr(f, "wire_lost", 0) for f in faults)
        table.caption = (f"whole run: {system_line(losses, host_drops)}; in switch outages "
                         f"{losses.get('lost_in_switch_outages', 0)}, by netem on the wire "
                         f"{losses.get('lost_on_the_wire', 0)} of the {wire} it dropped (tc "
                         f"netem, or p4sim's impairment) (gaps the NFs counted meanwhile: "
                         f"{sum(getattr(f, 'gaps', 0) for f in faults)}), "
                         f"by the end hosts' sockets {host_drops}, duplicated "
                         f"{losses.get('duplicated', 0)}, reordered {losses.get('reordered', 0)}, "
                         f"checker counts repeated {losses.get('count_repeats', 0)}, flows "
                         f"wedged {losses.get('wedged_flows', 0)}")
    cuts = [f for f in faults if f.kind == "mgmt"]
    if cuts:  # the cut NFs: how long they were cut off, and until each was a spare again
        cut = percentiles([f.cut_ms for f in cuts if f.cut_ms is not None])
        back = percentiles([f.back_ms for f in cuts if f.back_ms is not None])
        roles = ", ".join(f"{r} {sum(f.role == r for f in cuts)}"
                          for r in ("primary", "backup", "spare"))
        table.caption = (f"{table.caption or ''}\nmgmt cuts ({roles}): cut for p50 "
                         f"{ms(cut['p50'])} ms; from the restore to the NF back in the pool "
                         f"owning no slot p50 {ms(back['p50'])} ms, p99 "
                         f"{ms(back['p99'])} ms").lstrip("\n")
    if modes:
        from topo.faults.chaos_modes import modes_line

        table.caption = f"{table.caption or ''}\n{modes_line(modes)}".lstrip("\n")
    return table
