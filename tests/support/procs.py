"""Process helpers for tests: the launcher's own (`topo.procs`), re-exported, and a pair of free
UDP ports."""

import socket

from topo.procs import free_port, stop_process, wait_for

__all__ = ["free_port", "free_udp_pair", "stop_process", "wait_for"]


def free_udp_pair() -> int:
    """A port p with p and p + 1 free for UDP (two workers' heartbeats)."""
    while True:
        port = free_port()
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as a, \
                    socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue
