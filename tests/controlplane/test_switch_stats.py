"""The controller reads p4sim's port counters (switch.stats) and shows them in its status, its
metrics and the `nfc status` table; an unreadable endpoint is said so, not shown as no loss."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from controlplane import switch_stats
from controlplane.cli import drops_line, status_table
from controlplane.config import parse_config
from controlplane.controller import Controller
from controlplane.nf_state import NfLoad, nf_losses
from controlplane.p4names import P4NameError
from controlplane.switch_stats import PORT_REASONS, port_losses, total_lost
from p4sim.io.ports import PortStats
from p4sim.server.device import Device
from p4sim.server.stats import StatsServer
from tests.support.procs import free_port

pytestmark = [pytest.mark.unit]

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Ports:
    interfaces: dict[int, str] = field(default_factory=lambda: {1: "s1-eth1", 3: "s1-eth3"})
    io: str = "ring"
    stats: dict[int, PortStats] = field(default_factory=lambda: {
        1: PortStats(rx=100, kernel_drops=12, ring_freezes=1), 3: PortStats(rx=50, tx_errors=2)})

    def snapshot(self) -> dict[int, dict[str, int | bool]]:
        return {p: s.to_json() for p, s in self.stats.items()}


def controller(stats: str) -> Controller:
    data = yaml.safe_load((ROOT / "topo" / "nfcluster.yaml").read_text())
    data["switch"]["stats"] = stats
    return Controller(parse_config(data), use_etcd=False)


def test_port_losses_are_keyed_by_port_and_reason() -> None:
    doc = {"ports": {"1": PortStats(kernel_drops=12, ring_freezes=1).to_json(),
                     "3": PortStats(tx_errors=2, impair_dropped=5, impair_duplicated=3,
                                    impair_delayed=9).to_json()},
           "device": {"engine_errors": 0, "no_pipeline": 4}}
    losses = port_losses(doc)
    assert losses == {"1/kernel_drops": 12, "1/ring_freezes": 1, "3/tx_errors": 2,
                      "3/impair_dropped": 5, "device/no_pipeline": 4}
    assert total_lost(losses) == 23
    # every loss p4sim adds into a port's `lost` is a reason here (and nothing else is)
    fields = PortStats()
    for name in PortStats.__dataclass_fields__:
        setattr(fields, name, int(name != "gone"))  # every counter 1
    assert set(PORT_REASONS) == {k for k in fields.to_json() if k.endswith(("drops", "_dropped",
                                 "errors", "overflows", "truncated")) and k != "rx_errors"}
    assert fields.lost == len(PORT_REASONS)


def test_the_controller_shows_the_switch_port_losses() -> None:
    device = Device()
    server = StatsServer("127.0.0.1:0", Ports(), device)
    try:
        addr = f"127.0.0.1:{server.port}"
        ctl = controller(addr)
        asyncio.run(ctl.read_switch_ports(addr))
        st = ctl.status()
        assert st["switch_ports"] == {"1/kernel_drops": 12, "1/ring_freezes": 1, "3/tx_errors": 2}
        assert st["switch_stats_error"] is None
        assert "port 1/kernel_drops 12" in drops_line(st)
        console = Console(width=200, record=True)
        console.print(status_table(st))
        assert "port 3/tx_errors 2" in console.export_text()
        assert ctl.metrics.registry.get_sample_value(
            "nfc_switch_port_losses", {"port": "1", "reason": "kernel_drops"}) == 12
    finally:
        server.close()
        device.close()


def test_an_unreadable_endpoint_is_reported() -> None:
    addr = f"127.0.0.1:{free_port()}"  # nothing listens
    ctl = controller(addr)
    asyncio.run(ctl.read_switch_ports(addr))
    st = ctl.status()
    assert st["switch_ports"] is None and addr in st["switch_stats_error"]
    assert "port counters unreadable" in drops_line(st)
    assert "switch.stats not set" in drops_line({"switch_drops": {}, "switch_ports": None})


def test_an_nf_drops_are_split_by_where_they_happened() -> None:
    load = NfLoad(drops=20, kernel_drops=7, buffer_overflows=3, tx_lost=2, malformed=1,
                  duplicates=4, unowned=0, nf_errors=1)
    assert nf_losses(load) == {"kernel": 7, "buffers": 3, "tx": 2, "malformed": 1,
                               "duplicates": 4, "nf_errors": 1, "other": 3}


class CounterSession:
    """A switch session that serves counters from a dict (a missing name: not in the P4Info)."""

    def __init__(self, cells: dict[str, dict[int, tuple[int, int]]]) -> None:
        self.cells = cells

    async def read_counter(self, short: str) -> dict[int, tuple[int, int]]:
        if short not in self.cells:
            raise P4NameError(f"no counter named {short!r}")
        return self.cells[short]


def test_the_controller_reads_the_per_port_packet_counters() -> None:
    ctl = controller(f"127.0.0.1:{free_port()}")
    session, ctl.session = ctl.session, CounterSession({  # type: ignore[assignment]
        "port_rx": {1: (10, 900), 3: (4, 400), 5: (0, 0)},
        "port_tx": {3: (10, 1060), 2: (4, 300), 510: (0, 0)}})
    view = asyncio.run(ctl.refresh_port_packets())
    assert view["ports"] == {"1": {"rx": 10}, "3": {"rx": 4, "tx": 10}, "2": {"tx": 4}}
    assert view["read_at"] is not None and ctl.port_packets_view() == view
    assert ctl.metrics.registry.get_sample_value(
        "nfc_switch_port_packets", {"port": "3", "direction": "tx"}) == 10
    # a program of before the counters: nothing, not an error
    ctl.session = CounterSession({})  # type: ignore[assignment]
    assert asyncio.run(switch_stats.read_port_packets(ctl.session)) == {}
    ctl.session, ctl.counters.port_packets = session, view["ports"]
    assert ctl.status()["switch_port_packets"] == view["ports"]
