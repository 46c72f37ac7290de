"""An NF's drops are split by where they happened: the kernel drops at a worker's socket are
added up, logged, and reported in Status (`kernel_drops`, with the buffer overflows and unowned
packets) summed over the workers."""

from __future__ import annotations

import logging
from typing import Any, TypeVar

import pytest

from contract.commands import Returns, Status, answer
from contract.proto import nf_control_pb2 as pb
from nf_host.config import NfHostConfig
from nf_host.control import NfControlServicer
from nf_host.global_state import MemoryStore
from nf_host.nfs import make_nf
from nf_host.worker import Worker, WorkerConfig

pytestmark = pytest.mark.unit
R = TypeVar("R")


def worker(nf_id: int, kernel: list[int]) -> Worker:
    # the kernel's counts since last read
    return Worker(WorkerConfig(nf_id=nf_id), make_nf("checker"), MemoryStore(), lambda frame: None,
                  drop_probe=lambda: kernel.pop(0) if kernel else 0)


class Pool:
    procs: list[Any] = []

    def __init__(self, workers: list[Worker]) -> None:
        self.workers = workers

    def broadcast(self, cmd: Returns[R]) -> list[R]:
        assert cmd.NAME == Status.NAME  # (not narrowed by isinstance: the answer stays an R)
        return [answer(cmd, w.status()) for w in self.workers]

    def heartbeats_withheld(self) -> int:
        return 4


def test_kernel_drops_are_added_up_logged_and_reported(caplog: pytest.LogCaptureFixture) -> None:
    a, b = worker(1, [5, 0, 2]), worker(1, [1])
    a.c.unowned, a.c.overflows, b.inbuf.overflows = 3, 4, 6
    with caplog.at_level(logging.WARNING):
        assert a.status().kernel_drops == 5
    assert "the kernel dropped 5 frames" in caplog.text
    servicer = NfControlServicer(NfHostConfig(nf_id=1, interface="veth0"), Pool([a, b]))  # type: ignore[arg-type]
    load = servicer.Status(pb.StatusRequest(), None).load
    assert (load.kernel_drops, load.buffer_overflows, load.unowned) == (5 + 1, 4 + 6, 3)
    assert load.overload_drops == load.kernel_drops + load.buffer_overflows
    assert load.heartbeats_withheld == 4  # (the parent's heartbeat echo: nf_host/liveness.py)
    assert load.drops >= load.kernel_drops + load.buffer_overflows + load.unowned
    assert a.status().kernel_drops == 7  # the next read adds the kernel's new count
