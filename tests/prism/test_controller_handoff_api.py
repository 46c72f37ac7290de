"""Prism's hand-off API on nfcluster's own controller (controlplane.handoff_api): registered on
the controller's HTTP application (its request guard applies), the hosts' routes written once
the session is primary, steps refused until then (503), concurrent requests batched into fewer
Writes through the session's write, every step written, malformed and unknown hosts refused."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from finsy import P4Schema

from controlplane.api import make_app
from controlplane.handoff_api import HandOffService
from prism.switch_entries import Endpoint, HandOffStep
from tests.controlplane.test_api_guard import FakeView
from tests.prism.test_switch_entries import BACKEND, FRONTEND, HOSTS, schema  # noqa: F401

pytestmark = pytest.mark.unit
JSON = {"Content-Type": "application/json"}


class FakeSession:
    """The controller's SwitchSession as the service sees it; Writes recorded, each slow."""

    def __init__(self, p4schema: P4Schema) -> None:
        self.schema = p4schema
        self.primary = asyncio.Event()
        self.writes: list[list[Any]] = []

    async def wait_primary(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self.primary.wait(), timeout)

    async def write(self, updates: list[Any]) -> None:
        self.writes.append(updates)
        await asyncio.sleep(0.02)  # a switch round trip: requests meanwhile batch up


def begin(port: int) -> dict[str, Any]:
    return HandOffStep("begin", Endpoint("10.0.1.1", port), FRONTEND, BACKEND).as_json()


def test_handoff_api_on_the_controllers_app(schema: P4Schema) -> None:  # noqa: F811
    async def body() -> None:
        session = FakeSession(schema)
        service = HandOffService(session, session.write, HOSTS)
        app = make_app(FakeView(), extra_routes=[service.register])
        started = asyncio.create_task(service.start())
        async with TestClient(TestServer(app)) as client:
            # the controller's guard: a state change without a JSON body or marker is refused
            resp = await client.post("/handoff", data="x", headers={"Content-Type": "text/plain"})
            assert resp.status == 415
            assert (await (await client.get("/handoff/status")).json())["ready"] is False
            session.primary.set()
            await started
            assert len(session.writes) == 1 and len(session.writes[0]) == len(HOSTS)  # routes
            answers = await asyncio.gather(*[
                client.post("/handoff", json={"steps": [begin(40000 + i)]}, headers=JSON)
                for i in range(20)])
            assert [r.status for r in answers] == [200] * 20
            status = await (await client.get("/handoff/status")).json()
            assert status["steps"] == 20 and status["failures"] == 0
            assert 1 <= status["writes"] < 20  # batched
            assert sum(len(w) for w in session.writes[1:]) == 2 * 20  # begin: two updates each
            resp = await client.post("/handoff", json={"steps": [{"step": "begin"}]})
            assert resp.status == 400
            bad = HandOffStep("begin", Endpoint("10.9.9.9", 1), FRONTEND, BACKEND).as_json()
            resp = await client.post("/handoff", json={"steps": [bad]})
            assert resp.status == 400

    asyncio.run(body())
