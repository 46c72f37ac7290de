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

A **zombie** (`nfc-topo chaos --zombies F`: `inject(..., zombie=True)`) is a hung NF (SIGSTOP)
that, once the controller has dealt with it, is resumed (SIGCONT) instead of killed: the same
process comes back believing it still has its old role, and must be fenced (its output never
leaves twice: the verdict) and made a spare by the controller (`back_ms`).

With `--overlap` faults run side by side (`topo.faults.chaos_modes`): each NF fault *claims* its victim
and the victim's partner (its backup, or the primary it backs up) until that pair is protected
again (`settled_for`), and `pick(exclude=...)` chooses no victim among claimed NFs, so no pair
loses both its members at once.

The `mgmt` fault (`FaultInjector.cut_mgmt`) cuts a live NF's management link instead (a primary
most of the time, else a backup or a spare; `topo.faults.mgmt_cut`) for `cut_s`, twice the heartbeat
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
# faults of the other parts (topo.faults.chaos): the leading controller, an etcd member, netem on a
# primary's data link, the switch process
CONTROL_KINDS = ("controller", "etcd", "netem", "switch")
# an NF's management link cut for longer than the heartbeat deadline, then restored
LINK_KINDS = ("mgmt",)
ALL_KINDS = FAULT_KINDS + CONTROL_KINDS + LINK_KINDS
# what may overlap another fault in flight (--overlap): the NFs' own faults
NF_KINDS = FAULT_KINDS + LINK_KINDS
# which role a `mgmt` cut picks (a primary is the interesting case): cumulative shares
MGMT_ROLES = (("primary", 0.6), ("backup", 0.8), ("spare", 1.0))


@dataclass
class FaultRecord:
    """One injected fault and what the system did about it."""

    kind: str                    # the victim's role: primary | backup | spare; or mgmt
    # kill (SIGKILL) | hang (SIGSTOP) | zombie (SIGSTOP, then SIGCONT once handled) | cut (mgmt)
    mode: str
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
    # its cluster's pool (alive, a spare that reports no slot of its own); a zombie: from the
    # SIGCONT to the NF back in the pool
    role: str = ""
    cut_ms: float | None = None
    back_ms: float | None = None
    ended: float | None = None   # time.time() when the harness was done with it (--overlap)

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
    # injects a control-plane fault (kind, target) and returns its record (topo.faults.chaos)
    control: Callable[[str, int], Any] | None = None
    etcd_members: int = 3
    # the API to use now (the controllers may have changed leader), and what to do between
    # faults (start again a controller that stopped): both set by the chaos harness
    follow: Callable[[str], str] | None = None
    between: Callable[[], object] | None = None
    # mgmt faults: cut (True) or restore (False) an NF's management link, and for how long
    cut: Callable[[int, bool], None] | None = None
    cut_s: float = 1.0
    # the share of NF faults that are zombies (hung, then resumed once handled: --zombies)
    zombies: float = 0.0
    timeout: float = 15.0  # how long the controller may take to act on an NF fault
    records: list[Any] = field(default_factory=list)  # FaultRecord, or chaos.ControlFault
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        # the zombie draws have a generator of their own: without --zombies the schedule is the
        # one it always was
        self.zombie_rng = random.Random(self.seed * 7919 + 1)

    def draw_zombie(self, kind: str) -> bool:
        """Whether the next fault of `kind` is a zombie (seeded; only NF kills and hangs)."""
        return kind in FAULT_KINDS and self.zombies > 0 and self.zombie_rng.random() < self.zombies

    def pick(self, kind: str | None = None, exclude: frozenset[int] | set[int] = frozenset(),
             kinds: tuple[str, ...] | None = None) -> tuple[str, int] | None:
        """A live victim of `kind` (random kind and NF from the seeded schedule if None; among
        `kinds` if given). A primary is a victim only while a live backup protects it (a primary
        without one has nobody to fail over to: that would be a second fault). `exclude`: NFs
        claimed by faults still in flight (--overlap): neither they nor a partner of theirs (the
        backup of a claimed primary, the primary of a claimed backup) is picked."""
        if self.between is not None:
            self.between()
        rows = _get(f"{self.leading()}/nfs")
        nfs = [r for r in rows if r["alive"] and r["id"] not in exclude]
        alive = {r["id"] for r in nfs}
        # a backup's primary: a backup whose primary is claimed is not a victim either
        primary_of = {r["backup"]: r["id"] for r in rows if r.get("backup") is not None}
        nfs = [r for r in nfs if primary_of.get(r["id"]) not in exclude]
        if exclude:  # faults in flight: an NF may be between roles (a restarted victim being
            # configured reports the role it had): a primary or backup only as the controller
            # pairs them, else the controller has no fail-over or replacement to make for it
            pairs = {int(p): b for p, b in (_get(f"{self.leading()}/status") or {}).get(
                "pairs", {}).items()}
            if pairs:
                nfs = [r for r in nfs if (r["role"] != "primary" or pairs.get(r["id"]) in alive)
                       and (r["role"] != "backup" or r["id"] in pairs.values())]
        kinds_ = [kind] if kind else list(kinds if kinds is not None else self.kinds)
        self.rng.shuffle(kinds_)
        for k in kinds_:
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
            # (a spare owns no slot in the map: a leader that has not configured an NF yet may
            # report the role of its configuration file; the soak of 2026-11-28 hung a primary
            # of 1,016 slots as a "spare", and waited for it as a spare for 30 s)
            pool = sorted(r["id"] for r in nfs if r["role"] == k
                          and (k != "primary" or r.get("backup") in alive)
                          and (k != "spare" or not r.get("slots_owned")))
            if pool:
                return k, self.rng.choice(pool)
        return None

    def inject(self, kind: str, nf: int, timeout: float | None = None, zombie: bool = False) -> Any:
        """Fault NF `nf` (whose role is `kind`), wait until the controller has dealt with it,
        then kill it for good and start it again (it comes back as a spare); a `zombie` is
        hung, then resumed instead (`resume_zombie`). A control-plane kind goes to `control`
        (`nf` is then the etcd member's index); `mgmt` to `cut_mgmt`."""
        timeout = self.timeout if timeout is None else timeout
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
        mode = "zombie" if zombie else "hang" if self.hang else "kill"
        rec = FaultRecord(kind, mode, nf, time.time(), slots)
        _signal_group(proc, signal.SIGSTOP if mode != "kill" else signal.SIGKILL)
        handled = False
        try:
            self._await_handling(rec, kind, api, before, timeout)
            handled = True
        except TimeoutError as exc:
            rec.error = str(exc)
        finally:
            if not (zombie and handled):  # else a hung NF never comes back as a zombie
                _signal_group(proc, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
                self.procs[nf] = self.restart(nf)
        if zombie and handled:
            self.resume_zombie(rec, proc, timeout)
        rec.ended = time.time()
        self.records.append(rec)
        return rec

    def resume_zombie(self, rec: FaultRecord, proc: subprocess.Popen[bytes],
                      timeout: float) -> None:
        """A hung NF the controller has dealt with (failed over, replaced, or shown dead) is
        resumed, not killed: it must come back in its cluster's pool (a spare, or already a
        primary's new backup) owning no slot, as a cut NF does (`cut_mgmt`). Killed and started
        again if it does not (the record then says so)."""
        _signal_group(proc, signal.SIGCONT)
        resumed = time.time()
        try:
            wait_for(lambda: self._back_owning_nothing(rec.nf), timeout=timeout, interval=0.02,
                     what=f"zombie NF {rec.nf} back in the pool (a spare, or a new backup) owning "
                          "no slot")
            rec.back_ms = (time.time() - resumed) * 1000
        except TimeoutError as exc:
            rec.ok, rec.error = False, str(exc)
            _signal_group(proc, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
            self.procs[rec.nf] = self.restart(rec.nf)

    def _back_owning_nothing(self, nf: int) -> bool:
        """NF `nf` alive, a spare or already a primary's new backup, reporting no slot."""
        r = next(r for r in _get(f"{self.leading()}/nfs") if r["id"] == nf)
        return bool(r["alive"] and r["role"] in ("spare", "backup") and not r["slots"])

    def claim(self, kind: str, nf: int) -> set[int]:
        """The NFs a fault of `nf` (of role `kind`; mgmt: any role) puts at risk until its pair
        is protected again: itself and its partner (its backup, or the primary it backs up)."""
        if kind not in NF_KINDS:
            return set()
        rows = _get(f"{self.leading()}/nfs")
        out = {nf}
        for r in rows:
            if r["id"] == nf and r.get("backup") is not None:
                out.add(int(r["backup"]))
            if r.get("backup") == nf:
                out.add(int(r["id"]))
        return out

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
            # the leader asked first, or the one leading now (a controller fault, or one that
            # stopped by itself, during the fault: each keeps its own history), from the fault on
            now = self.leading()
            rows = _get(f"{api}/status")["failovers"][before:] if now == api else [
                f for f in _get(f"{now}/status")["failovers"] if f.get("at", 0) >= rec.at]
            return next((f for f in rows if f["dead"] == nf), None)

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

            wait_for(lambda: self._back_owning_nothing(nf), timeout=timeout, interval=0.02,
                     what=f"NF {nf} back in the pool (a spare, or a new backup) owning no slot")
            rec.back_ms = (time.time() - restored) * 1000
        except TimeoutError as exc:
            rec.ok, rec.error = False, str(exc)
        finally:
            if restored is None:
                self.cut(nf, False)
                rec.cut_ms = (time.time() - rec.at) * 1000
        rec.ended = time.time()
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
        from a protected system rather than during the last one's recovery. The TimeoutError
        names what was still unsettled at the deadline."""
        self.wait_settled(None, timeout,
                          "every NF alive again, every primary protected, every backup armed")

    def wait_settled(self, claimed: set[int] | None, timeout: float, what: str) -> None:
        """Until `settled_for(claimed)`; the TimeoutError names what was still unsettled."""
        try:
            wait_for(lambda: self.settled_for(claimed), timeout=timeout, interval=0.05,
                     what=what)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc} (still: {'; '.join(self.unsettled(claimed))})") from exc

    def settled(self) -> bool:
        """Every NF alive again (restarted victims back in the pool) and configured; every
        primary with a backup unless no spare of its cluster on another node is left to give it
        one; with self-takeover on, every backup armed for its primary (docs/protocols.md
        §4.3)."""
        return self.settled_for(None)

    def settled_for(self, claimed: set[int] | None) -> bool:
        """`settled`, for the pairs one fault in flight put at risk (--overlap): the `claimed`
        NFs alive again, and every pair with a claimed member protected and armed as `settled`
        says (None: every NF and every pair, and every NF configured)."""
        return not self.unsettled(claimed)

    def unsettled(self, claimed: set[int] | None) -> list[str]:
        """What keeps `settled_for(claimed)` false, in words ([]: settled)."""
        api = self.leading()
        rows = _get(f"{api}/nfs")
        status = _get(f"{api}/status")
        dead = [r["id"] for r in rows if not r["alive"] and (claimed is None or r["id"] in claimed)]
        if dead:
            return [f"NF {', '.join(map(str, dead))} not alive"]
        nfs = status.get("nfs", {})
        if claimed is None and nfs.get("configured", 0) < nfs.get("total", 0):
            return [f"{nfs.get('configured', 0)} of {nfs.get('total', 0)} NFs configured"]
        pairs = {int(p): b for p, b in status.get("pairs", {}).items()
                 if claimed is None or int(p) in claimed or b in claimed}
        by_id = {r["id"]: r for r in rows}
        spares = [r for r in rows if r["role"] == "spare"]
        out: list[str] = []
        for p in (p for p, b in pairs.items() if b is None and p in by_id):
            me = by_id[p]  # a spare that could protect it (controlplane/failover.choose_backup)
            if any(r["cluster"] == me["cluster"] and r["node"] != me["node"] for r in spares):
                out.append(f"primary NF {p} without a backup while a spare could be one")
        if status.get("self_takeover"):
            armed = status.get("armed", {})
            out += [f"backup NF {b} not armed for primary NF {p}" for p, b in pairs.items()
                    if b is not None and armed.get(str(b), {}).get("primary") != p]
        return out


def primary_fault(rec: Any) -> bool:
    """Whether `rec` (a `FaultRecord`, or a `topo.faults.chaos.ControlFault`) faulted a primary (killed,
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
