"""The frontend's and backends' client of the hand-off controller's HTTP API (prism.controller).

Blocking (the servers are thread-per-connection), over a pool of kept-alive HTTP connections
(threads come and go per client connection; a new TCP connection per step would cost a handshake).
"""

from __future__ import annotations

import http.client
import json
import queue
import socket
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
        self._pool: queue.SimpleQueue[http.client.HTTPConnection] = queue.SimpleQueue()

    def _conn(self) -> http.client.HTTPConnection:
        try:
            return self._pool.get_nowait()
        except queue.Empty:
            pass
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        conn.connect()
        assert conn.sock is not None
        # a small request answered at once: Nagle + the server's delayed ACK would add 40 ms
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def steps(self, steps: list[HandOffStep]) -> float:
        """Apply the steps in one switch write; the write's duration in ms."""
        body = json.dumps({"steps": [s.as_json() for s in steps]}).encode()
        for attempt in (0, 1):  # a kept-alive connection the server closed: once more, anew
            conn = self._conn()
            try:
                conn.request("POST", "/handoff", body, {"Content-Type": "application/json"})
                resp = conn.getresponse()
                data = json.loads(resp.read())
                self._pool.put(conn)
                break
            except (ConnectionError, http.client.HTTPException):
                conn.close()
                if attempt:
                    raise
        if resp.status != 200:
            raise HandOffApiError(f"{resp.status}: {data.get('error')}")
        return float(data["write_ms"])

    def step(self, step: str, client: Endpoint, frontend: Endpoint, backend: Endpoint,
             previous: Endpoint | None = None) -> float:
        return self.steps([HandOffStep(step, client, frontend, backend, previous)])
