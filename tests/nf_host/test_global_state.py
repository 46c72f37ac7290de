"""The GlobalStore contract, run against both backends: MemoryStore and a real etcd (EtcdStore)."""

from __future__ import annotations

import multiprocessing
import multiprocessing.queues
import threading
import uuid
from collections.abc import Iterator

import pytest

from nf_host.global_state import EtcdStore, GlobalStoreError, MemoryStore, open_store
from nf_host.nf_api import GlobalStore
from tests.support.etcd import EtcdServer
from tests.support.procs import free_port


@pytest.fixture(
    params=[
        pytest.param("memory", marks=pytest.mark.unit),
        pytest.param("etcd", marks=pytest.mark.etcd),
    ]
)
def store(request: pytest.FixtureRequest) -> Iterator[GlobalStore]:
    if request.param == "memory":
        yield MemoryStore()
        return
    server: EtcdServer = request.getfixturevalue("etcd_server")
    etcd = EtcdStore(server.endpoint, prefix=f"/test-{uuid.uuid4().hex}/")
    try:
        yield etcd
    finally:
        etcd.close()


def test_get_put_delete(store: GlobalStore) -> None:
    assert store.get("a") is None
    store.put("a", b"1")
    assert store.get("a") == b"1"
    store.put("a", b"\x00\xff")
    assert store.get("a") == b"\x00\xff"
    assert store.delete("a") is True
    assert store.delete("a") is False
    assert store.get("a") is None


def test_compare_and_swap(store: GlobalStore) -> None:
    assert store.compare_and_swap("k", None, b"first") is True
    assert store.compare_and_swap("k", None, b"second") is False
    assert store.compare_and_swap("k", b"wrong", b"second") is False
    assert store.compare_and_swap("k", b"first", b"second") is True
    assert store.get("k") == b"second"
    store.delete("k")
    assert store.compare_and_swap("k", b"second", b"x") is False
    assert store.compare_and_swap("k", None, b"") is True
    assert store.get("k") == b""


def test_increment(store: GlobalStore) -> None:
    assert store.increment("c") == 1
    assert store.increment("c", 5) == 6
    assert store.increment("c", -2) == 4
    assert store.get("c") == b"4"
    store.put("bad", b"not a number")
    with pytest.raises(GlobalStoreError, match="not a decimal counter"):
        store.increment("bad")


def test_concurrent_increments_are_not_lost(store: GlobalStore) -> None:
    per_thread, threads = 25, 4
    seen: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(per_thread):
            value = store.increment("shared")
            with lock:
                seen.append(value)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    assert sorted(seen) == list(range(1, per_thread * threads + 1))


def test_concurrent_cas_has_one_winner(store: GlobalStore) -> None:
    wins: list[int] = []

    def claim(i: int) -> None:
        if store.compare_and_swap("owner", None, str(i).encode()):
            wins.append(i)

    workers = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    assert len(wins) == 1 and store.get("owner") == str(wins[0]).encode()


@pytest.mark.etcd
def test_prefixes_isolate_stores(etcd_server: EtcdServer) -> None:
    spec = f"etcd://{etcd_server.endpoint}/iso-{uuid.uuid4().hex}"
    a, b = open_store(spec + "/a"), open_store(spec + "/b")
    try:
        a.put("k", b"A")
        assert b.get("k") is None
        assert isinstance(a, EtcdStore) and a.prefix.endswith("/a/")
    finally:
        for s in (a, b):
            assert isinstance(s, EtcdStore)
            s.close()


def _child_increments(store: EtcdStore, out: multiprocessing.queues.Queue[int | str]) -> None:
    try:
        out.put(store.increment("forked"))
    except GlobalStoreError as exc:
        out.put(str(exc))


def _fork_and_increment(store: EtcdStore) -> int | str:
    ctx = multiprocessing.get_context("fork")
    out: multiprocessing.queues.Queue[int | str] = ctx.Queue()
    child = ctx.Process(target=_child_increments, args=(store, out))
    child.start()
    result = out.get(timeout=20)
    child.join(20)
    assert child.exitcode == 0
    return result


def _fork_checks(endpoint: str, out: multiprocessing.queues.Queue[str]) -> None:
    """The fork test's body, in a process of its own (spawned: no gRPC used in it before, as
    in an NF's runtime). In pytest's own process an earlier test's gRPC channel (the
    simulation's, any other's) had already started gRPC's core threads, and a child forked
    from it hangs on its first channel, whichever store opens it."""
    store = EtcdStore(endpoint, prefix=f"/fork-{uuid.uuid4().hex}/")
    try:
        first = _fork_and_increment(store)  # first used in the child: it connects there
        parent = store.increment("forked")
        second = _fork_and_increment(store)  # used by the parent before this fork: clear error
        out.put(repr((first, parent, isinstance(second, str) and "before a fork" in second,
                      store.increment("forked"))))
    except Exception as exc:  # (reported to the test)
        out.put(f"{type(exc).__name__}: {exc}")
    finally:
        store.close()


@pytest.mark.etcd
def test_store_created_before_fork_works_in_the_child(etcd_server: EtcdServer) -> None:
    ctx = multiprocessing.get_context("spawn")
    out: multiprocessing.queues.Queue[str] = ctx.Queue()
    proc = ctx.Process(target=_fork_checks, args=(etcd_server.endpoint, out))
    proc.start()
    try:
        result = out.get(timeout=60)
    finally:
        proc.join(20)
    assert result == repr((1, 2, True, 3)), result


@pytest.mark.unit
def test_open_store_specs() -> None:
    assert isinstance(open_store("memory"), MemoryStore)
    store = open_store("etcd://127.0.0.1:2379")
    assert isinstance(store, EtcdStore) and store.prefix == "/nfc/global/"
    with pytest.raises(ValueError, match="neither"):
        open_store("redis://x")
    with pytest.raises(ValueError, match="HOST:PORT"):
        EtcdStore("nohost")


@pytest.mark.unit
def test_unreachable_etcd_is_a_clear_error() -> None:
    store = EtcdStore(f"127.0.0.1:{free_port()}", timeout=0.5)
    try:
        with pytest.raises(GlobalStoreError, match=r"etcd at 127\.0\.0\.1"):
            store.get("k")
    finally:
        store.close()
