"""The example configuration yields the topology `make run` needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.config import load_config
from topo.launch.topology import build_topology

CONFIG = Path(__file__).resolve().parents[2] / "topo" / "nfcluster.yaml"


@pytest.mark.unit
def test_example_topology_has_every_nf_on_its_node() -> None:
    cfg = load_config(CONFIG)
    topo = build_topology(cfg)
    assert {h.name for h in topo.edge} == {"client", "server"}
    assert sorted(link.nf_id for n in topo.nodes for link in n.nfs) == sorted(nf.id for nf in cfg.nfs)
    for nf in cfg.nfs:
        assert topo.node_of(nf.id).name == nf.node
        assert topo.link_of(nf.id).port == nf.port
    # primaries and their backups sit on different nodes
    for p in cfg.primaries():
        assert p.backup is not None
        assert topo.node_of(p.id).name != topo.node_of(p.backup).name
    assert topo.mgmt_gateway not in {n.mgmt_ip for n in topo.nodes}
    assert all(len(link.intf) <= 15 for n in topo.nodes for link in n.nfs)  # Linux IFNAMSIZ
