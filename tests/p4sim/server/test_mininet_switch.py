"""The Mininet switch classes of topo/launch/switches.py: a Mininet network with one `P4simSwitch` running
ipv4_forward.p4 and two hosts; routes written over P4Runtime; UDP datagrams from h1 reach h2.
`Bmv2Switch` is checked only for its command line (BMv2 is not installed here).

Run: sudo .venv/bin/pytest tests/p4sim/server/test_mininet_switch.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import grpc
import pytest
from finsy.proto import U128, p4r, p4r_grpc

from tests.p4sim.server.conftest import PROGRAM, RealProgram
from tests.p4sim.server.entity_builders import INSERT, update
from tests.p4sim.server.p4rt_client import StreamClient
from tests.support.procs import free_port
from topo.launch.switches import (
    SWITCH_NICE,
    Bmv2Switch,
    P4Host,
    P4simSwitch,
    bmv2_available,
    switch_class,
)

UDP_RECEIVER = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 9999))
s.settimeout(10)
print("ready", flush=True)
n = 0
try:
    while n < int(sys.argv[2]):
        s.recv(2048)
        n += 1
except TimeoutError:
    pass
print(n, flush=True)
"""

UDP_SENDER = "import socket, sys; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); " + (
    "[s.sendto(b'p4sim', (sys.argv[1], 9999)) for _ in range(int(sys.argv[2]))]"
)


@pytest.mark.unit
def test_switch_class_by_target() -> None:
    assert switch_class("p4sim") is P4simSwitch
    assert switch_class("bmv2") is Bmv2Switch
    with pytest.raises(ValueError):
        switch_class("tofino")
    if not bmv2_available():
        with pytest.raises(RuntimeError, match="simple_switch_grpc"):
            Bmv2Switch("s9")


@pytest.mark.netns
@pytest.mark.slow
def test_mininet_hosts_ping_through_p4sim(real_program: RealProgram) -> None:
    from mininet.net import Mininet
    from mininet.topo import SingleSwitchTopo

    port = free_port()
    net = Mininet(
        topo=SingleSwitchTopo(2),
        switch=lambda name, **kw: P4simSwitch(
            name, program=str(PROGRAM), grpc_port=port, device_id=1, **kw
        ),
        host=P4Host,
        controller=None,
        autoSetMacs=True,
        autoStaticArp=True,
        waitConnected=False,
    )
    channel: grpc.Channel | None = None
    stream: StreamClient | None = None
    try:
        net.start()
        h1, h2 = net.get("h1", "h2")
        s1 = net.get("s1")
        ports = {}
        for h in (h1, h2):
            link = h.intf().link
            ports[h] = s1.ports[link.intf1 if link.intf1.node is s1 else link.intf2]
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        stream = StreamClient(channel)
        stream.arbitrate(1)
        assert stream.receive("arbitration").arbitration.status.code == 0
        routes = [
            update(INSERT, table_entry=real_program.route(
                int.from_bytes(bytes(map(int, h.IP().split("."))), "big"), 32, "ipv4_forward",
                dst_addr=int(h.MAC().replace(":", ""), 16), port=ports[h],
            ))
            for h in (h1, h2)
        ]
        req = p4r.WriteRequest(device_id=1, election_id=U128.encode(1), updates=routes)
        p4r_grpc.P4RuntimeStub(channel).Write(req)
        receiver = h2.popen([sys.executable, "-c", UDP_RECEIVER, h2.IP(), "5"], text=True)
        assert receiver.stdout.readline().strip() == "ready"
        h1.cmd(sys.executable, "-c", repr(UDP_SENDER), h2.IP(), "5")
        out, _ = receiver.communicate(timeout=20)
        assert out.split() == ["5"]
        # the switch runs ahead of the host's other work (a starved switch drops at its rings)
        stat = Path(f"/proc/{s1.proc.pid}/stat").read_text()
        assert int(stat.rsplit(")", 1)[1].split()[16]) == SWITCH_NICE  # field 19: nice
        group = Path(f"/proc/{s1.proc.pid}/autogroup")  # ...and its session as a whole
        if group.exists():
            assert group.read_text().split()[-1] == str(SWITCH_NICE)
    finally:
        if stream is not None:
            stream.close()
        if channel is not None:
            channel.close()
        net.stop()
