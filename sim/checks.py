"""What every simulated run must show (docs/protocols.md, P1-P3 and P6, checked end to end):

* **exactly once, in order, nothing lost** (P1, P2): every packet the switch stamped reaches the
  edge once, each flow's packets in the order they were sent;
* **no state lost or applied twice** (P3): the checker NF's running count in each delivered
  packet equals its packet number (the count is the NF's per-flow state: a rollback, a reset or a
  state update applied twice shows as a count that is not the packet's number);
* **no wedge**: once every fault has healed, every slot has exactly one owner, the switch's, and
  the last packet sent on every flow comes out (checked by the run, `System._final_packets`);
* **no stale owner**: no other NF holds the slot as primary or adopting.

A run is checked against the switch model's edge (what left the switch toward the hosts) and the
workers' slot tables. The simulated wire loses nothing; the only loss excused is a packet inside
a switch that restarts (its input or its output), named packet by packet (`SwitchModel.restart_lost`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Protocol

from contract.roles import SlotRole
from controlplane.controller import Controller
from nf_host.harness import read_checker
from nf_host.worker import Worker
from sim.switch import Delivered, SwitchModel


class CheckedNf(Protocol):
    """What the checks read of a simulated NF."""

    @property
    def worker(self) -> Worker | None: ...

    @property
    def alive(self) -> bool: ...


class CheckedRun(Protocol):
    """What the checks read of a finished run (`sim.system.System`)."""

    @property
    def nfs(self) -> Mapping[int, CheckedNf]: ...

    @property
    def switch(self) -> SwitchModel: ...

    @property
    def sent(self) -> Mapping[int, int]: ...

    def controllers(self) -> list[Controller]: ...

MAX_PROBLEMS = 12


def last_delivered(edge: Iterable[Delivered]) -> dict[int, int]:
    """Per flow, the highest packet number that reached the edge."""
    last: dict[int, int] = {}
    for d in edge:
        rec = read_checker(d.frame)
        if rec is not None:
            last[rec[0]] = max(last.get(rec[0], 0), rec[1])
    return last


def check_delivery(edge: Iterable[Delivered], sent: Mapping[int, int],
                   excused: Iterable[tuple[int, int]] = ()) -> list[str]:
    """P1-P3 and P6 on what reached the edge (see the module docstring). `excused`: (flow,
    packet) lost inside a restarting switch, each with its evidence (`SwitchModel.restart_lost`): such a
    packet may be missing, and the checker counts after it may be behind by the excused packets
    missing before them (their input lost) or not (only their output lost); nothing else."""
    problems: list[str] = []
    seen: dict[int, list[tuple[int, int]]] = {}
    for d in edge:
        rec = read_checker(d.frame)
        if rec is None:
            problems.append(f"slot {d.slot} seq {d.seq}: an output without a checker record")
            continue
        flow, no, count = rec
        seen.setdefault(flow, []).append((no, count))
    ok_lost: dict[int, set[int]] = {}
    for flow, no in excused:
        ok_lost.setdefault(flow, set()).add(no)
    for flow in sorted(set(sent) | set(seen)):
        got = seen.get(flow, [])
        nos = [no for no, _ in got]
        excused_here = ok_lost.get(flow, set()) - set(nos)
        want = [n for n in range(1, sent.get(flow, 0) + 1) if n not in excused_here]
        if nos != want:
            missing = sorted(set(want) - set(nos))
            dup = sorted({n for n in nos if nos.count(n) > 1})
            order = [b for a, b in itertools.pairwise(nos) if b < a]
            problems.append(f"flow {flow}: {len(nos)} delivered of {len(want)}; lost "
                            f"{missing[:6]}, duplicated {dup[:6]}, out of order {order[:6]}")
        bad = []
        prev_no, prev_count = 0, 0
        for no, count in got:
            gap = sum(1 for n in excused_here if prev_no < n < no)
            if not 1 <= count - prev_count <= 1 + gap or count > no:
                bad.append((no, count))
            prev_no, prev_count = no, count
        if bad:
            problems.append(f"flow {flow}: checker counts that are not the packet's number "
                            f"(state lost or applied twice): {bad[:4]}")
    return problems


def check_owners(system: CheckedRun) -> list[str]:
    """Each slot's owner on the switch holds it as primary, and no other NF holds it."""
    problems: list[str] = []
    holders: dict[int, list[tuple[int, str]]] = {}
    for nf_id, nf in system.nfs.items():
        w = nf.worker
        if w is None or not nf.alive:
            continue
        for slot, rt in w.slots.items():
            # (a RELEASED slot only forwards what still reaches it to its new owner)
            if rt.role not in (SlotRole.REPLICA, SlotRole.RELEASED):
                holders.setdefault(slot, []).append((nf_id, rt.role.name))
    for slot, own in sorted(system.switch.owners.items()):
        primary = system.switch.groups.get(own.group, (None, None))[0]
        held = holders.get(slot, [])
        if held != [(primary, SlotRole.PRIMARY.name)]:
            problems.append(f"slot {slot}: the switch sends it to NF {primary} (epoch "
                            f"{own.epoch}); held as {held}")
    return problems


def check(system: CheckedRun) -> list[str]:
    """Every check of the module docstring: the problems found (the run keeps MAX_PROBLEMS)."""
    found = check_delivery(system.switch.edge, system.sent, system.switch.restart_lost) \
        + check_owners(system)
    violations = sum(c.state.violations.count for c in system.controllers())
    if violations:  # (each one logged: controlplane/cluster_state.py)
        found.append(f"{violations} cluster state violations")
    return found
