"""A small `make run`: the whole system in namespaces (p4sim switch, 8 NF processes, controller,
etcd), numbered traffic both ways, and every flow delivered exactly once, in order, with an unbroken
checker count."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from topo.procs import descendants, still_running, stop_process, wait_for
from topo.traffic import SideReport
from topo.verify import verify

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.netns
@pytest.mark.slow
def test_small_make_run_delivers_every_packet_once_in_order(tmp_path: Path) -> None:
    if not (REPO / "build" / "nfcluster.p4info.txtpb").exists():
        subprocess.run(["make", "-C", str(REPO), "build"], check=True, capture_output=True)
    flows, packets = 8, 30
    result = subprocess.run(
        [sys.executable, "-m", "topo", "run", "--flows", str(flows), "--packets", str(packets),
         "--rate", "300", "--out-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=240, cwd=REPO,
    )
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted(tmp_path.glob("*.log")))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:] + logs
    assert "verified: every packet delivered exactly once and in order" in result.stdout
    client = SideReport.from_json(json.loads((tmp_path / "client.json").read_text()))
    server = SideReport.from_json(json.loads((tmp_path / "server.json").read_text()))
    # the sink's own verdict, recomputed here from the raw arrivals
    assert dict(client.sent) == {f: packets for f in range(flows)}
    assert dict(server.sent) == {f: packets for f in range(flows)}
    verdict = verify(server.received, client.received, client.sent, server.sent)
    assert verdict.ok, verdict.problems()
    assert verdict.packets_received == 2 * flows * packets
    # every NF alive, no sequence number skipped or seen twice, and no packet dropped for any
    # reason but a malformed frame (the only drops allowed are stray kernel frames on a data port,
    # which the NFs count as malformed); every packet was processed by a primary
    nfs = json.loads((tmp_path / "nfs.json").read_text())
    bad = [{k: nf.get(k) for k in ("id", "role", "alive", "misses", "drops", "malformed",
                                   "duplicates", "gaps")}
           for nf in nfs if not (nf["alive"] and nf["gaps"] == 0 and nf["duplicates"] == 0
                                 and nf["drops"] == nf["malformed"])]
    assert bad == [], json.dumps(bad)
    assert sum(nf["packets"] for nf in nfs if nf["role"] == "primary") == 2 * flows * packets
    # the checker NF really was in the path: counts run 1..2*packets per flow
    for f in range(flows):
        counts = sorted(c for _, c in (*server.received[f], *client.received[f]))
        assert counts == list(range(1, 2 * packets + 1))


def _leftovers() -> list[str]:
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    names = [line.split()[0].split("@")[0] for line in links.splitlines() if line.strip()]
    return [n for n in names if n.startswith(("s1-", "nfcm0", "client-", "server-", "n1-", "n2-"))]


@pytest.mark.netns
@pytest.mark.slow
def test_ctrl_c_stops_everything_it_started(tmp_path: Path) -> None:
    if not (REPO / "build" / "nfcluster.p4info.txtpb").exists():
        subprocess.run(["make", "-C", str(REPO), "build"], check=True, capture_output=True)
    assert _leftovers() == [], "links from an earlier run are still there"
    log = tmp_path / "run.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "topo", "run", "--flows", "4", "--packets", "100000",
             "--rate", "200", "--out-dir", str(tmp_path)],
            stdout=out, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    try:
        wait_for(lambda: b"sending 4 flows" in log.read_bytes() or proc.poll() is not None,
                 timeout=120, what="traffic started")
        assert proc.poll() is None, log.read_text()[-3000:]
        children = descendants(proc.pid)
        assert len(children) > 3  # p4sim, controllers, etcd, NFs, ... started by the run
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
        assert proc.wait(timeout=60) == 130
    finally:
        stop_process(proc)
    assert "interrupted: everything started was stopped" in log.read_text()
    still = still_running(children)
    assert still == [], f"processes left running: {still}"
    assert _leftovers() == []
