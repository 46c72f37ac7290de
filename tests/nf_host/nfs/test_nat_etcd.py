"""Two NAT instances in separate OS processes share one port pool through a real etcd.

Run: .venv/bin/pytest tests/nf_host/nfs/test_nat_etcd.py
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether

from nf_host.global_state import EtcdStore
from nf_host.nf_api import Verdict
from nf_host.nfs import make_nf
from tests.nf_host.nfs.packets import FlowTable, checksums_valid, tcp
from tests.support.etcd import EtcdServer

pytestmark = pytest.mark.etcd

REPO = Path(__file__).resolve().parents[3]


def test_concurrent_allocations_never_share_a_port(etcd_server: EtcdServer) -> None:
    spec = f"etcd://{etcd_server.endpoint}/nat-race-{uuid.uuid4().hex}"
    count, pool = 150, range(20000, 20300)  # 2 x 150 connections exactly fill the 300 ports
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.nf_host.nfs.nat_allocator",
                "--store",
                spec,
                "--instance",
                str(i + 1),
                "--count",
                str(count),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            results.append([int(line) for line in out.split()])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    a, b = (set(r) for r in results)
    assert len(results[0]) == len(a) == count and len(results[1]) == len(b) == count
    assert not a & b, f"ports handed out twice: {sorted(a & b)[:10]}"
    assert a | b == set(pool)
    assert min(a) < max(b) and min(b) < max(a), "the two instances did not allocate concurrently"


def test_reply_is_mapped_back_through_etcd(etcd_server: EtcdServer) -> None:
    """Outbound on one NAT instance, the reply on another: the mapping travels through etcd."""
    store = EtcdStore(etcd_server.endpoint, prefix=f"/nat-reply-{uuid.uuid4().hex}/")
    try:
        params = {"public_ip": "203.0.113.1", "port_min": 30000, "port_max": 30010}
        outside, inside = (
            FlowTable(make_nf("nat", params), store),
            FlowTable(make_nf("nat", params), store),
        )
        _, out, _ = inside.send(tcp("10.0.0.5", "198.51.100.7", 3333, 80, "S"))
        port = Ether(out)[TCP].sport
        verdict, back, state = outside.send(tcp("198.51.100.7", "203.0.113.1", 80, port, "SA"))
        assert state["inside_port"] == 3333
        assert verdict == Verdict.FORWARD and checksums_valid(back)
        assert (Ether(back)[IP].dst, Ether(back)[TCP].dport) == ("10.0.0.5", 3333)
        assert store.get(f"nat/default/port/{port}") is not None
    finally:
        store.close()
