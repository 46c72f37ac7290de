"""The northbound HTTP API (aiohttp): JSON views of the controller and Prometheus metrics.

    GET /status            switch session, slot map summary, NF and flow counts
    GET /nfs               one row per NF: role, liveness, load, slots owned
    GET /slots?nf=ID&limit=N   one row per slot: owner, backup, epoch, switch packets/bytes
    GET /flows?limit=N     flows learned from digests
    GET /moves             every slot move so far (bytes shipped, delta or full, time, undone)
    POST /slots/{slot}/move?to=NF   migrate one slot to primary NF; answers the move's result
                           (200 moved, 409 failed: undone, or not (`undone` false: the adopter is
                           down or did not answer its fence), 400 a request that cannot start)
    POST /lb/scale-out?cluster=C   a spare becomes a primary (409: no spare)
    POST /nfs/{nf}/drain   scale-in: every slot of the primary moved away, it and its backup idle
    POST /nfs/{nf}/update  live update; the body is the NF's new parameters (a JSON object);
                           answers the report (200 updated, 409 refused: slots moved back)
    GET /lb/history?limit=N   the load balancer: knobs, last loads, its decisions (newest last)
    POST /lb/pause  /lb/resume   the (enabled) load balancer stops / starts taking rounds
    GET /metrics           Prometheus text format
    POST /handoff  GET /handoff/status   Prism's hand-off steps, with `--prism-hosts`
                           (controlplane/handoff_api.py)
    GET /  /events  /timeline   the live web view: the page, its server-sent events, the
                           timeline of NF events, fail-overs, moves and balancer decisions
                           (controlplane/web_view.py; read-only)

The server binds to loopback unless configured otherwise (`api.listen`).

Every state-changing request (any method but GET/HEAD/OPTIONS, on every route, present or future)
goes through one middleware, `request_guard`: it must be a request a browser cannot send
cross-site without a CORS preflight (which this server never grants): the header
`X-Nfc-Request` (any value), or a JSON body (`Content-Type: application/json`). A form's content
type is answered 415, no marker at all 403. With a token configured (`api.token`, or the
environment variable `NFC_API_TOKEN`, which wins), it also needs `Authorization: Bearer <token>`
(401 otherwise). Reads stay open (the server listens on loopback by default).
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Callable, Sequence

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from contract.nf_params import parse_params
from controlplane.controller_view import ControllerView
from controlplane.metrics import CONTENT_TYPE_LATEST
from controlplane.migration import MoveError, NotPrimaryError
from controlplane.spare_pool import ScaleError
from controlplane.web_view import add_web_view

MAX_ROWS = 65536
TOKEN_ENV = "NFC_API_TOKEN"
REQUEST_HEADER = "X-Nfc-Request"
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


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


def _nf_arg(request: web.Request) -> int:
    """The `{nf}` of the path, or 400 naming what is wrong."""
    try:
        return int(request.match_info["nf"])
    except ValueError:
        raise web.HTTPBadRequest(text="the NF id must be an integer") from None


def api_token(configured: str | None) -> str | None:
    """The bearer token state-changing requests need: `NFC_API_TOKEN` if set, else `api.token`."""
    return os.environ.get(TOKEN_ENV) or configured or None


def request_guard(token: str | None) -> Middleware:
    """The middleware refusing state-changing requests that a cross-site form post could make
    (see the module docstring), and, with a token, those without it."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method in READ_METHODS:
            return await handler(request)
        if REQUEST_HEADER not in request.headers and request.content_type != "application/json":
            what = (f"{request.method} {request.path} changes state: send the header "
                    f"{REQUEST_HEADER}: 1 or a JSON body (Content-Type: application/json); "
                    "requests a cross-site form post can make are refused")
            if "Content-Type" in request.headers:
                raise web.HTTPUnsupportedMediaType(
                    text=f"{what} (got Content-Type {request.headers['Content-Type']!r})")
            raise web.HTTPForbidden(text=what)
        if token is not None:
            scheme, _, given = request.headers.get("Authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip(), token):
                raise web.HTTPUnauthorized(
                    text=f"{request.method} {request.path} needs Authorization: Bearer <token> "
                         f"(the controller's api.token or {TOKEN_ENV})",
                    headers={"WWW-Authenticate": 'Bearer realm="nfc"'})
        return await handler(request)

    return guard


RouteAdder = Callable[[web.Application], None]


def make_app(view: ControllerView, token: str | None = None,
             extra_routes: Sequence[RouteAdder] = ()) -> web.Application:
    async def status(_: web.Request) -> web.Response:
        return web.json_response(view.status())

    async def nfs(request: web.Request) -> web.Response:
        if request.query.get("refresh") in ("1", "true"):  # each NF's load asked for now
            await view.refresh_nfs()
        return web.json_response(view.nf_rows())

    async def switch_ports(request: web.Request) -> web.Response:
        """The P4 program's packets in and out per switch port (port_rx, port_tx): the last
        counter round's, or read now with ?refresh=1 (503 when the switch does not answer)."""
        if request.query.get("refresh") in ("1", "true"):
            try:
                return web.json_response(await view.refresh_port_packets())
            except Exception as exc:  # the switch is away (restarting, not primary yet)
                return web.json_response({"error": f"counters not read: {exc}"}, status=503)
        return web.json_response(view.port_packets_view())

    async def slots(request: web.Request) -> web.Response:
        nf = _int_arg(request, "nf", None)
        limit = _int_arg(request, "limit", MAX_ROWS) or 0
        return web.json_response(view.slot_rows(nf)[: min(limit, MAX_ROWS)])

    async def flows(request: web.Request) -> web.Response:
        limit = _int_arg(request, "limit", MAX_ROWS) or 0
        return web.json_response(view.flow_rows()[: min(limit, MAX_ROWS)])

    async def moves(_: web.Request) -> web.Response:
        return web.json_response(view.move_rows())

    async def move(request: web.Request) -> web.Response:
        try:
            slot = int(request.match_info["slot"])
        except ValueError:
            raise web.HTTPBadRequest(text="the slot must be an integer") from None
        to = _int_arg(request, "to", None)
        if to is None:
            raise web.HTTPBadRequest(text="query parameter 'to' (the target NF id) is required")
        try:
            [result] = await view.migrate([slot], to)
        except NotPrimaryError as exc:
            raise web.HTTPServiceUnavailable(text=str(exc)) from None
        except MoveError as exc:
            raise web.HTTPBadRequest(text=str(exc)) from None
        return web.json_response(result.to_json(), status=200 if result.ok else 409)

    async def scale_out(request: web.Request) -> web.Response:
        try:
            return web.json_response(await view.scale_out(request.query.get("cluster")))
        except ScaleError as exc:
            raise web.HTTPConflict(text=str(exc)) from None

    async def drain(request: web.Request) -> web.Response:
        nf = _nf_arg(request)
        try:
            return web.json_response(await view.drain(nf))
        except ScaleError as exc:
            raise web.HTTPConflict(text=str(exc)) from None

    async def update(request: web.Request) -> web.Response:
        nf = _nf_arg(request)
        try:
            params = parse_params(await request.text() or "{}", "the body (the NF's parameters)")
        except ValueError as exc:
            raise web.HTTPBadRequest(text=str(exc)) from None
        try:
            report = await view.update_nf(nf, params)
        except ScaleError as exc:
            raise web.HTTPConflict(text=str(exc)) from None
        return web.json_response(report, status=200 if report["ok"] else 409)

    async def lb_history(request: web.Request) -> web.Response:
        return web.json_response(view.lb_view(_int_arg(request, "limit", None)))

    async def lb_pause(_: web.Request) -> web.Response:
        return web.json_response(view.lb_pause(True))

    async def lb_resume(_: web.Request) -> web.Response:
        return web.json_response(view.lb_pause(False))

    async def metrics(_: web.Request) -> web.Response:
        resp = web.Response(body=view.metrics.render())
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp

    app = web.Application(middlewares=[request_guard(token)])
    app.router.add_get("/status", status)
    app.router.add_get("/nfs", nfs)
    app.router.add_get("/switch/ports", switch_ports)
    app.router.add_get("/slots", slots)
    app.router.add_get("/flows", flows)
    app.router.add_get("/moves", moves)
    app.router.add_post("/slots/{slot}/move", move)
    app.router.add_get("/lb/history", lb_history)
    app.router.add_post("/lb/scale-out", scale_out)
    app.router.add_post("/lb/pause", lb_pause)
    app.router.add_post("/lb/resume", lb_resume)
    app.router.add_post("/nfs/{nf}/drain", drain)
    app.router.add_post("/nfs/{nf}/update", update)
    app.router.add_get("/metrics", metrics)
    add_web_view(app, view)
    for add in extra_routes:  # e.g. controlplane.handoff_api (nfc-controller run --prism-hosts)
        add(app)
    return app


async def serve(view: ControllerView, host: str, port: int, token: str | None = None,
                extra_routes: Sequence[RouteAdder] = ()) -> web.AppRunner:
    """Start the API on host:port (state-changing requests need `token` if given); call
    `await runner.cleanup()` to stop it."""
    runner = web.AppRunner(make_app(view, token, extra_routes), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner
