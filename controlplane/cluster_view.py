"""`ClusterView`: the three things every protocol of the controller reads (the configuration,
the NF registry and the cluster state). Fail-over, moves, live update, the spare pool and
takeover planning each take a Protocol built on it (`failover.FailoverHost`,
`migration.MoveHost`, ...), never the controller itself."""

from __future__ import annotations

from typing import Protocol

from controlplane.cluster_state import ClusterState
from controlplane.config import ControllerConfig
from controlplane.nf_registry import NfRegistry


class ClusterView(Protocol):
    """The configuration, the NFs (their records, connections and detector) and the cluster
    state (pairs, groups, armed backups, each NF's phase)."""

    @property
    def cfg(self) -> ControllerConfig: ...
    @property
    def registry(self) -> NfRegistry: ...
    @property
    def state(self) -> ClusterState: ...
