"""The HTTP API's request guard: state-changing requests a cross-site form post could make are
refused (403/415), a configured token is required (401), reads stay open, every route (present or
added later) is covered; `nfc` sends what the guard requires and `--watch` never repeats a
state-changing command."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from rich.console import Console

from controlplane import cli
from controlplane.api import TOKEN_ENV, api_token, make_app, serve
from controlplane.metrics import ControllerMetrics
from controlplane.migration import MoveResult
from tests.support.procs import free_port

pytestmark = pytest.mark.unit


class FakeView:
    def __init__(self) -> None:
        self.metrics = ControllerMetrics()
        self.moves: list[tuple[list[int], int]] = []
        self.paused: list[bool] = []

    def status(self) -> dict[str, Any]:
        return {"ok": True}

    def nf_rows(self) -> list[dict[str, Any]]:
        return []

    async def refresh_nfs(self) -> None:
        self.refreshed = getattr(self, "refreshed", 0) + 1

    def port_packets_view(self) -> dict[str, Any]:
        return {"read_at": None, "ports": {}}

    async def refresh_port_packets(self) -> dict[str, Any]:
        return {"read_at": 1.0, "ports": {"1": {"rx": 2}}}

    def slot_rows(self, nf: int | None = None) -> list[dict[str, Any]]:
        return []

    def flow_rows(self) -> list[dict[str, Any]]:
        return []

    def move_rows(self) -> list[dict[str, Any]]:
        return [m.to_json() for m in self.results]

    def lb_view(self, limit: int | None = None) -> dict[str, Any]:
        return {"enabled": False, "history": []}

    def lb_pause(self, paused: bool) -> dict[str, Any]:
        self.paused.append(paused)
        return {"enabled": True, "paused": paused}

    async def scale_out(self, cluster: str | None) -> dict[str, Any]:
        return {"nf": 9, "cluster": cluster}

    async def drain(self, nf: int) -> dict[str, Any]:
        return {"nf": nf}

    async def update_nf(self, nf: int, params: dict[str, Any]) -> dict[str, Any]:
        return {"nf": nf, "params": params, "ok": True}

    @property
    def results(self) -> list[MoveResult]:
        return [MoveResult(s[0], 1, to, 2, True, True) for s, to in self.moves]

    async def migrate(self, slots: list[int], to_nf: int) -> list[MoveResult]:
        self.moves.append((slots, to_nf))
        return [MoveResult(slots[0], 1, to_nf, 2, True, True)]


Body = Callable[[TestClient[web.Request, web.Application], FakeView], Awaitable[None]]


def with_client(body: Body, token: str | None = None,
                extra: Callable[[web.Application], None] | None = None) -> None:
    async def main() -> None:
        view = FakeView()
        app = make_app(view, token)
        if extra is not None:
            extra(app)
        async with TestClient(TestServer(app)) as client:
            await body(client, view)

    asyncio.run(main())


MOVE = "/slots/7/move?to=2"


def test_cross_site_form_posts_are_refused_and_nothing_moves() -> None:
    async def body(client: TestClient[web.Request, web.Application], view: FakeView) -> None:
        # the three content types an HTML form can send, and a bare POST
        for ctype in ("application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                      "text/plain"):
            resp = await client.post(MOVE, data=b"a=b", headers={"Content-Type": ctype})
            assert resp.status == 415, ctype
            assert "X-Nfc-Request" in await resp.text()
        resp = await client.post(MOVE, skip_auto_headers=["Content-Type"])
        assert resp.status == 403 and "cross-site" in await resp.text()
        assert view.moves == []
        # a request a form cannot make: the custom header, or a JSON body
        resp = await client.post(MOVE, headers={"X-Nfc-Request": "1"})
        assert resp.status == 200 and (await resp.json())["ok"]
        resp = await client.post(MOVE, json={})
        assert resp.status == 200
        assert view.moves == [([7], 2), ([7], 2)]
        assert (await client.get("/moves")).status == 200

    with_client(body)


def test_a_configured_token_is_required_for_changes_not_for_reads() -> None:
    async def body(client: TestClient[web.Request, web.Application], view: FakeView) -> None:
        marker = {"X-Nfc-Request": "1"}
        resp = await client.post(MOVE, headers=marker)
        assert resp.status == 401 and resp.headers["WWW-Authenticate"].startswith("Bearer")
        assert TOKEN_ENV in await resp.text()
        resp = await client.post(MOVE, headers={**marker, "Authorization": "Bearer wrong"})
        assert resp.status == 401
        assert view.moves == []
        resp = await client.post(MOVE, headers={**marker, "Authorization": "Bearer s3cret"})
        assert resp.status == 200 and view.moves == [([7], 2)]
        assert (await client.get("/status")).status == 200

    with_client(body, token="s3cret")


def test_every_route_added_later_is_guarded_too() -> None:
    async def handler(_: web.Request) -> web.Response:
        raise AssertionError("the guard must refuse before any handler runs")

    def extra(app: web.Application) -> None:
        app.router.add_post("/lb/enable", handler)
        app.router.add_delete("/slots/{slot}", handler)

    async def body(client: TestClient[web.Request, web.Application], view: FakeView) -> None:
        assert (await client.post("/lb/enable", data=b"x=1")).status == 415
        assert (await client.delete("/slots/3", skip_auto_headers=["Content-Type"])).status == 403

    with_client(body, extra=extra)


def test_token_from_the_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    assert api_token(None) is None and api_token("file") == "file"
    monkeypatch.setenv(TOKEN_ENV, "env")
    assert api_token("file") == "env"


def run_cli(argv: list[str]) -> tuple[int, str]:
    buf = io.StringIO()
    code = cli.main(argv, console=Console(file=buf, width=200), sleep=lambda _s: None)
    return code, buf.getvalue()


def test_nfc_sends_what_the_api_requires_and_watch_never_repeats_a_move(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "s3cret")

    async def main() -> None:
        view = FakeView()
        port = free_port()
        runner = await serve(view, "127.0.0.1", port, token="s3cret")
        base = f"http://127.0.0.1:{port}"
        try:
            code, _ = await asyncio.to_thread(run_cli, ["--api", base, "move", "7", "--to", "2"])
            assert code == 0 and view.moves == [([7], 2)]
            code, _ = await asyncio.to_thread(
                run_cli, ["--api", base, "--watch", "0.01", "move", "7", "--to", "2"])
            assert code == 2 and view.moves == [([7], 2)]  # refused before sending anything
            assert "--watch" in capsys.readouterr().err
            monkeypatch.setenv(TOKEN_ENV, "wrong")
            code, _ = await asyncio.to_thread(run_cli, ["--api", base, "move", "7", "--to", "2"])
            assert code == 2 and "401" in capsys.readouterr().err and len(view.moves) == 1
        finally:
            await runner.cleanup()

    asyncio.run(main())


def test_switch_ports_serves_the_last_read_or_a_fresh_one() -> None:
    async def body(client: TestClient[web.Request, web.Application], view: FakeView) -> None:
        assert await (await client.get("/switch/ports")).json() == {"read_at": None, "ports": {}}
        fresh = await (await client.get("/switch/ports?refresh=1")).json()
        assert fresh == {"read_at": 1.0, "ports": {"1": {"rx": 2}}}

    with_client(body)


def test_lb_pause_and_resume_are_guarded_state_changes() -> None:
    async def body(client: TestClient[web.Request, web.Application], view: FakeView) -> None:
        assert (await client.post("/lb/pause", data=b"x=1")).status == 415
        assert view.paused == []
        resp = await client.post("/lb/pause", headers={"X-Nfc-Request": "1"})
        assert resp.status == 200 and (await resp.json())["paused"] is True
        resp = await client.post("/lb/resume", headers={"X-Nfc-Request": "1"})
        assert resp.status == 200 and (await resp.json())["paused"] is False
        assert view.paused == [True, False]

    with_client(body)
