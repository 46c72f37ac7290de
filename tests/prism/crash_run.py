"""The backend-failure runs the Prism tests share: a run through p4sim in a private network
namespace (links at 8 Mbit/s, so a crash lands mid-response) whose backend `VICTIM` is crashed
once the frontend's stats name it in a record of a given kind; what the client saw and every
stats record are returned."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prism.private_netns import run_in_private_netns
from prism.testbed import REPO, Testbed, target_missing, wait_until

CONNECTIONS, REQUESTS, SIZE = 3, 4, 400_003  # 400 kB at 8 Mbit/s: 0.4 s a response at best
VICTIM = 1


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def of_kind(run: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r for r in run["records"] if r["kind"] == kind]


def _crash_victim(logdir: Path, mode: str, frontend_args: list[str], after: str,
                  what: str) -> dict[str, Any]:
    tb = Testbed(backends=2, logdir=logdir, rate_mbit=8.0)
    try:
        stats = logdir / f"{mode}.jsonl"
        tb.start_servers(mode, stats=stats, frontend_args=frontend_args)
        client = tb.start_client("--connections", str(CONNECTIONS), "--requests", str(REQUESTS),
                                 "--size", str(SIZE))
        wait_until(what, lambda: any(r["kind"] == after and r["backend"] == f"10.0.3.{VICTIM}"
                                     for r in records(stats)), timeout=60)
        tb.crash_backend(VICTIM)
        result = tb.client_result(client, timeout=120)
        return {"client": result, "records": records(stats)}
    finally:
        tb.close()


def crash_run(tmp_path_factory: pytest.TempPathFactory, name: str, mode: str,
              frontend_args: list[str], after: str, what: str) -> dict[str, Any]:
    """A module fixture's run: mode `mode` with `frontend_args`; the victim crashes once a
    record of kind `after` names it (`what` says it in a timeout's message)."""
    if missing := target_missing("p4sim", REPO / "build"):
        pytest.skip(missing)
    logdir = tmp_path_factory.mktemp(name)
    return run_in_private_netns(lambda: _crash_victim(logdir, mode, frontend_args, after, what),
                                timeout=240, on_interrupt=Testbed.close_all)
