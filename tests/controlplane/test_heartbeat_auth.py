"""Authenticated UDP heartbeats (docs/security.md): a reply without the NF's key, from another
address, of another controller session or naming an unknown NF never answers a heartbeat, and
each is counted (`rejected`, per NF); the NF's echo ignores requests without its key."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pytest

from contract import heartbeat
from controlplane.liveness import UdpHeartbeats
from mgmt.pki import derive_heartbeat_key
from nf_host import liveness
from tests.support.procs import free_udp_pair

pytestmark = pytest.mark.unit

SECRET = bytes(range(32))
KEYS = {3: derive_heartbeat_key(SECRET, 3), 4: derive_heartbeat_key(SECRET, 4)}


def run(body: Any) -> None:
    asyncio.run(asyncio.wait_for(body(), 30))


async def _forger(hb: UdpHeartbeats, make: Any, stop: asyncio.Event) -> int:
    """Send a forged reply to every request `hb` sends (as a dead NF's impostor would), from a
    socket of its own, until `stop`; how many were sent."""
    assert hb.transport is not None
    target = hb.transport.get_extra_info("sockname")
    sent = 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        while not stop.is_set():
            for counter in range(1, 8):
                s.sendto(make(counter, hb.session), ("127.0.0.1", target[1]))
                sent += 1
            await asyncio.sleep(0.005)
    return sent


def test_forged_replies_do_not_keep_a_dead_nf_alive_and_are_counted() -> None:
    """NF 3 is dead (nothing listens on its port). Replies naming it arrive for every counter:
    without a tag, with NF 4's key, with the right key but from the wrong address, and from a
    recorded reply of another session. None makes the heartbeat succeed; each is counted."""
    forgeries = {
        "no tag": lambda c, sess: heartbeat.reply(c, 3, 0, 1000, None, sess),
        "another NF's key": lambda c, sess: heartbeat.reply(c, 3, 0, 1000, KEYS[4], sess),
        "right key, wrong sender": lambda c, sess: heartbeat.reply(c, 3, 0, 1000, KEYS[3], sess),
        "another session": lambda c, sess: heartbeat.reply(c, 3, 0, 1000, KEYS[3], sess ^ 1),
        "unknown NF": lambda c, sess: heartbeat.reply(c, 99, 0, 1000, KEYS[3], sess),
    }

    async def body() -> None:
        port = free_udp_pair()
        for what, make in forgeries.items():
            hb = UdpHeartbeats(KEYS.get, bind="127.0.0.1")
            await hb.start()
            stop = asyncio.Event()
            forger = asyncio.ensure_future(_forger(hb, make, stop))
            try:
                for counter in range(1, 8):
                    assert await hb.ping(3, "127.0.0.1", port, 1, counter, timeout=0.05) is None, what
            finally:
                stop.set()
                sent = await forger
                hb.close()
            assert sent > 0 and hb.rejected > 0, what
            assert hb.rejected + hb.stray == sent or hb.rejected > 0, what
            if what != "unknown NF":
                assert hb.rejected_by_nf.get(3, 0) == hb.rejected, what

    run(body)


def test_a_keyed_echo_answers_its_controller_and_ignores_untagged_requests() -> None:
    async def body() -> None:
        port = free_udp_pair()
        transport, echo = await liveness.serve("127.0.0.1", port, 3, 0, time.monotonic() - 2,
                                               KEYS[3])
        hb = UdpHeartbeats(KEYS.get, bind="127.0.0.1")
        try:
            uptime = await hb.ping(3, "127.0.0.1", port, 1, 1, timeout=2.0)
            assert uptime is not None and uptime >= 2000 and hb.rejected == 0
            # a request without the key (an attacker probing, or a controller without the
            # secret) is not answered
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.setblocking(False)
                for key in (None, KEYS[4]):
                    s.sendto(heartbeat.request(5, key, 1), ("127.0.0.1", port))
                deadline = time.monotonic() + 5
                while echo.ignored < 2 and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)  # (the echo runs on this loop)
                assert echo.ignored == 2 and echo.answered == 1
                with pytest.raises(BlockingIOError):
                    s.recv(128)  # nothing came back
        finally:
            hb.close()
            transport.close()

    run(body)


def test_a_controller_without_keys_accepts_only_replies_from_the_workers_address() -> None:
    """Plaintext (`tls: false`): no tags, but the sender's address is still checked."""
    async def body() -> None:
        port = free_udp_pair()
        transport, _echo = await liveness.serve("127.0.0.1", port, 3, 0, time.monotonic())
        hb = UdpHeartbeats()
        try:
            assert await hb.ping(3, "127.0.0.1", port, 1, 1, timeout=2.0) is not None
            transport.close()
            await hb.start()
            stop = asyncio.Event()
            forger = asyncio.ensure_future(
                _forger(hb, lambda c, sess: heartbeat.reply(c, 3, 0, 1, None, sess), stop))
            try:
                assert await hb.ping(3, "127.0.0.1", port, 1, 2, timeout=0.1) is None
            finally:
                stop.set()
                await forger
            assert hb.rejected > 0
        finally:
            hb.close()

    run(body)
