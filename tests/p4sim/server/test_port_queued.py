"""What waits in a port's socket, not read yet (`PortStats.queued`): the frames a switch killed
now would lose, which the chaos verdict weighs the losses of packets sent before a switch's kill
against (topo/faults/chaos.py, `restart_switch`). Both receive variants, a real veth pair."""

from __future__ import annotations

import socket

import pytest

from p4sim.io.ports import PortSet
from p4sim.io.ring_ports import RingPortSet

pytestmark = [pytest.mark.netns]


@pytest.mark.parametrize("kind", [PortSet, RingPortSet])
def test_frames_given_to_a_port_and_not_read_yet_are_counted_as_queued(
        veth: tuple[str, str], kind: type[PortSet]) -> None:
    a, b = veth
    ports = kind({1: a})
    ports.open()  # (its receive loop not started: nothing is read)
    peer = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    try:
        peer.bind((b, 0))
        frame = b"\x02" * 6 + b"\x04" * 6 + b"\x88\xb5" + bytes(46)
        for _ in range(7):
            peer.send(frame)
        snap = ports.snapshot()[1]
        # (the kernel may give the socket chatter of its own too: IPv6 router solicitations)
        assert snap["queued"] >= 7 and snap["rx"] == 0 and snap["kernel_drops"] == 0
        assert snap["kernel_seen"] == snap["queued"]
    finally:
        peer.close()
        ports.close()
