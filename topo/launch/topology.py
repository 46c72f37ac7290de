"""The `make run` topology as data, derived from the controller's configuration.

One P4 switch; one Mininet host per edge entry (client, server) on its configured port; one Mininet
host per NF *node*, with one data interface per NF on that node (wired to the NF's switch port, with
the NF's MAC) and one interface on the management bridge (the node's management address). The root
namespace joins the management bridge as `MGMT_GATEWAY`, where the controller and etcd run.
The same data serves the launcher and the tests.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from controlplane.config import ControllerConfig, split_hostport

MGMT_BRIDGE = "nfcm0"


@dataclass(frozen=True)
class EdgeHost:
    name: str
    port: int
    mac: str
    ip: str  # with prefix length, as Mininet wants it


@dataclass(frozen=True)
class NfLink:
    nf_id: int
    port: int
    mac: str
    intf: str  # interface name inside the node


@dataclass
class Node:
    name: str
    mgmt_ip: str
    nfs: list[NfLink] = field(default_factory=list)


@dataclass
class Topology:
    switch_name: str
    cpu_port: int
    edge: list[EdgeHost]
    nodes: list[Node]
    mgmt_network: ipaddress.IPv4Network
    mgmt_gateway: str

    def node_of(self, nf_id: int) -> Node:
        for node in self.nodes:
            if any(link.nf_id == nf_id for link in node.nfs):
                return node
        raise KeyError(f"NF {nf_id} is on no node")

    def link_of(self, nf_id: int) -> NfLink:
        for link in self.node_of(nf_id).nfs:
            if link.nf_id == nf_id:
                return link
        raise KeyError(nf_id)


def _edge_ip(prefixes: list[str]) -> str:
    """A host's address: the first address of its first prefix, in a /24 so that it is on-link."""
    net = ipaddress.IPv4Network(prefixes[0])
    addr = net.network_address if net.prefixlen == 32 else next(net.hosts())
    return f"{addr}/24"


def build_topology(cfg: ControllerConfig, switch_name: str = "s1") -> Topology:
    """The topology the configuration describes; raises ValueError on an inconsistent one."""
    nodes: dict[str, Node] = {}
    mgmt_hosts: set[ipaddress.IPv4Address] = set()
    for nf in sorted(cfg.nfs, key=lambda n: n.id):
        host, _ = split_hostport(nf.mgmt)
        addr = ipaddress.IPv4Address(host)
        node = nodes.setdefault(nf.node, Node(nf.node, str(addr)))
        if node.mgmt_ip != str(addr):
            raise ValueError(
                f"nfs[id={nf.id}].mgmt: node {nf.node} already has address {node.mgmt_ip}, not {addr}"
            )
        mgmt_hosts.add(addr)
        node.nfs.append(NfLink(nf.id, nf.port, nf.mac, nf.interface or f"{nf.node}-nf{nf.id}"))
    network = ipaddress.IPv4Network(f"{min(mgmt_hosts)}/24", strict=False)
    gateway = next(a for a in network.hosts() if a not in mgmt_hosts)
    edge = [EdgeHost(h.name, h.port, h.mac, _edge_ip(h.prefixes)) for h in cfg.edge]
    return Topology(switch_name, cfg.switch.cpu_port, edge, list(nodes.values()), network, str(gateway))
