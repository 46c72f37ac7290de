"""The controller's HTTP API as the launcher and the fault harness call it: JSON read by GET,
state-changing POSTs with the request guard's header (and the API token when one is set)."""

from __future__ import annotations

import contextlib
import json
import os
import urllib.error
import urllib.request
from typing import Any


def http_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=2) as resp:
        return json.loads(resp.read())


def http_post(url: str, timeout: float = 30.0) -> tuple[int, Any]:
    # what the API's request guard requires of a state-changing request (docs/controller.md)
    headers = {"X-Nfc-Request": "1", "Content-Type": "application/json"}
    if os.environ.get("NFC_API_TOKEN"):
        headers["Authorization"] = f"Bearer {os.environ['NFC_API_TOKEN']}"
    req = urllib.request.Request(url, data=b"{}", method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        body = exc.read().decode(errors="replace")
        with contextlib.suppress(ValueError):
            return exc.code, json.loads(body)
        return exc.code, body


def api_status(api: str) -> dict[str, Any] | None:
    """A controller's /status, or None while it does not answer (killed, starting)."""
    try:
        data: dict[str, Any] = http_json(f"{api}/status")
        return data
    except OSError:
        return None
