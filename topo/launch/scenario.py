"""The main job behind `make run`: the whole nfcluster system in Mininet, proven end to end.

It brings up a private etcd, a Mininet network (one P4 switch on the chosen target, the client and
server hosts, one host per NF node, and a management bridge shared with the root namespace), one
`nf-host` process per NF running the checker NF, and the controller; it waits until the controller is
the switch's primary and has configured every NF; it sends numbered traffic on many flows in both
directions while showing a live table of the NFs; and it ends with a summary and the sink's verdict
(every packet delivered exactly once and in order, with an unbroken per-flow count). Everything it
started is stopped on the way out, also on Ctrl-C.

Two options disturb the traffic on purpose:

* `--move-slots N` moves N slots that carry traffic, alternately to a primary of the same cluster
  (the state ships as a delta) and of the other cluster (full state), through the controller's HTTP
  API (`POST /slots/{slot}/move?to=NF`), while the traffic runs; the verdict stays exactly-once, in
  order, counts unbroken;
* `--kill-nf ID` SIGKILLs that primary's `nf-host` (its process group: the runtime and its workers)
  mid-traffic; the controller's heartbeats declare it dead and fail it over to its backup. The
  verdict allows no loss for it: only a switch outage or a wire impairment tied to a packet may
  excuse its loss (topo/faults/loss_evidence.py); never a duplicate, a reordering or a repeated checker
  count; whatever is lost is counted, split by what explains it, and shown.

The moves and fail-overs (bytes shipped, delta or full, times) are in the summary and in
`disturbances.json` in the output directory.

`--hot` proves the load balancer (topo/launch/hot.py): skewed traffic and per-packet work make NF 1 hot;
the controller's balancer moves its slots to its cluster peer (deltas) and to the other cluster
(full state) while the live table shows each NF's load and the decisions; the summary lists every
decision and the time until NF 1 was below the high-water mark (`lb.json` in the output directory);
the verdict stays exactly-once, in order, counts unbroken.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
import time
from contextlib import ExitStack
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.live import Live

from controlplane.config import ControllerConfig, load_config
from topo.faults import chaos, chaos_modes, hogs
from topo.faults.disturbances import Disturbances, disturb, loss_report
from topo.faults.injector import first_output_times, takeover_times
from topo.faults.kernel_drops import kernel_counters, machine_counters
from topo.faults.loss_evidence import judge, loss_summary, windows_of
from topo.faults.losses import gap_lines, loss_lines, switch_status, where_lost
from topo.faults.memory import RssSampler
from topo.faults.memory import plot as plot_rss
from topo.faults.port_accounting import PortAccount, accounting, summary_line
from topo.faults.port_accounting import Snapshot as PortSnapshot
from topo.faults.port_accounting import snapshot as port_snapshot
from topo.http_api import http_json
from topo.launch import chain_run
from topo.launch import hot as hot_run
from topo.launch.bringup import system
from topo.launch.nfs import started
from topo.launch.options import options_from
from topo.launch.report import nf_table, summarise
from topo.model import REPO, RunOptions
from topo.procs import wait_for
from topo.traffic import SideReport
from topo.verify import FlowVerdict, Verdict

SINK_PORT = 9000


def run(opts: RunOptions, console: Console | None = None) -> Verdict:
    """Run the scenario and return the sink's verdict (raises on a failure to start)."""
    console = console or Console()
    cfg = load_config(opts.config)
    if opts.kill_nf is not None and opts.kill_nf not in {p.id for p in cfg.primaries()}:
        raise RuntimeError(f"--kill-nf {opts.kill_nf}: not a primary of {opts.config}")
    with ExitStack() as stack:
        stack.enter_context(hogs.cpu_hogs(opts.busy, console.print))  # stopped on every way out
        sys_ = stack.enter_context(system(opts, console))
        cfg, net, ctls, api, log_dir = sys_.cfg, sys_.net, sys_.ctls, sys_.api, sys_.log_dir
        memory = RssSampler(os.getpid())
        stack.callback(memory.stop)  # (stopped below on the normal path: idempotent)
        client, server = net.get("client"), net.get("server")
        server_ip = server.IP()
        for cmd in chain_run.neighbours(cfg, client.MAC()):
            server.cmd(f"{cmd} dev {server.defaultIntf()}")
        sink = server.popen([sys.executable, "-m", "topo.traffic", "sink", "--listen",
                             f"{server_ip}:{SINK_PORT}", "--idle", "0", "--out",
                             str(log_dir / "server.json")], cwd=str(REPO))
        stack.enter_context(started([sink]))
        wait_for(lambda: f":{SINK_PORT}" in server.cmd("ss -uln"), timeout=10, what="sink bound")
        sports: list[str] = []
        watch: hot_run.HotWatch | None = None
        hot_ids: list[int] = []
        if opts.hot:
            hot_slots = {int(r["slot"]) for r in http_json(f"{api}/slots?nf={hot_run.HOT_NF}")}
            ports = hot_run.skewed_ports(hot_slots, client.IP(), server_ip, SINK_PORT, opts.flows,
                                         cfg.switch.slot_count)
            hot_ids = hot_run.hot_flows(ports, hot_slots, client.IP(), server_ip, SINK_PORT,
                                        cfg.switch.slot_count)
            sports = ["--sports", ",".join(map(str, ports))]
            watch = hot_run.HotWatch(api)
        machine0 = machine_counters()  # the per-CPU backlog's drops are machine-wide
        switch_node = net.get(sys_.topo.switch_name)

        def target_status() -> dict[str, Any] | None:
            return switch_status(sys_.switch_stats)

        # each switch port's interface and P4 counters before the traffic (topo/faults/port_accounting.py)
        ports0 = port_snapshot(api, switch_node, target_status, first="p4")
        sender = client.popen([sys.executable, "-m", "topo.traffic", "send", "--dst",
                               f"{server_ip}:{SINK_PORT}", "--flows", str(opts.flows), "--packets",
                               str(opts.packets), "--rate", str(opts.rate), "--wait", "10",
                               "--out", str(log_dir / "client.json"), *sports], cwd=str(REPO))
        stack.enter_context(started([sender]))
        console.print(f"sending {opts.flows} flows x {opts.packets} packets each way ...")
        dist: Disturbances | None = None
        worker: threading.Thread | None = None
        if opts.move_slots or opts.kill_nf is not None or opts.kill_every:
            dist = Disturbances()
            faults = chaos.injector(sys_)
            worker = threading.Thread(target=disturb, args=(api, opts, faults, sender, dist),
                                      name="disturb", daemon=True)
            worker.start()
        with Live(console=console, refresh_per_second=4) as live:
            while sender.poll() is None:
                # a controller that stopped by itself (its lease lost on a starved machine) is
                # started again, as its supervisor would, also once no fault comes any more (the
                # soak's settle: both stopped and none led for its last minutes); counted below
                for name in ctls.revive():
                    console.print(f"controller {name} stopped by itself: started again")
                with contextlib.suppress(Exception):
                    if watch is not None:
                        watch.api = ctls.leader_api(watch.api)  # (a controller fault)
                        loads = hot_run.loads_of(watch.poll())
                        live.update(hot_run.live(nf_table(http_json(f"{api}/nfs"), "NFs (live)",
                                                          loads), watch))
                    else:
                        live.update(nf_table(http_json(f"{ctls.leader_api(api)}/nfs"),
                                             "NFs (live)"))
                time.sleep(0.25)  # display refresh cadence, not synchronisation
        if worker is not None and dist is not None:
            # the schedule ends with its last fault handled and the system settled (a settle
            # on a loaded host may take up to SETTLE_LONGEST, then it fails with an error)
            longest = faults.timeout + chaos_modes.SETTLE_LONGEST + 30
            worker.join(timeout=longest)
            if worker.is_alive():
                dist.errors.append(f"the fault schedule did not end within {longest:.0f} s of "
                                   "the traffic (its last fault or settle still waiting)")
        # the sender waited for the last replies; the sink has no idle deadline (a switch outage
        # may be longer than any), so it stops here and writes its report
        sink.terminate()
        wait_for(lambda: sink.poll() is not None, timeout=30, what="sink finished")
        memory.stop()
        # counts as of now, not of the last load poll, from the controller leading now (after
        # controller faults, the standby may lead); its API then serves the reads below
        nfs = ctls.read("/nfs?refresh=1", api)
        api = ctls.settled_leader_api(api)
        (log_dir / "nfs.json").write_text(json.dumps(nfs, indent=1))
        ports1 = port_snapshot(api, switch_node, target_status, first="interfaces")
        accounts, accounts_why = port_window(ports0, ports1, dist)
        switch_drops: dict[str, int] = ctls.read("/status", api).get("switch_drops", {})
        switch_doc = switch_status(sys_.switch_stats)
        kernel = kernel_counters(net, [h.name for h in cfg.edge], sys_.topo.switch_name,
                                 switch_links=switch_doc is None, machine_since=machine0)
        (log_dir / "switch.json").write_text(json.dumps(
            {"drops": switch_drops, "p4sim": switch_doc, "kernel": kernel, "ports": {
                "before": ports0 and ports0.to_json(), "after": ports1 and ports1.to_json(),
                "accounts": None if accounts is None else [a.to_json() for a in accounts],
                "why_not": accounts_why or None}}, indent=1))
        lb: dict[str, Any] = {}
        if watch is not None:
            lb = ctls.read("/lb/history", api)
            lb["relief"] = watch.relief()
            lb["samples"] = watch.samples
            lb["hot_flows"] = hot_ids
        if dist is not None:  # (what each leader reported during the run, and this one's)
            seen = chaos_modes.FailoverLog()
            seen.add(dist.failovers)
            seen.add(ctls.read("/status", api)["failovers"])
            dist.failovers = seen.rows()
            dist.rss = memory.snapshots()
            dist.rss_series = memory.series_json()
            if dist.faults_ended_at is not None:
                dist.rss_settled_from = round(memory.since(dist.faults_ended_at), 1)
            dist.rss_lives = memory.incarnations(dist.rss_settled_from)
            dist.errors += [f"controller {n} stopped by itself (lease lost) and was started again"
                            for n in ctls.revived]
    client_rep = SideReport.from_json(json.loads((log_dir / "client.json").read_text()))
    server_rep = SideReport.from_json(json.loads((log_dir / "server.json").read_text()))
    inputs = (server_rep.received, client_rep.received, client_rep.sent, server_rep.sent)
    # a loss is excused only by a fault's window tied to it (topo/faults/loss_evidence.py)
    verdict = judge(client_rep, server_rep, dist.faults if dist is not None else [],
                    _slots_of_flows(cfg, client_rep), not cfg.chains, bool(cfg.chains))
    losses = loss_summary(verdict, switch_drops)
    nat = chain_run.nat_problems(cfg, server_rep)
    if nat:
        verdict = Verdict([*verdict.flows, FlowVerdict(-1, 0, 0, nat[:10])])
    if lb:
        moved = [d["at"] for d in lb["decisions"] if d["action"]["action"] == "move"]
        lb["latency"] = hot_run.latency(client_rep.rtt, hot_ids, min(moved, default=None),
                                        lb["relief"]["relieved"])
        (log_dir / "lb.json").write_text(json.dumps(lb, indent=1))
    faulted = dist.faults if dist is not None else []
    wedged = chaos_modes.wedged_flows(inputs, (client_rep.sent_at, server_rep.sent_at),
                                      windows_of(faulted, bool(cfg.chains)),
                                      chaos_modes.faults_over(faulted))
    if dist is not None:
        if dist.faults or opts.moves:
            dist.modes = chaos_modes.modes_summary(
                dist.faults, dist.failovers,
                (dist.chaos_moves, dist.moves_refused) if opts.moves else None)
        # every run's losses, faults or none: a run whose faults never started (the system
        # never settled) had false fail-overs all the same, and its losses must show
        dist.losses = {**loss_report(inputs, counted=not cfg.chains), **losses,
                       "wedged_flows": len(wedged)}
        if dist.faults:
            takeover_times(dist.faults, client_rep, server_rep, _slots_of_flows(cfg, client_rep))
            first_output_times(dist.faults, log_dir)
        (log_dir / "disturbances.json").write_text(json.dumps(
            {**asdict(dist), "faults": [f.to_json() for f in dist.faults]}, indent=1))
        if dist.faults and plot_rss(dist.rss_series, log_dir / "rss.png",
                                    dist.rss_settled_from):
            console.print(f"memory over the run: {log_dir / 'rss.png'}")
    chain = " -> ".join(st.name for st in cfg.stages()) if cfg.chains else ""
    summarise(console, verdict, client_rep, server_rep, nfs, dist, switch_drops, chain, losses)
    console.print(summary_line(accounts, accounts_why))
    lost = loss_report(inputs, counted=not cfg.chains)["lost"]
    if lost or not verdict.ok:  # where: every drop counter of the path that is not zero
        for line in loss_lines(lost, where_lost(cfg, switch_doc, switch_drops, nfs, {
                "client": client_rep.host_drops, "server": server_rep.host_drops}, kernel,
                accounts), verdict.losses.outage) + gap_lines(nfs):
            console.print(line)
    if wedged:  # a slot that stopped forwarding: its flows' last packets never came
        console.print(f"[bold red]wedged:[/] the last packets of {len(wedged)} flow(s) never "
                      f"arrived (flow, direction): {wedged[:10]}")
        verdict = Verdict([*verdict.flows, FlowVerdict(-1, 0, 0, [
            f"{len(wedged)} flow(s) wedged: their last packets never arrived"])])
    if lb:
        hot_run.summary(console, lb, lb["relief"])
        moves = [d for d in lb["decisions"] if d["action"]["action"] == "move"]
        # under chaos, the balancer's moves may meet faults (and the hot NF may be one): only
        # the traffic's verdict judges them there
        if not opts.kill_every and (lb["relief"]["seconds"] is None
                                    or any(d["outcome"] != "moved" for d in moves)):
            return Verdict([*verdict.flows, FlowVerdict(-1, 0, 0, ["the hot NF was not relieved "
                                                                   "by moves that all succeeded"])])
    if dist is not None and (dist.errors or any(not m["ok"] for m in dist.moves)
                             or chaos_modes.unfinished_failovers(dist.failovers)):
        return Verdict([*verdict.flows, FlowVerdict(-1, 0, 0, ["a move or fail-over failed"])])
    if dist is not None and any(not f.ok for f in dist.faults):
        return Verdict([*verdict.flows, FlowVerdict(-1, 0, 0, ["a fault was not handled"])])
    return verdict


def port_window(before: PortSnapshot | None, after: PortSnapshot | None,
                dist: Disturbances | None) -> tuple[list[PortAccount] | None, str]:
    """Each switch port's account over the traffic (`topo.faults.port_accounting`), or None and why
    not: a counter snapshot not read, or a switch restarted in between (its P4 counters began
    again at 0, so a difference would mean nothing)."""
    if before is None or after is None:
        return None, "the P4 port counters could not be read (a program without port_rx/port_tx?)"
    if dist is not None and any(getattr(f, "kind", "") == "switch" for f in dist.faults):
        return None, "the switch restarted during the traffic: not computed"
    return accounting(before, after)


def _slots_of_flows(cfg: ControllerConfig, client: SideReport) -> dict[int, int]:
    """Each flow's slot, as the switch hashes its 5-tuple (client port -> the sink's port, UDP)."""
    client_ip = next(h.prefixes[0] for h in cfg.edge if h.name == "client").split("/")[0]
    server_ip = next(h.prefixes[0] for h in cfg.edge if h.name == "server").split("/")[0]
    # (`contract.slot_hash`, the model the PTF suite checks against the switch)
    return {flow: hot_run.slot_of(client_ip, server_ip, port, SINK_PORT, 17,
                                  cfg.switch.slot_count)
            for flow, port in client.ports.items()}


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main(args: argparse.Namespace) -> int:
    console = Console(width=max(Console().width, 110))
    signal.signal(signal.SIGTERM, _interrupt)  # stopped like Ctrl-C: everything is cleaned up
    try:
        verdict = run(options_from(args), console)
    except KeyboardInterrupt:
        console.print("\ninterrupted: everything started was stopped")
        return 130
    except (PermissionError, FileNotFoundError, RuntimeError, TimeoutError) as exc:
        console.print(f"[bold red]make run failed:[/] {exc}")
        return 1
    return 0 if verdict.ok else 1
