"""Configuration of one NF instance (`nf-host run`): from a YAML file, overridden by flags.

Validated with pydantic so a wrong value is reported with the name of its field. Addresses: the
control address is where the gRPC `NfControl` service listens ("host:port" or "unix:/path");
the replication address is worker 0's "host:port", worker i listens on port + i, and every NF of
a deployment must run the same number of workers (slot s belongs to worker s % workers everywhere).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from contract.timing import SWITCH_QUEUE_BOUND
from nf_host.peer_policy import PeerLimits
from nf_host.worker import WorkerConfig


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the field."""


class NfHostConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    nf_id: int = Field(ge=1, le=0xFFFF)
    cluster: int = Field(default=0, ge=0)
    interface: str
    control: str = "127.0.0.1:50100"
    replication: str = "127.0.0.1:51000"
    role: Literal["primary", "backup", "idle"] = "primary"
    nf: str = "passthrough"
    params: dict[str, Any] = Field(default_factory=dict)
    nf_modules: list[str] = Field(default_factory=list)
    workers: int = Field(default=1, ge=1, le=64)
    batch_size: int = Field(default=32, ge=1, le=65536)
    batch_time_us: int = Field(default=500, ge=0)
    gap_timeout_ms: float = Field(default=50.0, gt=0)
    # a promoted backup's longest wait for the dead primary's state it lacks (promote_wait.py)
    promote_wait_ms: float = Field(default=500.0, ge=0)
    # ... extended while its deltas keep coming (alive, only slow), up to this in all
    promote_wait_max_ms: float = Field(default=4000.0, ge=0)
    reorder_capacity: int = Field(default=4096, ge=1)
    backup_buffer_mb: float = Field(default=64.0, gt=0)
    max_held: int = Field(default=65536, ge=1)
    # how long a backup keeps its primary's released output (the switch's queue bound)
    output_retain_ms: float = Field(default=SWITCH_QUEUE_BOUND * 1000, ge=0)
    # what the replication server accepts (nf_host/peer_policy.py, docs/protocols.md §6); every NF
    # of a deployment should use the same frame limit (a snapshot over it never gets through)
    repl_max_frame_mb: float = Field(default=64.0, gt=0, le=4095)
    # messages larger than a chunk (snapshots, transfers) leave in fragments of this size, paced
    # by the receiver (nf_host/chunked.py); a receiver reassembles up to `repl_max_message_mb`
    repl_chunk_kb: int = Field(default=1024, ge=1, le=16384)
    repl_max_message_mb: float = Field(default=4096.0, gt=0)
    repl_max_connections: int = Field(default=64, ge=1)
    repl_known_peers_only: bool = True
    # who answers heartbeats (nf_host/liveness.py): a responder process at real-time priority
    # ("normal": at normal priority), while the worker's event loop has turned within
    # `loop_stall_ms`; or the worker's event loop itself ("loop")
    heartbeat_echo: Literal["realtime", "normal", "loop"] = "realtime"
    loop_stall_ms: float = Field(default=250.0, gt=0)
    global_store: str = "memory"
    log_level: str = "INFO"
    # the management plane's security (mgmt/tls.py, docs/security.md): mutual TLS on the
    # control API and the replication links, with `nf-<id>.crt/.key` and `ca.crt` of `pki_dir`,
    # and heartbeats authenticated with `nf-<id>.hbkey`; `tls: false` (--insecure) is plaintext
    # and unauthenticated heartbeats, for debugging only
    tls: bool = True
    pki_dir: str = "build/pki"
    # the global store's etcd over mutual TLS too (as `nf-<id>`, etcd's certificate checked
    # against "etcd"); false (--etcd-insecure): plaintext to etcd only, for an etcd without TLS
    etcd_tls: bool = True
    # who may call the control API: client certificates with these common names (the controller's)
    control_clients: list[str] = Field(default_factory=lambda: ["controller"], min_length=1)

    def worker_config(self, index: int) -> WorkerConfig:
        host, _, port = self.replication.rpartition(":")
        return WorkerConfig(
            nf_id=self.nf_id,
            cluster=self.cluster,
            index=index,
            workers=self.workers,
            batch_size=self.batch_size,
            batch_time=self.batch_time_us / 1e6,
            gap_timeout=self.gap_timeout_ms / 1e3,
            promote_wait=self.promote_wait_ms / 1e3,
            promote_wait_max=self.promote_wait_max_ms / 1e3,
            reorder_capacity=self.reorder_capacity,
            backup_buffer_bytes=int(self.backup_buffer_mb * 1024 * 1024),
            max_held=self.max_held,
            output_retain=self.output_retain_ms / 1e3,
            limits=PeerLimits(
                max_frame=int(self.repl_max_frame_mb * 1024 * 1024),
                max_message=int(self.repl_max_message_mb * 1024 * 1024),
                max_connections=self.repl_max_connections,
                known_peers_only=self.repl_known_peers_only,
            ),
            repl_chunk=self.repl_chunk_kb * 1024,
            repl_host=host.strip("[]"),
            repl_port=int(port) + index,
        )


def load_config(path: str | Path | None, overrides: dict[str, Any]) -> NfHostConfig:
    """Read the YAML file (if any), apply the non-None overrides, validate."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            raw = yaml.safe_load(Path(path).read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"{path}: {exc}") from exc
        if raw is not None and not isinstance(raw, dict):
            raise ConfigError(f"{path}: the top level must be a mapping")
        data.update(raw or {})
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        cfg = NfHostConfig.model_validate(data)
    except ValidationError as exc:
        msgs = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        raise ConfigError("invalid NF host configuration: " + "; ".join(msgs)) from None
    host, _, port = cfg.replication.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"replication: {cfg.replication!r} is not host:port")
    return cfg
