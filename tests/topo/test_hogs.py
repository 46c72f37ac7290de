"""`--busy N`: CPU hogs at nice 19, started and stopped by PID, none left on any way out
(topo/faults/hogs.py)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.procs import wait_for
from topo.faults.hogs import HOG, NICE, cpu_hogs

pytestmark = pytest.mark.unit


def _nice(pid: int) -> int | None:
    """The niceness of `pid` once it runs the hog (not `nice` itself any more), else None."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    if HOG.encode() not in cmdline:
        return None
    return int(stat.rsplit(")", 1)[1].split()[16])  # field 19 of stat: nice


def _running(pid: int) -> int:
    """Wait until `pid` runs the hog; its niceness."""
    return wait_for(functools.partial(_nice, pid), timeout=10, what=f"hog {pid} running")


def _gone(pid: int) -> bool:
    """No such process, or only a zombie nobody reaped yet (it runs no more)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def test_hogs_run_at_nice_19_and_are_stopped_by_pid() -> None:
    with cpu_hogs(2) as hogs:
        pids = hogs.pids
        assert len(set(pids)) == 2
        for pid in pids:
            assert _running(pid) == NICE
        assert all(p.poll() is None for p in hogs.procs)
    assert all(p.returncode is not None for p in hogs.procs)  # killed and reaped
    assert all(not Path(f"/proc/{pid}").exists() for pid in pids)


def test_hogs_are_stopped_when_the_run_fails() -> None:
    with pytest.raises(RuntimeError, match="the run failed"), cpu_hogs(1) as hogs:
        _running(hogs.pids[0])
        raise RuntimeError("the run failed")
    assert hogs.procs[0].returncode is not None and not Path(f"/proc/{hogs.pids[0]}").exists()


def test_no_hog_is_none_and_a_negative_number_is_refused() -> None:
    with cpu_hogs(0) as hogs:
        assert hogs.pids == []
    with pytest.raises(ValueError, match="must not be negative"), cpu_hogs(-1):
        pass


def test_hogs_of_a_process_killed_outright_stop_by_themselves() -> None:
    """SIGKILL unwinds nothing: the hogs see their parent change and exit."""
    parent = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom topo.faults.hogs import start_hogs\n"
         "print(*start_hogs(2).pids, flush=True)\ntime.sleep(600)\n"],
        stdout=subprocess.PIPE, cwd=Path(__file__).resolve().parents[2])
    try:
        assert parent.stdout is not None
        pids = [int(p) for p in parent.stdout.readline().split()]
        for pid in pids:
            _running(pid)
    finally:
        parent.kill()
        parent.wait(timeout=10)
    for pid in pids:
        wait_for(functools.partial(_gone, pid), timeout=10, what=f"orphaned hog {pid} gone")
    assert os.getpid() not in pids


def test_busy_is_an_option_of_run_and_chaos_and_of_the_failover_bench() -> None:
    import topo.__main__ as topo_main
    from bench import failover
    from topo.launch.options import options_from

    args = topo_main.build_parser().parse_args(["run", "--busy", "2"])
    assert options_from(args).busy == 2
    assert topo_main.build_parser().parse_args(["chaos", "--busy", "3"]).busy == 3
    with pytest.raises(SystemExit):
        failover.main(["--busy", "-1"])
