"""Example NFs inside a real `nf-host run` process (namespace, veth, the switch-playing harness).

The unit tests drive the NFs directly; these check that the runtime's ordering is what makes the
IDS see a split pattern, and that frames rewritten by the NAT leave the runtime intact.
Run: .venv/bin/pytest tests/nf_host/nfs/test_nfs_runtime_netns.py
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from nf_host.harness import Netns, NfProcess, RawPort, Switch, assign, strip_shim, udp_frame
from tests.nf_host.nfs.packets import checksums_valid, udp
from tests.support.procs import free_port, wait_for

pytestmark = [pytest.mark.netns, pytest.mark.slow]

SLOT = 9


@pytest.fixture
def ns() -> Iterator[Netns]:
    with Netns(prefix="nfcnf") as netns:
        yield netns


def start(ns: Netns, nf: str, params: dict[str, object]) -> tuple[NfProcess, RawPort]:
    nf_side, sw_side = ns.veth()
    proc = NfProcess(ns.name, 1, nf_side, free_port(), nf=nf, batch_size=1,
                     extra=["--params", json.dumps(params), "--global-store", "memory"])  # fmt: skip
    port = RawPort(ns.name, sw_side)
    try:
        proc.wait_ready()
        assign(proc, [SLOT])
    except Exception:
        proc.stop()
        port.close()
        raise
    return proc, port


def test_ids_finds_a_split_pattern_although_the_wire_reorders(ns: Netns) -> None:
    proc, port = start(ns, "ids", {"patterns": ["ATTACK"]})
    try:
        sw = Switch()
        pieces = [b"xxAT", b"TA", b"CKxx", b"harmless"]
        stamped = [
            sw.stamp(SLOT, udp_frame("10.0.0.1", "10.9.0.1", 1234, 80, p), 1)[0] for p in pieces
        ]
        for i in (2, 0, 3, 1):  # seq 3, 1, 4, 2 on the wire; the NF must see 1, 2, 3, 4
            port.send(stamped[i])
        wait_for(lambda: proc.status().load.packets == 4, 10, what="4 packets processed")
        wait_for(lambda: port.count() == 3, 5, what="3 outputs")
        outs = {strip_shim(f)[0].seq: strip_shim(f)[1] for f in port.outputs()}
        assert sorted(outs) == [1, 2, 4], "the packet completing ATTACK (seq 3) is dropped"
        assert bytes(Ether(outs[4])[UDP].payload) == b"harmless"
    finally:
        proc.stop()
        port.close()


def test_nat_rewrites_frames_through_the_runtime(ns: Netns) -> None:
    proc, port = start(
        ns, "nat", {"public_ip": "203.0.113.1", "port_min": 40000, "port_max": 40099}
    )
    try:
        sw = Switch()
        for i in range(5):
            frame = bytes(
                udp(f"10.0.0.{i + 1}", "198.51.100.1", 5000, 53, b"query")
            )  # with a UDP checksum
            port.send(sw.stamp(SLOT, frame, 1)[0])
        wait_for(lambda: port.count() == 5, 10, what="5 translated outputs")
        ports = set()
        for out in port.outputs():
            _shim, inner = strip_shim(out)
            pkt = Ether(inner)
            assert pkt[IP].src == "203.0.113.1" and pkt[IP].dst == "198.51.100.1"
            assert checksums_valid(inner)
            ports.add(pkt[UDP].sport)
        assert len(ports) == 5 and all(40000 <= p <= 40099 for p in ports)
    finally:
        proc.stop()
        port.close()
