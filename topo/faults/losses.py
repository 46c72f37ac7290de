"""Where a run's packets were lost: every drop counter of the path, next to the sink's count.

A packet of `make run` crosses the client's socket, the switch's client port, the pipeline, an NF
port (to the primary and a copy to its backup), the NF's socket and buffers, the NF port again on
the way back, the pipeline, the server's port and the server's socket; the replies cross the
same in reverse. Each place counts what it drops: p4sim per port (the kernel's drops before p4sim
read a frame, transmit errors, a full transmit ring; docs/p4sim.md), the P4 program's drop
counters, each NF (its socket's kernel drops, its buffers, refused output, ...; docs/nf_host.md),
the end hosts' sockets, and the kernel in every namespace (interfaces, queueing disciplines, the
per-CPU backlog, the end hosts' IP and UDP layers: `topo.faults.kernel_drops`). `where_lost` lists the
non-zero ones, named by place, for the summary, with the frames a switch port's interface and the
P4 program's port counters say the target dropped silently before or after its pipeline
(`topo.faults.port_accounting`: BMv2's input buffer); `loss_lines` sets the lost packets against the
drops that are losses (a duplicate's or a backup's copy's drop is not) and names the rest
"unaccounted".
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from controlplane.config import ControllerConfig
from topo.faults.port_accounting import PortAccount
from topo.http_api import http_json

PORT_REASONS = {
    "kernel_drops": "dropped by the kernel before p4sim read them (receive ring/buffer full)",
    "rx_truncated": "longer than a receive ring block (dropped)",
    "if_tx_dropped": "dropped by the interface on sending (its peer's backlog full)",
    "if_rx_dropped": "dropped by the interface on receiving",
    "tx_errors": "refused by the kernel on sending (interface down or gone)",
    "tx_overflows": "transmit ring full",
    "impair_dropped": "dropped on purpose by p4sim's wire impairment (a netem fault)",
}
DEVICE_REASONS = {
    "engine_errors": "the P4 engine failed on them",
    "no_pipeline": "arrived before the program was loaded",
}
NF_REASONS = {
    "kernel": "dropped by the kernel at the NF's socket (receive buffer full)",
    "buffers": "reorder or backup buffers full",
    "tx": "output refused by the NF's socket",
    "malformed": "malformed frames",
    "duplicates": "duplicates (dropped on purpose)",
    "unowned": "slot not owned",
    "nf_errors": "the NF raised",
    "store_errors": "the global state store failed",
    "other": "other drops",
}


@dataclass(frozen=True)
class LossSite:
    where: str  # "switch port 3 (NF 1)", "NF 5", "client socket"
    why: str
    packets: int
    loss: bool = True  # False: a copy's drop (a duplicate, a backup's input copy): not a loss


def port_names(cfg: ControllerConfig) -> dict[int, str]:
    """Switch port -> what is on it ("client", "NF 3", "CPU")."""
    names = {h.port: h.name for h in cfg.edge}
    names |= {nf.port: f"NF {nf.id}" for nf in cfg.nfs}
    names[cfg.switch.cpu_port] = "CPU"
    return names


def switch_status(address: str | None) -> dict[str, Any] | None:
    """p4sim's /status at `address` (None without one, or when the switch does not answer)."""
    if address is None:
        return None
    try:
        doc: dict[str, Any] = http_json(f"http://{address}/status")
    except Exception:  # a switch that died with a fault: no counters
        return None
    return doc


def queued_in_switch(address: str | None) -> tuple[int, float] | None:
    """How many frames wait in p4sim's sockets now (its ports' `queued`: what the kernel gave
    them that p4sim has not read), and the time.time() that holds from: a switch killed right
    after loses them, packets sent before its kill (`topo.faults.chaos.restart_switch`). None
    without p4sim's status (BMv2, or no answer)."""
    since = time.time()  # (a frame given a socket after this is sent after it too)
    doc = switch_status(address)
    if doc is None or not isinstance(doc.get("ports"), dict):
        return None
    return sum(int(p.get("queued", 0) or 0) for p in doc["ports"].values()), since


KERNEL_REASONS = {  # counter of topo.faults.kernel_drops -> why, for "interface host/if", "host h"
    "tx_dropped": "dropped on sending (the peer's backlog full: a burst into the switch or host)",
    "rx_dropped": "dropped on receiving",
    "qdisc_drops": "dropped by the interface's queueing discipline (a full queue, a netem fault)",
    "backlog_drops": "dropped by the kernel: this CPU's input backlog full (netdev_max_backlog; "
                     "machine-wide)",
    "udp_noports": "UDP datagrams to a closed port (arrived after the receiver stopped: late)",
    "udp_csum_errors": "UDP datagrams with a bad checksum",
    "ip_in_hdr_errors": "IPv4 packets with a bad header",
    "ip_in_addr_errors": "IPv4 packets to an address not the host's",
    "ip_in_unknown_protos": "IPv4 packets of an unknown protocol",
    "ip_in_discards": "IPv4 packets discarded on receipt (no memory)",
    "arp_unresolved_discards": "packets dropped while their next hop's address was unresolved",
}
# copies dropped on purpose: a second output of one input, output of a previous epoch, an NF's
# watermark frame (output without a packet: docs/dataplane.md "Output dedup")
NOT_LOSSES = {"nf_output_drops/duplicate", "nf_output_drops/stale_epoch",
              "nf_output_drops/watermark"}


def _kernel_sites(kernel: dict[str, dict[str, int]], host_drops: dict[str, int]
                  ) -> list[LossSite]:
    """The kernel's drops (`topo.faults.kernel_drops.kernel_counters`), named by place. A UDP socket's
    full receive buffer counts in `RcvbufErrors` and again in `InErrors`, and at an end host's
    own socket in `host_drops` too: each drop is listed once."""
    sites: list[LossSite] = []
    for name, counters in sorted(kernel.items()):
        node, _, place = name.partition("/")
        if place in ("udp", "ip"):
            where = f"host {node}"
        elif place in ("backlog", "arp"):
            where = f"kernel ({node})" if node != "kernel" else "kernel"
        else:
            where = f"interface {name}"
        for key, why in KERNEL_REASONS.items():
            if counters.get(key):
                sites.append(LossSite(where, why, int(counters[key])))
        rcvbuf = counters.get("udp_rcvbuf_errors", 0)
        other = counters.get("udp_inerrors", 0) - rcvbuf - counters.get("udp_csum_errors", 0)
        if rcvbuf > host_drops.get(node, 0):  # beyond what the end host's own sockets saw
            sites.append(LossSite(where, "UDP receive buffer full (another socket)",
                                  rcvbuf - host_drops.get(node, 0)))
        if other > 0:
            sites.append(LossSite(where, "UDP receive errors", other))
    return sites


def port_sites(accounts: list[PortAccount], names: dict[int, str],
               copy_ports: Collection[int] = ()) -> list[LossSite]:
    """The frames each switch port's interface and the P4 program's port counters say the
    target dropped before or after its pipeline, beyond what the target's own counters (listed
    with the port) already count (`topo.faults.port_accounting`). After the pipeline, a frame toward a
    backup's port (`copy_ports`) was an input's copy: not a loss."""
    sites: list[LossSite] = []
    for a in accounts:
        place = f"switch port {a.port} ({names.get(a.port, '?')})"
        if a.before_uncounted:
            sites.append(LossSite(place, "dropped by the switch before its pipeline, counted by no "
                                  f"switch counter (the interface received {a.received}, port_rx "
                                  f"counted {a.entered}, the target {a.before_counted})",
                                  a.before_uncounted))
        if a.after_uncounted:
            sites.append(LossSite(place, "dropped by the switch after its pipeline, counted by no "
                                  f"switch counter (port_tx counted {a.sent}, the interface sent "
                                  f"{a.transmitted}, the target counted {a.after_counted})",
                                  a.after_uncounted, a.port not in copy_ports))
    return sites


def backup_ports(cfg: ControllerConfig, nfs: list[dict[str, Any]]) -> set[int]:
    """The switch ports of the NFs that are backups now (the controller's NF rows)."""
    ports = {nf.id: nf.port for nf in cfg.nfs}
    return {ports[int(r["id"])] for r in nfs if r.get("role") == "backup" and int(r["id"]) in ports}


def where_lost(cfg: ControllerConfig, switch: dict[str, Any] | None, switch_drops: dict[str, int],
               nfs: list[dict[str, Any]], host_drops: dict[str, int],
               kernel: dict[str, dict[str, int]] | None = None,
               ports: list[PortAccount] | None = None) -> list[LossSite]:
    """Every non-zero drop counter of the path. `switch`: p4sim's /status document (None: not
    read, e.g. BMv2); `switch_drops`: the P4 program's drop counters ("counter/reason");
    `nfs`: the controller's NF rows (with `losses`); `host_drops`: end host -> socket drops;
    `kernel`: the kernel's drops in every namespace (`topo.faults.kernel_drops.kernel_counters`);
    `ports`: each switch port's account over the traffic (`topo.faults.port_accounting`), of which
    the frames no switch counter saw are listed with the port.
    Drops of a copy (a duplicate output, a backup's input copy) are marked `loss=False`."""
    sites: list[LossSite] = []
    names = port_names(cfg)
    for port, c in sorted((switch or {}).get("ports", {}).items(), key=lambda kv: int(kv[0])):
        place = f"switch port {port} ({names.get(int(port), c.get('interface', '?'))})"
        sites += [LossSite(place, why, int(c[k])) for k, why in PORT_REASONS.items() if c.get(k)]
    sites += port_sites(ports or [], names, backup_ports(cfg, nfs))
    device = (switch or {}).get("device", {})
    sites += [LossSite("switch", why, int(device[k])) for k, why in DEVICE_REASONS.items()
              if device.get(k)]
    sites += [LossSite("switch pipeline", f"P4 drop counter {k}", v, k not in NOT_LOSSES)
              for k, v in sorted(switch_drops.items()) if v]
    for row in nfs:
        for reason, packets in sorted(row.get("losses", {}).items()):
            if packets:
                role = row.get("role", "?")
                sites.append(LossSite(f"NF {row['id']} ({role})", NF_REASONS.get(reason, reason),
                                      int(packets), reason != "duplicates" and role != "backup"))
    sites += [LossSite(f"{host} socket", "receive buffer full (the end host's own loss)", n)
              for host, n in sorted(host_drops.items()) if n]
    return sites + _kernel_sites(kernel or {}, host_drops)


def counted_losses(sites: list[LossSite]) -> int:
    """The drops that are losses (a copy's drop is not), to set against the packets lost."""
    return sum(s.packets for s in sites if s.loss)


def loss_lines(lost: int, sites: list[LossSite], outage: int = 0) -> list[str]:
    """The summary's words: how many packets the sink missed, where drops were counted, and
    how many of the lost no counter saw (the loss not accounted for). `outage`: the lost packets
    sent while the switch was down or restarting (a chaos run's switch faults: no counter of the
    dead switch survives it, so the run counts them from the outage windows)."""
    if not lost and not sites and not outage:
        return []
    counted, copies = counted_losses(sites), sum(s.packets for s in sites if not s.loss)
    head = f"lost {lost} packets end to end; drops counted on the path: {counted + outage}"
    if copies:
        head += f" (and {copies} drops of copies, not losses: duplicates, a backup's inputs)"
    lines = [head]
    if outage:
        lines.append(f"  switch outages: {outage} sent while the switch was down or restarting "
                     "(switch faults; the restarted switch's own drops below are among them)")
    lines += [f"  {s.where}: {s.packets} {s.why}" + ("" if s.loss else " (a copy)")
              for s in sites]
    if lost > counted + outage:
        lines.append(f"  unaccounted: {lost - counted - outage} lost packets no counter on the "
                     "path saw")
    return lines


def gap_lines(nfs: list[dict[str, Any]]) -> list[str]:
    """Where a loss showed, as the NFs count it: the sequence numbers each skipped as a gap
    (never received within its gap timeout). Not where the packets were lost (a drop counter
    would name that), but the slot's owner that found them missing, so a loss no counter saw
    still has a place to start from."""
    counted = [(int(r["id"]), str(r.get("role", "?")), int(r.get("gaps") or 0)) for r in nfs]
    skipped = [row for row in counted if row[2]]
    if not skipped:
        return []
    each = ", ".join(f"NF {i} ({role}) {n}" for i, role, n in sorted(skipped))
    return [f"  where it showed: numbers skipped as gaps by {each} (never received by the "
            "slot's owner: lost on the way to it)"]

