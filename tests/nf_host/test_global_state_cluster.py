"""The NF runtime's global state store over a real three-member etcd cluster: the loss of one
member, even the leader, is invisible (every operation succeeds, none is lost: the calls
in flight wait out the election), the loss of the quorum makes
operations fail with a clear GlobalStoreError, and everything works again when a member returns."""

from __future__ import annotations

import time
import uuid

import pytest

from nf_host.global_state import GlobalStoreError, open_store
from tests.support.etcd import EtcdCluster

pytestmark = [pytest.mark.etcd, pytest.mark.slow]


def test_one_member_lost_changes_nothing_the_quorum_lost_fails_clearly_then_recovers(
        etcd_cluster: EtcdCluster) -> None:
    spec = f"etcd://{','.join(etcd_cluster.endpoints)}/test-{uuid.uuid4().hex}"
    store = open_store(spec)  # timeout 5 s: more than an election after the leader's death
    try:
        claimed = []
        for port in range(10):
            assert store.compare_and_swap(f"port/{port}", None, b"flow-a")
            claimed.append(port)
        # gRPC's pick_first dials the first member: kill it, then every other in turn, one at a time
        for victim in range(3):
            etcd_cluster.kill(victim)
            for port in range(10 + 10 * victim, 20 + 10 * victim):
                assert store.compare_and_swap(f"port/{port}", None, b"flow-b")
                claimed.append(port)
            assert store.increment("cursor") == victim + 1
            etcd_cluster.start(victim)
            etcd_cluster.wait_healthy()
        assert all(store.get(f"port/{p}") is not None for p in claimed)

        etcd_cluster.kill(0)
        etcd_cluster.kill(1)
        started = time.monotonic()
        with pytest.raises(GlobalStoreError, match=r"did not answer within .* \(no quorum"):
            store.put("port/999", b"flow-c")
        assert time.monotonic() - started < 8.0  # the store's timeout, not a hang

        etcd_cluster.start(1)
        etcd_cluster.wait_healthy()
        store.put("port/999", b"flow-c")  # a member back: the quorum again, writes again
        assert store.get("port/999") == b"flow-c"
    finally:
        store.close()  # type: ignore[attr-defined]
