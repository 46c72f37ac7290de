"""CPU hogs: a machine made busy on purpose (`nfc-topo run|chaos --busy N`, `bench.failover
--busy N`).

A review ran `make bench-failover` with two compile jobs at nice 19 in the background and it lost
packets; `--busy N` reproduces that: N processes that spin on a CPU at nice 19 for the whole run,
each started and stopped by its PID (`CpuHogs.stop`: SIGKILL to each PID, then reaped). Every
exit path stops them: the context manager's, an exception's, Ctrl-C's and SIGTERM's (the scenario
turns SIGTERM into KeyboardInterrupt). If the process that started them dies without unwinding
(SIGKILL), each hog notices that its parent changed within a few milliseconds of spinning and
exits by itself, so none is left behind.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

NICE = 19
# spin, and look up every few ms whether the process that started it (its PID the argument: a
# parent killed before the hog's first look would otherwise be taken for init) is still its parent
HOG = ("import os, sys\nparent = int(sys.argv[1])\nwhile os.getppid() == parent:\n"
       "    for _ in range(100000):\n        pass\n")


def add_argument(parser: argparse.ArgumentParser) -> None:
    """`--busy N`, for the launcher and the benchmarks."""
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help=f"N CPU hogs at nice {NICE} for the whole run (a busy machine, as "
                             "background compile jobs make it), stopped by PID at the end")


@dataclass
class CpuHogs:
    """The running hogs."""

    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def stop(self) -> None:
        """SIGKILL each hog by its PID and reap it (idempotent)."""
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
        for proc in self.procs:
            proc.wait(timeout=10)


def start_hogs(n: int) -> CpuHogs:
    """Start `n` hogs at nice NICE (all stopped again if one fails to start)."""
    hogs = CpuHogs()
    try:
        for _ in range(n):
            hogs.procs.append(subprocess.Popen(
                ["nice", "-n", str(NICE), sys.executable, "-c", HOG, str(os.getpid())],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    except BaseException:
        hogs.stop()
        raise
    return hogs


@contextmanager
def cpu_hogs(n: int, say: Callable[[str], object] | None = None) -> Iterator[CpuHogs]:
    """`n` hogs while the block runs (none for 0), stopped by PID on every way out of it."""
    if n < 0:
        raise ValueError(f"--busy {n}: the number of CPU hogs must not be negative")
    hogs = start_hogs(n)
    try:
        if n and say is not None:
            say(f"{n} CPU hog(s) at nice {NICE} for the whole run (pids "
                f"{', '.join(map(str, hogs.pids))})")
        yield hogs
    finally:
        hogs.stop()
