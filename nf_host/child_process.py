"""What every process `nf-host` starts (its workers, its heartbeat responder) does first: die
with the `nf-host` parent (PR_SET_PDEATHSIG), leave Ctrl-C to it, and log under its own name."""

from __future__ import annotations

import ctypes
import logging
import signal

PR_SET_PDEATHSIG = 1


def become_child(level: int | str, name: str) -> None:
    """Set up the calling process as a child of `nf-host`; its log lines carry `name`."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(level=level, format=f"%(asctime)s {name} %(levelname)s %(message)s")
