"""What every experiment shares: the run context, generated configurations, the system brought up
through `topo.launch.bringup.system`, traffic rounds, CSV files and progress on the terminal.

An experiment is a function of a `Context` that returns an `Outcome`: the CSV files and plots it
wrote, the rows set beside the thesis's tables, and its sanity checks (each a sentence and whether
it held). Everything random (source ports, hence slots and NFs) comes from the context's seed.
"""

from __future__ import annotations

import csv
import json
import math
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

REPO = Path(__file__).resolve().parent.parent
SINK_PORT = 9000
DATA_PORT_BASE = 3


@dataclass
class Context:
    """One experiment's run: where it writes, how big it is, and its seed."""

    out_dir: Path
    quick: bool = False
    seed: int = 1
    target: str = "p4sim"
    console: Console = field(default_factory=Console)

    def rng(self, salt: str) -> random.Random:
        """A generator of its own per use, so that one experiment's choices do not shift when
        another changes (seeded from the run's seed and `salt`)."""
        return random.Random(f"{self.seed}:{salt}")

    def progress(self, name: str, done: int, total: int, what: str) -> None:
        self.console.print(f"[bold]{name}[/] [{done}/{total}] {what}")


@dataclass
class Check:
    """A sanity property of a figure and whether the run kept it."""

    what: str
    ok: bool
    detail: str = ""


@dataclass
class Outcome:
    """What an experiment produced."""

    name: str
    csvs: list[Path] = field(default_factory=list)
    plots: list[Path] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # parameters changed and why, other remarks
    error: str = ""  # the experiment failed: why


@dataclass
class Comparison:
    """One thesis table set beside ours: rows of (x, thesis value, our value) per series."""

    table: str              # e.g. "A.1"
    title: str
    x_label: str
    unit_thesis: str
    unit_ours: str
    rows: list[tuple[Any, float | None, float | None]]
    shape: str = ""         # one sentence on any difference of shape


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    """Rows (dicts with the same keys, in order) to a CSV file with a header."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not rows:
        path.write_text("")
        return path
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for row in rows:
            w.writerow({k: _fmt(v) for k, v in row.items()})
    return path


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _fmt(v: Any) -> Any:
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.6g}"
    return "" if v is None else v


# -- configurations --------------------------------------------------------------------------------

def make_config(clusters: Sequence[int], batch: int = 30, batch_timeout_us: int = 5000,
                spares: int = 0, load_balancer: dict[str, Any] | None = None,
                capacity_pps: float | None = None) -> dict[str, Any]:
    """A controller configuration with `clusters[c]` primaries in cluster c+1, each with a backup
    on a node of its own, and `spares` idle NFs per cluster. NF ids: primaries 1..P in cluster
    order (so the thesis's NF-1, NF-2, ... are ids 1, 2, ...), then their backups P+1..2P, then
    the spares. Every NF runs on a node of its own."""
    n_primaries = sum(clusters)
    nfs: list[dict[str, Any]] = []

    def nf(nf_id: int, cluster: int, role: str, backup: int | None = None) -> dict[str, Any]:
        node = f"n{nf_id}"
        entry: dict[str, Any] = {
            "id": nf_id, "name": f"nf{nf_id}", "node": node, "cluster": f"c{cluster}",
            "role": role, "port": DATA_PORT_BASE + nf_id - 1,
            "mac": f"02:00:00:00:{nf_id >> 8:02x}:{nf_id & 0xFF:02x}",
            "mgmt": f"10.99.0.{10 + nf_id}:{7100 + nf_id}",
        }
        if backup is not None:
            entry["backup"] = backup
        if capacity_pps is not None:
            entry["capacity_pps"] = capacity_pps
        return entry

    primary_cluster: list[int] = []
    for c, k in enumerate(clusters, start=1):
        primary_cluster += [c] * k
    for i, c in enumerate(primary_cluster, start=1):
        nfs.append(nf(i, c, "primary", backup=n_primaries + i))
    for i, c in enumerate(primary_cluster, start=1):
        nfs.append(nf(n_primaries + i, c, "backup"))
    next_id = 2 * n_primaries + 1
    for c in range(1, len(clusters) + 1):
        for _ in range(spares):
            nfs.append(nf(next_id, c, "spare"))
            next_id += 1
    data: dict[str, Any] = {
        "switch": {"target": "p4sim", "address": "127.0.0.1:9559", "device_id": 1,
                   "election_id": 10, "p4info": "build/nfcluster.p4info.txtpb",
                   "cpu_port": 510, "slot_bits": 12},
        "edge": [{"name": "client", "port": 1, "mac": "02:00:00:00:00:01",
                  "prefixes": ["10.0.0.1/32"]},
                 {"name": "server", "port": 2, "mac": "02:00:00:00:00:02",
                  "prefixes": ["10.0.0.2/32"]}],
        "clusters": [{"name": f"c{c}"} for c in range(1, len(clusters) + 1)],
        "nfs": nfs,
        "batch": {"size": batch, "timeout_us": batch_timeout_us},
        "heartbeat": {"interval_ms": 200, "misses": 3, "timeout_ms": 200},
        "etcd": {"endpoints": ["127.0.0.1:2379"], "prefix": "/nfcluster"},
        "api": {"listen": "127.0.0.1:8080"},
    }
    if load_balancer is not None:
        data["load_balancer"] = load_balancer
    return data


# -- the system ------------------------------------------------------------------------------------

@dataclass
class Bench:
    """The system brought up for a series of points (`bring_up`), and traffic rounds through it."""

    ctx: Context
    system: Any  # topo.model.System
    work_dir: Path
    rounds: int = 0

    @property
    def api(self) -> str:
        return str(self.system.api)

    def get(self, path: str) -> Any:
        from topo.http_api import http_json

        return http_json(f"{self.api}{path}")

    def post(self, path: str, timeout: float = 30.0) -> Any:
        """POST to the controller's API (as `topo.http_api.http_post`); the JSON answer, or
        {"ok": False, "error": ...} on an HTTP error without one."""
        from topo.http_api import http_post

        status, body = http_post(f"{self.api}{path}", timeout)
        if isinstance(body, dict):
            return body
        return {"ok": False, "error": f"HTTP {status}: {body}"}

    def nf_status(self, nf_id: int) -> Any:
        """NF `nf_id`'s Status over its control API (gRPC, through the management network)."""
        from contract.proto import nf_control_pb2 as pb
        from contract.proto import nf_control_pb2_grpc as pb_grpc
        from mgmt.tls import control_channel

        cfg = self.system.cfg
        sec = cfg.security
        with control_channel(cfg.nf(nf_id).mgmt, nf_id, sec.pki_dir, sec.tls, sec.name) as ch:
            stub = pb_grpc.NfControlStub(ch)  # type: ignore[no-untyped-call]
            return stub.Status(pb.StatusRequest(), timeout=5)

    def traffic(self, flows: int, packets: int, rate: float, sports: Sequence[int] = (),
                dports: Sequence[int] = (), echo: bool = True, wait: float = 5.0,
                sink_ports: int = 1, idle: float = 2.0,
                during: Callable[[], None] | None = None) -> Traffic:
        """One round: a sink on the server, `flows` x `packets` from the client at `rate`
        packets/s; returns what the client (or, one-way, the sink) saw. `during` runs while the
        sender sends."""
        from topo.procs import wait_for

        self.rounds += 1
        d = self.work_dir / f"round{self.rounds}"
        d.mkdir(parents=True, exist_ok=True)
        net = self.system.net
        client, server = net.get("client"), net.get("server")
        server_ip = server.IP()
        sink = server.popen([sys.executable, "-m", "topo.traffic", "sink", "--listen",
                             f"{server_ip}:{SINK_PORT}", "--idle", str(idle), "--out",
                             str(d / "server.json"), "--ports", str(sink_ports),
                             *([] if echo else ["--no-echo"])], cwd=str(REPO))
        try:
            wait_for(lambda: f":{SINK_PORT}" in server.cmd("ss -uln"), timeout=10,
                     what="sink bound")
            cmd = [sys.executable, "-m", "topo.traffic", "send", "--dst",
                   f"{server_ip}:{SINK_PORT}", "--flows", str(flows), "--packets", str(packets),
                   "--rate", str(rate), "--wait", str(wait if echo else 0), "--out",
                   str(d / "client.json")]
            if sports:
                cmd += ["--sports", ",".join(map(str, sports))]
            if dports:
                cmd += ["--dports", ",".join(map(str, dports))]
            with open(d / "sender.log", "wb") as log:
                sender = client.popen(cmd, cwd=str(REPO), stdout=log, stderr=subprocess.STDOUT)
            if during is not None:
                during()
            sender.wait(timeout=packets * flows / max(rate, 1) + wait + 120)
            try:
                sink.wait(timeout=idle + 10)
            except subprocess.TimeoutExpired:  # nothing arrived: stopped, it writes its report
                sink.terminate()
                sink.wait(timeout=10)
        finally:
            for proc in (sink,):
                if proc.poll() is None:
                    proc.terminate()
                    with suppress(subprocess.TimeoutExpired, OSError):
                        proc.wait(timeout=5)
        if not (d / "client.json").exists():
            raise RuntimeError(f"the sender wrote no report (exit {sender.returncode}): "
                               f"{(d / 'sender.log').read_text()[-2000:]}")
        return Traffic.load(d, echo)


@contextmanager
def bring_up(ctx: Context, name: str, config: dict[str, Any], nf_params: dict[str, Any] | None = None,
             workers: int = 1) -> Iterator[Bench]:
    """The whole system (etcd with one member, the switch on `ctx.target`, one nf-host per NF of
    `config` running the generic NF with `nf_params`, the controller) for a series of points."""
    from topo.launch.bringup import system
    from topo.model import RunOptions

    work = ctx.out_dir / "runs" / name
    work.mkdir(parents=True, exist_ok=True)
    cfg_path = work / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(config, sort_keys=False))
    opts = RunOptions(target=ctx.target, config=cfg_path, flows=1, packets=1, rate=1.0,
                      workers=workers, out_dir=work, ready_timeout=120.0, nf="generic",
                      nf_params=json.dumps(nf_params or {}), etcd_members=1, standby=False,
                      seed=ctx.seed)
    quiet = Console(quiet=True)
    t0 = time.monotonic()
    with ExitStack() as stack:
        sys_ = stack.enter_context(system(opts, quiet))
        ctx.console.print(f"  [dim]{name}: system up in {time.monotonic() - t0:.0f} s "
                          f"({len(config['nfs'])} NFs, {workers} worker(s) each)[/]")
        yield Bench(ctx, sys_, work)


@dataclass
class Traffic:
    """What one round measured."""

    sent: int
    received: int
    duration_s: float        # first packet sent to last reply (or arrival, one-way)
    rtt_ms: list[float]
    first_sent: float = 0.0  # Unix time

    @property
    def throughput_pps(self) -> float:
        return self.received / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def loss(self) -> float:
        return 1.0 - self.received / self.sent if self.sent else 0.0

    def latency(self, q: float | None = None) -> float:
        """Mean round trip in ms (or its `q` quantile); NaN without any."""
        if not self.rtt_ms:
            return math.nan
        if q is None:
            return sum(self.rtt_ms) / len(self.rtt_ms)
        ordered = sorted(self.rtt_ms)
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

    @classmethod
    def load(cls, d: Path, echo: bool) -> Traffic:
        from topo.traffic import SideReport

        client = SideReport.from_json(json.loads((d / "client.json").read_text()))
        sent = sum(client.sent.values())
        starts = [t for ts in client.sent_at.values() for t in ts]
        first = min(starts, default=0.0)
        if echo:
            ends = [t for ts in client.received_at.values() for t in ts]
            received = sum(len(v) for v in client.received.values())
            rtts = [ms for v in client.rtt.values() for _t, ms in v]
        else:
            server = SideReport.from_json(json.loads((d / "server.json").read_text()))
            ends = [t for ts in server.received_at.values() for t in ts]
            received = sum(len(v) for v in server.received.values())
            rtts = []
        duration = max(ends) - first if ends and starts else 0.0
        return cls(sent, received, duration, rtts, first)


def ports_in_slots(slots: set[int], n: int, slot_count: int, rng: random.Random,
                   dports: Sequence[int] = (SINK_PORT,), client: str = "10.0.0.1",
                   server: str = "10.0.0.2", sports: range = range(20000, 65536),
                   ) -> list[tuple[int, int]]:
    """`n` (source port, destination port) pairs, each source port once (one socket each), whose
    flows hash into `slots`, drawn in a seeded order."""
    from topo.launch.hot import slot_of

    candidates = [(s, d) for d in dports for s in sports]
    rng.shuffle(candidates)
    out: list[tuple[int, int]] = []
    used: set[int] = set()
    for sport, dport in candidates:
        if sport not in used and slot_of(client, server, sport, dport, 17, slot_count) in slots:
            used.add(sport)
            out.append((sport, dport))
            if len(out) == n:
                return out
    raise RuntimeError(f"only {len(out)} of {n} port pairs hash into slots {sorted(slots)[:8]}")


def random_ports(n: int, rng: random.Random) -> list[int]:
    """`n` distinct seeded source ports (flows land in seeded slots, hence on seeded NFs)."""
    return rng.sample(range(20000, 65536), n)
