"""`make run --hot`: skewed traffic makes NF 1 hot; the controller's load balancer moves its slots
(to its cluster peer, then across) until it is below the high-water mark, within a bounded time,
and no packet is lost, duplicated or reordered. Needs the Mininet lock (flock /tmp/nfc-mininet.lock)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from topo.traffic import SideReport
from topo.verify import verify

REPO = Path(__file__).resolve().parents[2]
FLOWS, PACKETS = 32, 100
RELIEF_BOUND_S = 5.0  # measured 1.05 s (ring I/O, 0.4 s reports) on the shared 2-core VM


@pytest.mark.netns
@pytest.mark.slow
@pytest.mark.xfail(strict=False, reason="open (docs/protocols.md, Known limits, \"The balancer's "
                   "relief in a loaded CI run\"): in both fresh-clone CI runs of 2026-11-27 NF 1 "
                   "was relieved late (5.3 s) or not before the traffic ended; it passes alone")
def test_a_hot_nf_is_relieved_by_the_balancer_with_nothing_lost(tmp_path: Path) -> None:
    if not (REPO / "build" / "nfcluster.p4info.txtpb").exists():
        subprocess.run(["make", "-C", str(REPO), "build"], check=True, capture_output=True)
    result = subprocess.run(
        [sys.executable, "-m", "topo", "run", "--hot", "--flows", str(FLOWS), "--packets",
         str(PACKETS), "--rate", "400", "--out-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted(tmp_path.glob("*.log")))
    assert (tmp_path / "lb.json").exists(), result.stdout[-3000:] + result.stderr[-3000:] + logs
    assert result.returncode == 0, result.stdout[-4000:]
    lb = json.loads((tmp_path / "lb.json").read_text())
    relief = lb["relief"]
    assert relief["peak"] > lb["knobs"]["high_water"], relief  # NF 1 was really hot
    assert relief["seconds"] is not None and relief["seconds"] <= RELIEF_BOUND_S, relief
    moves = [d for d in lb["decisions"] if d["action"]["action"] == "move"]
    assert moves and all(d["outcome"] == "moved" for d in moves), moves
    # NF 1 sheds; an NF it filled may pass the excess on once over the high mark itself (a
    # cascade, never back to NF 1: nothing oscillates)
    assert moves[0]["action"]["src"] == 1 and all(d["action"]["dst"] != 1 for d in moves), moves
    assert all("> high" in d["action"]["reason"] for d in moves if d["action"]["src"] != 1), moves
    # the flow chart: its cluster peer first (deltas)
    assert moves[0]["kind"] == "intra" and moves[0]["action"]["dst"] == 2
    assert all(d["detail"]["delta"] for d in moves if d["kind"] == "intra")
    assert all(not d["detail"]["delta"] for d in moves if d["kind"] == "inter")
    assert len({d["action"]["slot"] for d in moves}) == len(moves)  # no slot moved twice
    client = SideReport.from_json(json.loads((tmp_path / "client.json").read_text()))
    server = SideReport.from_json(json.loads((tmp_path / "server.json").read_text()))
    assert dict(client.sent) == {f: PACKETS for f in range(FLOWS)}
    verdict = verify(server.received, client.received, client.sent, server.sent)
    assert verdict.ok, verdict.problems()
    assert verdict.packets_received == 2 * FLOWS * PACKETS  # 0 lost
    nfs = json.loads((tmp_path / "nfs.json").read_text())
    bad = [nf for nf in nfs
           if nf["gaps"] != 0 or nf["duplicates"] != 0 or nf["drops"] != nf["malformed"]]
    assert not bad, bad
