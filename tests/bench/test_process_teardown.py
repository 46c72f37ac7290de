"""The teardown benchmark's short mode: one kill per size, a table whose times are real."""

from __future__ import annotations

import asyncio

import pytest

from bench.process_teardown import main, one_kill


@pytest.mark.unit
def test_a_killed_child_is_seen_by_both_watchers_in_bounded_time() -> None:
    eof_ms, grpc_ms = asyncio.run(one_kill(5))
    assert 0 < eof_ms < 5000 and 0 < grpc_ms < 5000


@pytest.mark.unit
def test_the_table_has_a_row_per_size(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--rss", "2,4", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "RSS MiB" in out and "│       2 │" in out and "│       4 │" in out


@pytest.mark.unit
def test_bad_sizes_are_named() -> None:
    with pytest.raises(SystemExit):
        main(["--rss", "ten"])
