"""The spare pool: idle NF runtimes per cluster, and the elasticity built on them.

Spares are the configuration's NFs of role `spare`, and any NF that comes back after a failure
(configured idle: it holds nothing). The pool serves three users:

* fail-over (`failover.choose_backup`): a promoted backup's new backup is a spare of its cluster
  on another node, and a primary left without one is protected as soon as a spare joins;
* **scale-out** (`SparePool.scale_out`, the load balancer's `ScaleExecutor`, `nfc scale-out`):
  a spare of the cluster (or of any cluster when it has none) becomes a primary, with a new
  replica group and, from the pool, a backup on another node; it owns no slot yet: the balancer
  (or `nfc move`) moves slots to it, each move an ordinary migration;
* **scale-in** (`SparePool.drain`, `nfc drain`): every slot of a primary is moved to the other
  primaries of its cluster (the least loaded first; another cluster's if it has none), then the
  primary and its backup are reconfigured idle and return to the pool.

Scaling is serialised with moves and fail-overs by the controller's lock around each step.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from contract.proto import nf_control_pb2 as pb
from contract.roles import NfRole
from controlplane.failover import FailoverHost, FailoverResult, choose_backup, protect
from controlplane.migration import MoveResult
from controlplane.nf_registry import NfControlError

LOG = logging.getLogger(__name__)


class ScaleError(Exception):
    """A scale-out or drain that cannot be done (no spare, unknown NF, ...); nothing changed."""


class PoolHost(FailoverHost, Protocol):
    """What the pool runs on besides a fail-over's building blocks (`Controller` is one): moves
    (serialised by `move_lock`), a drained primary's retirement, the fail-over record."""

    @property
    def move_lock(self) -> asyncio.Lock: ...
    async def migrate(self, slots: list[int], to_nf: int) -> list[MoveResult]: ...
    async def retire_primary(self, nf: int) -> None: ...
    def record_failover(self, result: FailoverResult) -> None: ...


class SparePool:
    """Elasticity on the controller's spare pool (see the module docstring)."""

    def __init__(self, ctl: PoolHost) -> None:
        self.ctl = ctl

    def spares(self, cluster: str | None = None, stage: int | None = None) -> list[int]:
        """Live idle NFs (of `cluster`, or of every cluster of chain `stage`, or of every
        cluster), lowest id first."""
        ctl = self.ctl
        busy = set(ctl.state.pairs) | {b for b in ctl.state.pairs.values() if b is not None}
        return sorted(
            nf.id for nf in ctl.cfg.nfs
            if (cluster is None or nf.cluster == cluster) and nf.id not in busy
            and (stage is None or ctl.cfg.stage_of(nf.id) == stage)
            and ctl.registry.nfs[nf.id].role == "spare"
            and not ctl.registry.nfs[nf.id].declared_down and ctl.registry.nfs[nf.id].alive is not False
        )

    async def scale_out(self, cluster: str) -> int:
        """A spare of `cluster` (else of any cluster) becomes a primary with a backup from the
        pool (none if the pool has no other NF on another node: protected later); returns it."""
        ctl = self.ctl
        if cluster not in {c.name for c in ctl.cfg.clusters}:
            raise ScaleError(f"no cluster {cluster!r} in the configuration")
        stage = ctl.cfg.stage_of_cluster(cluster)
        candidates = self.spares(cluster) or self.spares(stage=stage)
        if not candidates:
            raise ScaleError(f"no spare NF left in cluster {cluster} or any other of its stage")
        new = candidates[0]
        async with ctl.move_lock:
            backup = choose_backup(ctl, new, exclude={new})
            try:
                await ctl.registry.call(new, "SetRole", pb.SetRoleRequest(role=pb.PRIMARY))
                if backup is not None:
                    await ctl.registry.call(backup, "AssignSlots", pb.AssignSlotsRequest(
                        slots=[], as_backup=True, primary_nf_id=new))
                    ctl.registry.nfs[backup].role = NfRole.BACKUP
                    await ctl.registry.call(new, "SetBackup", pb.SetBackupRequest(
                        backup_nf_id=backup, address=ctl.cfg.nf(backup).replication_address()))
                await ctl.set_pair(new, backup)  # its replica group, on the switch
            except NfControlError as exc:
                raise ScaleError(f"scale-out with NF {new}: {exc}") from exc
            ctl.registry.nfs[new].role = NfRole.PRIMARY
        LOG.warning("scale-out: NF %d (cluster %s) is a primary, backup %s", new,
                    ctl.cfg.nf(new).cluster, backup if backup is not None else "none yet")
        return new

    def targets(self, nf: int) -> list[int]:
        """Where a drained NF's slots go: the other primaries of its cluster, least loaded
        first; another cluster's of its chain stage when it has none."""
        ctl = self.ctl
        cluster, stage = ctl.cfg.nf(nf).cluster, ctl.cfg.stage_of(nf)
        live = [p for p in ctl.state.pairs if p != nf and not ctl.registry.nfs[p].declared_down
                and ctl.cfg.stage_of(p) == stage]
        mine = [p for p in live if ctl.cfg.nf(p).cluster == cluster]
        load = {}
        for p in live:
            report = ctl.registry.nfs[p].load
            load[p] = report.packet_rate if report is not None else 0.0
        return sorted(mine or live, key=lambda p: (load[p], p))

    async def drain(self, nf: int) -> None:
        """Move every slot of primary `nf` away (ordinary migrations, deltas within the cluster),
        then return it and its backup to the pool."""
        ctl = self.ctl
        if nf not in ctl.state.pairs:
            raise ScaleError(f"NF {nf} is not a primary")
        targets = self.targets(nf)
        if not targets:
            raise ScaleError(f"NF {nf} is the only live primary: nowhere to move its slots")
        slots = ctl.slot_map.slots_of(nf)
        for i, slot in enumerate(slots):
            [result] = await ctl.migrate([slot], targets[i % len(targets)])
            if not result.ok:
                raise ScaleError(f"drain of NF {nf} stopped at slot {slot}: {result.error}")
        async with ctl.move_lock:
            backup = ctl.state.pairs.get(nf)
            await ctl.retire_primary(nf)
            for idle in (nf, backup):
                if idle is None:
                    continue
                try:
                    await ctl.registry.call(idle, "SetRole", pb.SetRoleRequest(role=pb.IDLE))
                except NfControlError as exc:
                    LOG.warning("NF %d not reset to idle: %s", idle, exc)
                ctl.registry.nfs[idle].role = NfRole.SPARE
            for given in await protect(ctl):
                ctl.record_failover(given)
        LOG.warning("scale-in: NF %d drained (%d slots) and back in the pool with its backup %s",
                    nf, len(slots), backup)
