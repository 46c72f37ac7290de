"""Prism's hand-off API on nfcluster's own controller (docs/prism.md, "Controller API"): the
routes `POST /handoff` and `GET /handoff/status` on the controller's HTTP API (so its request
guard and token apply), every step written through the controller's P4Runtime session, batched
(prism.handoff_batcher) -- instead of prism.controller's session of its own, which could not
share the switch with nfcluster's (one primary per device).

The Prism hosts (address, MAC, switch port: `nfc-controller run --prism-hosts FILE`, the JSON
prism.testbed writes) must be edge ports of the controller's configuration (it owns port_role);
this service writes their `handoff_route` /32 entries when the session becomes primary, and
then the `handoff_conn` entries of each step. Neither table is among the controller's managed
(reconciled) tables, so its reconciliation leaves them alone.

    POST /handoff         {"steps": [{"step", "client", "frontend", "backend"}, ...]}: one Write
                          with the steps of every request meanwhile; 200 {"write_ms"}, 400
                          malformed or no Prism host, 409 refused by the switch, 503 not primary
    GET  /handoff/status  {"writes", "steps", "failures", "ready"}
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from aiohttp import web
from finsy import P4Schema
from finsy.p4client import P4ClientError

from prism.handoff_batcher import HandOffBatcher
from prism.handoff_http import handle_handoff
from prism.switch_entries import HandOffEntries, HostPort

LOG = logging.getLogger("controlplane.handoff_api")
NOT_PRIMARY_WAIT_S = 5.0


class Session(Protocol):
    """What the service needs of controlplane.switch_session.SwitchSession."""

    @property
    def schema(self) -> P4Schema: ...
    async def wait_primary(self, timeout: float | None = None) -> None: ...


class HandOffService:
    """`write`: the session's P4Runtime Write (`session.switch.write`)."""

    def __init__(self, session: Session, write: Callable[[list[Any]], Awaitable[None]],
                 hosts: dict[str, HostPort]) -> None:
        self.session = session
        self.write = write
        self.hosts = hosts
        self.batcher = HandOffBatcher(write)

    async def start(self) -> None:
        """Once primary: the hosts' routes (modified when a previous primary wrote them), then
        steps are accepted."""
        await self.session.wait_primary()
        entries = HandOffEntries(self.session.schema, self.hosts)
        routes = entries.routes()
        try:
            await self.write([+r for r in routes])
        except P4ClientError:
            await self.write([~r for r in routes])  # a previous primary wrote them: modify
        self.batcher.set_entries(entries)
        LOG.info("hand-off API ready: %d Prism hosts routed", len(self.hosts))

    def register(self, app: web.Application) -> None:
        """Add the routes to the controller's application."""
        app.router.add_post("/handoff", self._handoff)
        app.router.add_get("/handoff/status", self._status)

    async def _handoff(self, request: web.Request) -> web.Response:
        return await handle_handoff(request, self.batcher, NOT_PRIMARY_WAIT_S)

    async def _status(self, _: web.Request) -> web.Response:
        return web.json_response(self.batcher.status())
