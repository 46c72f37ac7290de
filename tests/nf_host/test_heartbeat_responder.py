"""The heartbeat responder of an `nf-host` (nf_host/liveness.py `HeartbeatResponder`): it answers for
a worker whose process is busy but whose event loop turns (a slow NF is not silent), and is
silent for a worker that is stopped (SIGSTOP), gone, or whose loop has not turned within
`stall_limit` (stuck), counting what it withholds."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from contract import heartbeat
from nf_host import liveness
from tests.support.procs import free_port, free_udp_pair

pytestmark = pytest.mark.unit



def ask(port: int, counter: int, timeout: float) -> tuple[int, int, int, int] | None:
    """One heartbeat request to 127.0.0.1:port; the parsed reply, None if none within `timeout`."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.sendto(heartbeat.request(counter), ("127.0.0.1", port))
        try:
            return heartbeat.parse_reply(s.recv(64))
        except TimeoutError:
            return None


def stop(pid: int) -> None:
    """SIGSTOP process `pid` and wait until /proc says it is stopped."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while liveness.process_state(pid) != "T" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert liveness.process_state(pid) == "T"


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    """A process standing in for a worker (its state is what the echo reads)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait(10)


def echo_for(pid: int, clock: liveness.LoopClock, port: int,
             stall_limit: float = 0.5) -> liveness.HeartbeatResponder:
    e = liveness.HeartbeatResponder("127.0.0.1", port, 9, [liveness.WatchedWorker(pid, clock)],
                            started=time.monotonic() - 3, stall_limit=stall_limit)
    e.start()
    return e


def test_a_worker_whose_loop_turns_is_answered_however_busy_its_process() -> None:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    clock = mp.RawValue("d", time.monotonic())
    port = free_port()
    echo = echo_for(busy.pid, clock, port)
    try:
        reply = ask(port, 2, 5.0)
        assert reply is not None and reply[:3] == (2, 9, 0) and reply[3] >= 3000
        deadline = time.monotonic() + 5  # (counted just after the reply left)
        while echo.answered == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert echo.answered == 1 and echo.withheld == 0
    finally:
        echo.close()
        busy.kill()
        busy.wait(10)


def test_a_stopped_worker_is_not_answered_and_is_again_once_continued(
        child: subprocess.Popen[bytes]) -> None:
    clock = mp.RawValue("d", time.monotonic())
    port = free_port()
    echo = echo_for(child.pid, clock, port, stall_limit=60)
    try:
        assert ask(port, 1, 5.0) is not None
        stop(child.pid)
        assert ask(port, 2, 0.3) is None
        assert echo.withheld == 1
        os.kill(child.pid, signal.SIGCONT)
        deadline = time.monotonic() + 5
        reply = None
        while reply is None and time.monotonic() < deadline:
            reply = ask(port, 3, 0.3)
        assert reply is not None and reply[0] == 3
    finally:
        os.kill(child.pid, signal.SIGCONT)
        echo.close()


def test_a_stopped_nf_host_parent_silences_every_worker(child: subprocess.Popen[bytes]) -> None:
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    port = free_port()
    echo = liveness.HeartbeatResponder("127.0.0.1", port, 9,
                                       [liveness.WatchedWorker(child.pid, mp.RawValue("d", 0.0))],
                                       started=0.0, stall_limit=1e9, watch_also=[parent.pid])
    try:
        assert echo.why_silent(0, time.monotonic()) == ""
        stop(parent.pid)
        assert echo.why_silent(0, time.monotonic()) == "the nf-host process is stopped"
    finally:
        parent.kill()
        parent.wait(10)
        echo.close()


def test_the_responder_process_answers_and_reports_counts_in_shared_memory() -> None:
    """`responder_main` as `nf-host` runs it: in a process of its own, whose counters the parent
    reads from shared memory."""
    ctx = mp.get_context("spawn")
    clock = ctx.RawValue("d", time.monotonic())
    counts = ctx.RawArray("Q", 2)
    port = free_port()
    here, there = ctx.Pipe()
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    proc = ctx.Process(target=liveness.responder_main,
                       args=("127.0.0.1", port, 9, [(worker.pid, clock)], os.getpid(),
                             time.monotonic(), 0.5, True, counts, there))
    proc.start()
    try:
        assert here.poll(30)
        assert str(here.recv()).startswith("ok: ")
        clock.value = time.monotonic()  # the worker's loop turns (its start-up may outlast 0.5 s)
        assert ask(port, 1, 5.0) is not None
        stop(worker.pid)
        assert ask(port, 2, 0.3) is None
        deadline = time.monotonic() + 5
        while tuple(counts) != (1, 1) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert tuple(counts) == (1, 1)
        # a port taken: the responder says so instead of answering nothing
        here2, there2 = ctx.Pipe()
        proc2 = ctx.Process(target=liveness.responder_main,
                            args=("127.0.0.1", port, 9, [(worker.pid, clock)], os.getpid(),
                                  time.monotonic(), 0.5, True, counts, there2))
        proc2.start()
        assert here2.poll(30) and "heartbeat responder: UDP 127.0.0.1:" in str(here2.recv())
        proc2.join(10)
    finally:
        worker.kill()
        worker.wait(10)
        proc.kill()
        proc.join(10)


def test_a_stuck_loop_or_a_gone_process_is_not_answered(
        child: subprocess.Popen[bytes]) -> None:
    clock = mp.RawValue("d", time.monotonic() - 2)  # the loop last turned 2 s ago
    port = free_udp_pair()
    other = subprocess.Popen([sys.executable, "-c", "pass"])
    other.wait(10)  # a worker process that is gone
    echo = liveness.HeartbeatResponder("127.0.0.1", port, 9,
                               [liveness.WatchedWorker(child.pid, clock),
                                liveness.WatchedWorker(other.pid, mp.RawValue("d", time.monotonic()))],
                               started=time.monotonic(), stall_limit=0.5)
    echo.start()
    try:
        assert "not turned" in echo.why_silent(0, time.monotonic())
        assert echo.why_silent(1, time.monotonic()) == "its process is gone"
        assert ask(port, 1, 0.3) is None and ask(port + 1, 2, 0.3) is None
        assert echo.withheld == 2
        clock.value = time.monotonic()  # it turns again
        assert ask(port, 3, 5.0) is not None
    finally:
        echo.close()


def test_garbage_is_ignored_and_close_ends_the_thread(child: subprocess.Popen[bytes]) -> None:
    port = free_port()
    echo = echo_for(child.pid, mp.RawValue("d", time.monotonic()), port)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"not a heartbeat", ("127.0.0.1", port))
    deadline = time.monotonic() + 5
    while echo.ignored == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert echo.ignored == 1 and echo.answered == 0
    echo.close()
    assert not echo._thread.is_alive()
