"""A port whose interface disappears leaves p4sim's receive loop, counted, without a busy loop
(before: POLLERR was reported again at once, hundreds of thousands of errors a second)."""

from __future__ import annotations

import subprocess
import time

import pytest

from p4sim.io.ports import PortSet

pytestmark = [pytest.mark.netns]


def test_a_port_whose_interface_is_deleted_leaves_the_loop_and_is_counted(
        veth: tuple[str, str]) -> None:
    a, _b = veth
    ports = PortSet({1: a})
    ports.open()
    ports.start(lambda port, data: None)
    try:
        subprocess.run(["ip", "link", "del", a], check=True)
        deadline = time.monotonic() + 5
        while not ports.stats[1].gone and time.monotonic() < deadline:
            time.sleep(0.01)  # polling a condition with a deadline
        assert ports.stats[1].gone
        errors = ports.stats[1].rx_errors
        assert 1 <= errors <= 5
        # no busy loop: the loop keeps running (other ports) without counting more errors
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:
            time.sleep(0.05)  # an observation window: nothing to wait for
        assert ports.stats[1].rx_errors == errors
        ports.send(1, b"\x00" * 60)  # sending to a gone port is counted, never raises
        assert ports.stats[1].tx_errors >= 1 or ports.stats[1].tx == 0
    finally:
        ports.close()
