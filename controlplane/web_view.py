"""The live web view's routes on the controller's HTTP API (read-only).

    GET /                  the page (controlplane/web/index.html); also GET /ui
    GET /ui/{file}         its script and style sheet (only the files shipped in controlplane/web/)
    GET /events?after=ID   the live feed: server-sent events (controlplane/live_feed.py); `after`
                           (or the `Last-Event-ID` an EventSource sends when it reconnects) is the
                           last timeline event the reader has; 503 when `MAX_CLIENTS` readers are on
    GET /timeline?after=ID&limit=N   the timeline's events as JSON (controlplane/timeline.py)
    GET /events/stats      readers connected, refused, dropped

Every route is a GET: the page only reads (the operator's commands stay with `nfc` and the API's
guarded POSTs). The page and its files load nothing from elsewhere: a Content-Security-Policy
allows this server only, and no other site may frame it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from controlplane.live_feed import LiveFeed
from controlplane.timeline import Timeline

if TYPE_CHECKING:
    from controlplane.controller_view import ControllerView

WEB_DIR = Path(__file__).resolve().parent / "web"
WEB_FILES = {"app.js": "text/javascript", "style.css": "text/css"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
       "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
           "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "Cache-Control": "no-cache"}
FEED_KEY: web.AppKey[LiveFeed] = web.AppKey("live_feed", LiveFeed)
MAX_TIMELINE = 500


def _after(request: web.Request) -> int:
    raw = request.query.get("after") or request.headers.get("Last-Event-ID") or "0"
    try:
        return max(0, int(raw))
    except ValueError:
        raise web.HTTPBadRequest(text=f"'after' must be an integer, got {raw!r}") from None


def add_web_view(app: web.Application, view: ControllerView) -> LiveFeed:
    """Add the page, its files, the live feed and the timeline to `app`; returns the feed."""
    timeline = getattr(view, "timeline", None)
    timeline = timeline if isinstance(timeline, Timeline) else None
    feed = LiveFeed(view, timeline)
    app[FEED_KEY] = feed

    async def page(_: web.Request) -> web.FileResponse:
        return web.FileResponse(WEB_DIR / "index.html", headers={
            **HEADERS, "Content-Type": "text/html; charset=utf-8"})

    async def asset(request: web.Request) -> web.FileResponse:
        name = request.match_info["name"]
        if name not in WEB_FILES:  # only what is shipped: no path reaches another file
            raise web.HTTPNotFound(text=f"no file {name!r} in the web view")
        return web.FileResponse(WEB_DIR / name, headers={
            **HEADERS, "Content-Type": f"{WEB_FILES[name]}; charset=utf-8"})

    async def events(request: web.Request) -> web.StreamResponse:
        after = _after(request)
        if not feed.admit():
            raise web.HTTPServiceUnavailable(
                text=f"{feed.max_clients} live views are connected already: try again later",
                headers={"Retry-After": "5"})
        try:
            resp = web.StreamResponse(headers={
                "Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no", "X-Content-Type-Options": "nosniff"})
            await resp.prepare(request)
            await feed.stream(resp, after)
        finally:
            feed.leave()
        return resp

    async def timeline_rows(request: web.Request) -> web.Response:
        after = _after(request)
        raw = request.query.get("limit", str(MAX_TIMELINE))
        if not raw.isdigit():
            raise web.HTTPBadRequest(text=f"'limit' must be a non-negative integer, got {raw!r}")
        rows = timeline.since(after, min(int(raw), MAX_TIMELINE)) if timeline else []
        return web.json_response([e.to_json() for e in rows])

    async def stats(_: web.Request) -> web.Response:
        return web.json_response(feed.stats())

    async def shutdown(_: web.Application) -> None:
        await feed.close()

    app.router.add_get("/", page)
    app.router.add_get("/ui", page)
    app.router.add_get("/ui/", page)
    app.router.add_get("/ui/{name}", asset)
    # (no HEAD: a stream whose body is never sent would hold a reader's place while it lasts)
    app.router.add_get("/events", events, allow_head=False)
    app.router.add_get("/events/stats", stats)
    app.router.add_get("/timeline", timeline_rows)
    app.on_shutdown.append(shutdown)
    return feed
