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


SNMP = """Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors
Udp: 100 15685 3 90 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors
UdpLite: 0 0 0 0 0 0
"""
LINKS = ('[{"ifname":"lo","stats64":{"rx":{"dropped":0},"tx":{"dropped":0}}},'
         '{"ifname":"client-eth0","stats64":{"rx":{"dropped":0},"tx":{"dropped":12}}}]')


class FakeHost:
    name = "client"

    def cmd(self, command: str) -> str:
        return SNMP if "snmp" in command else LINKS


class FakeNet:
    hosts = [FakeHost()]


def test_hosts_interface_and_udp_drops_are_read_and_named() -> None:
    from topo.losses import interface_drops, udp_counters

    assert udp_counters(SNMP) == {"udp_noports": 15685, "udp_inerrors": 3}
    assert udp_counters("") == {}
    drops = interface_drops(FakeNet())
    assert drops == {"client/udp": {"udp_noports": 15685, "udp_inerrors": 3},
                     "client/client-eth0": {"tx_dropped": 12, "rx_dropped": 0}}
    cfg = load_config(CONFIG)
    sites = where_lost(cfg, None, {}, [], {}, drops)
    text = "\n".join(loss_lines(15700, sites))
    assert "interface client/client-eth0: 12 dropped on sending" in text
    assert "host client: 15685 UDP datagrams to a closed port" in text
    assert "drops counted on the path: 15700" in text
