"""p4sim's own counters over HTTP: Prometheus text at `/metrics`, JSON at `/status`.

`p4sim run --metrics-addr 127.0.0.1:PORT` serves them (loopback unless told otherwise), and
`p4sim status --metrics-addr 127.0.0.1:PORT` prints them. Per port: frames received and sent, the
frames the kernel dropped before p4sim read them, receive-ring freezes, transmit errors and frames
lost to a full transmit ring, receive errors; per device: packets in and out, packet-ins and
-outs, engine errors, packets that arrived before a program was loaded. The nfcluster controller
reads `/status` (its `switch.stats` setting) to show the switch's losses next to the NFs'.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from p4sim.server.device import Device

PORT_COUNTERS = {
    "rx": "Frames received and handed to the pipeline",
    "tx": "Frames handed to the kernel for sending",
    "kernel_drops": "Frames the kernel dropped before p4sim read them (full buffer or ring)",
    "ring_freezes": "Times the receive ring was full (every block waiting for p4sim)",
    "tx_errors": "Frames the kernel refused to send (interface down or gone), lost",
    "tx_overflows": "Frames lost because the transmit ring stayed full",
    "rx_truncated": "Frames longer than a receive ring block, cut short and dropped",
    "rx_errors": "Receive errors (occasions: e.g. the interface went away)",
    "if_tx_dropped": "Frames the interface dropped on sending (a veth: its peer's backlog full)",
    "if_rx_dropped": "Frames the interface dropped on receiving",
}
DEVICE_COUNTERS = {
    "packets_in": "Packets into the pipeline",
    "packets_out": "Packets out of the pipeline to data ports",
    "packet_ins": "Packets sent to the controller (packet-in)",
    "packet_outs": "Packets from the controller (packet-out)",
    "engine_errors": "Packets the engine failed on (dropped)",
    "no_pipeline": "Packets that arrived before a program was loaded (dropped)",
    "digest_lists": "Digest lists sent",
}


class PortsLike(Protocol):
    interfaces: Any
    io: str

    def snapshot(self) -> dict[int, dict[str, int | bool]]: ...


def status(ports: PortsLike, device: Device) -> dict[str, Any]:
    """The JSON document of `/status`."""
    snap = ports.snapshot()
    return {
        "device_id": device.device_id,
        "io": ports.io,
        "device": asdict(device.stats),
        "ports": {str(p): {"interface": ports.interfaces[p], **c} for p, c in snap.items()},
        "lost": sum(int(c["lost"]) for c in snap.values())
        + device.stats.engine_errors + device.stats.no_pipeline,
    }


class _Collector:
    def __init__(self, source: Callable[[], dict[str, Any]]) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        st = self.source()
        for name, doc in PORT_COUNTERS.items():
            fam = CounterMetricFamily(f"p4sim_port_{name}", doc, labels=["port", "interface"])
            for port, c in st["ports"].items():
                fam.add_metric([port, c["interface"]], c[name])
            yield fam
        gone = GaugeMetricFamily("p4sim_port_gone", "1 when the port's interface disappeared",
                                 labels=["port", "interface"])
        for port, c in st["ports"].items():
            gone.add_metric([port, c["interface"]], int(c["gone"]))
        yield gone
        for name, doc in DEVICE_COUNTERS.items():
            yield CounterMetricFamily(f"p4sim_{name}", doc, value=st["device"][name])


def registry(source: Callable[[], dict[str, Any]]) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Collector(source))
    return reg


class StatsServer:
    """The HTTP endpoint, in a daemon thread."""

    def __init__(self, address: str, ports: PortsLike, device: Device) -> None:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"metrics address must be HOST:PORT, got {address!r}")
        def source() -> dict[str, Any]:
            return status(ports, device)

        reg = registry(source)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/metrics":
                    body, kind = generate_latest(reg), CONTENT_TYPE_LATEST
                elif self.path == "/status":
                    body, kind = json.dumps(source()).encode(), "application/json"
                else:
                    self.send_error(404, "try /metrics or /status")
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # scraped every second: no access log

        self.httpd = ThreadingHTTPServer((host, int(port)), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="p4sim-stats",
                                        daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
