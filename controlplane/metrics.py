"""Prometheus metrics of the controller, in their own registry (served at /metrics by the API)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

__all__ = ["CONTENT_TYPE_LATEST", "ControllerMetrics"]


class SlotTrafficSeries(Collector):
    """`nfc_slot_packets{slot}` and `nfc_slot_bytes{slot}`: what the switch counted per slot in
    the last `slot_traffic` read, slots with traffic only, made at scrape time from that read."""

    def __init__(self) -> None:
        self.counters: Mapping[int, tuple[int, int]] = {}

    def collect(self) -> Iterable[Metric]:
        packets = GaugeMetricFamily("nfc_slot_packets", "Packets the switch counted per slot",
                                    labels=["slot"])
        nbytes = GaugeMetricFamily("nfc_slot_bytes", "Bytes the switch counted per slot",
                                   labels=["slot"])
        for slot, (p, b) in sorted(self.counters.items()):
            if p:
                packets.add_metric([str(slot)], p)
                nbytes.add_metric([str(slot)], b)
        yield packets
        yield nbytes


class ControllerMetrics:
    """Every metric the controller exports; names start with `nfc_`."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.is_primary = Gauge("nfc_switch_primary", "1 when this controller is the switch's primary", registry=r)
        self.writes = Counter("nfc_p4rt_writes", "P4Runtime updates written", ["op"], registry=r)
        self.reconciles = Counter("nfc_reconciles", "Reconciliations of the switch state", registry=r)
        self.numbering_resumed = Counter(
            "nfc_numbering_resumed", "Slots whose switch numbering was set back to where the NFs are "
            "(after a switch restart)", registry=r)
        self.digests = Counter("nfc_digest_lists", "Digest lists received (and acknowledged)", registry=r)
        self.new_flows = Counter("nfc_new_flows", "Flows first reported by a digest", registry=r)
        self.slot_moves = Counter("nfc_slot_moves", "slot_owner rewrites (migrations, fail-overs)", registry=r)
        self.nf_events = Counter("nfc_nf_events", "NF liveness changes", ["kind"], registry=r)
        self.slots_owned = Gauge("nfc_nf_slots", "Slots owned by an NF as primary", ["nf"], registry=r)
        self.nf_alive = Gauge("nfc_nf_alive", "1 alive, 0 declared dead, -1 unknown", ["nf"], registry=r)
        self.nf_misses = Gauge("nfc_nf_heartbeat_misses", "Heartbeats missed in a row", ["nf"], registry=r)
        self.nf_rate = Gauge("nfc_nf_packet_rate", "Packets/s an NF reports", ["nf"], registry=r)
        self.nf_queue = Gauge("nfc_nf_queue_depth", "Packets waiting in an NF", ["nf"], registry=r)
        self.nf_cpu = Gauge("nfc_nf_cpu_percent", "CPU of an NF (100 = one core)", ["nf"], registry=r)
        self.nf_drops = Gauge("nfc_nf_drops", "Packets an NF dropped since start", ["nf"], registry=r)
        self.nf_hb_rejected = Gauge(
            "nfc_nf_heartbeats_rejected", "Heartbeat replies naming an NF that were refused: wrong "
            "MAC, session or sender address (forged, docs/security.md)", ["nf"], registry=r)
        self.nf_gaps = Gauge("nfc_nf_gaps", "Sequence gaps an NF skipped since start", ["nf"], registry=r)
        # nfc_slot_packets and nfc_slot_bytes: from the last read, when scraped (SlotTrafficSeries)
        self.slot_traffic = SlotTrafficSeries()
        r.register(self.slot_traffic)
        self.nf_load = Gauge("nfc_nf_load", "Load of a primary NF as the balancer sees it (1 = capacity)",
                             ["nf"], registry=r)
        self.lb_actions = Counter("nfc_lb_actions", "Load-balancer decisions by kind "
                                  "(intra, inter, scale_out, scale_in)", ["kind"], registry=r)
        self._owners_seen: set[int] = set()
        self.switch_drops = Gauge("nfc_switch_drops", "Packets the switch dropped and counted, by "
                                  "counter and reason (output dedup, unowned slots, NF ports)",
                                  ["counter", "reason"], registry=r)
        self.switch_port_losses = Gauge(
            "nfc_switch_port_losses", "Packets lost at a switch port, by reason (p4sim's counters: "
            "kernel_drops before p4sim read them, tx_errors, tx_overflows, rx_truncated, "
            "if_tx_dropped, if_rx_dropped, impair_dropped (a wire impairment's loss on purpose); "
            "ring_freezes counts occasions); port 'device': engine_errors, no_pipeline",
            ["port", "reason"], registry=r)
        self.switch_port_packets = Gauge(
            "nfc_switch_port_packets", "Packets the P4 program counted per switch port: 'rx' "
            "entered its pipeline there (port_rx), 'tx' left through it (port_tx); set against "
            "the port's interface counters they show what the target dropped outside the pipeline",
            ["port", "direction"], registry=r)
        self.nf_losses = Gauge("nfc_nf_losses", "Packets an NF dropped since start, by where and "
                               "why (kernel socket, buffers, tx, malformed, duplicates, ...)",
                               ["nf", "reason"], registry=r)
        self._flow_gauges(r)

    def _flow_gauges(self, r: CollectorRegistry) -> None:
        self.nf_flows = Gauge("nfc_nf_flows", "Flows with state in an NF's owned slots", ["nf"],
                              registry=r)
        self.nf_evictions = Gauge("nfc_nf_evictions", "Flows an NF evicted since start, by reason "
                                  "(idle, closed, max: the bound, nf: no state kept for a drop)",
                                  ["nf", "reason"], registry=r)

    def count_write(self, op: str, n: int) -> None:
        self.writes.labels(op=op).inc(n)

    def update_nfs(self, summaries: Sequence[Mapping[str, Any]]) -> None:
        for s in summaries:
            nf = str(s["id"])
            alive = s.get("alive")
            self.nf_alive.labels(nf=nf).set(-1 if alive is None else int(bool(alive)))
            self.nf_misses.labels(nf=nf).set(s.get("misses", 0))
            self.nf_rate.labels(nf=nf).set(s.get("packet_rate", 0.0))
            self.nf_queue.labels(nf=nf).set(s.get("queue_depth", 0))
            self.nf_cpu.labels(nf=nf).set(s.get("cpu_percent", 0.0))
            self.nf_drops.labels(nf=nf).set(s.get("drops", 0))
            self.nf_gaps.labels(nf=nf).set(s.get("gaps", 0))
            self.nf_hb_rejected.labels(nf=nf).set(s.get("heartbeats_rejected", 0))
            for reason, packets in s.get("losses", {}).items():
                self.nf_losses.labels(nf=nf, reason=reason).set(packets)
            self.nf_flows.labels(nf=nf).set(s.get("flows", 0))
            for reason, flows in s.get("evictions", {}).items():
                self.nf_evictions.labels(nf=nf, reason=reason).set(flows)

    def update_switch_drops(self, drops: Mapping[str, int]) -> None:
        """`drops`: "counter/reason" -> packets (see Controller.switch_drops)."""
        for key, packets in drops.items():
            counter, _, reason = key.partition("/")
            self.switch_drops.labels(counter=counter, reason=reason).set(packets)

    def update_switch_ports(self, losses: Mapping[str, int]) -> None:
        """`losses`: "port/reason" -> packets (controlplane/switch_stats.port_losses)."""
        for key, packets in losses.items():
            port, _, reason = key.partition("/")
            self.switch_port_losses.labels(port=port, reason=reason).set(packets)

    def update_port_packets(self, ports: Mapping[str, Mapping[str, int]]) -> None:
        """`ports`: "port" -> {"rx", "tx"} (Controller.port_packets)."""
        for port, counts in ports.items():
            for direction, packets in counts.items():
                self.switch_port_packets.labels(port=port, direction=direction).set(packets)

    def update_slot_counts(self, owners: Mapping[int, int]) -> None:
        """Slots per primary; an NF that owned slots and owns none now (failed over, drained)
        reads 0, not its old count."""
        for nf in self._owners_seen - set(owners):
            self.slots_owned.labels(nf=str(nf)).set(0)
        for nf, count in owners.items():
            self.slots_owned.labels(nf=str(nf)).set(count)
        self._owners_seen |= set(owners)

    def update_slot_traffic(self, counters: Mapping[int, tuple[int, int]]) -> None:
        """Per-slot switch counters (the last read; kept, not copied: never change it); only
        slots that saw traffic get a series. Nothing is set here: the series are made when
        the metrics are scraped (4,096 gauge sets every second were milliseconds of CPU)."""
        self.slot_traffic.counters = counters

    def render(self) -> bytes:
        return generate_latest(self.registry)
