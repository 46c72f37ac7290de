"""The northbound HTTP API (aiohttp): JSON views of the controller and Prometheus metrics.

    GET /status            switch session, slot map summary, NF and flow counts
    GET /nfs               one row per NF: role, liveness, load, slots owned
    GET /slots?nf=ID&limit=N   one row per slot: owner, backup, epoch, switch packets/bytes
    GET /flows?limit=N     flows learned from digests
    GET /metrics           Prometheus text format

The server binds to loopback unless configured otherwise (`api.listen`).
"""

from __future__ import annotations

from typing import Any, Protocol

from aiohttp import web

from controlplane.metrics import CONTENT_TYPE_LATEST, ControllerMetrics

MAX_ROWS = 65536


class ControllerView(Protocol):
    metrics: ControllerMetrics

    def status(self) -> dict[str, Any]: ...
    def nf_rows(self) -> list[dict[str, Any]]: ...
    def slot_rows(self, nf: int | None = None) -> list[dict[str, Any]]: ...
    def flow_rows(self) -> list[dict[str, Any]]: ...


def _int_arg(request: web.Request, name: str, default: int | None) -> int | None:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise web.HTTPBadRequest(text=f"query parameter {name!r} must be an integer, got {raw!r}") from None
    if value < 0:
        raise web.HTTPBadRequest(text=f"query parameter {name!r} must not be negative")
    return value


def make_app(view: ControllerView) -> web.Application:
    async def status(_: web.Request) -> web.Response:
        return web.json_response(view.status())

    async def nfs(_: web.Request) -> web.Response:
        return web.json_response(view.nf_rows())

    async def slots(request: web.Request) -> web.Response:
        nf = _int_arg(request, "nf", None)
        limit = _int_arg(request, "limit", MAX_ROWS) or 0
        return web.json_response(view.slot_rows(nf)[: min(limit, MAX_ROWS)])

    async def flows(request: web.Request) -> web.Response:
        limit = _int_arg(request, "limit", MAX_ROWS) or 0
        return web.json_response(view.flow_rows()[: min(limit, MAX_ROWS)])

    async def metrics(_: web.Request) -> web.Response:
        resp = web.Response(body=view.metrics.render())
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp

    app = web.Application()
    app.router.add_get("/status", status)
    app.router.add_get("/nfs", nfs)
    app.router.add_get("/slots", slots)
    app.router.add_get("/flows", flows)
    app.router.add_get("/metrics", metrics)
    return app


async def serve(view: ControllerView, host: str, port: int) -> web.AppRunner:
    """Start the API on host:port; call `await runner.cleanup()` to stop it."""
    runner = web.AppRunner(make_app(view), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner
