"""Flow evictions (nf_host/flow_table.py) as the controller shows them: the NF summary, the
`/metrics` gauges and the `nfc nfs` table."""

from __future__ import annotations

import pytest
from rich.console import Console

from controlplane.cli import nfs_table
from controlplane.metrics import ControllerMetrics
from controlplane.nf_state import NfLoad

pytestmark = pytest.mark.unit


def test_evictions_reach_metrics_and_the_nfs_table() -> None:
    load = NfLoad(flows=1234, evictions={"idle": 7, "max": 3})
    summary = {"id": 4, "name": "fw", "alive": True, "flows": load.flows,
               "evictions": dict(load.evictions)}
    m = ControllerMetrics()
    m.update_nfs([summary])
    text = m.render().decode()
    assert 'nfc_nf_flows{nf="4"} 1234.0' in text
    assert 'nfc_nf_evictions{nf="4",reason="idle"} 7.0' in text
    assert 'nfc_nf_evictions{nf="4",reason="max"} 3.0' in text
    console = Console(width=200, record=True)
    console.print(nfs_table([summary]))
    out = console.export_text()
    assert "flows" in out and "evicted" in out and "idle:7 max:3" in out and "1234" in out
