"""The controller configuration's management-plane sections: failure detection (heartbeats,
the confirmation probe and its start-up grace), etcd, the northbound API and security.

Split from controlplane/config.py (which owns the whole schema and its cross-field rules, and
imports these); `docs/controller.md` describes every field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mgmt.etcd_endpoints import parse_endpoints
from mgmt.tls import Identity


class ConfigModel(BaseModel):
    """Every section: unknown keys are errors, and a parsed configuration is immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def check_hostport(value: str) -> str:
    """`value` if it is HOST:PORT with a TCP port, else ValueError (pydantic reports it)."""
    host, sep, port = value.rpartition(":")
    if not sep or not host:
        raise ValueError(f"{value!r} is not HOST:PORT")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"port {port!r} in {value!r} is not a TCP port (1..65535)")
    return value


class HeartbeatConfig(ConfigModel):
    """Failure detection: one heartbeat per interval; dead after `misses` in a row."""

    interval_ms: int = Field(default=50, ge=1)
    misses: int = Field(default=3, ge=1)
    timeout_ms: int = Field(default=40, ge=1)
    # the one probe that confirms a suspicion (missed heartbeats, or the NF's control connection
    # closing: a crashed process closes its sockets) before a fail-over; a live NF answers it
    confirm_timeout_ms: int = Field(default=200, ge=1)
    # an NF's first moments after its process's first configuration (TLS handshakes, links set
    # up) can stall its workers longer than `confirm_timeout_ms` on a loaded machine (~260 ms
    # seen in CI; 1.5-2.5 s with twelve NFs starting at once on 2 cores): for
    # `startup_grace_ms` after it, a suspicion is confirmed only after
    # `startup_confirm_timeout_ms` of silence (when longer), so a live NF is not failed over (a
    # crash is still seen at once: its connection closes)
    startup_grace_ms: int = Field(default=10000, ge=0)
    startup_confirm_timeout_ms: int = Field(default=3000, ge=1)
    # how heartbeats travel: "grpc" (the control API's Heartbeat: the NF's parent asks each
    # worker through its pipe), or "udp" (a datagram each worker's event loop echoes,
    # nf_host/liveness.py: microseconds, so heartbeats of a few ms do not load the machine)
    transport: Literal["grpc", "udp"] = "grpc"
    # the address the UDP heartbeat socket binds (its port is the kernel's); default: the local
    # address that routes to the first NF's replication host (its management address), never all
    bind: str | None = None
    # backups armed to take over by themselves when their primary's replication link closes
    # without a goodbye (docs/protocols.md §4.3); off: the controller's fail-over alone
    self_takeover: bool = True


class EtcdConfig(ConfigModel):
    endpoints: list[str] = Field(default_factory=lambda: ["127.0.0.1:2379"], min_length=1)
    prefix: str = "/nfcluster"
    # the leader's lease (controlplane/leader.py): a standby takes over this long after the
    # leader died; longer than an election of etcd's own leader (about 2 s), during which no
    # lease can be renewed
    leader_ttl_s: float = Field(default=5.0, ge=1.0, le=60.0)

    @field_validator("endpoints")
    @classmethod
    def _endpoints(cls, values: list[str]) -> list[str]:
        values = [check_hostport(v) for v in values]
        parse_endpoints(values)  # several members: IPv4 addresses (one gRPC address list)
        return values


class ApiConfig(ConfigModel):
    listen: str = "127.0.0.1:8080"
    # bearer token for state-changing requests; the environment variable NFC_API_TOKEN wins
    token: str | None = Field(default=None, min_length=1)

    @field_validator("listen")
    @classmethod
    def _hostport(cls, value: str) -> str:
        return check_hostport(value)


class SecurityConfig(ConfigModel):
    """The management plane's security (docs/security.md): mutual TLS to every NF's control API
    and to the switch's P4Runtime server (when `switch_tls`), with
    `<name>.crt/.key` and `ca.crt` of `pki_dir`, and heartbeats authenticated with keys derived
    from `pki_dir/heartbeat.secret`, and to etcd (when `etcd_tls`: the leadership and the slot
    map). `tls: false` is plaintext everywhere: debugging only."""

    tls: bool = True
    pki_dir: Path = Path("build/pki")
    name: str = "controller"  # this controller's certificate (`<name>.crt`, `<name>.key`)
    # P4Runtime over TLS (p4sim serves it with `--tls-dir`; a real switch if configured so)
    switch_tls: bool = True
    # etcd over mutual TLS (etcd's certificate checked against the name "etcd"); false: plaintext
    # to etcd only, for an etcd that serves no TLS (debugging, the tests' shared etcd)
    etcd_tls: bool = True

    def etcd_identity(self) -> Identity | None:
        """Who the controller is to etcd: its certificate, None for plaintext."""
        return Identity(self.pki_dir, self.name) if self.tls and self.etcd_tls else None
