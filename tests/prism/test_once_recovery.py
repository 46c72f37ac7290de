"""A backend holding mode "once" connections crashes mid-response (docs/prism.md, "Backend
failure"): with --snapshots the backend shipped each later request's live snapshot before
answering it, so the frontend resumes every connection it held (the response as sent, the
client's ACK saying how much it has), releases the switch entries and hands the connection to
the survivor for its remaining requests. The client must see every response complete and
byte-exact, no reset. Through p4sim, in a private network namespace, links at 8 Mbit/s."""

from __future__ import annotations

from typing import Any

import pytest

from tests.prism.crash_run import CONNECTIONS, REQUESTS, SIZE, VICTIM, crash_run, of_kind

pytestmark = pytest.mark.netns


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    # the victim answers a later request (not the handed-off one) after this snapshot
    return crash_run(tmp_path_factory, "prism-once-failure", "once",
                     ["--fail-after", "1.0", "--snapshots"], "snapshot",
                     "a snapshot from the victim")


def test_client_sees_every_byte_and_no_reset(run: dict[str, Any]) -> None:
    """Every response byte-exact, no reset. The one loss the design admits (a next request the
    crashed backend's kernel acknowledged before its snapshot reached the frontend) would be
    recorded at the frontend with its reason and be the client's only kind of failure."""
    client, lost = run["client"], of_kind(run, "lost")
    assert all(r["why"].startswith("no request after recovery") for r in lost), lost
    assert set(client["failures"]) <= {"short"}, client
    assert client["failures"].get("short", 0) == len(lost)
    assert client["ok"] >= (CONNECTIONS - len(lost)) * REQUESTS
    assert client["bytes"] == client["ok"] * SIZE
    if not lost:
        assert client["ok"] == CONNECTIONS * REQUESTS


def test_once_connections_resumed_from_their_snapshots(run: dict[str, Any]) -> None:
    recs = run["records"]
    failed = of_kind(run, "backend_failed")
    assert [r["backend"] for r in failed] == [f"10.0.3.{VICTIM}"]
    assert failed[0]["held"] >= 1
    # every connection the victim held was resumed, none recorded lost for being mode once
    assert len(of_kind(run, "recovered")) == failed[0]["held"]
    assert not [r for r in of_kind(run, "lost") if r["why"].startswith("once")]
    # the resumed connections went on at the survivor (handed off again, mode once)
    after = recs[recs.index(failed[0]):]
    handoffs_after = [r for r in after if r["kind"] == "handoff"]
    assert handoffs_after and {r["backend"] for r in handoffs_after} == {"10.0.3.2"}
