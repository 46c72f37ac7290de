"""Starting and stopping real processes, and waiting on a condition with a deadline.

Used by the launcher behind `make run` and by the tests (re-exported by `tests.support.procs`).
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def wait_for(
    condition: Callable[[], T | None], timeout: float = 10.0, interval: float = 0.02, what: str = ""
) -> T:
    """Poll `condition` until it returns something truthy, and return that; fail after `timeout` s."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
            last_exc = None
        except Exception as exc:  # the condition may fail until the thing it polls is up
            last_exc = exc
        time.sleep(interval)
    detail = f" (last error: {last_exc!r})" if last_exc else ""
    raise TimeoutError(f"condition not met within {timeout} s: {what or condition}{detail}")


def stop_process(proc: subprocess.Popen[bytes] | subprocess.Popen[str], timeout: float = 5.0) -> None:
    """Terminate `proc`, and kill it if it does not exit within `timeout` s."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


def stop_processes(procs: list[subprocess.Popen[bytes]], timeout: float = 5.0) -> None:
    """Terminate every process at once, then wait for each (killing the ones that do not exit)."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        stop_process(proc, timeout)
