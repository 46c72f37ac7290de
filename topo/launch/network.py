"""The Mininet network of a run: one P4 switch, the end hosts, one host per NF node, and the
management bridge shared with the root namespace."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from contract.shim import SHIM_LEN
from topo.launch.topology import MGMT_BRIDGE, Topology

# an NF link's MTU: an edge packet of 1500 bytes and the shim the switch inserts before it
NF_LINK_MTU = 1500 + SHIM_LEN


def _quiet(host: Any) -> Any:
    """No IPv6 on a host, set before its interfaces exist: no router solicitations or MLD
    reports on the data path (the NFs would count them as malformed frames)."""
    host.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")
    return host


@contextmanager
def _no_ipv6_on_new_root_interfaces() -> Iterator[None]:
    """While the network is built, interfaces created in the root namespace (the switch's ports)
    start without IPv6, so no MLD report or router solicitation leaves them at link-up; the
    machine's previous default is restored afterwards."""
    knob = Path("/proc/sys/net/ipv6/conf/default/disable_ipv6")
    if not knob.exists():
        yield
        return
    before = knob.read_text().strip()
    knob.write_text("1")
    try:
        yield
    finally:
        knob.write_text(before)


@contextmanager
def mininet_network(topo: Topology, target: str, grpc_port: int, log_dir: Path,
                    device_id: int = 1, switch_opts: dict[str, Any] | None = None) -> Iterator[Any]:
    """Build and start the Mininet network; stop it and remove what it left behind afterwards.
    `switch_opts`: extra arguments of the switch class (p4sim's io, engine, metrics_port)."""
    from mininet.log import setLogLevel
    from mininet.net import Mininet
    from mininet.nodelib import LinuxBridge

    from topo.launch.switches import switch_class

    setLogLevel("warning")
    net = Mininet(topo=None, build=False, controller=None, autoSetMacs=False)
    try:
        with _no_ipv6_on_new_root_interfaces():
            # the configuration's device id, not the switch class's counter (which goes on
            # counting when one process builds several networks, e.g. the experiments)
            sw = net.addSwitch(topo.switch_name, cls=switch_class(target), grpc_port=grpc_port,
                               cpu_port=topo.cpu_port, log_dir=str(log_dir), device_id=device_id,
                               **(switch_opts or {}))
            mgmt = net.addSwitch(MGMT_BRIDGE, cls=LinuxBridge)
            for h in topo.edge:
                host = _quiet(net.addHost(h.name, ip=h.ip, mac=h.mac))
                net.addLink(host, sw, port2=h.port)
            prefix = topo.mgmt_network.prefixlen
            for node in topo.nodes:
                host = _quiet(net.addHost(node.name, ip=f"{node.mgmt_ip}/{prefix}"))
                net.addLink(host, mgmt, intfName1=f"{node.name}-m")
                for link in node.nfs:
                    net.addLink(host, sw, port2=link.port, intfName1=link.intf, addr1=link.mac)
            net.build()
        net.start()
        subprocess.run(["ip", "addr", "add", f"{topo.mgmt_gateway}/{prefix}", "dev", MGMT_BRIDGE],
                       check=True)
        for host in net.hosts:
            for intf in host.intfList():
                # the switch reads frames off veths: checksums must be complete, not offloaded
                host.cmd(f"ethtool -K {intf.name} tx off rx off >/dev/null 2>&1")
        # an NF link carries the edge's frames with the shim inserted: both of its ends take a
        # full-size edge frame plus the shim (a kernel drops a frame above a veth's MTU)
        for node in topo.nodes:
            for link in node.nfs:
                net.get(node.name).cmd(f"ip link set dev {link.intf} mtu {NF_LINK_MTU}")
                subprocess.run(["ip", "link", "set", "dev", sw.intfs[link.port].name, "mtu",
                                str(NF_LINK_MTU)], check=True)
        client, server = net.get("client"), net.get("server")
        client_ip, server_ip = client.IP(), server.IP()
        # permanent: a plain entry goes stale after ~30 s and the kernel re-probes it with ARP,
        # which the switch does not answer; while it re-resolves, every packet is dropped
        client.cmd(f"ip neigh replace {server_ip} lladdr {server.MAC()} nud permanent "
                   f"dev {client.defaultIntf()}")
        server.cmd(f"ip neigh replace {client_ip} lladdr {client.MAC()} nud permanent "
                   f"dev {server.defaultIntf()}")
        yield net
    finally:
        with contextlib.suppress(Exception):
            net.stop()
        subprocess.run(["ip", "link", "del", MGMT_BRIDGE], stderr=subprocess.DEVNULL, check=False)
