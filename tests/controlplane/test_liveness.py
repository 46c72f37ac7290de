"""UDP heartbeats (controlplane/liveness.py against nf_host/liveness.py echoes on loopback): an NF
answers only when every worker answers, a silent worker makes it miss, the registry declares it
down after its misses and up again with a lower uptime as a restart, and a probe sent three times
survives a lost datagram."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from contract import heartbeat
from controlplane.config import parse_config
from controlplane.liveness import UdpHeartbeats, local_address_towards
from controlplane.nf_registry import NfRegistry
from controlplane.nf_state import NfEvent, NfLoad
from mgmt.pki import local_pki
from mgmt.tls import heartbeat_key_path
from nf_host import liveness
from tests.support.procs import free_port, free_udp_pair

pytestmark = pytest.mark.unit


def run(body: Any) -> None:
    asyncio.run(asyncio.wait_for(body(), 30))


def test_an_nf_answers_only_when_every_worker_answers() -> None:
    async def body() -> None:
        port = free_udp_pair()
        started = time.monotonic() - 5
        w0, _ = await liveness.serve("127.0.0.1", port, 7, 0, started)
        w1, echo1 = await liveness.serve("127.0.0.1", port + 1, 7, 1, started)
        hb = UdpHeartbeats()
        try:
            uptime = await hb.ping(7, "127.0.0.1", port, 2, 1, timeout=2.0)
            assert uptime is not None and uptime >= 5000 and echo1.answered == 1
            w1.close()  # worker 1 silent (stopped, wedged, gone)
            assert await hb.ping(7, "127.0.0.1", port, 2, 2, timeout=0.2) is None
            assert await hb.ping(7, "127.0.0.1", port, 1, 3, timeout=2.0) is not None
            # a reply to another NF id or counter, or garbage, is not an answer
            echo1.transport = None
            assert heartbeat.parse_reply(b"garbage") is None and heartbeat.parse_request(b"x") is None
        finally:
            hb.close()
            w0.close()

    run(body)


def test_the_registry_declares_a_silent_nf_down_then_up_and_sees_a_restart() -> None:
    async def body() -> None:
        port = free_udp_pair()
        cfg = parse_config({
            "switch": {"slot_bits": 4},
            "clusters": [{"name": "c1"}],
            "nfs": [{"id": 1, "name": "nf1", "node": "a", "cluster": "c1", "role": "primary",
                     "backup": 2, "port": 3, "mac": "02:00:00:00:01:01",
                     "mgmt": f"127.0.0.1:{free_port()}", "replication": f"127.0.0.1:{port}"},
                    {"id": 2, "name": "nf2", "node": "b", "cluster": "c1", "role": "backup",
                     "port": 4, "mac": "02:00:00:00:01:02", "mgmt": f"127.0.0.1:{free_port()}"}],
            "heartbeat": {"interval_ms": 50, "misses": 2, "timeout_ms": 50, "transport": "udp"},
            "security": {"pki_dir": str(local_pki())},
        })
        reg = NfRegistry(cfg)
        assert reg.detector.udp is not None
        await reg.detector.udp.start()  # bound to the management address (loopback here), not every one
        assert reg.detector.udp.address is not None and reg.detector.udp.address[0] == "127.0.0.1"
        key = heartbeat_key_path(local_pki(), 1).read_bytes()  # (what NF 1 holds)
        events: list[NfEvent] = []
        reg.add_listener(events.append)
        reg.nfs[1].load = NfLoad(workers=2)  # from its Status: two workers to hear from
        w0, _ = await liveness.serve("127.0.0.1", port, 1, 0, time.monotonic() - 60, key)
        w1, _ = await liveness.serve("127.0.0.1", port + 1, 1, 1, time.monotonic() - 60, key)
        try:
            assert await reg.detector.heartbeat(1) and (reg.nfs[1].uptime_ms or 0) >= 60_000
            w1.close()  # worker 1 silent: the NF misses even though worker 0 answers
            assert not await reg.detector.heartbeat(1)
            w0.close()
            assert not await reg.detector.heartbeat(1)
            assert [e.kind for e in events] == ["down"] and reg.nfs[1].declared_down
            assert events[0].since > 0
            assert not await reg.detector.probe_hang(1, 0.1)
            # a new process: its workers have just started
            w0, _ = await liveness.serve("127.0.0.1", port, 1, 0, time.monotonic(), key)
            w1, _ = await liveness.serve("127.0.0.1", port + 1, 1, 1, time.monotonic(), key)
            assert await reg.detector.heartbeat(1)
            assert events[-1] == NfEvent("up", 1, restarted=True)
            assert await reg.detector.probe_hang(1, 1.0)
        finally:
            w0.close()
            w1.close()
            await reg.close()

    run(body)


def test_a_probe_sends_again_so_one_lost_datagram_does_not_make_a_live_nf_dead() -> None:
    async def body() -> None:
        port = free_udp_pair()
        transport, echo = await liveness.serve("127.0.0.1", port, 4, 0, time.monotonic())
        real = echo.datagram_received
        dropped: list[bytes] = []

        def lose_the_first(data: bytes, addr: Any) -> None:
            if not dropped:
                dropped.append(data)  # the first request is lost on the way
                return
            real(data, addr)

        echo.datagram_received = lose_the_first  # type: ignore[method-assign]
        hb = UdpHeartbeats()
        try:
            assert await hb.ping(4, "127.0.0.1", port, 1, 9, timeout=0.6, sends=3) is not None
            assert len(dropped) == 1 and echo.answered == 1
        finally:
            hb.close()
            transport.close()

    run(body)


def test_the_heartbeat_socket_binds_the_address_that_routes_to_the_nfs_never_all() -> None:
    assert local_address_towards("127.0.0.1") == "127.0.0.1"

    async def body() -> None:
        hb, pinned = UdpHeartbeats(towards="127.0.0.1"), UdpHeartbeats(bind="127.0.0.1")
        try:
            await hb.start()
            await pinned.start()
            assert hb.address is not None and hb.address[0] == "127.0.0.1"
            assert pinned.address is not None and pinned.address[0] == "127.0.0.1"
        finally:
            hb.close()
            pinned.close()

    run(body)
