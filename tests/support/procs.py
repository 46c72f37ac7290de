"""Process helpers for tests: the launcher's own (`topo.procs`), re-exported."""

from topo.procs import free_port, stop_process, wait_for

__all__ = ["free_port", "stop_process", "wait_for"]
