"""Starting and stopping real processes, and waiting on a condition with a deadline.

Used by the launcher behind `make run` and by the tests (re-exported by `tests.support.procs`).
"""

from __future__ import annotations

import random
import socket
import subprocess
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


_PICK = random.SystemRandom()  # which free port is no test's behaviour: not seeded
LISTEN_PORTS_FROM = 20000


def _ephemeral_low() -> int:
    """The first port of the kernel's range for outgoing connections (32768 by default)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` that nothing listens on right now, below the kernel's ephemeral range
    when there is room: a port there can only be taken by another listener before ours binds it,
    never by one of the many outgoing connections of a running system (which took a controller's
    API port once). Falls back to a port the kernel picks.

    Never the same port twice in one process (within the last `_HANDED_OUT.maxlen`): the callers
    pick several ports before any process binds them (three etcd members' peer ports once drew the
    same port, and etcd refused the cluster)."""
    low = _ephemeral_low()
    for _ in range(50 if low > LISTEN_PORTS_FROM else 0):
        port = _PICK.randrange(LISTEN_PORTS_FROM, low)
        if port not in _HANDED_OUT and _bindable(host, port):
            return _hand_out(port)
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED_OUT:
            return _hand_out(port)


_HANDED_OUT: deque[int] = deque(maxlen=1024)


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _hand_out(port: int) -> int:
    _HANDED_OUT.append(port)
    return port


def wait_for(
    condition: Callable[[], T | None], timeout: float = 10.0, interval: float = 0.02, what: str = "",
    fatal: tuple[type[Exception], ...] = (),
) -> T:
    """Poll `condition` until it returns something truthy, and return that; fail after `timeout` s,
    or at once when it raises one of `fatal` (waiting cannot help then)."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
            last_exc = None
        except fatal:
            raise
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


def prioritize_session(pid: int, nice: int) -> bool:
    """Give the session of `pid` (a process started with `start_new_session`) the niceness
    `nice` as a whole: with the kernel's autogroups (`/proc/sys/kernel/sched_autogroup_enabled`)
    each session is one scheduling group with one session's share of the CPU whatever its
    processes' own niceness, so `nice -n -10` inside it gains nothing against other sessions
    (measured: p4sim's threads waited 9-12 times as long for a CPU as they ran at nice 0 and at
    nice -10 alike on a loaded host). False where that is not possible (no autogroups, no
    privilege, the process gone); the process then runs at the host's priority."""
    try:
        Path(f"/proc/{pid}/autogroup").write_text(f"{nice}\n")
    except OSError:
        return False
    return True


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (which may hold spaces): [0] is the
    state, [1] the parent's PID, [19] the start time; None if there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()


def process_start(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot): with its PID, it names the process
    (a PID may be taken again); None if there is none or it is a zombie (it ran to its end)."""
    fields = _stat(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def parent_of(pid: int) -> int | None:
    fields = _stat(pid)
    return None if fields is None else int(fields[1])


def descendants(pid: int) -> dict[int, int]:
    """Every living process below `pid` (children, theirs, ...): PID -> `process_start`."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            parent = parent_of(int(entry.name))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry.name))
    out: dict[int, int] = {}
    todo = list(children.get(pid, []))
    while todo:
        child = todo.pop()
        start = process_start(child)
        if start is not None:
            out[child] = start
        todo += children.get(child, [])
    return out


def still_running(procs: dict[int, int]) -> list[int]:
    """The PIDs of `procs` (PID -> `process_start`) that still run: the same processes."""
    return [pid for pid, start in procs.items() if process_start(pid) == start]
