"""The flood's CI mode (`make flood-short`; `make flood` sends 1,000,000): 100,000 distinct
5-tuples with steady flows at a primary/backup pair whose bound is 10,000 flows per worker
(nf_host/flood.py). The flow table never exceeds the bound by more than the held output, memory
stops growing once the bound is reached, the backup holds exactly the primary's flows, and a
fail-over afterwards loses nothing."""

from __future__ import annotations

import pytest

from nf_host.flood import BURST, run

pytestmark = [pytest.mark.unit, pytest.mark.slow]


def test_a_flood_of_distinct_flows_stays_bounded_in_sync_and_fails_over_without_loss() -> None:
    res = run(flows=100_000, max_flows=10_000, steady=50)
    # over the bound by at most the flows of output not yet acknowledged (bursts in flight)
    assert 10_000 <= res.table_max <= 10_000 + 5 * BURST
    assert res.evictions["max"] >= 90_000 - 5 * BURST
    first, peak = res.rss_after_bound
    # flat: the state is bounded (a scan of 70,000 more flows costs no more than a few MB of
    # allocator slack and the harness's own record of the steady flows' output)
    assert peak - first < 12.0, res.rss_mb
    assert res.in_sync and res.backup_flows == 10_000
    assert res.replayed == 50  # the steady flows' last packets, seen only by the backup
    assert res.failover_errors == [] and res.steady_counts_ok
