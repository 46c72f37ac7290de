"""The run's live view and its summary: NF tables, the fault tables, the verdict."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from topo.faults import chaos
from topo.faults.chaos_modes import modes_line
from topo.faults.disturbances import Disturbances
from topo.faults.injector import FaultRecord, percentiles
from topo.faults.loss_evidence import excused_line, system_line
from topo.faults.memory import rss_table
from topo.traffic import SideReport
from topo.verify import Verdict

# -- the live view and the summary -----------------------------------------------------------------

def nf_table(rows: list[dict[str, Any]], title: str, loads: dict[int, float] | None = None) -> Table:
    """One row per NF; with `loads` (the balancer's view, --hot) a load column too."""
    table = Table(title=title)
    for col in ("NF", "node", "cluster", "role", "alive", "slots", "pkt/s", "packets", "queue",
                "drops", "gaps", *(["load"] if loads is not None else [])):
        table.add_column(col, justify="right" if col not in ("node", "cluster", "role") else "left")
    # a backup holds replicas of its primary's slots: shown in parentheses
    backed = {r.get("backup"): r.get("slots_owned", 0) for r in rows if r.get("backup")}
    for r in rows:
        slots = str(r.get("slots_owned", 0)) if r["id"] not in backed else f"({backed[r['id']]})"
        table.add_row(str(r["id"]), str(r["node"]), str(r["cluster"]), str(r["role"]),
                      "yes" if r["alive"] else "NO", slots,
                      f"{r.get('packet_rate', 0):.0f}", str(r.get("packets", 0)),
                      str(r.get("queue_depth", 0)), str(r.get("drops", 0)), str(r.get("gaps", 0)),
                      *([f"{loads[r['id']]:.2f}" if r["id"] in loads else ""] if loads is not None
                        else []))
    return table


def fault_table(faults: list[FaultRecord], losses: dict[str, Any]) -> Table:
    """One row per injected fault, then p50/p99/max of detection and takeover."""
    table = Table(title="faults (detection: signal to confirmed down; takeover: signal to the "
                        "first packet sent after it, on the dead NF's slots, delivered)")
    for col in ("#", "victim", "NF", "signal", "slots", "detection ms", "takeover ms", "promoted",
                "new backup", "result"):
        table.add_column(col, justify="right")

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    for i, f in enumerate(faults, 1):
        victim = f"{f.kind} ({f.role})" if getattr(f, "role", "") else f.kind  # mgmt: its role
        table.add_row(str(i), victim, str(f.nf), f.mode, str(len(f.slots)), ms(f.detection_ms),
                      ms(f.takeover_ms), str(f.promoted or "-"), str(f.new_backup or "-"),
                      "ok" if f.ok else f.error or "failed")
    for name in ("p50", "p99", "max"):
        det = percentiles([f.detection_ms for f in faults if f.detection_ms is not None])
        tko = percentiles([f.takeover_ms for f in faults if f.takeover_ms is not None])
        table.add_row(name, "", "", "", "", ms(det[name]), ms(tko[name]), "", "", "")
    return table


def disturbance_tables(console: Console, dist: Disturbances, host_drops: int = 0) -> None:
    if dist.modes and not dist.faults:
        console.print(modes_line(dist.modes))
    if dist.moves:
        table = Table(title="slot moves (through the HTTP API)")
        for col in ("slot", "from", "to", "kind", "epoch", "bytes", "flows", "last seq", "ms",
                    "result"):
            table.add_column(col, justify="right")
        for m in dist.moves:
            kind = ("intra" if m["same_cluster"] else "inter") + ("/delta" if m["delta"] else "/full")
            table.add_row(str(m["slot"]), str(m["from_nf"]), str(m["to_nf"]), kind, str(m["epoch"]),
                          str(m["bytes_shipped"]),
                          str(m["flows_shipped"]), str(m["last_seq"]), f"{m['seconds'] * 1000:.1f}",
                          "ok" if m["ok"] else ("undone: " if m["undone"] else "") + m["error"])
        console.print(table)
    for f in dist.failovers:
        backup = f"new backup NF {f['new_backup']}" if f["new_backup"] is not None \
            else "no new backup (no NF of the cluster qualifies: it runs without one)"
        what = {"primary": "fail-over", "backup": "backup replaced"}.get(f["kind"], "protected")
        console.print(f"{what}: NF {f['dead']} -> NF {f['promoted']} for {f['slots']} slots, "
                      f"{f['replayed']} packets replayed, {backup}, in {f['seconds'] * 1000:.1f} ms"
                      + (f" ({', '.join(f'{k} {v:.1f}' for k, v in f['steps_ms'].items())})"
                         if f.get("steps_ms") else "")
                      + ("" if f["ok"] else f" FAILED: {f['error']}"))
    if dist.faults:
        console.print(fault_table(dist.faults, dist.losses))
        console.print(chaos.kind_table(dist.faults, dist.losses, host_drops, dist.modes))
    if dist.rss:
        console.print(rss_table(dist.rss, dist.rss_lives or None,
                                settled_from=dist.rss_settled_from))
    if dist.losses:
        lo = dist.losses
        console.print(f"over the whole run: lost {lo['lost']}, duplicated {lo['duplicated']}, "
                      f"reordered {lo['reordered']}, checker counts repeated {lo['count_repeats']}")
    for err in dist.errors:
        console.print(f"[bold red]disturbance problem:[/] {err}")
    if dist.slow_settles:
        console.print(f"settles after a fault slower than 20 s (timing, not judged): "
                      f"{len(dist.slow_settles)}: {'; '.join(dist.slow_settles[:5])}")


def summarise(console: Console, verdict: Verdict, client: SideReport, server: SideReport,
              nfs: list[dict[str, Any]], dist: Disturbances | None = None,
              switch_drops: dict[str, int] | None = None, chain: str = "",
              losses: dict[str, int] | None = None) -> None:
    """The end of a run: NF loads, drops, disturbances and the verdict. `chain`: the service
    chain's stages (no checker NF in the path: the NAT's translation is judged instead).
    `losses`: the verdict's losses by what explains them (`topo.faults.loss_evidence.loss_summary`):
    the "lost by the system" line, which must say 0 for a passing verdict."""
    sent = sum(client.sent.values()) + sum(server.sent.values())
    console.print()
    console.print(nf_table(nfs, "NF load at the end"))
    counted = {k: v for k, v in (switch_drops or {}).items() if v}
    console.print("switch drops (counted): " + (", ".join(f"{k} {v}" for k, v in sorted(counted.items()))
                                               or "none"))
    console.print(f"dropped by the end hosts' own sockets (full receive buffers, not nfcluster): "
                  f"client {client.host_drops}, server {server.host_drops}")
    if dist is not None:
        disturbance_tables(console, dist, client.host_drops + server.host_drops)
    console.print(f"flows: {len(verdict.flows)}   packets sent: {sent} "
                  f"(client {sum(client.sent.values())}, server replies {sum(server.sent.values())})"
                  f"   received: {verdict.packets_received}")
    excused = 0
    if losses is not None:
        excused = losses.get("lost_in_switch_outages", 0) + losses.get("lost_on_the_wire", 0)
        console.print(system_line(losses, client.host_drops + server.host_drops))
        if excused or losses.get("lost_after_processing", 0):
            console.print(excused_line(losses))
    but = f", but for {excused} the wire is shown to have dropped," if excused else ""
    if verdict.ok and chain:
        console.print(f"[bold green]verified through the chain {chain}: every packet delivered "
                      f"exactly once and in order both ways{but} one NAT mapping per flow[/]")
    elif verdict.ok:
        console.print(f"[bold green]verified: every packet delivered exactly once and in order"
                      f"{but or ','} and every flow's checker count unbroken"
                      f"{' by the system' if excused else ''}[/]")
    else:
        console.print(f"[bold red]NOT verified: {sum(not f.ok for f in verdict.flows)} flows wrong[/]")
        for line in verdict.problems():
            console.print(f"  {line}")
