"""The controller's HTTP API served on a free loopback port for a test, and stopped after it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from controlplane.api import serve
from tests.support.procs import free_port


@asynccontextmanager
async def served_api(view: Any) -> AsyncIterator[str]:
    """`async with served_api(controller) as base:` the API's base URL."""
    port = free_port()
    runner = await serve(view, "127.0.0.1", port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
