"""Faults injected into a running system, and what each one cost.

`make run RUN_ARGS="--kill-nf ID"` kills one primary; `--kill-every SECONDS` kills (or, with
`--hang`, SIGSTOPs) a random primary, backup or spare again and again, from a seeded schedule.
After each fault the victim's process is killed for good and started again: a fresh `nf-host`
comes up idle and the controller returns it to its cluster's spare pool, so the pool never runs
dry. Each fault gets a `FaultRecord`:

* **detection**: from the signal to the controller's confirmed "down" (the start of its
  fail-over, or of the backup's replacement; for a spare, the NF shown dead);
* **takeover** (primaries): from the signal to the arrival, at the receiving end, of the first
  packet that was sent after the signal on a flow of one of the dead primary's slots: the first
  output the promoted backup produced for them, end to end;
* the run's losses, duplicates and reorderings come from the sink's verdict (`topo.verify`),
  which must stay clean: with output dedup in the switch a fail-over loses and repeats nothing.

The `mgmt` fault (`FaultInjector.cut_mgmt`) cuts a live NF's management link instead (a primary
most of the time, else a backup or a spare; `topo.mgmt_cut`) for `cut_s`, twice the heartbeat
deadline, and restores it: the controller cannot tell that from a hang and fails the NF over
(or replaces it as a backup, or drops it from the pool as a spare); the NF process lives on and,
once it answers again, must be made a spare that owns nothing (`back_ms`). It is not restarted.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from topo.procs import wait_for
from topo.traffic import SideReport

FAULT_KINDS = ("primary", "backup", "spare")
# faults of the other parts (topo.chaos): the leading controller, an etcd member, netem on a
# primary's data link, the switch process
CONTROL_KINDS = ("controller", "etcd", "netem", "switch")
# an NF's management link cut for longer than the heartbeat deadline, then restored
LINK_KINDS = ("mgmt",)
ALL_KINDS = FAULT_KINDS + CONTROL_KINDS + LINK_KINDS
# which role a `mgmt` cut picks (a primary is the interesting case): cumulative shares
MGMT_ROLES = (("primary", 0.6), ("backup", 0.8), ("spare", 1.0))


@dataclass
class FaultRecord:
    """One injected fault and what the system did about it."""

    kind: str                    # the victim's role: primary | backup | spare; or mgmt
    mode: str                    # kill (SIGKILL) | hang (SIGSTOP) | cut (mgmt: the link)
    nf: int
    at: float                    # time.time() of the signal
    slots: list[int] = field(default_factory=list)  # a primary's slots at that time
    detection_ms: float | None = None
    takeover_ms: float | None = None
    # from the signal to the promoted backup releasing its first output for the dead NF's
    # slots (its log's "takeover:" line): takeover at the NF, without the switch's transit
    first_output_ms: float | None = None
    promoted: int | None = None
    new_backup: int | None = None
    ok: bool = False
    error: str = ""
    # mgmt: the victim's role, how long its link was cut, and from the restore to the NF back in
    # its cluster's pool (alive, a spare that reports no slot of its own)
    role: str = ""
    cut_ms: float | None = None
    back_ms: float | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["slots"] = len(self.slots)
        return out


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """`sig` to the runtime and its workers (one process group per nf-host)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


@dataclass
class FaultInjector:
    """Injects faults through the controller's HTTP API `api` into the NFs `procs` (id ->
    process), restarting each victim with `restart(id)`."""

    api: str
    procs: dict[int, subprocess.Popen[bytes]]
    restart: Callable[[int], subprocess.Popen[bytes]]
    seed: int = 1
    hang: bool = False
    kinds: tuple[str, ...] = FAULT_KINDS
    # injects a control-plane fault (kind, target) and returns its record (topo.chaos)
    control: Callable[[str, int], Any] | None = None
    etcd_members: int = 3
    # the API to use now (the controllers may have changed leader), and what to do between
    # faults (start again a controller that stopped): both set by the chaos harness
    follow: Callable[[str], str] | None = None
    between: Callable[[], object] | None = None
    # mgmt faults: cut (True) or restore (False) an NF's management link, and for how long
    cut: Callable[[int, bool], None] | None = None
    cut_s: float = 1.0
    records: list[Any] = field(default_factory=list)  # FaultRecord, or chaos.ControlFault
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def pick(self, kind: str | None = None) -> tuple[str, int] | None:
        """A live victim of `kind` (random kind and NF from the seeded schedule if None). One
        fault at a time: a primary is a victim only while a live backup protects it (a primary
        without one has nobody to fail over to: that would be a second fault)."""
        if self.between is not None:
            self.between()
        nfs = [r for r in _get(f"{self.leading()}/nfs") if r["alive"]]
        alive = {r["id"] for r in nfs}
        kinds = [kind] if kind else list(self.kinds)
        self.rng.shuffle(kinds)
        for k in kinds:
            if k == "mgmt":
                if self.cut is None:
                    continue
                draw = self.rng.random()
                roles = [r for r, share in MGMT_ROLES if draw < share][:1] + [
                    r for r, _ in MGMT_ROLES]
                for role in dict.fromkeys(roles):  # the drawn role first, else any other
                    pool = sorted(r["id"] for r in nfs if r["role"] == role
                                  and (role != "primary" or r.get("backup") in alive))
                    if pool:
                        return k, self.rng.choice(pool)
                continue
            if k in CONTROL_KINDS:
                if self.control is None:
                    continue
                if k == "netem":  # the data link of a live primary, one that carries traffic
                    # if any does (with a few flows, a primary may own none of them: netem on
                    # its link would disturb nothing)
                    primaries = sorted(r["id"] for r in nfs if r["role"] == "primary")
                    busy = [r["id"] for r in nfs if r["role"] == "primary"
                            and r.get("packet_rate")]
                    if primaries:
                        return k, self.rng.choice(sorted(busy) or primaries)
                    continue
                return k, self.rng.randrange(self.etcd_members) if k == "etcd" else 0
            pool = sorted(r["id"] for r in nfs if r["role"] == k
                          and (k != "primary" or r.get("backup") in alive))
            if pool:
                return k, self.rng.choice(pool)
        return None

    def inject(self, kind: str, nf: int, timeout: float = 15.0) -> Any:
        """Fault NF `nf` (whose role is `kind`), wait until the controller has dealt with it,
        then kill it for good and start it again (it comes back as a spare). A control-plane
        kind goes to `control` (`nf` is then the etcd member's index); `mgmt` to `cut_mgmt`."""
        if kind == "mgmt":
            return self.cut_mgmt(nf, timeout)
        if kind in CONTROL_KINDS:
            assert self.control is not None
            crec = self.control(kind, nf)
            self.records.append(crec)
            return crec
        api = self.leading()
        slots = [r["slot"] for r in _get(f"{api}/slots?nf={nf}")] if kind == "primary" else []
        before = len(_get(f"{api}/status")["failovers"])
        proc = self.procs[nf]
        rec = FaultRecord(kind, "hang" if self.hang else "kill", nf, time.time(), slots)
        _signal_group(proc, signal.SIGSTOP if self.hang else signal.SIGKILL)
        try:
            self._await_handling(rec, kind, api, before, timeout)
        except TimeoutError as exc:
            rec.error = str(exc)
        finally:
            _signal_group(proc, signal.SIGKILL)  # a hung NF never comes back as a zombie
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
            self.procs[nf] = self.restart(nf)
        self.records.append(rec)
        return rec

    def _await_handling(self, rec: FaultRecord, role: str, api: str, before: int,
                        timeout: float) -> None:
        """Until the controller has acted on the fault of `rec.nf`, whose role was `role`: a
        spare shown dead; a primary's fail-over or a backup's replacement, the `before`-th or a
        later entry of its `failovers`. Fills in the detection time and the outcome."""
        nf = rec.nf
        if role == "spare":
            wait_for(lambda: not self._alive(nf), timeout=timeout, interval=0.01,
                     what=f"spare NF {nf} seen dead")
            rec.detection_ms, rec.ok = (time.time() - rec.at) * 1000, True
            return

        def handled() -> dict[str, Any] | None:
            new = _get(f"{api}/status")["failovers"][before:]
            return next((f for f in new if f["dead"] == nf), None)

        wait_for(lambda: handled() is not None, timeout=timeout, interval=0.01,
                 what=f"controller acting on NF {nf}")
        fo = handled()
        assert fo is not None
        rec.detection_ms = (fo["at"] - rec.at) * 1000
        rec.promoted, rec.new_backup = fo["promoted"], fo["new_backup"]
        rec.ok, rec.error = bool(fo["ok"]), fo["error"]

    def cut_mgmt(self, nf: int, timeout: float = 15.0) -> FaultRecord:
        """Cut live NF `nf`'s management link (`cut`) for `cut_s`, or until the controller has
        acted on it if that takes longer, then restore it and wait until the NF is back in its
        cluster's pool: alive, a spare (or already a primary's new backup: a primary left without
        one takes a spare as soon as one joins), and reporting no slot of its own (its status is
        polled every second). The NF process is never restarted: once it answers again, the
        controller must take from it whatever it owned (docs/protocols.md §7, "No zombie")."""
        assert self.cut is not None
        api = self.leading()
        row = next(r for r in _get(f"{api}/nfs") if r["id"] == nf)
        role = str(row["role"])
        slots = [r["slot"] for r in _get(f"{api}/slots?nf={nf}")] if role == "primary" else []
        before = len(_get(f"{api}/status")["failovers"])
        rec = FaultRecord("mgmt", "cut", nf, time.time(), slots, role=role)
        self.cut(nf, True)
        restored: float | None = None
        try:
            self._await_handling(rec, role, api, before, timeout)
            time.sleep(max(0.0, rec.at + self.cut_s - time.time()))  # the cut's length
            self.cut(nf, False)
            restored = time.time()
            rec.cut_ms = (restored - rec.at) * 1000

            def back() -> bool:  # a spare: or already taken from the pool as a new backup
                r = next(r for r in _get(f"{self.leading()}/nfs") if r["id"] == nf)
                return bool(r["alive"] and r["role"] in ("spare", "backup") and not r["slots"])

            wait_for(back, timeout=timeout, interval=0.02,
                     what=f"NF {nf} back in the pool (a spare, or a new backup) owning no slot")
            rec.back_ms = (time.time() - restored) * 1000
        except TimeoutError as exc:
            rec.ok, rec.error = False, str(exc)
        finally:
            if restored is None:
                self.cut(nf, False)
                rec.cut_ms = (time.time() - rec.at) * 1000
        self.records.append(rec)
        return rec

    def leading(self) -> str:
        """The API to ask: the leading controller's (`follow`), else the one given."""
        if self.follow is not None:
            self.api = self.follow(self.api)
        return self.api

    def _alive(self, nf: int) -> bool:
        return any(r["id"] == nf and r["alive"] for r in _get(f"{self.leading()}/nfs"))

    def wait_back(self, nf: int, timeout: float = 20.0) -> None:
        """Until killed primary `nf`, started again, is alive and back in the pool: configured
        as a spare (or already the new backup of a primary left without one), no longer shown
        as the primary it was."""
        def back() -> bool:
            return any(r["id"] == nf and r["alive"] and r["role"] != "primary"
                       for r in _get(f"{self.leading()}/nfs"))
        wait_for(back, timeout=timeout, interval=0.05, what=f"NF {nf} back in the pool")

    def wait_pool(self, timeout: float = 20.0) -> None:
        """Until the system has settled after a fault (`settled`), so that every fault starts
        from a protected system rather than during the last one's recovery."""
        wait_for(self.settled, timeout=timeout, interval=0.05,
                 what="every NF alive again, every primary protected, every backup armed")

    def settled(self) -> bool:
        """Every NF alive again (restarted victims back in the pool) and configured; every
        primary with a backup unless no spare of its cluster on another node is left to give it
        one; with self-takeover on, every backup armed for its primary (docs/protocols.md
        §4.3)."""
        api = self.leading()
        rows = _get(f"{api}/nfs")
        status = _get(f"{api}/status")
        if not all(r["alive"] for r in rows):
            return False
        nfs = status.get("nfs", {})
        if nfs.get("configured", 0) < nfs.get("total", 0):
            return False
        pairs = {int(p): b for p, b in status.get("pairs", {}).items()}
        by_id = {r["id"]: r for r in rows}
        spares = [r for r in rows if r["role"] == "spare"]
        for p in (p for p, b in pairs.items() if b is None and p in by_id):
            me = by_id[p]  # a spare that could protect it (controlplane/failover.choose_backup)
            if any(r["cluster"] == me["cluster"] and r["node"] != me["node"] for r in spares):
                return False
        armed = status.get("armed", {})
        return not status.get("self_takeover") or all(
            armed.get(str(b), {}).get("primary") == p for p, b in pairs.items() if b is not None)


def primary_fault(rec: Any) -> bool:
    """Whether `rec` (a `FaultRecord`, or a `topo.chaos.ControlFault`) faulted a primary (killed,
    hung or cut off): its slots were failed over."""
    return bool(rec.kind == "primary" or getattr(rec, "role", "") == "primary")


def takeover_times(records: list[FaultRecord], client: SideReport, server: SideReport,
                   slot_of_flow: Mapping[int, int]) -> None:
    """Fill in each primary fault's `takeover_ms` from the traffic reports (see the module
    docstring); `slot_of_flow` maps each flow id to its slot."""
    for rec in records:
        if not primary_fault(rec):
            continue
        dead = set(rec.slots)
        first: float | None = None
        for flow, slot in slot_of_flow.items():
            if slot not in dead:
                continue
            for sent, recv in ((client, server), (server, client)):
                times = sent.sent_at.get(flow, [])
                # the first packet number sent after the signal, then its arrival (if any)
                after = next((i + 1 for i, t in enumerate(times) if t > rec.at), None)
                if after is None:
                    continue
                for (no, _count), t in zip(recv.received.get(flow, []),
                                           recv.received_at.get(flow, []), strict=False):
                    if no >= after:
                        first = t if first is None else min(first, t)
                        break
        if first is not None:
            rec.takeover_ms = (first - rec.at) * 1000


TAKEOVER_LINE = re.compile(r"takeover: first output .* at (\d+\.\d+)")


def first_output_times(records: list[FaultRecord], log_dir: Path) -> None:
    """Fill in each primary fault's `first_output_ms` from its promoted NF's log (`nf<id>.log`,
    the runtime's "takeover:" line, stamped with the wall clock every namespace shares)."""
    for rec in records:
        if not primary_fault(rec) or rec.promoted is None:
            continue
        path = log_dir / f"nf{rec.promoted}.log"
        if not path.exists():
            continue
        stamps = [float(m.group(1)) for m in TAKEOVER_LINE.finditer(
            path.read_text(errors="replace"))]
        after = [t for t in stamps if t > rec.at]
        if after:
            rec.first_output_ms = (min(after) - rec.at) * 1000


def percentiles(values: list[float]) -> dict[str, float | None]:
    """p50, p99 and max of `values` (None for an empty list)."""
    if not values:
        return {"p50": None, "p99": None, "max": None}
    vs = sorted(values)

    def at(q: float) -> float:
        return vs[min(len(vs) - 1, round(q * (len(vs) - 1)))]

    return {"p50": at(0.5), "p99": at(0.99), "max": vs[-1]}
