"""The hand-off's switch writes, by step, against the built P4Info, and the controller's API:
one P4Runtime Write per request however many steps it carries, malformed requests refused."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from finsy import P4Schema, P4TableEntry

from prism.controller import HandOffController, make_app
from prism.switch_entries import Endpoint, HandOffEntries, HandOffStep, HostPort

pytestmark = pytest.mark.unit
P4INFO = Path(__file__).resolve().parents[2] / "build" / "nfcluster.p4info.txtpb"
HOSTS = {a: HostPort(a, m, p) for a, m, p in (("10.0.1.1", "02:00:00:00:00:01", 1),
                                               ("10.0.2.1", "02:00:00:00:00:02", 2),
                                               ("10.0.3.1", "02:00:00:00:00:03", 3))}
CLIENT, FRONTEND, BACKEND = (Endpoint("10.0.1.1", 40000), Endpoint("10.0.2.1", 8080),
                             Endpoint("10.0.3.1", 9090))
INSERT, MODIFY, DELETE = 1, 2, 3


@pytest.fixture(scope="module")
def schema() -> P4Schema:
    if not P4INFO.exists():
        pytest.skip("no build/nfcluster.p4info.txtpb: run `make build`")
    return P4Schema(P4INFO)


def summary(entries: list[P4TableEntry]) -> list[tuple[int, str, dict[str, Any], dict[str, Any]]]:
    out = []
    for e in entries:
        action = e.action.name.split(".")[-1] if e.action else ""  # type: ignore[union-attr]
        args = dict(e.action.args) if e.action else {}  # type: ignore[union-attr]
        out.append((int(e._update_type), action, dict(e.match or {}), args))
    return out


def step(name: str) -> HandOffStep:
    return HandOffStep(name, CLIENT, FRONTEND, BACKEND)


FORWARD_KEY = {"src_addr": 0x0A000101, "dst_addr": 0x0A000201, "src_port": 40000, "dst_port": 8080}
RETURN_KEY = {"src_addr": 0x0A000301, "dst_addr": 0x0A000101, "src_port": 9090, "dst_port": 40000}


def test_each_step_writes_what_the_protocol_says(schema: P4Schema) -> None:
    e = HandOffEntries(schema, HOSTS)
    assert summary(e.updates(step("begin"))) == [
        (INSERT, "handoff_lock", FORWARD_KEY, {}),
        (INSERT, "handoff_to_client", RETURN_KEY,
         {"port": 1, "dst_mac": 0x020000000001, "src_addr": 0x0A000201, "src_port": 8080})]
    assert summary(e.updates(step("commit"))) == [
        (MODIFY, "handoff_to_backend", FORWARD_KEY,
         {"port": 3, "dst_mac": 0x020000000003, "dst_addr": 0x0A000301, "dst_port": 9090})]
    assert summary(e.updates(step("lock"))) == [(MODIFY, "handoff_lock", FORWARD_KEY, {})]
    assert summary(e.updates(step("release"))) == [(DELETE, "", FORWARD_KEY, {}),
                                                   (DELETE, "", RETURN_KEY, {})]


def test_handover_moves_only_the_return_entry(schema: P4Schema) -> None:
    """The direct hand-over: the old backend's return entry goes, the new one's comes, in one
    Write; the forward entry (locked by the old backend) is not touched."""
    hosts = {**HOSTS, "10.0.3.2": HostPort("10.0.3.2", "02:00:00:00:00:04", 4)}
    e = HandOffEntries(schema, hosts)
    new = Endpoint("10.0.3.2", 9090)
    s = HandOffStep("handover", CLIENT, FRONTEND, new, previous=BACKEND)
    assert HandOffStep.parse(s.as_json()) == s
    assert summary(e.updates(s)) == [
        (DELETE, "", RETURN_KEY, {}),
        (INSERT, "handoff_to_client", {**RETURN_KEY, "src_addr": 0x0A000302},
         {"port": 1, "dst_mac": 0x020000000001, "src_addr": 0x0A000201, "src_port": 8080})]
    with pytest.raises(ValueError, match="previous"):
        HandOffStep("handover", CLIENT, FRONTEND, new)


def test_unknown_host_and_step_are_refused(schema: P4Schema) -> None:
    e = HandOffEntries(schema, HOSTS)
    with pytest.raises(ValueError, match="not a Prism host"):
        e.updates(HandOffStep("commit", CLIENT, FRONTEND, Endpoint("10.9.9.9", 9090)))
    with pytest.raises(ValueError, match="unknown step"):
        HandOffStep.parse({**step("begin").as_json(), "step": "teleport"})


class RecordingSwitch:
    """Stands in for finsy's Switch: records each Write's updates."""

    def __init__(self) -> None:
        self.writes: list[list[Any]] = []

    async def write(self, updates: list[Any]) -> None:
        self.writes.append(updates)


def test_api_writes_a_batch_of_steps_in_one_write(schema: P4Schema) -> None:
    async def body() -> None:
        sw = RecordingSwitch()
        ctl = HandOffController(sw, HOSTS)  # type: ignore[arg-type]
        ctl.batcher.set_entries(HandOffEntries(schema, HOSTS))
        other = HandOffStep("begin", Endpoint("10.0.1.1", 40001), FRONTEND, BACKEND)
        async with TestClient(TestServer(make_app(ctl))) as client:
            resp = await client.post("/handoff", json={"steps": [step("begin").as_json(),
                                                                 other.as_json()]})
            assert resp.status == 200
            assert len(sw.writes) == 1 and len(sw.writes[0]) == 4
            resp = await client.post("/handoff", json={"steps": [{"step": "begin"}]})
            assert resp.status == 400
            resp = await client.post("/handoff", data="steps", headers={"Content-Type": "text/plain"})
            assert resp.status == 415
            status = await (await client.get("/status")).json()
        assert status == {"writes": 1, "steps": 2, "failures": 0, "ready": True}
        assert isinstance(make_app(ctl), web.Application)

    asyncio.run(body())
