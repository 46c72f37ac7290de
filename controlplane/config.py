"""The controller's configuration: one YAML file, validated with pydantic.

This module owns the schema (switch, edge hosts, service chains, clusters, NF instances, thresholds,
load balancer, batch settings, heartbeats, etcd, API) and its cross-field rules (unique ids, ports and
MACs; every primary has a backup on another node in the same cluster; referenced clusters, stages and
edge hosts exist; low < high water mark).
Every problem is reported as `path: reason`, where `path` names the field, e.g. `nfs[2].backup`.
`docs/controller.md` describes every field.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator

from contract.roles import NfRole
from controlplane.config_management import (
    ApiConfig,
    EtcdConfig,
    HeartbeatConfig,
    SecurityConfig,
)
from controlplane.config_management import ConfigModel as _Model
from controlplane.config_management import check_hostport as _check_hostport

MAC_RE = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
MAX_PORT = 510  # bit<9> port numbers; 511 is the v1model drop port
CHAIN_STAGES = 4  # the program's CHAIN_STAGES (1 << STAGE_BITS, p4src/shared/define.p4)
Port = Annotated[int, Field(ge=0, le=MAX_PORT)]


class ConfigError(Exception):
    """A configuration that cannot be used; `problems` is a list of (field path, reason)."""

    def __init__(self, problems: list[tuple[str, str]], source: str = "") -> None:
        self.problems = problems
        self.source = source
        head = f"invalid configuration{f' in {source}' if source else ''}:"
        super().__init__("\n".join([head, *(f"  {path}: {why}" for path, why in problems)]))


def split_hostport(value: str) -> tuple[str, int]:
    """`"10.99.0.11:7101"` -> `("10.99.0.11", 7101)`."""
    host, _, port = value.rpartition(":")
    return host.strip("[]"), int(port)


def mac_to_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


class SwitchConfig(_Model):
    """The P4 switch and how the controller talks to it."""

    target: Literal["p4sim", "bmv2", "tofino"] = "p4sim"
    address: str = "127.0.0.1:9559"
    device_id: int = Field(default=1, ge=0)
    election_id: int = Field(default=10, ge=1)
    p4info: Path = Path("build/nfcluster.p4info.txtpb")
    device_config: Path | None = None
    cpu_port: Port = 510
    slot_bits: int = Field(default=12, ge=1, le=16)
    # p4sim's counter endpoint (`p4sim run --metrics-addr`): port drops, read every counter round
    stats: str | None = None

    @field_validator("address")
    @classmethod
    def _hostport(cls, value: str) -> str:
        return _check_hostport(value)

    @field_validator("stats")
    @classmethod
    def _stats_hostport(cls, value: str | None) -> str | None:
        return None if value is None else _check_hostport(value)

    @property
    def slot_count(self) -> int:
        return 1 << self.slot_bits

    def device_config_path(self) -> Path:
        """The device config pushed with the P4Info; defaults by target, as `make build` writes
        them (mk/dataplane.mk): p4sim's `build/nfcluster.p4sim` next to its P4Info, p4c's
        `build/bmv2/nfcluster.json` next to its own P4Info (`build/bmv2/nfcluster.p4info.txtpb`).
        With the P4Info of another directory (e.g. p4sim's, whose ids are p4c's) the target's
        subdirectory of that directory is used."""
        if self.device_config is not None:
            return self.device_config
        subdir, name = {"p4sim": ("", "nfcluster.p4sim"), "bmv2": ("bmv2", "nfcluster.json"),
                        "tofino": ("tofino", "nfcluster.bin")}[self.target]
        base = self.p4info.parent
        if subdir and base.name != subdir:
            base = base / subdir
        return base / name


class EdgeHostConfig(_Model):
    """A host on an edge port (client, server): packets to its prefixes leave on its port."""

    name: str = Field(min_length=1)
    port: Port
    mac: str
    prefixes: list[str] = Field(min_length=1)

    @field_validator("mac")
    @classmethod
    def _mac(cls, value: str) -> str:
        if not MAC_RE.match(value):
            raise ValueError(f"{value!r} is not a MAC address like 02:00:00:00:00:01")
        return value.lower()

    @field_validator("prefixes")
    @classmethod
    def _prefixes(cls, values: list[str]) -> list[str]:
        out = []
        for value in values:
            try:
                out.append(str(ipaddress.IPv4Network(value, strict=True)))
            except ValueError as exc:
                raise ValueError(f"{value!r} is not an IPv4 prefix: {exc}") from exc
        return out


class StageConfig(_Model):
    """One stage of a service chain: the NFs of the clusters naming it process its packets."""

    name: str = Field(min_length=1)
    # the stage's NF rewrites addresses or ports (a NAT): the switch computes its output's slot
    # again from the rewritten headers, so both directions of a connection meet in one slot
    rewrites_addresses: bool = False
    # what the launcher (nfc-topo) runs in the stage's nf-host processes: an NF of nf_host/nfs
    # and its parameters (the controller itself does not look at them)
    nf: str | None = Field(default=None, min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)


class ChainConfig(_Model):
    """A service chain: packets from an `inside` edge host go through the stages in order, packets
    from an `outside` edge host in reverse; after the last stage they leave by destination."""

    name: str = Field(min_length=1)
    stages: list[StageConfig] = Field(min_length=1)
    inside: list[str] = Field(min_length=1)   # edge host names
    outside: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class Stage:
    """A stage as the switch numbers it: 0, 1, ... over the chains in configuration order."""

    id: int
    name: str
    chain: str
    position: int          # 0 = the chain's first stage
    last: bool
    rewrites_addresses: bool


class ClusterConfig(_Model):
    """A cluster: NFs that replicate state among themselves, so moves within it ship deltas."""

    name: str = Field(min_length=1)
    stage: str | None = None  # the chain stage its NFs serve (required when chains are declared)


class NfConfig(_Model):
    """One NF instance (one nf-host process) on a node."""

    id: int = Field(ge=1, le=0xFFFF)
    name: str = Field(min_length=1)
    node: str = Field(min_length=1)
    cluster: str = Field(min_length=1)
    role: NfRole
    backup: int | None = None
    port: Port
    mac: str
    mgmt: str
    replication: str | None = None
    interface: str | None = None
    capacity_pps: float = Field(default=10000.0, gt=0)

    @field_validator("mac")
    @classmethod
    def _mac(cls, value: str) -> str:
        if not MAC_RE.match(value):
            raise ValueError(f"{value!r} is not a MAC address like 02:00:00:00:01:01")
        return value.lower()

    @field_validator("mgmt", "replication")
    @classmethod
    def _hostport(cls, value: str | None) -> str | None:
        return None if value is None else _check_hostport(value)

    def replication_address(self) -> str:
        """Where peers send state; defaults to the management host, control port + 100."""
        if self.replication is not None:
            return self.replication
        host, port = split_hostport(self.mgmt)
        return f"{host}:{port + 100}"


class ThresholdConfig(_Model):
    """Load-balancer water marks, as fractions of an NF's `capacity_pps`."""

    low_water: float = Field(default=0.3, ge=0.0, le=1.0)
    high_water: float = Field(default=0.8, gt=0.0, le=2.0)
    max_slots_per_move: int = Field(default=16, ge=1)


class LoadBalancerConfig(_Model):
    """The load balancer's loop and the knobs that keep it from oscillating (docs/controller.md).

    The water marks themselves are `thresholds.low_water` / `thresholds.high_water`."""

    enabled: bool = False
    # enabled but not acting until `POST /lb/resume` (a benchmark's baseline; `POST /lb/pause`)
    paused: bool = False
    period_s: float = Field(default=1.0, gt=0.0, le=3600.0)
    # how often the controller asks every NF for its load (packet rate, CPU, queue)
    report_s: float = Field(default=1.0, ge=0.05, le=60.0)
    target_margin: float = Field(default=0.1, ge=0.0, lt=1.0)
    idle_floor: float = Field(default=0.05, ge=0.0, le=1.0)
    idle_for_s: float = Field(default=30.0, ge=0.0)
    hot_for_s: float = Field(default=0.0, ge=0.0)
    slot_cooldown_s: float = Field(default=10.0, ge=0.0)
    nf_settle_s: float = Field(default=2.0, ge=0.0)
    max_concurrent_moves: int = Field(default=8, ge=1)
    scale_cooldown_s: float = Field(default=30.0, ge=0.0)
    min_primaries_per_cluster: int = Field(default=1, ge=1)
    move_overhead_bytes: int = Field(default=256, ge=0)
    bytes_per_flow: int = Field(default=64, ge=1)
    cpu_capacity_percent: float | None = Field(default=None, gt=0.0)
    queue_growth: int = Field(default=256, ge=1)
    history: int = Field(default=1000, ge=1, le=1_000_000)


class BatchConfig(_Model):
    """Output-commit batches the NF runtimes use: B packets or T microseconds."""

    size: int = Field(default=32, ge=1, le=65536)
    timeout_us: int = Field(default=500, ge=1)


class ControllerConfig(_Model):
    """The whole file."""

    switch: SwitchConfig = Field(default_factory=SwitchConfig)
    edge: list[EdgeHostConfig] = Field(default_factory=list)
    chains: list[ChainConfig] = Field(default_factory=list)
    clusters: list[ClusterConfig] = Field(min_length=1)
    nfs: list[NfConfig] = Field(min_length=1)
    thresholds: ThresholdConfig = Field(default_factory=ThresholdConfig)
    load_balancer: LoadBalancerConfig = Field(default_factory=LoadBalancerConfig)
    batch: BatchConfig = Field(default_factory=BatchConfig)
    heartbeat: HeartbeatConfig = Field(default_factory=HeartbeatConfig)
    etcd: EtcdConfig = Field(default_factory=EtcdConfig)
    api: ApiConfig = Field(default_factory=ApiConfig)
    security: SecurityConfig = Field(default_factory=SecurityConfig)

    # -- views used by the rest of the controller -------------------------------------------------
    def nf(self, nf_id: int) -> NfConfig:
        for nf in self.nfs:
            if nf.id == nf_id:
                return nf
        raise KeyError(f"no NF with id {nf_id}")

    def primaries(self) -> list[NfConfig]:
        return sorted((nf for nf in self.nfs if nf.role == "primary"), key=lambda n: n.id)

    def backup_of(self, primary_id: int) -> NfConfig | None:
        backup = self.nf(primary_id).backup
        return None if backup is None else self.nf(backup)

    def cluster_numbers(self) -> dict[str, int]:
        """Cluster name -> its number on the NF control API: 1, 2, ... in configuration order."""
        return {c.name: i + 1 for i, c in enumerate(self.clusters)}

    def cluster_members(self, cluster: str) -> list[NfConfig]:
        return sorted((nf for nf in self.nfs if nf.cluster == cluster), key=lambda n: n.id)

    # -- service chains ---------------------------------------------------------------------------
    def stages(self) -> list[Stage]:
        """Every stage, numbered over the chains in order; one stage 0 ("main") without chains."""
        if not self.chains:
            return [Stage(0, "main", "main", 0, True, False)]
        out: list[Stage] = []
        for chain in self.chains:
            for pos, st in enumerate(chain.stages):
                out.append(Stage(len(out), st.name, chain.name, pos, pos == len(chain.stages) - 1,
                                 st.rewrites_addresses))
        return out

    def stage_config(self, stage: int) -> StageConfig:
        """The configuration of stage `stage` (a bare one without chains)."""
        every = [st for chain in self.chains for st in chain.stages]
        return every[stage] if every else StageConfig(name="main")

    def stage_of_cluster(self, cluster: str) -> int:
        """The stage id of `cluster`'s NFs (0 without chains)."""
        if not self.chains:
            return 0
        name = next(c.stage for c in self.clusters if c.name == cluster)
        return next(st.id for st in self.stages() if st.name == name)

    def stage_of(self, nf_id: int) -> int:
        return self.stage_of_cluster(self.nf(nf_id).cluster)

    @property
    def slot_space(self) -> int:
        """Slot indexes the controller manages: stage << slot_bits | slot for every stage."""
        return self.switch.slot_count * len(self.stages())

    def stage_of_slot(self, slot_index: int) -> int:
        return slot_index >> self.switch.slot_bits

    def stage_slots(self, stage: int) -> range:
        """The slot indexes of `stage`."""
        count = self.switch.slot_count
        return range(stage * count, (stage + 1) * count)


def _path(loc: Iterable[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _unique(problems: list[tuple[str, str]], items: list[Any], section: str, attr: str) -> None:
    seen: dict[Any, int] = {}
    for index, item in enumerate(items):
        value = getattr(item, attr)
        if value is None:
            continue
        if value in seen:
            problems.append(
                (f"{section}[{index}].{attr}", f"{value!r} is already used by {section}[{seen[value]}]")
            )
        else:
            seen[value] = index


def cross_check(cfg: ControllerConfig) -> list[tuple[str, str]]:
    """The rules that span fields; returns (path, reason) for each violation."""
    problems: list[tuple[str, str]] = []
    _unique(problems, cfg.clusters, "clusters", "name")
    for attr in ("id", "name", "port", "mac", "mgmt"):
        _unique(problems, cfg.nfs, "nfs", attr)
    _unique(problems, cfg.edge, "edge", "name")
    _unique(problems, cfg.edge, "edge", "port")
    nf_ports = {nf.port: i for i, nf in enumerate(cfg.nfs)}
    for i, host in enumerate(cfg.edge):
        if host.port in nf_ports:
            problems.append((f"edge[{i}].port", f"port {host.port} is also nfs[{nf_ports[host.port]}].port"))
        if host.port == cfg.switch.cpu_port:
            problems.append((f"edge[{i}].port", f"port {host.port} is the CPU port"))
    for i, nf in enumerate(cfg.nfs):
        if nf.port == cfg.switch.cpu_port:
            problems.append((f"nfs[{i}].port", f"port {nf.port} is the CPU port"))
    clusters = {c.name for c in cfg.clusters}
    by_id = {nf.id: nf for nf in cfg.nfs}
    backed_by: dict[int, int] = {}
    referenced = {nf.backup for nf in cfg.nfs if nf.role == "primary"}
    for i, nf in enumerate(cfg.nfs):
        if nf.cluster not in clusters:
            problems.append((f"nfs[{i}].cluster", f"cluster {nf.cluster!r} is not in clusters"))
        if nf.role != "primary":
            if nf.backup is not None:
                problems.append((f"nfs[{i}].backup", f"only a primary has a backup (role is {nf.role})"))
            continue
        if nf.backup is None:
            problems.append((f"nfs[{i}].backup", "a primary needs a backup NF id"))
            continue
        backup = by_id.get(nf.backup)
        if backup is None:
            problems.append((f"nfs[{i}].backup", f"NF {nf.backup} does not exist"))
            continue
        if backup.id == nf.id:
            problems.append((f"nfs[{i}].backup", "an NF cannot back itself up"))
        elif backup.role != "backup":
            problems.append((f"nfs[{i}].backup", f"NF {backup.id} has role {backup.role}, not backup"))
        elif backup.node == nf.node:
            problems.append(
                (f"nfs[{i}].backup", f"backup NF {backup.id} is on the same node {nf.node!r}")
            )
        elif backup.cluster != nf.cluster:
            problems.append(
                (f"nfs[{i}].backup", f"backup NF {backup.id} is in cluster {backup.cluster!r}, "
                 f"not {nf.cluster!r}")
            )
        elif backup.id in backed_by:
            problems.append(
                (f"nfs[{i}].backup", f"NF {backup.id} already backs up NF {backed_by[backup.id]}")
            )
        else:
            backed_by[backup.id] = nf.id
    for i, nf in enumerate(cfg.nfs):
        if nf.role == "backup" and nf.id not in referenced:
            problems.append((f"nfs[{i}].role", f"backup NF {nf.id} is no primary's backup"))
    if not any(nf.role == "primary" for nf in cfg.nfs):
        problems.append(("nfs", "no NF has role primary"))
    if cfg.thresholds.low_water >= cfg.thresholds.high_water:
        problems.append(
            ("thresholds.low_water", f"{cfg.thresholds.low_water} is not below high_water "
             f"{cfg.thresholds.high_water}")
        )
    lb, th = cfg.load_balancer, cfg.thresholds
    if th.high_water - lb.target_margin <= th.low_water:
        problems.append(
            ("load_balancer.target_margin", f"{lb.target_margin} leaves no room: high_water - "
             f"target_margin ({th.high_water - lb.target_margin:.3g}) must be above low_water "
             f"{th.low_water}")
        )
    if lb.idle_floor >= th.low_water and th.low_water > 0:
        problems.append(
            ("load_balancer.idle_floor", f"{lb.idle_floor} is not below thresholds.low_water {th.low_water}")
        )
    if cfg.heartbeat.timeout_ms > cfg.heartbeat.interval_ms:
        problems.append(("heartbeat.timeout_ms", "must not exceed heartbeat.interval_ms"))
    if cfg.heartbeat.transport == "udp":
        for i, nf in enumerate(cfg.nfs):
            repl_host = split_hostport(nf.replication_address())[0]
            if ":" in repl_host:  # the controller's heartbeat socket is IPv4
                problems.append((f"nfs[{i}].replication", f"{repl_host} is IPv6: heartbeat.transport "
                                 "udp needs IPv4 or host names (use grpc)"))
    problems.extend(_check_chains(cfg))
    return problems


def _check_chains(cfg: ControllerConfig) -> list[tuple[str, str]]:
    """Chains: stage names unique over every chain, at most CHAIN_STAGES stages, edge hosts that
    exist and enter one chain only, every cluster in a stage and every stage with a primary."""
    problems: list[tuple[str, str]] = []
    if not cfg.chains:
        for i, cluster in enumerate(cfg.clusters):
            if cluster.stage is not None:
                problems.append((f"clusters[{i}].stage", f"stage {cluster.stage!r} is not in chains "
                                 "(no chains are declared)"))
        return problems
    _unique(problems, cfg.chains, "chains", "name")
    stages: dict[str, str] = {}
    total = 0
    for c, chain in enumerate(cfg.chains):
        for s, st in enumerate(chain.stages):
            total += 1
            if st.name in stages:
                problems.append((f"chains[{c}].stages[{s}].name",
                                 f"stage {st.name!r} is already a stage of chain {stages[st.name]!r}"))
            stages.setdefault(st.name, chain.name)
    if total > CHAIN_STAGES:
        problems.append(("chains", f"{total} stages in all; the program has room for {CHAIN_STAGES} "
                         "(STAGE_BITS in p4src/shared/define.p4)"))
    if cfg.switch.slot_bits + (CHAIN_STAGES - 1).bit_length() > 16:
        problems.append(("switch.slot_bits", f"{cfg.switch.slot_bits} leaves no room for the stage "
                         "in the 16-bit slot index (at most 14 with chains)"))
    hosts = {h.name for h in cfg.edge}
    entered: dict[str, str] = {}
    for c, chain in enumerate(cfg.chains):
        for side in ("inside", "outside"):
            for h, host in enumerate(getattr(chain, side)):
                if host not in hosts:
                    problems.append((f"chains[{c}].{side}[{h}]", f"edge host {host!r} is not in edge"))
                elif host in entered:
                    problems.append((f"chains[{c}].{side}[{h}]",
                                     f"edge host {host!r} already enters {entered[host]}"))
                else:
                    entered[host] = f"chain {chain.name!r} ({side})"
    for i, host in enumerate(cfg.edge):
        if host.name not in entered:
            problems.append((f"edge[{i}]", f"edge host {host.name!r} enters no chain (name it in a "
                             "chain's inside or outside)"))
    staffed: set[str] = set()
    for i, cluster in enumerate(cfg.clusters):
        if cluster.stage is None:
            problems.append((f"clusters[{i}].stage", "a cluster needs a stage when chains are declared"))
        elif cluster.stage not in stages:
            problems.append((f"clusters[{i}].stage", f"stage {cluster.stage!r} is in no chain "
                             f"(stages: {', '.join(sorted(stages))})"))
        elif any(nf.cluster == cluster.name and nf.role == "primary" for nf in cfg.nfs):
            staffed.add(cluster.stage)
    for c, chain in enumerate(cfg.chains):
        for s, st in enumerate(chain.stages):
            if st.name not in staffed:
                problems.append((f"chains[{c}].stages[{s}]", f"stage {st.name!r} has no primary NF "
                                 "(no cluster of it has one)"))
    return problems


def parse_config(data: Any, source: str = "") -> ControllerConfig:
    """Validate already-loaded YAML data; raise ConfigError naming every bad field."""
    if not isinstance(data, dict):
        raise ConfigError([("(top level)", "the file must hold a mapping")], source)
    try:
        cfg = ControllerConfig.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                msg = "unknown field"
            elif msg.startswith("Value error, "):
                msg = msg[len("Value error, "):]
            problems.append((_path(err["loc"]), msg))
        raise ConfigError(problems, source) from None
    problems = cross_check(cfg)
    if problems:
        raise ConfigError(problems, source)
    return cfg


def load_config(path: str | Path) -> ControllerConfig:
    """Read and validate a YAML configuration file."""
    text = Path(path).read_text()
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([("(yaml)", str(exc))], str(path)) from None
    return parse_config(data, str(path))
