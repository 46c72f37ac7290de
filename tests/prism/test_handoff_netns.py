"""Real hand-offs through the p4sim switch (prism.testbed, in a private network namespace):
the proxy baseline, Prism with one hand-off per connection, Prism with a hand-off at every
request, and the same with the direct hand-over (--direct: a handed-back connection goes
straight to the next backend); every response's length and bytes are checked at the client, no connection may be
reset, and the frontend's and controller's records must show the hand-offs happened."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from prism.private_netns import run_in_private_netns
from prism.testbed import REPO, TARGETS, Testbed, target_missing, wait_until

pytestmark = pytest.mark.netns

CONNECTIONS, REQUESTS, SIZE = 3, 6, 100_003  # an odd size: no response is a whole number of MSS
# once: begin, commit, release per connection; every: begin and commit per request, lock and
# release per hand-back (at each request but the first), and the backend's release at the end
STEPS_PER_MODE = {"proxy": 0, "once": 3 * CONNECTIONS,
                  "every": 2 * CONNECTIONS * REQUESTS + 2 * CONNECTIONS * (REQUESTS - 1) + CONNECTIONS}
MODES = {"proxy": ("proxy", []), "once": ("once", []), "every": ("every", []),
         "direct": ("every", ["--direct"])}


def direct_steps(handoffs: list[dict[str, Any]]) -> int:
    """--direct: begin and commit of the first hand-off, then per request the backend's lock,
    the frontend's handover (none when the next backend is the same one) and the commit; the
    backend's release at the end."""
    return (CONNECTIONS * REQUESTS + CONNECTIONS + CONNECTIONS * (REQUESTS - 1)
            + int(sum(h.get("handover_steps", 0) for h in handoffs)) + CONNECTIONS)


def rows(path: Path, kind: str) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [r for r in map(json.loads, path.read_text().splitlines()) if r["kind"] == kind]


def three_modes(logdir: Path, target: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    steps = 0
    tb = Testbed(backends=2, logdir=logdir, target=target)
    try:
        for mode, (server_mode, args) in MODES.items():
            stats = logdir / f"{mode}.jsonl"
            tb.start_servers(server_mode, stats=stats, frontend_args=args)
            result = tb.run_client("--connections", str(CONNECTIONS), "--requests", str(REQUESTS),
                                   "--size", str(SIZE))
            # the servers finish each connection after the client has all its bytes (the
            # last release): wait for the controller to have written every step (a hand-off's
            # record is written at its ACK, before its response: all are there by now)
            steps += (direct_steps(rows(stats, "handoff")) if mode == "direct"
                      else STEPS_PER_MODE[mode])
            wait_until(f"{mode}: {steps} steps",
                       lambda n=steps: tb.controller_status()["steps"] >= n)  # type: ignore[misc]
            tb.stop_servers()
            out[mode] = {"client": result, "steps": steps, "handoffs": rows(stats, "handoff"),
                         "handbacks": rows(stats, "handback")}
        out["controller"] = tb.controller_status()
    finally:
        tb.close()
    return out


@pytest.fixture(scope="module", params=TARGETS)
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The three modes on p4sim, and on BMv2 where it is installed (skipped cleanly if not)."""
    target = str(request.param)
    if missing := target_missing(target, REPO / "build"):
        pytest.skip(f"{target}: {missing}")
    logdir = tmp_path_factory.mktemp(f"prism-{target}")
    return run_in_private_netns(lambda: three_modes(logdir, target), timeout=240,
                                on_interrupt=Testbed.close_all)


@pytest.mark.parametrize("mode", list(MODES))
def test_every_response_complete_and_correct(runs: dict[str, Any], mode: str) -> None:
    client = runs[mode]["client"]
    assert client["failures"] == {}, f"{mode}: {client['failures']}"
    assert client["ok"] == CONNECTIONS * REQUESTS
    assert client["bytes"] == CONNECTIONS * REQUESTS * SIZE


def test_once_hands_each_connection_off_once_to_both_backends(runs: dict[str, Any]) -> None:
    handoffs = runs["once"]["handoffs"]
    assert len(handoffs) == CONNECTIONS
    assert {h["backend"] for h in handoffs} == {"10.0.3.1", "10.0.3.2"}
    assert runs["once"]["handbacks"] == []


def test_every_hands_off_at_every_request_and_back(runs: dict[str, Any]) -> None:
    handoffs, handbacks = runs["every"]["handoffs"], runs["every"]["handbacks"]
    assert len(handoffs) == CONNECTIONS * REQUESTS
    # a hand-back happens when the next request has arrived: after the last response the
    # client closes instead, and the backend closes the connection itself
    assert len(handbacks) == CONNECTIONS * (REQUESTS - 1)
    assert_owner_changes(handoffs)


def assert_owner_changes(handoffs: list[dict[str, Any]]) -> None:
    """A connection never goes straight back to the backend that handed it back (a restore
    on the host it just left can be reset by that host's late segments: Frontend.pick)."""
    per_conn: dict[int, list[str]] = {}
    for h in handoffs:
        per_conn.setdefault(h["client_port"], []).append(h["backend"])
    for owners in per_conn.values():
        assert all(a != b for a, b in itertools.pairwise(owners)), owners


def test_direct_hands_over_without_taking_back(runs: dict[str, Any]) -> None:
    """--direct: every later request's hand-off is a direct one (no restore at the frontend:
    no hand-back record), and the owner still changes between requests."""
    handoffs = runs["direct"]["handoffs"]
    assert len(handoffs) == CONNECTIONS * REQUESTS
    assert sum(1 for h in handoffs if h.get("direct")) == CONNECTIONS * (REQUESTS - 1)
    assert runs["direct"]["handbacks"] == []
    assert_owner_changes(handoffs)


def test_controller_wrote_every_step_without_failure(runs: dict[str, Any]) -> None:
    ctl = runs["controller"]
    assert ctl["failures"] == 0
    assert ctl["steps"] == runs["direct"]["steps"]  # the running total, after the last mode
