"""The chaos `netem` fault on a kernel without sch_netem: p4sim's wire impairment of the NF's
switch port (topo/faults/chaos.py `impair_on_data_link`), against an in-process p4sim status server on a
port set that sends into a socket pair; the `tc netem` path against a recorded `tc` (this CI's
kernel has no sch_netem); and which fault kinds `nfc-topo chaos` keeps (netem on p4sim; left
out, or refused when asked for, on BMv2 without netem).

Run: .venv/bin/pytest tests/topo/test_chaos_netem.py
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import topo.__main__ as topo_main
from p4sim.io.impair import Impairer, Impairment
from p4sim.io.ports import PortSet
from p4sim.server.device import Device
from p4sim.server.stats import StatsServer
from tests.p4sim.test_impair import pair_port_set
from tests.support.procs import wait_for
from topo.faults import chaos

pytestmark = pytest.mark.unit

FRAMES = 2000


@pytest.fixture
def p4sim_port() -> Iterator[tuple[str, PortSet, list[bytes]]]:
    """p4sim's status server over a port set whose port 1 sends into a socket pair; what
    arrives at the other end is collected."""
    ports, peer = pair_port_set()
    device = Device()
    server = StatsServer("127.0.0.1:0", ports, device)
    got: list[bytes] = []
    peer.settimeout(0.2)
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                got.append(peer.recv(100))
            except TimeoutError:
                continue
            except OSError:
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield f"127.0.0.1:{server.port}", ports, got
    finally:
        stop.set()
        reader.join(timeout=5)
        server.close()
        device.close()
        ports.close()
        peer.close()


def test_the_netem_fault_by_p4sim_counts_what_the_impairment_dropped(
        p4sim_port: tuple[str, PortSet, list[bytes]], monkeypatch: pytest.MonkeyPatch) -> None:
    stats, ports, got = p4sim_port
    gaps = iter([5, 12])
    monkeypatch.setattr(chaos, "_gaps", lambda api, nf: next(gaps))
    frames = [i.to_bytes(4, "big") for i in range(FRAMES)]
    sent = threading.Event()

    class FaultTime:
        """The fault's duration is until the traffic has gone through the port."""

        time = staticmethod(time.time)

        @staticmethod
        def sleep(seconds: float) -> None:
            if seconds == chaos.NETEM_S:  # (else the gaps' settling time, 0 here)
                assert sent.wait(30), "the traffic did not go through"

    monkeypatch.setattr(chaos, "time", FaultTime)

    def traffic() -> None:  # through the port while the fault is on
        wait_for(lambda: 1 in ports._impair, timeout=10, what="port 1 impaired")
        for f in frames:
            ports.send(1, f)
        sent.set()

    real_snapshot = ports.snapshot

    def late_snapshot() -> dict[int, dict[str, Any]]:
        """The answer that sets the impairment is read only once the traffic went through it
        (on a busy switch, frames flow while it is written): it must not be the fault's start."""
        if 1 in ports._impair and not sent.is_set():
            assert sent.wait(30), "the traffic did not go through"
        return real_snapshot()

    monkeypatch.setattr(ports, "snapshot", late_snapshot)
    sender = threading.Thread(target=traffic)
    sender.start()
    rec = chaos.impair_on_data_link(stats, 1, 4, lambda: "http://ctl", seed=31, gap_settle_s=0)
    sender.join()
    assert rec.ok and (rec.kind, rec.mode, rec.target, rec.nf) == ("netem", "p4sim", "p4sim:port 1", 4)
    oracle = Impairer(Impairment(**chaos.IMPAIR, seed=31))  # the same seeded decisions
    for f in frames:
        oracle.offer(f)
    st = ports.stats[1]
    assert rec.wire_lost == st.impair_dropped == oracle.counts.impair_dropped > 0
    assert rec.impair["impair_duplicated"] == st.impair_duplicated == oracle.counts.impair_duplicated
    assert rec.impair["impair_delayed"] == st.impair_delayed > 0
    assert rec.gaps == 7 and ports._impair == {}  # cleared: the held frames were sent
    wait_for(lambda: len(got) == FRAMES - rec.wire_lost + st.impair_duplicated, timeout=10,
             what="every frame the impairment let through")
    assert rec.to_json()["impair"] == rec.impair


def test_a_refused_impairment_is_an_unhandled_fault(monkeypatch: pytest.MonkeyPatch,
                                                    p4sim_port: tuple[str, PortSet, list[bytes]]
                                                    ) -> None:
    stats, _, _ = p4sim_port
    monkeypatch.setattr(chaos, "_gaps", lambda api, nf: 0)
    rec = chaos.impair_on_data_link(stats, 9, 4, lambda: "http://ctl")
    assert not rec.ok and "404" in rec.error and "port 9 has no interface" in rec.error


@pytest.mark.parametrize(("target", "asked", "netem", "kinds", "code"), [
    ("p4sim", None, False, topo_main.CHAOS_KINDS, None),  # p4sim's impairment
    ("bmv2", None, False, topo_main.CHAOS_KINDS.replace("netem,", ""), None),  # left out
    ("bmv2", "netem,primary", False, None, 2),  # asked for and impossible
    ("bmv2", "netem,primary", True, "netem,primary", None),  # tc netem
])
def test_chaos_keeps_netem_where_something_can_do_it(
        monkeypatch: pytest.MonkeyPatch, target: str, asked: str | None, netem: bool,
        kinds: str | None, code: int | None) -> None:
    monkeypatch.setattr(chaos, "netem_available", lambda: netem)
    import topo.faults.mgmt_cut

    monkeypatch.setattr(topo.faults.mgmt_cut, "available", lambda: True)
    ran: list[argparse.Namespace] = []

    def cmd_run(args: argparse.Namespace) -> int:  # nothing started
        ran.append(args)
        return 0

    monkeypatch.setattr(topo_main, "cmd_run", cmd_run)
    argv = ["chaos", "--target", target, "--duration", "1"]
    argv += ["--fault-kinds", asked] if asked else []
    rc = topo_main.main(argv)
    if code is not None:
        assert (rc, ran) == (code, [])
    else:
        assert rc == 0 and ran[0].fault_kinds == kinds



TC_STATS = """qdisc netem 8001: root refcnt 2 limit 1000 delay 1ms loss 1% duplicate 1% reorder 10% 25%
 Sent 181262 bytes 1795 pkt (dropped 17, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
"""


def test_the_netem_fault_by_tc_sets_reads_and_removes_the_qdisc(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the kernel has sch_netem (not this CI's): the qdisc set on the switch's side of the
    NF's link, its drop count read as the wire's loss, the qdisc removed, the NF's gaps counted;
    a `tc` that refuses (an unknown qdisc kind) is an unhandled fault naming tc's message."""
    gaps = iter([3, 20])
    monkeypatch.setattr(chaos, "http_json", lambda url: [{"id": 7, "gaps": next(gaps)}])
    monkeypatch.setattr(chaos, "NETEM_S", 0.0)
    ran: list[str] = []

    def run(cmd: str) -> str:
        ran.append(cmd)
        return TC_STATS if cmd.startswith("tc -s") else ""

    rec = chaos.netem_on_data_link(run, "s1-eth9", 7, lambda: "http://ctl", gap_settle_s=0.0)
    assert rec.ok and rec.error == "" and (rec.kind, rec.nf, rec.target) == ("netem", 7, "s1-eth9")
    assert rec.wire_lost == 17 and rec.gaps == 17
    # the losses are turned off before the count is read, so nothing is dropped uncounted
    assert ran == [f"tc qdisc replace dev s1-eth9 root netem {chaos.NETEM}",
                   "tc qdisc change dev s1-eth9 root netem delay 1ms",
                   "tc -s qdisc show dev s1-eth9", "tc qdisc del dev s1-eth9 root"]

    gaps = iter([0, 0])
    refused = chaos.netem_on_data_link(
        lambda cmd: "Error: Specified qdisc kind is unknown.\n", "s1-eth9", 7, lambda: "x",
        gap_settle_s=0.0)
    assert not refused.ok and refused.error == "tc: Error: Specified qdisc kind is unknown."
