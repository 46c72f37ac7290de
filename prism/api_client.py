"""The frontend's and backends' client of the hand-off controller's HTTP API (prism.controller).

Blocking (the servers are thread-per-connection), one kept-alive HTTP connection per thread.
"""

from __future__ import annotations

import http.client
import json
import threading
from urllib.parse import urlsplit

from prism.switch_entries import Endpoint, HandOffStep


class HandOffApiError(RuntimeError):
    """The controller refused a batch of steps (its status and message)."""


class HandOffApi:
    def __init__(self, url: str, timeout: float = 10.0) -> None:
        parts = urlsplit(url)
        if not parts.hostname or not parts.port:
            raise ValueError(f"controller URL without host and port: {url}")
        self.host, self.port, self.timeout = parts.hostname, parts.port, timeout
        self._local = threading.local()

    def _conn(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            self._local.conn = conn
        return conn

    def steps(self, steps: list[HandOffStep]) -> float:
        """Apply the steps in one switch write; the write's duration in ms."""
        body = json.dumps({"steps": [s.as_json() for s in steps]})
        for attempt in (0, 1):  # a kept-alive connection the server closed: once more, anew
            conn = self._conn()
            try:
                conn.request("POST", "/handoff", body, {"Content-Type": "application/json"})
                resp = conn.getresponse()
                data = json.loads(resp.read())
                break
            except (ConnectionError, http.client.HTTPException):
                conn.close()
                self._local.conn = None
                if attempt:
                    raise
        if resp.status != 200:
            raise HandOffApiError(f"{resp.status}: {data.get('error')}")
        return float(data["write_ms"])

    def step(self, step: str, client: Endpoint, frontend: Endpoint, backend: Endpoint) -> float:
        return self.steps([HandOffStep(step, client, frontend, backend)])
