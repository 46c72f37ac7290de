"""A run of `make run` as data: its options (`RunOptions`, and the defaults the launcher's flags
start from) and what the launcher brought up (`System`).

Shared by the launcher (`topo.launch`) and the fault harness (`topo.faults`), which take a
`System` and import nothing of the launcher at run time; nothing here starts anything.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from topo.faults.injector import FAULT_KINDS

if TYPE_CHECKING:
    from controlplane.config import ControllerConfig
    from topo.faults.mgmt_cut import MgmtCuts
    from topo.launch.controllers import Controllers
    from topo.launch.topology import Topology

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = REPO / "topo" / "nfcluster.yaml"
CHAIN_CONFIG = REPO / "topo" / "chain.yaml"
# members of the etcd cluster `make run` starts (a quorum survives the loss of one)
ETCD_MEMBERS = 3
# the client's rate when --rate is not given, per target (packets/s, replies as many): the switch
# takes 4 packets in and sends 6 out per client packet (its two copies, the NF's output, the same
# for the reply). BMv2 (a logging build) forwarded 98% of 5,000 pkt/s offered and at most about
# 10,000, and silently dropped 1.4% of `make run`'s packets at 400; at 200 it lost 1 in 3,200 and
# 0 (docs/bmv2.md)
DEFAULT_RATES = {"p4sim": 400.0, "bmv2": 200.0}
# packets per egress queue `make run` asks BMv2 for (its own default is 64; docs/bmv2.md)
BMV2_QUEUE_DEPTH = 1024


def default_rate(target: str) -> float:
    """The client's rate on `target` when --rate is not given."""
    return DEFAULT_RATES.get(target, DEFAULT_RATES["p4sim"])


@dataclass(frozen=True)
class RunOptions:
    target: str
    config: Path
    flows: int
    packets: int
    rate: float
    workers: int
    out_dir: Path
    ready_timeout: float
    move_slots: int = 0
    kill_nf: int | None = None
    kill_every: float = 0.0
    hang: bool = False
    seed: int = 1
    faults: int = 0                 # with kill_every: stop after this many (0: until the end)
    fault_kinds: tuple[str, ...] = FAULT_KINDS
    heartbeat_ms: int = 0           # override heartbeat.interval_ms (and its timeout) if > 0
    confirm_ms: int = 0             # override heartbeat.confirm_timeout_ms if > 0
    hot: bool = False
    chain: bool = False             # the config declares a service chain (topo/chain.yaml)
    nf: str = "checker"             # the NF every nf-host runs (the verdict needs the checker)
    nf_params: str = ""             # its parameters, a JSON object ("" : the NF's defaults)
    etcd_members: int = ETCD_MEMBERS
    standby: bool = True            # also start a standby controller
    gap_timeout_ms: int = 200
    io: str | None = None           # p4sim's port I/O (ring, socket; None: p4sim's default)
    engine: str | None = None       # p4sim's packet engine (None: p4sim's default)
    self_takeover: bool | None = None  # heartbeat.self_takeover (None: the config's; §4.3)
    heartbeat_echo: str | None = None  # nf-host --heartbeat-echo (None: nf-host's default)
    heartbeat_misses: int = 0       # override heartbeat.misses if > 0
    settle: float = 0.0             # with kill_every: the traffic's last seconds without faults
    busy: int = 0                   # CPU hogs at nice 19 for the whole run (topo/faults/hogs.py)
    bmv2_queue_depth: int = BMV2_QUEUE_DEPTH  # BMv2's egress queues, packets (0: BMv2's 64)
    api_port: int = 0               # the first controller's HTTP API port (0: a free one)
    # chaos modes (topo/faults/chaos_modes.py): random moves per second during the faults, faults
    # side by side, and the share of NF faults that are zombies (hung, then resumed)
    moves: float = 0.0
    overlap: bool = False
    zombies: float = 0.0


@dataclass
class System:
    """What `topo.launch.bringup.system()` brought up: everything the run's traffic and
    disturbances need."""

    opts: RunOptions
    cfg: ControllerConfig
    topo: Topology
    net: Any                                  # the Mininet network
    etcd: Any                                 # topo.etcd's cluster handle
    nf_procs: list[subprocess.Popen[bytes]]   # one nf-host per NF, by ascending id
    ctls: Controllers
    api: str                                  # the first leader's HTTP API
    log_dir: Path
    store: str                                # the NF runtimes' global store (etcd over mgmt)
    # starts an NF again, idle, on its node (`topo.launch.nfs.start_nf`, bound by the launcher)
    start_idle: Callable[[int], subprocess.Popen[bytes]]
    switch_stats: str | None = None           # p4sim's counter endpoint (host:port)
    cuts: MgmtCuts | None = None              # where NFs' management links are cut (mgmt faults)

    def restart_nf(self, nf_id: int) -> subprocess.Popen[bytes]:
        """Start NF `nf_id` again, idle (the controller returns it to the spare pool); it is
        stopped with the others on the way out."""
        proc = self.start_idle(nf_id)
        self.nf_procs.append(proc)
        return proc
