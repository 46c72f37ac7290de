"""The wire impairment's HTTP control on p4sim's status server (`/ports/{port}/impair`, p4sim/
server/stats.py), in process, on a port set that sends into a socket pair: validation (400 naming
what is wrong), unknown ports (404), the cross-site guard (403/415), and a set, use and clear
round trip with its counters in `/status` and `/metrics`; and `p4sim impair` against it.

Run: .venv/bin/pytest tests/p4sim/server/test_impair_endpoint.py
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from p4sim.__main__ import main as p4sim_main
from p4sim.io.ports import PortSet
from p4sim.server.device import Device
from p4sim.server.stats import StatsServer
from tests.p4sim.test_impair import pair_port_set

pytestmark = pytest.mark.unit

JSON = {"Content-Type": "application/json"}


@pytest.fixture
def served() -> Iterator[tuple[str, PortSet, socket.socket]]:
    ports, peer = pair_port_set()
    device = Device()
    server = StatsServer("127.0.0.1:0", ports, device)
    try:
        yield f"127.0.0.1:{server.port}", ports, peer
    finally:
        server.close()
        device.close()
        ports.close()
        peer.close()


def call(addr: str, method: str, path: str, body: Any = None,
         headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    data = body if isinstance(body, bytes) else None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://{addr}{path}", data=data, method=method,
                                 headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.parametrize(("body", "words"), [
    ({"loss": 2}, "loss must be a probability in [0, 1], got 2"),
    ({"delay_ms": 5000}, "delay_ms must be in [0, 1000] ms, got 5000"),
    ({"loss": 0.1, "bandwidth": 5}, "unknown key 'bandwidth' (known: loss, duplicate, reorder"),
    ({"reorder": 0.5}, "reorder needs a delay"),
    ([0.1], "the body must be a JSON object"),
    (b"{loss: 1}", "the body is not JSON"),
    (b"", "the body must be a JSON object"),
])
def test_bad_impairments_get_400_naming_what_is_wrong(
        served: tuple[str, PortSet, socket.socket], body: Any, words: str) -> None:
    addr, ports, _ = served
    code, doc = call(addr, "POST", "/ports/1/impair", body, JSON)
    assert code == 400 and words in doc["error"], doc
    assert ports._impair == {}  # nothing changed


def test_unknown_ports_and_paths(served: tuple[str, PortSet, socket.socket]) -> None:
    addr, _, _ = served
    code, doc = call(addr, "POST", "/ports/7/impair", {"loss": 0.5}, JSON)
    assert (code, doc["error"]) == (404, "port 7 has no interface (ports: 1)")
    code, doc = call(addr, "DELETE", "/ports/x/impair", headers={"X-Nfc-Request": "1"})
    assert (code, doc["error"]) == (400, "the port must be an integer, got 'x'")
    code, doc = call(addr, "GET", "/ports/7/impair")
    assert code == 404
    code, doc = call(addr, "POST", "/status", {"loss": 0.5}, JSON)
    assert code == 404 and "/ports/{port}/impair" in doc["error"]


def test_a_request_a_cross_site_form_could_make_is_refused(
        served: tuple[str, PortSet, socket.socket]) -> None:
    addr, ports, _ = served
    code, doc = call(addr, "POST", "/ports/1/impair", b"loss=1",
                     {"Content-Type": "application/x-www-form-urlencoded"})
    assert code == 415 and "X-Nfc-Request" in doc["error"] and "form" in doc["error"]
    code, doc = call(addr, "POST", "/ports/1/impair", b"{\"loss\": 1}",
                     {"Content-Type": "text/plain"})
    assert code == 415
    code, doc = call(addr, "DELETE", "/ports/1/impair")
    assert code == 403 and "X-Nfc-Request" in doc["error"]
    assert ports._impair == {}
    code, _ = call(addr, "POST", "/ports/1/impair", b"{\"loss\": 1}",  # the header is enough
                   {"Content-Type": "text/plain", "X-Nfc-Request": "1"})
    assert code == 200 and 1 in ports._impair


def test_set_use_and_clear_round_trip(served: tuple[str, PortSet, socket.socket]) -> None:
    addr, ports, peer = served
    want = {"loss": 1.0, "duplicate": 0.0, "reorder": 0.0, "delay_ms": 0.0, "seed": 7}
    code, doc = call(addr, "POST", "/ports/1/impair", {"loss": 1, "seed": 7},
                     {"Content-Type": "application/json; charset=utf-8"})
    assert code == 200 and (doc["port"], doc["interface"], doc["impair"]) == (1, "nonexistent0", want)
    for i in range(10):
        ports.send(1, bytes([i]))
    code, doc = call(addr, "GET", "/ports/1/impair")
    assert (code, doc["impair_dropped"], doc["tx"], doc["lost"]) == (200, 10, 0, 10)
    with urllib.request.urlopen(f"http://{addr}/status", timeout=5) as resp:
        status = json.loads(resp.read())
    assert status["ports"]["1"]["impair"] == want and status["lost"] == 10
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as resp:
        metrics = resp.read().decode()
    assert 'p4sim_port_impaired{interface="nonexistent0",port="1"} 1.0' in metrics
    assert 'p4sim_port_impair_dropped_total{interface="nonexistent0",port="1"} 10.0' in metrics
    code, doc = call(addr, "POST", "/ports/1/impair", {"duplicate": 1}, JSON)  # replaces it
    ports.send(1, b"twice")
    assert (doc["impair"]["duplicate"], doc["impair"]["loss"]) == (1.0, 0.0)
    code, doc = call(addr, "DELETE", "/ports/1/impair", headers={"X-Nfc-Request": "1"})
    assert code == 200 and doc["impair"] is None and doc["impair_duplicated"] == 1
    ports.send(1, b"plain")
    assert [peer.recv(100) for _ in range(3)] == [b"twice", b"twice", b"plain"]
    assert ports.stats[1].tx == 3


def test_the_impair_command(served: tuple[str, PortSet, socket.socket],
                            capsys: pytest.CaptureFixture[str]) -> None:
    addr, ports, _ = served
    assert p4sim_main(["impair", "--metrics-addr", addr, "1", "--loss", "0.01", "--delay-ms", "1",
                       "--reorder", "0.1", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "port 1 (nonexistent0) impaired: delay 1ms loss 1% reorder 10% (seed 3)" in out
    assert p4sim_main(["impair", "--metrics-addr", addr, "1"]) == 0
    assert "impaired: delay 1ms" in capsys.readouterr().out
    assert p4sim_main(["impair", "--metrics-addr", addr, "1", "--loss", "3"]) == 2
    assert "loss must be a probability" in capsys.readouterr().err
    # refused before any request: no switch needed to say a value is wrong
    assert p4sim_main(["impair", "--metrics-addr", "127.0.0.1:1", "1", "--reorder", "0.5"]) == 2
    assert "reorder needs a delay" in capsys.readouterr().err
    assert p4sim_main(["impair", "--metrics-addr", addr, "9", "--clear"]) == 1
    assert "port 9 has no interface" in capsys.readouterr().err
    assert p4sim_main(["status", "--metrics-addr", addr]) == 0
    assert "port 1 (nonexistent0) impaired: delay 1ms loss 1%" in capsys.readouterr().out
    assert p4sim_main(["impair", "--metrics-addr", addr, "1", "--clear"]) == 0
    out = capsys.readouterr().out
    assert "port 1 (nonexistent0) not impaired" in out
    assert "the impairment it ended had dropped 0, duplicated 0, reordered 0, delayed 0" in out
    assert ports._impair == {}
    assert p4sim_main(["status", "--metrics-addr", addr]) == 0
    assert "impaired" not in capsys.readouterr().out


class PlainPorts:
    """A port set without an impairment (another implementation of the status source)."""

    interfaces = {1: "eth9"}
    io = "socket"

    def snapshot(self) -> dict[int, dict[str, Any]]:
        return {1: {"lost": 0, "gone": False}}


def test_a_port_set_that_cannot_impair_says_so() -> None:
    device = Device()
    server = StatsServer("127.0.0.1:0", PlainPorts(), device)
    try:
        code, doc = call(f"127.0.0.1:{server.port}", "POST", "/ports/1/impair", {}, JSON)
        assert (code, doc["error"]) == (501, "this switch's ports cannot be impaired")
    finally:
        server.close()
        device.close()
