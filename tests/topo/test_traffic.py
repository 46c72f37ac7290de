"""The traffic sender and echoing sink, over loopback, feed a verdict that passes (no NF in the path,
so counts are 0: this checks numbering and bookkeeping, not the checker)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.procs import free_port, stop_process, wait_for
from topo.traffic import SideReport


@pytest.mark.unit
def test_sender_and_sink_account_for_every_packet(tmp_path: Path) -> None:
    port = free_port()
    server_out, client_out = tmp_path / "server.json", tmp_path / "client.json"
    sink = subprocess.Popen(
        [sys.executable, "-m", "topo.traffic", "sink", "--listen", f"127.0.0.1:{port}",
         "--idle", "2", "--out", str(server_out)]
    )
    try:
        def sink_bound() -> bool:
            out = subprocess.run(["ss", "-uln"], capture_output=True, text=True).stdout
            return f":{port} " in out
        wait_for(sink_bound, timeout=10, what="sink bound")
        subprocess.run(
            [sys.executable, "-m", "topo.traffic", "send", "--dst", f"127.0.0.1:{port}",
             "--flows", "4", "--packets", "25", "--rate", "0", "--out", str(client_out)],
            check=True, timeout=60,
        )
        sink.wait(timeout=30)
    finally:
        stop_process(sink)
    server = SideReport.from_json(json.loads(server_out.read_text()))
    client = SideReport.from_json(json.loads(client_out.read_text()))
    assert dict(client.sent) == {f: 25 for f in range(4)}
    for f in range(4):
        assert [n for n, _ in server.received[f]] == list(range(1, 26))
        assert [n for n, _ in client.received[f]] == list(range(1, 26))
    assert dict(server.sent) == dict(client.sent)
    # the sender timed every round trip (packet n to the n-th reply), the sink none
    assert {f: len(v) for f, v in client.rtt.items()} == {f: 25 for f in range(4)}
    assert all(0 < ms < 10_000 and t > 1e9 for v in client.rtt.values() for t, ms in v)
    assert not server.rtt


@pytest.mark.unit
def test_a_sink_without_idle_deadline_serves_until_terminated(tmp_path: Path) -> None:
    """`--idle 0` (what `make run` uses: a switch outage may last longer than any deadline): the
    sink answers a second sender that comes after the first one ended, and SIGTERM makes it write
    its report of both."""
    port = free_port()
    server_out = tmp_path / "server.json"
    sink = subprocess.Popen(
        [sys.executable, "-m", "topo.traffic", "sink", "--listen", f"127.0.0.1:{port}",
         "--idle", "0", "--out", str(server_out)]
    )
    try:
        wait_for(lambda: f":{port} " in subprocess.run(["ss", "-uln"], capture_output=True,
                                                        text=True).stdout,
                 timeout=10, what="sink bound")
        for round_ in (1, 2):
            out = tmp_path / f"client{round_}.json"
            subprocess.run(
                [sys.executable, "-m", "topo.traffic", "send", "--dst", f"127.0.0.1:{port}",
                 "--flows", "2", "--packets", "5", "--rate", "0", "--wait", "10", "--out",
                 str(out)], check=True, timeout=60,
            )
            client = SideReport.from_json(json.loads(out.read_text()))
            assert {f: len(v) for f, v in client.received.items()} == {0: 5, 1: 5}, round_
        assert sink.poll() is None
        sink.terminate()
        sink.wait(timeout=30)
    finally:
        stop_process(sink)
    server = SideReport.from_json(json.loads(server_out.read_text()))
    assert {f: len(v) for f, v in server.received.items()} == {0: 10, 1: 10}


@pytest.mark.unit
def test_sender_uses_the_given_source_port_for_each_flow(tmp_path: Path) -> None:
    import socket

    from topo.traffic import run_sender

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.bind(("127.0.0.1", 0))
        server.settimeout(5)
        sports = [free_port(), free_port()]
        while sports[1] == sports[0]:
            sports[1] = free_port()
        run_sender(server.getsockname(), 2, 1, 0.0, 64, 0.0, tmp_path / "c.json", sports)
        peers = sorted(server.recvfrom(2048)[1][1] for _ in range(2))
    assert peers == sorted(sports)


@pytest.mark.unit
def test_datagrams_the_kernel_drops_at_a_full_socket_are_counted() -> None:
    """SO_RXQ_OVFL: a receiver that falls behind sees how many datagrams its socket dropped."""
    import socket

    from topo.traffic import open_for_receiving, receive

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        open_for_receiving(rx)
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # tiny: most will not fit
        rx.bind(("127.0.0.1", 0))
        for i in range(200):
            tx.sendto(i.to_bytes(4, "big") * 64, rx.getsockname())
        rx.setblocking(False)
        received, dropped = 0, 0

        def drain() -> None:
            nonlocal received, dropped
            while True:
                try:
                    _payload, _peer, count = receive(rx)
                except BlockingIOError:
                    return
                received += 1
                dropped = max(dropped, count or 0)  # given (non-zero) once drops began

        drain()
        tx.sendto(b"after", rx.getsockname())  # queued after the drops: it carries their count
        drain()
        assert dropped > 0 and received - 1 + dropped == 200
