"""Where a run's losses were counted, named by place (switch port and what is on it, NF, host)."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.config import load_config
from topo.faults.losses import LossSite, loss_lines, port_names, where_lost

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
    assert next(s for s in sites if s.where == "switch pipeline").loss is False  # a duplicate
    lines = loss_lines(60, sites)
    assert lines[0].startswith("lost 60 packets end to end; drops counted on the path: 56 "
                               "(and 3 drops of copies")
    assert any("switch port 1 (client): 40" in ln for ln in lines)
    assert lines[-1] == "  unaccounted: 4 lost packets no counter on the path saw"
    assert not any("unaccounted" in ln for ln in loss_lines(56, sites))


def test_a_loss_no_counter_saw_is_called_unaccounted() -> None:
    cfg = load_config(CONFIG)
    assert where_lost(cfg, None, {}, [], {}) == []
    assert loss_lines(0, []) == []
    assert loss_lines(3, [])[-1] == "  unaccounted: 3 lost packets no counter on the path saw"


def test_losses_in_switch_outages_are_named_and_accounted() -> None:
    """A chaos run's switch restarts lose what was sent meanwhile: no counter of the dead switch
    survives, so the run's count from the outage windows is a line of its own, not unaccounted."""
    sites = [LossSite("switch", "arrived before the program was loaded", 5)]
    lines = loss_lines(120, sites, outage=110)
    assert lines[0].startswith("lost 120 packets end to end; drops counted on the path: 115")
    assert lines[1].startswith("  switch outages: 110 sent while the switch was down")
    assert lines[-1] == "  unaccounted: 5 lost packets no counter on the path saw"
    assert not any("unaccounted" in ln for ln in loss_lines(110, [], outage=110))
    assert loss_lines(0, [], outage=0) == []


SNMP = """Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout ReasmReqds ReasmOKs ReasmFails FragOKs FragFails FragCreates OutTransmits
Ip: 2 64 72976 0 2 0 0 0 72974 90000 0 0 0 0 0 0 0 0 0 90000
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 100 15685 10 90 8 0 1 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 0 0 0 0 0 0 0
"""  # recorded /proc/net/snmp, numbers edited
LINKS = ('[{"ifname":"lo","stats64":{"rx":{"dropped":0},"tx":{"dropped":0}}},'
         '{"ifname":"client-eth0","stats64":{"rx":{"dropped":0},"tx":{"dropped":12}}}]')
QDISCS = ('[{"kind":"noqueue","handle":"0:","dev":"lo","root":true,"drops":0},'
          '{"kind":"tbf","handle":"8007:","dev":"client-eth0","root":true,"refcnt":3,"options":'
          '{"rate":1000,"burst":1600,"lat":0},"bytes":900,"packets":10,"drops":7,'
          '"overlimits":20,"requeues":0,"backlog":0,"qlen":0},'
          '{"kind":"pfifo","handle":"10:","dev":"client-eth0","parent":"8007:1","drops":7}]')
SOFTNET = """0c10a845 00000000 00000024 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000
0bfe1eb9 0000001a 00000016 00000000 00000000 00000000 00000000 00000000 00000000 00000002 00000000 00000000 00000001 00000000 00000000
"""
ARP = """entries  allocs   destroys hash_grows lookups  hits     res_failed rcv_probes_mcast rcv_probes_ucast periodic_gc_runs forced_gc_runs unresolved_discards table_fulls
00000002 00002fec 000030f2 00000003   00016bee 0000a1cd 00000000   00000000         00000000         00000000         00000000       00000003            00000000
00000002 0000331a 00003212 00000004   00019472 0000b476 00000012   00000000         00000000         00000d50         00000000       00000010            00000000
"""


class FakeNode:
    def __init__(self, name: str) -> None:
        self.name = name

    def cmd(self, command: str) -> str:
        if "snmp" in command:
            return SNMP
        return QDISCS if command.startswith("tc ") else LINKS


class FakeNet:
    hosts = [FakeNode("client"), FakeNode("n1")]
    switches: list[FakeNode] = []


def test_the_kernels_counters_are_parsed_from_their_recorded_text() -> None:
    from topo.faults.kernel_drops import (
        arp_discards,
        ip_counters,
        link_drops,
        qdisc_drops,
        softnet_drops,
        udp_counters,
    )

    assert udp_counters(SNMP) == {"udp_noports": 15685, "udp_inerrors": 10,
                                  "udp_rcvbuf_errors": 8, "udp_csum_errors": 1}
    assert udp_counters("") == {} and ip_counters("") == {}
    assert ip_counters(SNMP)["ip_in_addr_errors"] == 2
    assert link_drops(LINKS) == {"client-eth0": {"tx_dropped": 12, "rx_dropped": 0}}
    assert qdisc_drops(QDISCS) == {"client-eth0": 7}  # the root's, which holds its child's
    assert softnet_drops(SOFTNET) == {0: 0, 1: 0x1a + 2}  # backlog full + flow limit
    assert arp_discards(ARP) == 0x13
    assert arp_discards("cat: /proc/net/stat/arp_cache: No such file or directory") == 0


def test_each_namespaces_kernel_drops_are_read_and_named_once() -> None:
    from topo.faults.kernel_drops import grown, kernel_counters

    drops = kernel_counters(FakeNet(), edge=["client"])
    # an NF host's UDP is the control plane's (its traffic comes on a packet socket): not read
    assert drops == {"client/udp": {"udp_noports": 15685, "udp_inerrors": 10,
                                    "udp_rcvbuf_errors": 8, "udp_csum_errors": 1},
                     "client/ip": {"ip_in_addr_errors": 2},
                     "client/client-eth0": {"tx_dropped": 12, "qdisc_drops": 7},
                     "n1/client-eth0": {"tx_dropped": 12, "qdisc_drops": 7}}
    drops = {k: v for k, v in drops.items() if k.startswith("client/")}
    drops["cpu1/backlog"] = {"backlog_drops": 4}
    drops["kernel/arp"] = {"arp_unresolved_discards": 2}
    cfg = load_config(CONFIG)
    # the client's socket saw 5 of the 8 full-buffer drops: each drop is listed once
    sites = where_lost(cfg, None, {}, [], {"client": 5}, drops)
    text = "\n".join(loss_lines(15722, sites))
    assert "interface client/client-eth0: 12 dropped on sending" in text
    assert "interface client/client-eth0: 7 dropped by the interface's queueing discipline" in text
    assert "host client: 15685 UDP datagrams to a closed port" in text
    assert "host client: 3 UDP receive buffer full (another socket)" in text
    assert "host client: 1 UDP datagrams with a bad checksum" in text
    assert "host client: 1 UDP receive errors" in text  # 10 - 8 full buffers - 1 checksum
    assert "host client: 2 IPv4 packets to an address not the host's" in text
    assert "kernel (cpu1): 4 dropped by the kernel: this CPU's input backlog full" in text
    assert "kernel: 2 packets dropped while their next hop's address was unresolved" in text
    assert "drops counted on the path: 15722" in text and "unaccounted" not in text
    before = {"cpu1/backlog": {"backlog_drops": 10}, "kernel/arp": {"arp_unresolved_discards": 2}}
    now = {"cpu0/backlog": {"backlog_drops": 1}, "cpu1/backlog": {"backlog_drops": 13},
           "kernel/arp": {"arp_unresolved_discards": 2}}
    assert grown(now, before) == {"cpu0/backlog": {"backlog_drops": 1},
                                  "cpu1/backlog": {"backlog_drops": 3}}


def test_gaps_an_nf_skipped_say_where_a_loss_no_counter_saw_showed() -> None:
    """The `--hot` run on a busy host lost 24 packets no drop counter saw; NF 2 had skipped
    them as gaps after a false fail-over: the summary names that place."""
    from topo.faults.losses import gap_lines

    assert gap_lines([{"id": 1, "role": "primary", "gaps": 0}]) == []
    [line] = gap_lines([{"id": 2, "role": "primary", "gaps": 24},
                        {"id": 1, "role": "backup", "gaps": 3}, {"id": 5}])
    assert line.startswith("  where it showed: numbers skipped as gaps by NF 1 (backup) 3, "
                           "NF 2 (primary) 24 ")


def test_the_frames_queued_in_p4sims_sockets_are_summed_over_its_ports(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from topo.faults import losses

    doc = {"ports": {"1": {"queued": 3, "rx": 900}, "3": {"queued": 0}, "4": {"queued": 12}}}
    monkeypatch.setattr(losses, "switch_status", lambda address: doc)
    got = losses.queued_in_switch("127.0.0.1:9559")
    assert got is not None and got[0] == 15
    # no status (BMv2, or p4sim not answering): not counted, so the outage's fixed margin
    monkeypatch.setattr(losses, "switch_status", lambda address: None)
    assert losses.queued_in_switch("127.0.0.1:9559") is None
