"""The whole system's zero-loss capacity (`make bench-system`): p4sim's port I/O variants compared.

For each variant (p4sim `--io` x `--engine`) the system of `make run` is brought up
(`topo.launch.bringup.system`: Mininet, the p4sim switch, one nf-host per NF running the checker, the
controller, etcd), and a search over the client's rate finds the highest rate at which every
packet is delivered: short rounds of numbered traffic in both directions, each judged by the
sink's verdict (`topo.verify`: every packet of every flow delivered once and in order) and by the
backlog: the last reply must come within `--drain` seconds of the last packet sent. (Without that,
a round shorter than what the switch's and the NFs' buffers hold would pass at a rate the system
cannot sustain: the queues absorb the excess and drain after the sender stopped.) The search
is a bisection on a logarithmic scale between `--lo` and `--hi`. Variants are interleaved within
each repeat, so a change of the machine's load hits them alike; the table gives each variant's
median capacity over `--repeats` and its ratio to the first variant. At the first rate that lost
packets, the places that counted drops are listed (p4sim's port counters, the P4 drop counters,
the NFs' counters, the kernel's in every namespace: `topo.faults.losses.where_lost`), the lost packets
set against the drops that are losses, and what no counter saw as "unaccounted"; a round that
lost nothing but failed by its backlog says so.

A system is brought up once per variant and repeat (about half a minute) and then carries every
round of that search: a full `make run` per rate would spend most of its time starting up.

    .venv/bin/python -m bench.system_capacity [--io socket,ring,ring-pyloop] [--engine python] [--repeats 3]
    .venv/bin/python -m bench.system_capacity --quick       # one repeat, 3 rounds per variant

Needs root (Mininet) and `make build`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from rich.console import Console
from rich.table import Table

from bench.io_variants import NATIVE_RING_ENV, p4sim_io, parse_ios

REPO = Path(__file__).resolve().parent.parent
SINK_PORT = 9000


@dataclass
class Trial:
    rate: float
    ok: bool
    sent: int
    lost: int
    seconds: float
    drain_s: float = 0.0  # last reply received minus last packet sent (the backlog left)
    sites: list[str] = field(default_factory=list)  # where drops were counted (failed rounds)
    counted: int = 0  # this round's drops that are losses, counted on the path (failed rounds)

    @property
    def unaccounted(self) -> int:
        """Packets lost that no counter on the path saw."""
        return max(0, self.lost - self.counted)

    def where(self) -> str:
        """Where this failed round's packets went: the counted drops, and what no counter saw;
        or, when nothing was lost, that the round failed by its backlog."""
        if not self.lost:
            return (f"nothing lost; the backlog took {self.drain_s:.2f} s to drain"
                    + (" (drops of copies: " + "; ".join(self.sites) + ")" if self.sites else ""))
        text = f"lost {self.lost}, counted {self.counted}: " + ("; ".join(self.sites) or "-")
        return text + (f"; unaccounted: {self.unaccounted}" if self.unaccounted else "")


def bisect_capacity(ok: Callable[[float], bool], lo: float, hi: float, steps: int) -> float:
    """The highest rate found to pass: `lo` and `hi` are tried first (0.0 if `lo` fails, `hi` if
    it passes), then `steps` halvings of the interval on a log scale."""
    if not ok(lo):
        return 0.0
    if ok(hi):
        return hi
    good, bad = lo, hi
    for _ in range(steps):
        mid = round(math.sqrt(good * bad))
        if ok(mid):
            good = mid
        else:
            bad = mid
    return good


@dataclass(frozen=True)
class Variant:
    io: str
    engine: str

    @property
    def name(self) -> str:
        return f"{self.io}/{self.engine}"


def drain_time(client: Any) -> float:
    """Seconds from the client's last packet sent to its last reply received."""
    sent = [t for ts in client.sent_at.values() for t in ts]
    got = [t for ts in client.received_at.values() for t in ts]
    return max(got) - max(sent) if sent and got else 0.0


def one_round(sys_: Any, rate: float, flows: int, seconds: float, out: Path,
              max_drain: float = 1.0) -> Trial:
    """Numbered traffic through a running system at `rate` client packets/s for about `seconds`;
    judged by packet numbers (a flow's earlier rounds may have left checker state behind)."""
    from topo.faults.disturbances import loss_report
    from topo.faults.kernel_drops import kernel_counters
    from topo.faults.losses import LossSite, where_lost
    from topo.http_api import http_json
    from topo.launch import chain_run
    from topo.procs import wait_for
    from topo.traffic import SideReport
    from topo.verify import verify

    out.mkdir(parents=True, exist_ok=True)
    packets = max(10, round(rate * seconds / flows))

    def sites_now(client_drops: int = 0, server_drops: int = 0
                  ) -> dict[tuple[str, str], LossSite]:
        switch = (http_json(f"http://{sys_.switch_stats}/status") if sys_.switch_stats else None)
        status = http_json(f"{sys_.api}/status")
        kernel = kernel_counters(sys_.net, [h.name for h in sys_.cfg.edge],
                                 sys_.topo.switch_name, switch_links=switch is None,
                                 machine_since={})
        sites = where_lost(sys_.cfg, switch, status.get("switch_drops", {}),
                           http_json(f"{sys_.api}/nfs"),
                           {"client": client_drops, "server": server_drops}, kernel)
        return {(s.where, s.why): s for s in sites}

    before = sites_now()  # the counters are cumulative: this round's share is the difference
    client, server = sys_.net.get("client"), sys_.net.get("server")
    server_ip = server.IP()
    for cmd in chain_run.neighbours(sys_.cfg, client.MAC()):
        server.cmd(f"{cmd} dev {server.defaultIntf()}")
    t0 = time.monotonic()
    sink = server.popen([sys.executable, "-m", "topo.traffic", "sink", "--listen",
                         f"{server_ip}:{SINK_PORT}", "--idle", "3", "--out",
                         str(out / "server.json")], cwd=str(REPO))
    try:
        wait_for(lambda: f":{SINK_PORT}" in server.cmd("ss -uln"), timeout=10, what="sink bound")
        with open(out / "sender.log", "wb") as log:
            sender = client.popen([sys.executable, "-m", "topo.traffic", "send", "--dst",
                                   f"{server_ip}:{SINK_PORT}", "--flows", str(flows), "--packets",
                                   str(packets), "--rate", str(rate), "--wait", "5", "--out",
                                   str(out / "client.json")], cwd=str(REPO), stdout=log,
                                  stderr=subprocess.STDOUT)
        sender.wait(timeout=packets * flows / rate + 120)
        sink.wait(timeout=60)
    finally:
        for proc in (sink,):
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=10)
    client_rep = SideReport.from_json(json.loads((out / "client.json").read_text()))
    server_rep = SideReport.from_json(json.loads((out / "server.json").read_text()))
    inputs = (server_rep.received, client_rep.received, client_rep.sent, server_rep.sent)
    verdict = verify(*inputs, counted=False)
    lost = loss_report(inputs, counted=False)["lost"]
    sent = sum(client_rep.sent.values()) + sum(server_rep.sent.values())
    drain = drain_time(client_rep)
    trial = Trial(rate, verdict.ok and drain <= max_drain, sent, lost, time.monotonic() - t0,
                  drain)
    if not trial.ok:  # this round's share of each counter: the difference
        after = sites_now(client_rep.host_drops, server_rep.host_drops)
        grown = [(site, site.packets - (before[k].packets if k in before else 0))
                 for k, site in after.items()]
        grown = [(site, n) for site, n in grown if n > 0]
        trial.sites = [f"{site.where}: {n} {site.why}" + ("" if site.loss else " (a copy)")
                       for site, n in grown]
        trial.counted = sum(n for site, n in grown if site.loss)
    return trial


def capacity_of(variant: Variant, args: argparse.Namespace, out: Path, console: Console,
                engine_option: bool) -> tuple[float, list[Trial]]:
    """Bring the system up with `variant` and search its zero-loss capacity."""
    from topo.launch.bringup import system
    from topo.model import DEFAULT_CONFIG, RunOptions

    io, native_ring = p4sim_io(variant.io)
    opts = RunOptions(target="p4sim", config=DEFAULT_CONFIG, flows=args.flows, packets=1, rate=1.0,
                      workers=1, out_dir=out, ready_timeout=120.0, etcd_members=1, standby=False,
                      io=io, engine=variant.engine if engine_option else None)
    trials: list[Trial] = []
    t0 = time.monotonic()
    # the switch started in Mininet inherits the environment; it is put back afterwards
    with mock.patch.dict(os.environ, {NATIVE_RING_ENV: native_ring}), \
            system(opts, Console(quiet=True)) as sys_:
        console.print(f"  [dim]{variant.name}: system up in {time.monotonic() - t0:.0f} s[/]")

        def ok(rate: float) -> bool:
            # the counters are cumulative: what earlier rounds lost stays in them
            trial = one_round(sys_, rate, args.flows, args.seconds,
                              out / f"round{len(trials) + 1}", args.drain)
            trials.append(trial)
            what = (f"lost {trial.lost} of {trial.sent}" if trial.lost else "all delivered")
            console.print(f"  {variant.name} {rate:>7.0f} pkt/s: {what}, backlog drained in "
                          f"{trial.drain_s:.2f} s" + ("" if trial.ok else " -> too much")
                          + f" ({trial.seconds:.0f} s)")
            return trial.ok

        capacity = bisect_capacity(ok, args.lo, args.hi, args.steps)
    return capacity, trials


def table(variants: list[Variant], caps: dict[str, list[float]]) -> Table:
    t = Table(title="zero-loss capacity of the whole system (client packets/s; replies as many)")
    for col in ("variant", "median pkt/s", "runs", "ratio"):
        t.add_column(col, justify="left" if col == "variant" else "right")
    base = statistics.median(caps[variants[0].name]) if caps[variants[0].name] else 0.0
    for v in variants:
        med = statistics.median(caps[v.name])
        ratio = f"{med / base:.2f}" if base else "-"
        t.add_row(v.name, f"{med:.0f}", ", ".join(f"{c:.0f}" for c in caps[v.name]), ratio)
    return t


def main(argv: list[str] | None = None) -> int:
    from topo.launch.switches import p4sim_engines

    p = argparse.ArgumentParser(prog="bench.system_capacity", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--io", default="socket,ring",
                   help="p4sim port I/O variants, comma-separated: socket, ring, ring-pyloop (ring "
                        "without the native engine's C loop: P4SIM_NATIVE_RING=0)")
    p.add_argument("--engine", default="",
                   help="p4sim engines, comma-separated (only those `p4sim run --engine` offers; "
                        "default: every one it offers, both engines side by side)")
    p.add_argument("--repeats", type=int, default=3, help="searches per variant (median)")
    p.add_argument("--lo", type=float, default=1000.0, help="lowest rate tried (client pkt/s)")
    p.add_argument("--hi", type=float, default=16000.0, help="highest rate tried")
    p.add_argument("--steps", type=int, default=4, help="bisection steps between lo and hi")
    p.add_argument("--seconds", type=float, default=5.0, help="traffic per round, seconds")
    p.add_argument("--flows", type=int, default=16, help="flows per round")
    p.add_argument("--drain", type=float, default=1.0,
                   help="a round passes only if its last reply comes within this many seconds "
                   "of the last packet sent (default 1)")
    p.add_argument("--quick", action="store_true",
                   help="one repeat, one bisection step, 1.5 s rounds (for the test)")
    p.add_argument("--out", type=Path, default=REPO / "results" / "bench" / "system_capacity",
                   help="where rounds and the JSON result go")
    args = p.parse_args(argv)
    if args.quick:
        args.repeats, args.steps, args.seconds = 1, 1, 1.5
    if not 0 < args.lo < args.hi:
        p.error(f"--lo {args.lo} must be positive and below --hi {args.hi}")
    offered = p4sim_engines()
    engines = [e for e in args.engine.split(",") if e] or (offered or ["python"])
    missing = [e for e in engines if e not in (offered or ["python"])]
    if missing:
        p.error(f"--engine {','.join(missing)}: this p4sim offers {','.join(offered or ['python'])}")
    try:
        ios = parse_ios(args.io)
    except ValueError as exc:
        p.error(str(exc))
    variants = [Variant(io, e) for e in engines for io in ios]
    console = Console()
    caps: dict[str, list[float]] = {v.name: [] for v in variants}
    runs: list[dict[str, Any]] = []
    for r in range(args.repeats):
        for v in variants:
            out = args.out / f"r{r + 1}-{v.io}-{v.engine}"
            cap, trials = capacity_of(v, args, out, console, engine_option=bool(offered))
            caps[v.name].append(cap)
            runs.append({"variant": v.name, "repeat": r + 1, "capacity": cap,
                         "trials": [asdict(t) for t in trials]})
            # the first round that lost packets, and the first that failed by its backlog only
            first = [t for t in (next((t for t in trials if t.lost), None),
                                 next((t for t in trials if not t.ok and not t.lost), None))
                     if t is not None]
            for t in sorted(first, key=lambda t: trials.index(t)):
                console.print(f"  {v.name}: at {t.rate:.0f} pkt/s, {t.where()}")
    console.print(table(variants, caps))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "capacity.json").write_text(json.dumps(
        {"capacity": caps, "runs": runs, "args": {k: str(v) for k, v in vars(args).items()}},
        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
