"""Live NF update (NFactor's live update): new parameters for a running NF, traffic untouched.

`update_nf(ctl, nf, params)`:

1. every slot of primary `nf` moves to the other primaries of its cluster (least loaded first;
   another cluster's when it has none), each an ordinary migration (a delta within the
   cluster), so its traffic stays exactly-once and in order;
2. `UpdateNf(params)` restarts the network function of `nf` (and of its backup, which runs it
   after a fail-over) with the new parameters; the runtime refuses while it still owns a slot,
   and a refusal (bad parameters) leaves the old version running;
3. every slot moves back to `nf`, whether the update took or not.

An NF that owns no slot (a spare, a backup, an idle primary) is updated at once. The balancer
leaves `nf` alone meanwhile (`Balancer.draining`). A runtime restarted later starts from its
command line's parameters again: the update is not persisted (docs/controller.md).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from contract.proto import nf_control_pb2 as pb
from controlplane.cluster_view import ClusterView
from controlplane.migration import MoveResult
from controlplane.nf_registry import NfControlError
from controlplane.slot_map import SlotMap
from controlplane.spare_pool import ScaleError

LOG = logging.getLogger(__name__)


class UpdateHost(ClusterView, Protocol):
    """What a live update reads and runs on (`Controller` is one)."""

    @property
    def slot_map(self) -> SlotMap: ...
    async def migrate(self, slots: list[int], to_nf: int) -> list[MoveResult]: ...


@dataclass
class UpdateReport:
    """What a live update did; `error` is empty when the new parameters run."""

    nf: int
    params: dict[str, Any]
    updated: list[int] = field(default_factory=list)  # NFs now running the new parameters
    slots_moved_out: int = 0
    slots_moved_back: int = 0
    error: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"nf": self.nf, "params": self.params, "updated": self.updated,
                "slots_moved_out": self.slots_moved_out, "slots_moved_back": self.slots_moved_back,
                "ok": not self.error, "error": self.error, "seconds": round(self.seconds, 3)}


async def _move(ctl: UpdateHost, slots: list[int], targets: list[int]) -> list[int]:
    """Move each slot to the next target in turn; the slots moved (stops at the first failure)."""
    moved = []
    for i, slot in enumerate(slots):
        [result] = await ctl.migrate([slot], targets[i % len(targets)])
        if not result.ok:
            break
        moved.append(slot)
    return moved


async def update_nf(ctl: UpdateHost, nf: int, params: dict[str, Any], *,
                    targets_of: Callable[[int], list[int]], hands_off: set[int]) -> UpdateReport:
    """Run NF `nf` (and its backup) with `params`, moving its slots out and back (see the
    module docstring). `targets_of(nf)`: where its slots go meanwhile (the spare pool's
    targets); `hands_off`: NFs the balancer leaves alone (its `draining`). Raises ScaleError, with nothing changed, when it cannot start."""
    if nf not in {n.id for n in ctl.cfg.nfs}:
        raise ScaleError(f"no NF {nf} in the configuration")
    if ctl.registry.nfs[nf].declared_down or ctl.registry.nfs[nf].alive is False:
        raise ScaleError(f"NF {nf} is down: nothing to update")
    report = UpdateReport(nf=nf, params=params)
    started = time.monotonic()
    slots = ctl.slot_map.slots_of(nf) if nf in ctl.state.pairs else []
    targets = targets_of(nf) if slots else []
    if slots and not targets:
        raise ScaleError(f"NF {nf} is the only live primary: nowhere to move its slots meanwhile")
    hands_off.add(nf)
    try:
        moved = await _move(ctl, slots, targets)
        report.slots_moved_out = len(moved)
        if len(moved) < len(slots):
            report.error = f"slot {slots[len(moved)]} could not be moved away: NF {nf} not updated"
        else:
            backup = ctl.state.pairs.get(nf)
            for target in [nf] + ([backup] if backup is not None else []):
                try:
                    await ctl.registry.call(target, "UpdateNf", pb.UpdateNfRequest(
                        params_json=json.dumps(params)))
                except NfControlError as exc:
                    report.error = f"NF {target}: {exc}"
                    break
                report.updated.append(target)
        back = await _move(ctl, moved, [nf])
        report.slots_moved_back = len(back)
        if len(back) < len(moved):
            report.error += (f"; {len(moved) - len(back)} slots stayed with NF {nf}'s cluster peers "
                             "(the balancer may move them later)")
    finally:
        hands_off.discard(nf)
    report.seconds = time.monotonic() - started
    log = LOG.warning if report.error else LOG.info
    log("live update of NF %d: %s (out %d, back %d slots, %.2f s)%s", nf, report.updated,
        report.slots_moved_out, report.slots_moved_back, report.seconds,
        f": {report.error}" if report.error else "")
    return report
