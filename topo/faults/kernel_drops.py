"""The kernel's own drop counters on `make run`'s path, read inside every node's namespace.

Between the end hosts' sockets and p4sim's or an NF's packet socket a packet crosses kernel
places that drop without telling anyone: a veth whose peer's backlog is full (its `tx_dropped`),
a queueing discipline (a full queue, a netem fault: `tc -s qdisc`), the per-CPU input backlog
(`netdev_max_backlog`: /proc/net/softnet_stat, machine-wide), the end hosts' IP and UDP layers
(/proc/net/snmp, per namespace: a datagram to a closed port, a full receive buffer, a bad
checksum or header, a wrong address) and neighbour resolution (/proc/net/stat/arp_cache,
machine-wide: packets dropped while an address was unresolved). `kernel_counters` reads them all into one
JSON-able document ("node/place" -> counter -> packets, non-zero only) that `topo.faults.losses`
names in the run's loss summary. The parsers take the text the commands print, so they are
tested on recorded output.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Protocol

SOFTNET = "/proc/net/softnet_stat"
ARP_CACHE = "/proc/net/stat/arp_cache"
SNMP_UDP = {"NoPorts": "udp_noports", "InErrors": "udp_inerrors",
            "RcvbufErrors": "udp_rcvbuf_errors", "InCsumErrors": "udp_csum_errors"}
SNMP_IP = {"InHdrErrors": "ip_in_hdr_errors", "InAddrErrors": "ip_in_addr_errors",
           "InUnknownProtos": "ip_in_unknown_protos", "InDiscards": "ip_in_discards"}


class Node(Protocol):
    """A Mininet node, or anything that runs a shell command in a namespace and names it."""

    name: str

    def cmd(self, command: str) -> str: ...


def _snmp_rows(text: str, proto: str) -> dict[str, int]:
    """One protocol's counters of /proc/net/snmp (a header line, then a value line)."""
    lines = [ln.split() for ln in text.splitlines() if ln.startswith(f"{proto}:")]
    if len(lines) < 2:
        return {}
    return {k: int(v) for k, v in zip(lines[0][1:], lines[1][1:], strict=False)}


def udp_counters(text: str) -> dict[str, int]:
    """The UDP receive drops of /proc/net/snmp: `NoPorts` (to a port nobody listens on, e.g.
    after the receiver closed), `InErrors` (every receive error, including the two below),
    `RcvbufErrors` (a socket's receive buffer full) and `InCsumErrors` (bad checksum)."""
    row = _snmp_rows(text, "Udp")
    return {name: row.get(key, 0) for key, name in SNMP_UDP.items()} if row else {}


def ip_counters(text: str) -> dict[str, int]:
    """The IPv4 receive drops of /proc/net/snmp: bad headers, addresses not this host's,
    unknown protocols, discards (no memory)."""
    row = _snmp_rows(text, "Ip")
    return {name: row.get(key, 0) for key, name in SNMP_IP.items()} if row else {}


def link_drops(text: str) -> dict[str, dict[str, int]]:
    """`ip -j -s link show`: interface -> {"tx_dropped", "rx_dropped"} (non-zero, no `lo`). A
    veth counts in `tx_dropped` the frames its peer had no room for (backlog or ring full)."""
    out: dict[str, dict[str, int]] = {}
    for link in json.loads(text or "[]"):
        stats = link.get("stats64", {})
        drops = {"tx_dropped": int(stats.get("tx", {}).get("dropped", 0)),
                 "rx_dropped": int(stats.get("rx", {}).get("dropped", 0))}
        if link.get("ifname") != "lo" and any(drops.values()):
            out[str(link["ifname"])] = drops
    return out


def qdisc_drops(text: str) -> dict[str, int]:
    """`tc -s -j qdisc show`: interface -> packets its root queueing discipline dropped (a full
    queue, a netem loss). Root qdiscs only: a classful root counts its children's drops too."""
    out: dict[str, int] = {}
    for q in json.loads(text or "[]"):
        if q.get("root") and q.get("drops"):
            out[str(q["dev"])] = out.get(str(q["dev"]), 0) + int(q["drops"])
    return out


def softnet_drops(text: str) -> dict[int, int]:
    """/proc/net/softnet_stat: CPU -> packets dropped because its input backlog was full
    (column 2, `netdev_max_backlog`) or over the flow limit (column 10, when present)."""
    out: dict[int, int] = {}
    for cpu, line in enumerate(text.splitlines()):
        cols = [int(c, 16) for c in line.split()]
        if len(cols) >= 2:
            out[cpu] = cols[1] + (cols[9] if len(cols) >= 10 else 0)
    return out


def arp_discards(text: str) -> int:
    """/proc/net/stat/arp_cache: packets dropped while their next hop was unresolved (summed
    over the CPUs' lines)."""
    lines = text.split("\n")
    head = lines[0].split() if lines else []
    if "unresolved_discards" not in head:
        return 0
    col = head.index("unresolved_discards")
    return sum(int(ln.split()[col], 16) for ln in lines[1:] if len(ln.split()) > col)


def _put(out: dict[str, dict[str, int]], key: str, counters: Mapping[str, int]) -> None:
    nonzero = {k: v for k, v in counters.items() if v}
    if nonzero:
        out.setdefault(key, {}).update(nonzero)


def node_counters(node: Node, edge: bool, links: bool = True,
                  interfaces: Collection[str] | None = None) -> dict[str, dict[str, int]]:
    """One node's drops. `edge`: an end host (its IP, UDP and ARP counters count: the traffic's
    sockets are there; an NF host receives the traffic on a packet socket, and its UDP is the
    control plane's); `links`: read its interfaces' drop counters (not for p4sim's ports,
    which p4sim counts itself); `interfaces`: only these (a switch in the root namespace)."""
    out: dict[str, dict[str, int]] = {}

    def keep(ifname: str) -> bool:
        return interfaces is None or ifname in interfaces

    if links:
        try:
            for ifname, drops in link_drops(node.cmd("ip -j -s link show")).items():
                if keep(ifname):
                    _put(out, f"{node.name}/{ifname}", drops)
        except (ValueError, TypeError):
            pass
    try:
        for ifname, n in qdisc_drops(node.cmd("tc -s -j qdisc show")).items():
            if keep(ifname):
                _put(out, f"{node.name}/{ifname}", {"qdisc_drops": n})
    except (ValueError, TypeError):
        pass
    if edge:
        snmp = node.cmd("cat /proc/net/snmp")
        _put(out, f"{node.name}/udp", udp_counters(snmp))
        _put(out, f"{node.name}/ip", ip_counters(snmp))
    return out


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def machine_counters() -> dict[str, dict[str, int]]:
    """The machine-wide drop counters now (every namespace shares them; the kernel keeps them
    in the root namespace only): each CPU's input backlog drops ("cpuN/backlog") and the
    neighbour table's unresolved discards ("kernel/arp")."""
    out = {f"cpu{cpu}/backlog": {"backlog_drops": n}
           for cpu, n in softnet_drops(_read(SOFTNET)).items()}
    out["kernel/arp"] = {"arp_unresolved_discards": arp_discards(_read(ARP_CACHE))}
    return out


def grown(now: Mapping[str, Mapping[str, int]], before: Mapping[str, Mapping[str, int]]
          ) -> dict[str, dict[str, int]]:
    """The counters of `now` that grew since `before`, by how much (non-zero only)."""
    out: dict[str, dict[str, int]] = {}
    for key, counters in now.items():
        _put(out, key, {k: v - before.get(key, {}).get(k, 0) for k, v in counters.items()
                        if v > before.get(key, {}).get(k, 0)})
    return out


def kernel_counters(net: Any, edge: Iterable[str], switch: str | None = None,
                    switch_links: bool = False,
                    machine_since: Mapping[str, Mapping[str, int]] | None = None
                    ) -> dict[str, dict[str, int]]:
    """Every node's kernel drops in Mininet network `net` ("node/place" -> counters, non-zero):
    the hosts' interfaces and qdiscs, the end hosts' (`edge`: their names) IP, UDP and ARP
    counters, the data-plane switch's (`switch`: its name) interfaces' qdiscs (and their drop
    counters with `switch_links`: BMv2, whose ports nothing else counts), and with
    `machine_since` (a `machine_counters()` taken before the traffic) what the machine-wide
    counters counted since: another user's burst on this machine shows there too."""
    ends = set(edge)
    out: dict[str, dict[str, int]] = {}
    for host in net.hosts:
        out |= node_counters(host, host.name in ends)
    for sw in net.switches:
        if sw.name == switch:
            names = [n for n in sw.intfNames() if n != "lo"]
            out |= node_counters(sw, False, links=switch_links, interfaces=names)
    if machine_since is not None:
        out |= grown(machine_counters(), machine_since)
    return out
