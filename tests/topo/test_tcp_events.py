"""Real TCP through the service chain's events (issue #33): iperf3 (4 streams) and checked HTTP
downloads through firewall -> NAT -> monitor while the load balancer acts on their load (it scales
the NAT out and moves the hot primaries' slots to the new one, as it decides), then the NAT
primary carrying iperf3's data is killed, then a NAT slot carrying one of its live connections is
moved by command. No connection may be reset (iperf3 and every curl exit 0, no RST on the
client's wire while they run) and every byte must arrive (each download's sha256 is the file's).
`make bench-tcp` measures the same with repeats and a baseline.

Run it alone: `unshare -n sh -c 'ip link set lo up; .venv/bin/python -m pytest
tests/topo/test_tcp_events.py -q'`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from bench.tcp_events import chain_system, run_phase
from topo.http_api import http_json

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.netns
@pytest.mark.slow
def test_tcp_survives_the_balancer_a_nat_kill_and_a_slot_move(tmp_path: Path) -> None:
    if not (REPO / "build" / "nfcluster.p4info.txtpb").exists():
        subprocess.run(["make", "-C", str(REPO), "build"], check=True, capture_output=True)
    console = Console(width=140)
    with chain_system(tmp_path, console) as (sys_, files):
        phase = run_phase(sys_, files, 1, "events", ("balancer", "kill", "move"), warmup=2.0,
                          gap=2.0, console=console, seconds=28.0)
        history = http_json(f"{sys_.api}/lb/history")
    names = [n for n, _, _ in phase.events]
    assert names[-2:] == ["kill", "move"], phase.events
    assert not any(d.startswith("FAILED") for _, _, d in phase.events), phase.events
    # the balancer acted on its own with iperf3 running: it was paused before and after its
    # event, and it executed at least one of its decisions (a move that moved, a scale-out done)
    lb = [(n, t) for n, t, _ in phase.events if n.startswith("lb-")]
    assert lb, phase.events
    assert history["paused"] is True and history["enabled"] is True
    executed = [d for d in history["decisions"] if d["ok"]]
    assert executed, history["decisions"]
    assert all(d["inputs"]["nfs"] and d["action"]["reason"] for d in executed)
    t_kill = next(t for n, t, _ in phase.events if n == "kill")
    t_move = next(t for n, t, _ in phase.events if n == "move")
    t_lb = lb[0][1]
    # no connection reset: iperf3's four streams and its control connection lasted, every
    # download ended well, and no RST crossed the client's wire while they ran
    assert phase.iperf_rc == 0 and phase.iperf_errors == [], phase.iperf_errors
    assert phase.rsts == [], phase.rsts
    assert all(d.rc == 0 for d in phase.downloads), [d.error for d in phase.downloads]
    # every byte arrived: each download is the file, and one of them ran through the kill
    ok, n, nbytes = phase.verified
    assert n >= 2 and ok == n, [(d.rc, d.nbytes, d.error) for d in phase.downloads]
    assert nbytes == n * files["1M.bin"]["size"]
    assert any(d.started < t_kill + 1 and d.ended > t_kill for d in phase.downloads)
    # goodput went on after each event (the connections were carried, not just kept open)
    after_lb = sum(iv.nbytes for iv in phase.intervals if t_lb < iv.start < t_kill)
    after_kill = sum(iv.nbytes for iv in phase.intervals if t_kill < iv.start < t_move)
    after_move = sum(iv.nbytes for iv in phase.intervals if iv.start > t_move)
    assert after_lb > 0 and after_kill > 0 and after_move > 0, (after_lb, after_kill, after_move)
