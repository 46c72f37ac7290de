"""Where a run's packets were lost: every drop counter of the path, next to the sink's count.

A packet of `make run` crosses the client's socket, the switch's client port, the pipeline, an NF
port (to the primary and a copy to its backup), the NF's socket and buffers, the NF port again on
the way back, the pipeline, the server's port and the server's socket; the replies cross the
same in reverse. Each place counts what it drops: p4sim per port (the kernel's drops before p4sim
read a frame, transmit errors, a full transmit ring; docs/p4sim.md), the P4 program's drop
counters, each NF (its socket's kernel drops, its buffers, refused output, ...; docs/nf_host.md),
the end hosts' sockets. `where_lost` lists the non-zero ones, named by place, for the summary.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from controlplane.config import ControllerConfig

PORT_REASONS = {
    "kernel_drops": "dropped by the kernel before p4sim read them (receive ring/buffer full)",
    "rx_truncated": "longer than a receive ring block (dropped)",
    "if_tx_dropped": "dropped by the interface on sending (its peer's backlog full)",
    "if_rx_dropped": "dropped by the interface on receiving",
    "tx_errors": "refused by the kernel on sending (interface down or gone)",
    "tx_overflows": "transmit ring full",
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
    from topo.disturbances import http_json

    try:
        doc: dict[str, Any] = http_json(f"http://{address}/status")
    except Exception:  # a switch that died with a fault: no counters
        return None
    return doc


def udp_counters(text: str) -> dict[str, int]:
    """`NoPorts` and `InErrors` of /proc/net/snmp's Udp lines (datagrams that came to a port
    nobody listens on, e.g. after the sink closed; and every other UDP receive error)."""
    lines = [ln.split() for ln in text.splitlines() if ln.startswith("Udp:")]
    if len(lines) < 2:
        return {}
    row = dict(zip(lines[0][1:], lines[1][1:], strict=False))
    return {"udp_noports": int(row.get("NoPorts", 0)), "udp_inerrors": int(row.get("InErrors", 0))}


def interface_drops(net: Any) -> dict[str, dict[str, int]]:
    """Every Mininet host's interfaces' own drop counters ("host/interface" -> {"tx_dropped",
    "rx_dropped"}, non-zero only): a veth counts in tx_dropped the frames its peer's backlog had
    no room for (e.g. a burst into the switch's port); and the host's UDP errors ("host/udp" ->
    {"udp_noports", "udp_inerrors"}: datagrams that came after the receiving socket closed)."""
    out: dict[str, dict[str, int]] = {}
    for host in net.hosts:
        udp = udp_counters(host.cmd("cat /proc/net/snmp"))
        if any(udp.values()):
            out[f"{host.name}/udp"] = udp
        try:
            links = json.loads(host.cmd("ip -j -s link show"))
        except (ValueError, TypeError):
            continue
        for link in links:
            stats = link.get("stats64", {})
            drops = {"tx_dropped": int(stats.get("tx", {}).get("dropped", 0)),
                     "rx_dropped": int(stats.get("rx", {}).get("dropped", 0))}
            if link.get("ifname") != "lo" and any(drops.values()):
                out[f"{host.name}/{link['ifname']}"] = drops
    return out


def where_lost(cfg: ControllerConfig, switch: dict[str, Any] | None, switch_drops: dict[str, int],
               nfs: list[dict[str, Any]], host_drops: dict[str, int],
               interfaces: dict[str, dict[str, int]] | None = None) -> list[LossSite]:
    """Every non-zero drop counter of the path. `switch`: p4sim's /status document (None: not
    read, e.g. BMv2); `switch_drops`: the P4 program's drop counters ("counter/reason");
    `nfs`: the controller's NF rows (with `losses`); `host_drops`: end host -> socket drops;
    `interfaces`: the hosts' interfaces' own drops (`interface_drops`)."""
    sites: list[LossSite] = []
    names = port_names(cfg)
    for port, c in sorted((switch or {}).get("ports", {}).items(), key=lambda kv: int(kv[0])):
        place = f"switch port {port} ({names.get(int(port), c.get('interface', '?'))})"
        sites += [LossSite(place, why, int(c[k])) for k, why in PORT_REASONS.items() if c.get(k)]
    device = (switch or {}).get("device", {})
    sites += [LossSite("switch", why, int(device[k])) for k, why in DEVICE_REASONS.items()
              if device.get(k)]
    sites += [LossSite("switch pipeline", f"P4 drop counter {k}", v)
              for k, v in sorted(switch_drops.items()) if v]
    for row in nfs:
        for reason, packets in sorted(row.get("losses", {}).items()):
            if packets:
                sites.append(LossSite(f"NF {row['id']} ({row.get('role', '?')})",
                                      NF_REASONS.get(reason, reason), int(packets)))
    sites += [LossSite(f"{host} socket", "receive buffer full (the end host's own loss)", n)
              for host, n in sorted(host_drops.items()) if n]
    for name, drops in sorted((interfaces or {}).items()):
        if drops.get("tx_dropped"):
            sites.append(LossSite(f"interface {name}", "dropped on sending (the peer's backlog "
                                  "full: a burst into the switch or host)", drops["tx_dropped"]))
        if drops.get("rx_dropped"):
            sites.append(LossSite(f"interface {name}", "dropped on receiving",
                                  drops["rx_dropped"]))
        if drops.get("udp_noports"):
            sites.append(LossSite(f"host {name.split('/')[0]}", "UDP datagrams to a closed port "
                                  "(arrived after the receiver stopped: late, not lost)",
                                  drops["udp_noports"]))
        if drops.get("udp_inerrors"):
            sites.append(LossSite(f"host {name.split('/')[0]}", "UDP receive errors",
                                  drops["udp_inerrors"]))
    return sites


def loss_lines(lost: int, sites: list[LossSite]) -> list[str]:
    """The summary's words: how many packets the sink missed and where drops were counted."""
    if not lost and not sites:
        return []
    counted = sum(s.packets for s in sites)
    head = (f"lost {lost} packets end to end; drops counted on the path: {counted}"
            + (" (a backup's or a duplicate's drop need not be a loss)" if sites else ""))
    lines = [head]
    lines += [f"  {s.where}: {s.packets} {s.why}" for s in sites]
    if lost and not sites:
        lines.append("  no counter on the path saw them: the loss is not accounted for")
    return lines
