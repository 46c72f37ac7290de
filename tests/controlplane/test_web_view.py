"""The live web view's server side (controlplane/web_view.py, live_feed.py, timeline.py), with
aiohttp's test client against a controller connected to nothing: the page and its files are
served with a CSP and nothing else is; the server-sent events carry the NFs, the slot map and the
timeline, a new event reaches a reader at once, a reconnecting reader gets only what it missed;
readers are bounded (503), a reader that does not read is dropped; the feed only reads.
The browser test with a running system is tests/topo/test_web_view_browser.py.
Run one case: `.venv/bin/python -m pytest tests/controlplane/test_web_view.py -k bounded`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any, cast

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from controlplane.api import make_app
from controlplane.controller import Controller
from controlplane.failover import FailoverResult
from controlplane.live_feed import LiveFeed, protection, slot_map, snapshot
from controlplane.migration import MoveResult
from controlplane.nf_state import NfEvent
from controlplane.timeline import Timeline
from controlplane.web_view import FEED_KEY
from tests.controlplane.test_northbound import make_controller

pytestmark = pytest.mark.unit

Client = TestClient[web.Request, web.Application]


def with_client(body: Callable[[Client, Controller], Awaitable[None]],
                tune: Callable[[LiveFeed], None] | None = None) -> None:
    async def main() -> None:
        ctl = make_controller()
        app = make_app(ctl)
        if tune is not None:
            tune(app[FEED_KEY])
        try:
            async with TestClient(TestServer(app)) as client:
                await body(client, ctl)
        finally:
            await ctl.close()

    asyncio.run(main())


async def read_events(resp: Any, want: Callable[[list[tuple[str, Any]]], bool],
                      timeout: float = 5.0) -> list[tuple[str, Any]]:
    """Parse the stream's events until `want(events)` holds (TimeoutError after `timeout`)."""
    events: list[tuple[str, Any]] = []
    name, data = "", []

    async def run() -> None:
        nonlocal name, data
        while not want(events):
            line = (await resp.content.readline()).decode().rstrip("\n")
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
            elif line == "" and name:
                events.append((name, json.loads("\n".join(data))))
                name, data = "", []

    await asyncio.wait_for(run(), timeout)
    return events


def test_the_page_and_its_files_are_served_with_a_csp_and_nothing_else_is() -> None:
    async def body(client: Client, _: Controller) -> None:
        for path in ("/", "/ui", "/ui/"):
            resp = await client.get(path)
            assert resp.status == 200 and resp.content_type == "text/html"
            assert "script-src 'self'" in resp.headers["Content-Security-Policy"]
            assert resp.headers["X-Frame-Options"] == "DENY"
            page = await resp.text()
            assert '<script src="/ui/app.js"' in page and "http" not in page.split("<body>")[0]
        js = await client.get("/ui/app.js")
        assert js.status == 200 and js.content_type == "text/javascript"
        assert "new EventSource(\"/events\")" in await js.text()
        assert (await client.get("/ui/style.css")).content_type == "text/css"
        for bad in ("/ui/index.htm", "/ui/..%2fapi.py", "/ui/web_view.py"):
            assert (await client.get(bad)).status == 404, bad
        # the live view only reads: no route of it takes anything but GET (and a POST without
        # the API's marker is refused before any route, as every other)
        for path in ("/", "/events", "/timeline", "/ui/app.js"):
            assert (await client.post(path, headers={"X-Nfc-Request": "1"})).status == 405
        assert (await client.post("/events", skip_auto_headers=["Content-Type"])).status == 403
        assert (await client.head("/events")).status == 405  # (it would hold a reader's place)

    with_client(body)


def test_the_feed_carries_nfs_slots_and_the_timeline_and_new_events_at_once() -> None:
    async def body(client: Client, ctl: Controller) -> None:
        ctl.record_move(MoveResult(7, 1, 2, 2, True, True, bytes_shipped=640, seconds=0.004))
        resp = await client.get("/events")
        assert resp.status == 200 and resp.content_type == "text/event-stream"
        got = await read_events(resp, lambda ev: {n for n, _ in ev} >= {"snapshot", "slots",
                                                                         "timeline"})
        snap = next(d for n, d in got if n == "snapshot")
        assert [nf["id"] for nf in snap["nfs"]] == [nf["id"] for nf in ctl.nf_rows()]
        one = next(nf for nf in snap["nfs"] if nf["id"] == 1)
        assert one["primary"] and one["backup"] == 5 and one["slots_owned"] == 1024
        five = next(nf for nf in snap["nfs"] if nf["id"] == 5)
        assert five["backup_of"] == 1 and "primary" not in five
        slots = next(d for n, d in got if n == "slots")
        assert len(slots["stages"][0]["owners"]) == 4096
        assert slots["stages"][0]["owners"] == [ctl.slot_map.owner(s) for s in range(4096)]
        [move] = next(d for n, d in got if n == "timeline")
        assert move["kind"] == "move" and "slot 7 NF 1 -> NF 2: moved" in move["text"]
        # a fail-over recorded now reaches the reader at once (not at the next period)
        t0 = time.monotonic()
        ctl.registry.nfs[1].alive = False
        ctl.record_failover(FailoverResult(dead=1, promoted=5, new_backup=9, slots=1024,
                                           seconds=0.05, at=time.time()))
        got = await read_events(resp, lambda ev: any(n == "timeline" for n, _ in ev))
        assert time.monotonic() - t0 < 0.5
        [fo] = next(d for n, d in got if n == "timeline")
        assert fo["kind"] == "failover" and fo["text"].startswith("fail-over: NF 1 -> NF 5")
        resp.close()

    with_client(body)


def test_a_reconnecting_reader_gets_only_what_it_missed_and_timeline_json() -> None:
    async def body(client: Client, ctl: Controller) -> None:
        for nf in (3, 4, 5):
            ctl.timeline.nf_event(NfEvent("down", nf, misses=3, reason="closed"))
        first = ctl.timeline.events[0].id
        resp = await client.get("/events", headers={"Last-Event-ID": str(first)})
        got = await read_events(resp, lambda ev: any(n == "timeline" for n, _ in ev))
        assert [e["data"]["nf"] for e in next(d for n, d in got if n == "timeline")] == [4, 5]
        resp.close()
        rows = await (await client.get(f"/timeline?after={first}&limit=1")).json()
        assert [r["text"] for r in rows] == ["NF 5 declared down (closed)"]
        assert (await client.get("/timeline?after=x")).status == 400
        assert (await client.get("/timeline?limit=0")).status == 200

    with_client(body)


def test_readers_are_bounded_and_one_that_does_not_read_is_dropped() -> None:
    def tune(feed: LiveFeed) -> None:
        feed.max_clients = 2

    async def body(client: Client, _: Controller) -> None:
        a, b = await client.get("/events"), await client.get("/events")
        assert a.status == b.status == 200
        refused = await client.get("/events")
        assert refused.status == 503 and refused.headers["Retry-After"] == "5"
        stats = await (await client.get("/events/stats")).json()
        assert stats == {"clients": 2, "max_clients": 2, "refused": 1, "dropped": 0}
        a.close()  # gone: its place is free once a write finds it gone (at the next change)
        assert client.app is not None
        feed = client.app[FEED_KEY]
        assert feed.timeline is not None
        feed.timeline.add("move", "poke")
        deadline = time.monotonic() + 5
        while feed.clients > 1:
            assert time.monotonic() < deadline, feed.stats()
            await asyncio.sleep(0.02)
        assert (await client.get("/events")).status == 200
        b.close()

    with_client(body, tune)


def test_a_reader_whose_writes_stall_is_dropped_without_a_queue() -> None:
    class Stalled:
        writes = 0

        async def write(self, _: bytes) -> None:
            self.writes += 1
            await asyncio.Event().wait()  # the peer never reads: the socket buffer stays full

    async def main() -> None:
        ctl = make_controller()
        feed = LiveFeed(ctl, ctl.timeline, write_timeout=0.1)
        assert feed.admit()
        reader = Stalled()
        await asyncio.wait_for(feed.stream(reader, 0), 2)  # type: ignore[arg-type]
        assert reader.writes == 1 and feed.dropped == 1
        feed.leave()
        await feed.close()
        await ctl.close()

    asyncio.run(main())


def test_protection_and_the_timeline_bound() -> None:
    rows = [{"id": i, "alive": i != 6} for i in range(1, 8)]
    prot = protection(rows, {"1": 5, "2": 6, "3": None, "4": 7}, [4], {"5": {"primary": 1}})
    assert prot[1]["protection"] == "armed" and prot[2]["protection"] == "unprotected"
    assert prot[3]["protection"] == "unprotected" and prot[4]["protection"] == "orphan"
    assert prot[5] == {"backup_of": 1} and 9 not in prot
    t = Timeline(size=3)
    for i in range(5):
        t.add("move", str(i))
    assert [e.text for e in t.since(0)] == ["2", "3", "4"] and t.last_id == 5
    assert [e.id for e in t.since(4)] == [5] and t.since(0, 0) == []
    # a real controller's snapshot: every NF, drops by place, before anything is connected
    ctl = make_controller()
    ctl.counters.switch_drops = {"nf_output_drops/duplicate": 3, "unowned_drops/all": 0}
    snap = snapshot(ctl)
    assert snap["drops"]["switch"] == {"nf_output_drops/duplicate": 3}
    assert snap["controller"]["nfs"]["total"] == len(snap["nfs"]) == 10
    # a view without the controller's cheaper reads gives the same
    plain = SimpleNamespace(status=ctl.status, nf_rows=ctl.nf_rows, lb_view=ctl.lb_view,
                            slot_rows=ctl.slot_rows)
    assert snapshot(cast(Any, plain)) == snap
    assert slot_map(cast(Any, plain)) == slot_map(ctl)
    assert snap["controller"]["failovers"] == 0
    roles = {nf["id"]: nf["role"] for nf in snap["nfs"]}
    assert roles == {1: "primary", 2: "primary", 3: "primary", 4: "primary", 5: "backup",
                     6: "backup", 7: "backup", 8: "backup", 9: "spare", 10: "spare"}
    # after NF 1's fail-over (its backup 5 the primary, spare 9 its backup), before NF 1 is
    # configured again: the roles held now, not the ones last configured
    ctl.pairs.pop(1)
    ctl.pairs[5] = 9
    roles = {nf["id"]: nf["role"] for nf in snapshot(ctl)["nfs"]}
    assert (roles[1], roles[5], roles[9]) == ("idle", "primary", "backup")
    asyncio.run(ctl.close())
