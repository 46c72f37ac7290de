"""Where a run's losses were counted, named by place (switch port and what is on it, NF, host)."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.config import load_config
from topo.losses import loss_lines, port_names, where_lost

pytestmark = [pytest.mark.unit]

CONFIG = Path(__file__).resolve().parents[2] / "topo" / "nfcluster.yaml"


def test_each_counter_is_named_by_its_place() -> None:
    cfg = load_config(CONFIG)
    assert port_names(cfg)[1] == "client" and port_names(cfg)[3] == "NF 1"
    switch = {"ports": {"1": {"interface": "s1-eth1", "kernel_drops": 40, "tx_errors": 0},
                        "3": {"interface": "s1-eth3", "tx_overflows": 2}},
              "device": {"engine_errors": 1, "no_pipeline": 0}}
    nfs = [{"id": 1, "role": "primary", "losses": {"kernel": 5, "tx": 1}},
           {"id": 5, "role": "backup", "losses": {}}]
    sites = where_lost(cfg, switch, {"nf_output_drops/duplicate": 3, "unowned_drops/all": 0}, nfs,
                       {"client": 0, "server": 7})
    got = {(s.where, s.packets) for s in sites}
    assert got == {("switch port 1 (client)", 40), ("switch port 3 (NF 1)", 2), ("switch", 1),
                   ("switch pipeline", 3), ("NF 1 (primary)", 5), ("NF 1 (primary)", 1),
                   ("server socket", 7)}
    kernel = next(s for s in sites if s.packets == 40)
    assert "before p4sim read them" in kernel.why
    lines = loss_lines(60, sites)
    assert lines[0].startswith("lost 60 packets end to end; drops counted on the path: 59")
    assert any("switch port 1 (client): 40" in ln for ln in lines)


def test_a_loss_no_counter_saw_is_called_unaccounted() -> None:
    cfg = load_config(CONFIG)
    assert where_lost(cfg, None, {}, [], {}) == []
    assert loss_lines(0, []) == []
    assert "not accounted for" in loss_lines(3, [])[-1]
