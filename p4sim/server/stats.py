"""p4sim's own counters over HTTP: Prometheus text at `/metrics`, JSON at `/status`; and the
ports' wire impairment (p4sim/io/impair.py) at `/ports/{port}/impair`.

`p4sim run --metrics-addr 127.0.0.1:PORT` serves them (loopback unless told otherwise), and
`p4sim status --metrics-addr 127.0.0.1:PORT` prints them. Per port: frames received and sent, the
frames the kernel dropped before p4sim read them, receive-ring freezes, transmit errors and frames
lost to a full transmit ring, receive errors, what the port's impairment dropped, duplicated,
reordered and delayed (and the impairment itself, in `/status`); per device: packets in and out,
packet-ins and -outs, engine errors, packets that arrived before a program was loaded. The
nfcluster controller reads `/status` (its `switch.stats` setting) to show the switch's losses next
to the NFs'.

    GET    /ports/{port}/impair   the port's impairment (null: none) and counters
    POST   /ports/{port}/impair   impair it: {"loss": 0.01, "duplicate": 0.01, "reorder": 0.1,
                                  "delay_ms": 1, "seed": 7} (missing keys are 0)
    DELETE /ports/{port}/impair   stop (frames held for their delay are sent now)

POST and DELETE answer with the port's entry and `ended`: what the impairment the request ended
or replaced counted over its own life (`impair_dropped`, ...; null if there was none), exact even
while frames flow, which the port's counters read before and after are not.

A state-changing request (POST, DELETE) must be one a browser cannot send cross-site without a
CORS preflight (never granted here), as the controller's API asks (controlplane/api.py): the
header `X-Nfc-Request` (any value) or `Content-Type: application/json`; otherwise 403 (no marker)
or 415 (another content type). Bad requests get 400, an unknown port 404, each with a JSON
`{"error": "..."}` naming what is wrong.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from p4sim.io.impair import Impairment, ImpairmentError
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
    "impair_dropped": "Frames the port's wire impairment dropped (lost on purpose)",
    "impair_duplicated": "Extra copies the port's wire impairment sent",
    "impair_reordered": "Frames the port's wire impairment sent ahead of held ones",
    "impair_delayed": "Frames the port's wire impairment held for its delay",
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


REQUEST_HEADER = "X-Nfc-Request"  # as the controller's API (controlplane/api.py)
IMPAIR_PATH = re.compile(r"/ports/([^/]*)/impair")
MAX_BODY = 65536


class PortsLike(Protocol):
    interfaces: Any
    io: str

    def snapshot(self) -> dict[int, dict[str, Any]]: ...


class Headers(Protocol):
    def get(self, name: str, /) -> str | None: ...


class HttpError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def guard(method: str, path: str, headers: Headers) -> None:
    """Refuse a state-changing request a cross-site form post could make (see the module
    docstring)."""
    kind = headers.get("Content-Type")
    media = (kind or "").split(";")[0].strip().lower()
    if headers.get(REQUEST_HEADER) is not None or media == "application/json":
        return
    what = (f"{method} {path} changes state: send the header {REQUEST_HEADER}: 1 or a JSON body "
            "(Content-Type: application/json); requests a cross-site form post can make are "
            "refused")
    if kind is not None:
        raise HttpError(415, f"{what} (got Content-Type {kind!r})")
    raise HttpError(403, what)


class ImpairRefused(OSError):
    """The status server answered `/ports/{port}/impair` with an error: `code` and its message."""

    def __init__(self, method: str, url: str, code: int, why: str) -> None:
        super().__init__(f"{method} {url}: {code} {why}")
        self.code, self.why = code, why


def impair_call(addr: str, port: int, method: str = "GET", body: dict[str, Any] | None = None,
                timeout: float = 5.0) -> dict[str, Any]:
    """The client of `/ports/{port}/impair` on the status server at `addr` (host:port), with the
    cross-site marker a state change needs: the port's entry. `ImpairRefused` when the server
    refuses (its own message), another OSError when it cannot be reached."""
    import urllib.error
    import urllib.request

    url = f"http://{addr}/ports/{port}/impair"
    req = urllib.request.Request(url, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json", REQUEST_HEADER: "1"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            doc: dict[str, Any] = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        try:
            why = str(json.loads(exc.read()).get("error", exc.reason))
        except ValueError:
            why = str(exc.reason)
        raise ImpairRefused(method, url, exc.code, why) from None
    return doc


def impair_request(ports: PortsLike, method: str, port_text: str, body: bytes
                   ) -> dict[str, Any]:
    """GET, POST or DELETE /ports/{port}/impair (already past `guard`): the port's `/status`
    entry with its number, or HttpError."""
    try:
        port = int(port_text)
    except ValueError:
        raise HttpError(400, f"the port must be an integer, got {port_text!r}") from None
    if port not in ports.interfaces:
        known = ", ".join(str(p) for p in sorted(ports.interfaces)) or "none"
        raise HttpError(404, f"port {port} has no interface (ports: {known})")
    impair = getattr(ports, "impair", None)
    if impair is None:
        raise HttpError(501, "this switch's ports cannot be impaired")
    if method == "GET":
        entry = ports.snapshot()[port]
    elif method == "DELETE":
        entry = impair(port, None)
    else:
        try:
            doc = json.loads(body) if body.strip() else None
        except ValueError as exc:
            raise HttpError(400, f"the body is not JSON: {exc}") from None
        try:
            impairment = Impairment.from_json(doc)
        except ImpairmentError as exc:
            raise HttpError(400, str(exc)) from None
        entry = impair(port, impairment)
    return {"port": port, "interface": ports.interfaces[port], **entry}


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
        impaired = GaugeMetricFamily("p4sim_port_impaired",
                                     "1 while the port's wire impairment is on",
                                     labels=["port", "interface"])
        for port, c in st["ports"].items():
            gone.add_metric([port, c["interface"]], int(c["gone"]))
            impaired.add_metric([port, c["interface"]], int(c.get("impair") is not None))
        yield gone
        yield impaired
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
                    self._answer(200, generate_latest(reg), CONTENT_TYPE_LATEST)
                elif self.path == "/status":
                    self._answer(200, json.dumps(source()).encode(), "application/json")
                elif IMPAIR_PATH.fullmatch(urlsplit(self.path).path):
                    self._impair()
                else:
                    self.send_error(404, "try /metrics, /status or /ports/{port}/impair")

            def do_POST(self) -> None:
                self._impair()

            def do_DELETE(self) -> None:
                self._impair()

            def _impair(self) -> None:
                path = urlsplit(self.path).path
                try:
                    if self.command != "GET":
                        guard(self.command, path, self.headers)
                    m = IMPAIR_PATH.fullmatch(path)
                    if m is None:
                        raise HttpError(404, f"{self.command} {path}: try {self.command} "
                                             "/ports/{port}/impair")
                    doc = impair_request(ports, self.command, m.group(1), self._body())
                    code = 200
                except HttpError as exc:
                    code, doc = exc.code, {"error": exc.message}
                self._answer(code, json.dumps(doc).encode(), "application/json")

            def _body(self) -> bytes:
                try:
                    n = int(self.headers.get("Content-Length") or 0)
                except ValueError:
                    raise HttpError(400, "Content-Length is not a number") from None
                if n > MAX_BODY:
                    raise HttpError(413, f"the body is larger than {MAX_BODY} bytes")
                return self.rfile.read(n) if n > 0 else b""

            def _answer(self, code: int, body: bytes, kind: str) -> None:
                self.send_response(code)
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
