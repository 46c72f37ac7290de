"""The hand-off API's one request handler (`POST /handoff`), served by nfcluster's controller
(`controlplane/handoff_api.py`) and by the testbed's own `prism-controller`
(`prism/controller.py`): the steps parsed, written in one batch, the outcome as JSON."""

from __future__ import annotations

import asyncio

from aiohttp import web
from finsy.p4client import P4ClientError

from prism.handoff_batcher import HandOffBatcher
from prism.switch_entries import HandOffStep


async def handle_handoff(request: web.Request, batcher: HandOffBatcher,
                         not_primary_wait: float | None = None) -> web.Response:
    """{"steps": [...]} -> 200 {"write_ms"}; 415 without JSON, 400 for a malformed step or an
    address that is no Prism host, 409 when the switch refused the write, 503 when the writer
    is not the switch's primary within `not_primary_wait` s (None: wait as long as it takes)."""
    if request.content_type != "application/json":
        return web.json_response({"error": "a JSON body is required"}, status=415)
    try:
        body = await request.json()
        steps = [HandOffStep.parse(s) for s in body["steps"]]
    except (ValueError, KeyError, TypeError) as exc:
        return web.json_response({"error": str(exc)}, status=400)
    try:
        write_ms = await asyncio.wait_for(
            batcher.apply(steps), None if batcher.ready.is_set() else not_primary_wait)
    except TimeoutError:
        return web.json_response({"error": "not primary"}, status=503)
    except ValueError as exc:  # an address that is no Prism host
        return web.json_response({"error": str(exc)}, status=400)
    except P4ClientError as exc:
        return web.json_response({"error": str(exc)}, status=409)
    return web.json_response({"write_ms": write_ms})
