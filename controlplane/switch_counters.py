"""`SwitchCounters`: the controller's periodic reads of the switch's counters (packets and bytes
per slot, the P4 program's drops and packets per port, p4sim's port losses) and their last
values, which the status, the metrics and the web view show. It reads through the switch
session of a `CounterHost` (the controller's core), only while that is the switch's primary.
The per-slot counter comes from the core's `slot_traffic` (controlplane/shared_read.py), the
read the load balancer shares: a read the balancer made within the last half
`counter_interval` serves this loop too, and the metrics take a read it has not seen only."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Protocol

import aiohttp

from controlplane import switch_stats
from controlplane.cluster_view import ClusterView
from controlplane.metrics import ControllerMetrics
from controlplane.shared_read import SharedRead
from controlplane.switch_session import SwitchSession

LOG = logging.getLogger("controlplane.controller")  # one logger for the controller's parts


class CounterHost(ClusterView, Protocol):
    """The configuration, the NFs and the switch session the counters are read through."""

    @property
    def session(self) -> SwitchSession: ...
    @property
    def slot_traffic(self) -> SharedRead[dict[int, tuple[int, int]]]: ...


class SwitchCounters:
    """The counter loop and the last values it read (see the module docstring)."""

    def __init__(self, host: CounterHost, metrics: ControllerMetrics,
                 counter_interval: float = 1.0) -> None:
        self.host = host
        self.metrics = metrics
        self.counter_interval = counter_interval
        # the last `slot_traffic` read (shared with the balancer: never modified in place)
        self.slot_counters: dict[int, tuple[int, int]] = {}
        self._slot_seq = 0  # the number of that read (SharedRead.seq)
        self.switch_drops: dict[str, int] = {}  # switch_stats.read_drops, every counter round
        # p4sim's port losses (switch.stats), "port/reason" -> packets; None: not read (yet)
        self.switch_ports: dict[str, int] | None = None
        self.switch_stats_error: str | None = None
        # the P4 program's packets in and out by switch port (port_rx, port_tx), every counter
        # round: "port" -> {"rx", "tx"}, non-zero only; what `make run` sets against each
        # port's interface counters (topo/faults/port_accounting.py)
        self.port_packets: dict[str, dict[str, int]] = {}
        self.port_packets_at: float | None = None  # time.time() of that read

    async def _counter_loop(self) -> None:
        while True:
            if self.host.session.is_primary:
                try:
                    # a read of the last half interval (the balancer's, while an NF is hot)
                    read = await self.host.slot_traffic.get(self.counter_interval / 2)
                    if read.seq != self._slot_seq:
                        self.slot_counters, self._slot_seq = read.value, read.seq
                        self.metrics.update_slot_traffic(self.slot_counters)
                    self.switch_drops = await switch_stats.read_drops(self.host.session)
                    self.metrics.update_switch_drops(self.switch_drops)
                    await self.refresh_port_packets()
                except Exception as exc:
                    LOG.debug("counter read failed: %s", exc)
            else:
                self.metrics.is_primary.set(0)
            if self.host.cfg.switch.stats is not None:
                await self.read_switch_ports(self.host.cfg.switch.stats)
            self.metrics.update_nfs(self.host.registry.summaries())
            await asyncio.sleep(self.counter_interval)

    async def read_switch_ports(self, address: str) -> None:
        """The switch's port losses from p4sim's counter endpoint (controlplane/switch_stats)."""
        try:
            doc = await switch_stats.read_status(address)
        except (OSError, aiohttp.ClientError, TimeoutError, ValueError) as exc:
            if self.switch_stats_error is None:
                LOG.warning("cannot read the switch's counters at %s: %s", address, exc)
            self.switch_stats_error = f"{address}: {exc or type(exc).__name__}"
            return
        self.switch_stats_error = None
        self.switch_ports = switch_stats.port_losses(doc)
        self.metrics.update_switch_ports(self.switch_ports)

    async def refresh_port_packets(self) -> dict[str, Any]:
        """Read the per-port counters now (`GET /switch/ports?refresh=1`) and keep them."""
        self.port_packets = await switch_stats.read_port_packets(self.host.session)
        self.port_packets_at = time.time()
        self.metrics.update_port_packets(self.port_packets)
        return self.port_packets_view()

    def port_packets_view(self) -> dict[str, Any]:
        """The last per-port counters read and when (`GET /switch/ports`)."""
        return {"read_at": self.port_packets_at, "ports": self.port_packets}
