"""topo/faults/mgmt_cut.py: a cut drops every IP packet of the processes in one NF's cgroup, both ways,
without resetting their connections, and touches no other process; the restore lets the same
sockets talk again."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from topo.faults import mgmt_cut
from topo.faults.mgmt_cut import MgmtCuts

pytestmark = pytest.mark.netns  # root: cgroups and eBPF

ECHO = """
import socket, sys
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("127.0.0.1", 0))
tcp = socket.socket()
tcp.bind(("127.0.0.1", 0))
tcp.listen()
print(udp.getsockname()[1], tcp.getsockname()[1], flush=True)
conn, _ = tcp.accept()
udp.settimeout(0.01)
conn.settimeout(0.01)
while True:
    for sock in (udp, conn):
        try:
            if sock is udp:
                data, peer = udp.recvfrom(64)
                try:
                    udp.sendto(data, peer)
                except OSError:  # EPERM while cut: a cut link loses it
                    pass
            else:
                data = conn.recv(64)
                if not data:
                    sys.exit(0)
                conn.sendall(data)
        except TimeoutError:
            pass
"""


@pytest.fixture
def cuts() -> Iterator[MgmtCuts]:
    if not mgmt_cut.available():
        pytest.skip("no cgroup v2 mount or no CONFIG_CGROUP_BPF")
    c = MgmtCuts()
    yield c
    c.close()


def _udp_echo(port: int, payload: bytes, wait: float) -> bytes | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(wait)
        s.sendto(payload, ("127.0.0.1", port))
        try:
            return s.recvfrom(64)[0]
        except TimeoutError:
            return None


def test_a_cut_silences_the_nfs_sockets_both_ways_and_the_restore_resumes_them(
        cuts: MgmtCuts) -> None:
    proc = subprocess.Popen(cuts.wrap(1, [sys.executable, "-c", ECHO]), stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        udp_port, tcp_port = map(int, proc.stdout.readline().split())
        with socket.create_connection(("127.0.0.1", tcp_port), timeout=5) as tcp:
            tcp.sendall(b"a")
            assert tcp.recv(1) == b"a"
            assert _udp_echo(udp_port, b"u1", 5.0) == b"u1"
            cuts.cut(1)
            assert _udp_echo(udp_port, b"u2", 0.3) is None  # in: dropped (or out: dropped)
            tcp.settimeout(0.3)
            tcp.sendall(b"b")
            with pytest.raises(TimeoutError):
                tcp.recv(1)
            # a process outside the NF's cgroup talks on: only the NF is cut off
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as a, \
                    socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as b:
                b.bind(("127.0.0.1", 0))
                a.sendto(b"x", b.getsockname())
                b.settimeout(5)
                assert b.recvfrom(8)[0] == b"x"
            cuts.restore(1)
            # the same connection, not reset: TCP's retransmission delivers the byte sent
            # during the cut, and the echo comes back
            tcp.settimeout(10)
            assert tcp.recv(1) == b"b"
            assert _udp_echo(udp_port, b"u3", 5.0) == b"u3"
            assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_close_waits_for_the_nfs_processes_to_exit_then_removes_the_cgroups() -> None:
    if not mgmt_cut.available():
        pytest.skip("no cgroup v2 mount or no CONFIG_CGROUP_BPF")
    cuts = MgmtCuts()
    # a process that outlives its kill by a moment, as a killed NF's workers do
    proc = subprocess.Popen(cuts.wrap(3, [sys.executable, "-c", "import time; time.sleep(30)"]))
    cuts.cut(3)
    killer = subprocess.Popen(["sh", "-c", f"sleep 0.3; kill {proc.pid}"])
    try:
        cuts.close()
        assert not cuts.root.exists()
    finally:
        proc.kill()
        proc.wait()
        killer.wait()


def test_restoring_an_nf_that_was_never_cut_changes_nothing(cuts: MgmtCuts) -> None:
    cuts.restore(7)
    cuts.cut(7)
    cuts.restore(7)
    cuts.restore(7)
