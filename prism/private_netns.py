"""Run a function in a fresh network namespace of its own thread (loopback up, nothing else).

A network namespace belongs to a task, so `unshare(CLONE_NEWNET)` in a new thread moves that
thread only: the sockets it opens, and the processes it starts (`tc`, `ip`), live in the new
namespace, and the test process and other helpers' tests never see its interfaces or filters.
Needs root (CAP_SYS_ADMIN). Python 3.11 has no os.unshare: libc's, through ctypes.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import threading
from collections.abc import Callable
from typing import TypeVar

CLONE_NEWNET = 0x40000000
T = TypeVar("T")


def run_in_private_netns(fn: Callable[[], T], timeout: float = 60.0,
                         on_interrupt: Callable[[], None] | None = None) -> T:
    """`fn()` in a new thread in a new network namespace with `lo` up; its result or its error.
    Interrupted (Ctrl-C, or SIGTERM turned into KeyboardInterrupt) while waiting, it calls
    `on_interrupt` (stop what `fn` started, by PID) before passing the interruption on."""
    result: list[T] = []
    error: list[BaseException] = []

    def body() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.unshare(CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
            subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
            result.append(fn())
        except BaseException as exc:  # handed to the caller's thread
            error.append(exc)

    thread = threading.Thread(target=body, name="private-netns", daemon=True)
    thread.start()
    try:
        thread.join(timeout)
    except KeyboardInterrupt:
        if on_interrupt is not None:
            on_interrupt()
        raise
    if thread.is_alive():
        raise TimeoutError(f"private-netns function still running after {timeout} s")
    if error:
        raise error[0]
    return result[0]
