"""Wire impairment end to end (`POST /ports/{port}/impair` on a `p4sim run --engine native`, with
`--io socket` and with `--io ring`, whose native C loop hands an impaired port's outputs to
Python): frames from h1 through an impaired port 2 to h2. With loss 1.0 nothing arrives; with
loss, duplication, delay and reordering, h2 receives exactly `sent - impair_dropped +
impair_duplicated` frames, as many out of order as `impair_reordered` says, and the counters in
/status match what h2 saw; clearing the impairment restores plain forwarding.

Run: flock /tmp/nfc-mininet.lock .venv/bin/pytest tests/p4sim/server/test_veth_impair.py (root)
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from typing import Any

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from tests.p4sim.server.conftest import RealProgram
from tests.p4sim.server.entity_builders import table
from tests.p4sim.server.netns import Host, VethTopology
from tests.p4sim.server.veth_switch import p4sim_on_veths, status
from tests.support.procs import wait_for

pytestmark = [pytest.mark.netns, pytest.mark.slow]

N = 300  # frames through the mixed impairment
LOST = 20  # frames through loss 1.0
SENTINEL = 9999  # the UDP source port of the last frame, sent once the impairment is cleared
IMPAIR = {"loss": 0.1, "duplicate": 0.1, "reorder": 0.3, "delay_ms": 3, "seed": 11}

# sniff in h2's namespace until the sentinel arrives (it follows every other frame: nothing is
# held any more when it is sent)
SNIFF = r"""
import json, sys
from scapy.all import UDP, AsyncSniffer, Ether, conf
conf.bufsize = 8 << 20  # the socket's receive buffer (scapy's 64 KiB lost frames of the burst)
iface, dst, sentinel = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = AsyncSniffer(iface=iface, lfilter=lambda p: Ether in p and p[Ether].dst == dst,
                 stop_filter=lambda p: UDP in p and p[UDP].sport == sentinel,
                 started_callback=lambda: print("ready", flush=True))
s.start()
s.join(timeout=120)
if s.running:
    s.stop()
print(json.dumps([bytes(p).hex() for p in (s.results or [])]), flush=True)
"""


def impair(addr: str, port: int, body: dict[str, Any] | None) -> dict[str, Any]:
    """POST the impairment (None: DELETE it); the port's entry."""
    req = urllib.request.Request(
        f"http://{addr}/ports/{port}/impair", method="DELETE" if body is None else "POST",
        data=None if body is None else json.dumps(body).encode(),
        headers={"X-Nfc-Request": "1"} if body is None else {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        doc: dict[str, Any] = json.loads(resp.read())
    return doc


def udp(h1: Host, sport: int) -> bytes:
    return bytes(Ether(src=h1.mac, dst="02:00:00:00:00:fe") / IP(src="10.0.1.1", dst="10.0.2.2")
                 / UDP(sport=sport, dport=53) / bytes(20))


def sniffer(host: Host) -> subprocess.Popen[str]:
    proc = subprocess.Popen(["ip", "netns", "exec", host.ns, sys.executable, "-c", SNIFF,
                             host.intf, host.mac, str(SENTINEL)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        raise RuntimeError(f"sniffer did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    return proc


def overtakers(sports: list[int]) -> int:
    """Distinct frames received before a frame sent earlier than them."""
    later_min, out = 1 << 30, set()
    for sp in reversed(sports):
        if later_min < sp:
            out.add(sp)
        later_min = min(later_min, sp)
    return len(out)


@pytest.mark.parametrize("io", ["socket", "ring"])
def test_an_impaired_port_loses_duplicates_and_reorders_exactly_as_counted(
        topo: VethTopology, real_program: RealProgram, io: str) -> None:
    h1, h2 = topo.hosts
    with p4sim_on_veths(topo, io) as sw:
        metrics = sw.metrics
        sw.write([table(real_program.route(
            0x0A000200, 24, "ipv4_forward", dst_addr=0x020000000002, port=2))])
        wait_for(lambda: status(metrics), timeout=10, what="p4sim serves /status")
        sniff = sniffer(h2)

        entry = impair(metrics, 2, {"loss": 1.0, "seed": 1})
        assert entry["impair"]["loss"] == 1.0
        topo.send(h1, [udp(h1, 500 + i) for i in range(LOST)])
        wait_for(lambda: status(metrics)["ports"]["2"]["impair_dropped"] == LOST, timeout=20,
                 what=f"{LOST} frames dropped at port 2")

        impair(metrics, 2, IMPAIR)
        topo.send(h1, [udp(h1, 1000 + i) for i in range(N)])

        def settled() -> dict[str, Any] | None:
            doc = status(metrics)
            p1, p2 = doc["ports"]["1"], doc["ports"]["2"]
            done = p1["rx"] == LOST + N and p2["impair_held"] == 0
            return doc if done else None

        doc = wait_for(settled, timeout=30, what="every frame through port 2's impairment")
        p2 = doc["ports"]["2"]
        cleared = impair(metrics, 2, None)
        assert cleared["impair"] is None
        topo.send(h1, [udp(h1, SENTINEL)])
        out, err = sniff.communicate(timeout=150)
        got = [Ether(bytes.fromhex(h)) for h in json.loads(out.splitlines()[-1])]
    log = sw.log
    sports = [p[UDP].sport for p in got]
    assert sports and sports[-1] == SENTINEL, (sports[-5:], err, log[-3000:])
    sports = sports[:-1]
    assert not [sp for sp in sports if sp < 1000], "frames arrived through loss 1.0"
    dropped, duplicated = p2["impair_dropped"] - LOST, p2["impair_duplicated"]
    assert len(sports) == N - dropped + duplicated, (len(sports), dropped, duplicated)
    assert len(set(sports)) == N - dropped and len(sports) - len(set(sports)) == duplicated
    assert dropped > 0 and duplicated > 0 and p2["impair_delayed"] > 0  # the seed does each
    assert overtakers(sports) == p2["impair_reordered"] > 0, (sports, p2)
    assert p2["tx"] == len(sports) and p2["lost"] == LOST + dropped
    assert doc["lost"] == LOST + dropped and doc["ports"]["1"]["lost"] == 0
    assert "impaired: delay 3ms loss 10% duplicate 10% reorder 30% (seed 11)" in log
    assert (f"reorder 30% (seed 11)) removed: it dropped {dropped}, duplicated {duplicated}, "
            f"reordered {p2['impair_reordered']}, delayed {p2['impair_delayed']} frames; 0 held "
            "frames sent now") in log, log
    assert f"loss 100% (seed 1)) removed: it dropped {LOST}, duplicated 0" in log
    if io == "ring":
        assert "native ring fast path runs the batches" in log, log
