"""What every process `nf-host` starts (its workers, its heartbeat responder; forked) does first:
die with the `nf-host` parent (PR_SET_PDEATHSIG), leave Ctrl-C to it, drop the parent's SIGTERM
handler, and log under its own name;
and what each of its processes does once started (`freeze_startup`)."""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import signal

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15  # the thread's name (`comm`, 15 bytes): what ps, top, perf and psutil show


def become_child(level: int | str, name: str) -> None:
    """Set up the calling process as a child of `nf-host`; its log lines and its process name
    (`comm`, e.g. `nf3.w0`, `nf3.hb`) carry `name`."""
    libc = ctypes.CDLL(None)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    libc.prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # forked (nf_host/worker_process.py): not the parent's SIGTERM handler, nor its log format
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    logging.basicConfig(level=level, format=f"%(asctime)s {name} %(levelname)s %(message)s",
                        force=True)


def freeze_startup(what: str) -> int:
    """Move every object start-up made (modules, the NF, the config) out of the cyclic garbage
    collector's reach (`gc.freeze`): they live as long as the process, and each full collection
    scanned them all. Under load that stopped a worker's loop for 15-130 ms every ~10 s (~45,000
    objects; acks, and so output, waited meanwhile); frozen, ~7,000 remain and a full collection
    takes a few ms. Returns (and logs) how many objects were frozen."""
    gc.freeze()
    frozen = gc.get_freeze_count()
    logging.getLogger("nf_host").info("%s (pid %d): %d objects of start-up frozen out of the "
                                      "cyclic collector's reach", what, os.getpid(), frozen)
    return frozen
