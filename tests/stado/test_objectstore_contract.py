"""One contract for every object-store backend: memory, the local directory, SeaweedFS (S3), Azurite."""
import json
import multiprocessing
import threading
import time

import pytest

from stado.objectstore import (AccessDenied, AlreadyExists, InvalidKey, NotFound, PreconditionFailed, StoreUnavailable,
                               open_store)
from stado.objectstore.memory import MemoryStore
from stado.objectstore.tombstones import TombstoneDeletes

from .faultproxy import Rule, for_target, through
from .servers import free_port
from .storekit import StoreTarget, claim_keys, claim_process, increment_process, make_target, server_for

# memory-tombstone: the in-memory store behind the tombstone emulation of a conditional delete, the way
# GCS stores run (no local GCS server works with obstore; see docs/stado-protocol.md, "GCS gap"). s3-faulty: SeaweedFS through the
# fault proxy, which fails a fifth of the requests before they reach the server (503, 500, reset, garbled) and
# holds some answers back: the retries (objectstore/retries.py) must hide all of it.
ALL = ["memory", "memory-tombstone", "file", "s3", "s3-faulty", "azure"]
CLOUD = ["s3", "azure"]


def _not_multipart(method: str, target: str) -> bool:
    # A stream of chunks cannot be sent twice (CloudStore.put_chunks): the POSTs that start and end its multipart
    # upload are tried again by obstore on a 5xx, never on a reset. Its parts (plain PUTs) stay in the faults.
    return not (method == "POST" and ("uploads" in target or "uploadId" in target))


@pytest.fixture(params=ALL)
def store(request, tmp_path):
    if request.param == "memory":
        yield MemoryStore()
        return
    if request.param == "memory-tombstone":
        yield TombstoneDeletes(MemoryStore())
        return
    if request.param == "s3-faulty":
        target = make_target("s3", tmp_path, server_for(request, "s3"))
        with for_target(target, seed=17) as proxy:
            proxy.set_rules([Rule("fail_before", rate=0.2, where=_not_multipart),
                             Rule("delay", rate=0.05, delay=(0.05, 0.3))])
            # Ten retries: a request that a fifth of all tries fail is failed eleven times in a row once in 50 million.
            opened = through(target, proxy, max_retries=10).open()
            yield opened
            opened.close()
        return
    target = make_target(request.param, tmp_path, server_for(request, request.param))
    opened = target.open()
    yield opened
    opened.close()


def keys_of(entries):
    return [entry.key for entry in entries]


# -- get / put / delete -------------------------------------------------------------------------

def test_get_of_a_missing_key_raises_not_found(store):
    with pytest.raises(NotFound):
        store.get("queue/missing.json")


def test_put_then_get_returns_the_bytes_and_one_version_everywhere(store):
    data = bytes(range(256)) * 3
    written = store.put("status/j1/output/0001", data)
    blob = store.get("status/j1/output/0001")
    assert blob.data == data
    assert blob.version == written
    [entry] = store.list("status/j1")
    assert (entry.key, entry.version, entry.size) == ("status/j1/output/0001", written, len(data))
    assert abs(entry.modified - time.time()) < 300


def test_empty_object_round_trips(store):
    store.put_if_absent("queue/empty.json", b"")
    assert store.get("queue/empty.json").data == b""


@pytest.mark.parametrize("pieces", [[], [b"a", b"", b"bc"], [bytes([n]) * (1 << 20) for n in range(11)]],
                         ids=["empty", "small", "11MiB"])
def test_put_chunks_writes_the_pieces_as_one_object(store, pieces):
    """The large body crosses the cloud backends' multipart threshold (two 5 MiB parts)."""
    data = b"".join(pieces)
    written = store.put_chunks("status/j1/artifacts/big", iter(pieces))
    blob = store.get("status/j1/artifacts/big")
    assert (blob.data == data, blob.version, store.head("status/j1/artifacts/big").size) == (True, written, len(data))


def test_get_range_reads_part_of_an_object_with_its_version(store):
    data = bytes(range(256)) * 40
    written = store.put("status/j1/artifacts/model.bin", data)
    for start, length in [(0, 1), (0, len(data)), (7, 100), (4000, 5000), (len(data) - 1, 10), (0, 10 * len(data))]:
        blob = store.get_range("status/j1/artifacts/model.bin", start, length)
        assert blob.data == data[start:start + length], (start, length)
        assert blob.version == written


def test_get_range_at_or_past_the_end_is_empty_and_a_missing_key_is_not_found(store):
    written = store.put("status/j1/artifacts/a", b"0123456789")
    assert store.get_range("status/j1/artifacts/a", 10, 5) == (b"", written)
    assert store.get_range("status/j1/artifacts/a", 99, 1).data == b""
    empty = store.put("status/j1/artifacts/empty", b"")
    assert store.get_range("status/j1/artifacts/empty", 0, 5) == (b"", empty)
    with pytest.raises(NotFound):
        store.get_range("status/j1/artifacts/missing", 0, 5)
    for start, length in [(-1, 5), (0, 0)]:
        with pytest.raises(ValueError):
            store.get_range("status/j1/artifacts/a", start, length)


def test_a_store_that_does_not_override_get_range_reads_through_get():
    from stado.objectstore.base import ObjectStore

    class GetOnly(ObjectStore):
        def __init__(self, inner):
            self.inner = inner

        def get(self, key):
            return self.inner.get(key)

    inner = MemoryStore()
    version = inner.put("k", b"abcdef")
    assert GetOnly(inner).get_range("k", 2, 3) == (b"cde", version)


def test_put_overwrites_and_changes_the_version(store):
    first = store.put("agents/a1.json", b'{"seen": 1}')
    second = store.put("agents/a1.json", b'{"seen": 2}')
    assert second != first
    assert store.get("agents/a1.json") == (b'{"seen": 2}', second)


def test_delete_removes_and_a_missing_key_is_fine(store):
    store.put("queue/j1.json", b"{}")
    store.delete("queue/j1.json")
    with pytest.raises(NotFound):
        store.get("queue/j1.json")
    store.delete("queue/j1.json")
    store.delete("never/was/there.json")
    assert keys_of(store.list("queue")) == []


# -- list_page -------------------------------------------------------------------------------------

def test_list_page_gives_one_bounded_page_in_key_order(store):
    for n in range(7):
        store.put(f"ready/{n:04d}-job", b"{}")
    store.put("ready2/x", b"{}")
    first = store.list_page("ready", limit=3)
    assert keys_of(first) == ["ready/0000-job", "ready/0001-job", "ready/0002-job"]
    rest = store.list_page("ready", start_after=first[-1].key, limit=10)
    assert keys_of(rest) == [f"ready/{n:04d}-job" for n in range(3, 7)]
    assert store.list_page("ready", start_after="ready/0006-job") == []
    assert [e.version for e in first] == [e.version for e in list(store.list("ready"))[:3]]


# -- head ------------------------------------------------------------------------------------------

def test_head_gives_the_listing_entry_without_the_bytes(store):
    before = time.time()
    version = store.put("status/j1/heartbeat", b'{"at": 1}')
    store.put("status/j1/output/00000001", b"x" * 10)
    entry = store.head("status/j1/heartbeat")
    assert (entry.key, entry.version, entry.size) == ("status/j1/heartbeat", version, 9)
    assert abs(entry.modified - before) < 300
    assert entry == next(e for e in store.list("status/j1") if e.key == "status/j1/heartbeat")
    with pytest.raises(NotFound):
        store.head("status/j1/missing")


# -- conditional delete --------------------------------------------------------------------------

def test_delete_if_match_removes_only_the_version_read(store):
    first = store.put_if_absent("queue/j1.json", b'{"generation": 1}')
    second = store.put_if_match("queue/j1.json", b'{"generation": 2}', first)
    assert store.delete_if_match("queue/j1.json", first) is False
    assert store.get("queue/j1.json") == (b'{"generation": 2}', second)
    assert store.delete_if_match("queue/j1.json", second) is True
    with pytest.raises(NotFound):
        store.get("queue/j1.json")
    assert store.delete_if_match("queue/j1.json", second) is False
    assert keys_of(store.list("queue")) == []


def test_a_stale_delete_never_removes_a_recreated_key(store):
    old = store.put_if_absent("queue/j1.json", b'{"generation": 1, "nonce": "a"}')
    assert store.delete_if_match("queue/j1.json", old) is True
    new = store.put_if_absent("queue/j1.json", b'{"generation": 3, "nonce": "b"}')
    assert store.delete_if_match("queue/j1.json", old) is False
    assert store.get("queue/j1.json") == (b'{"generation": 3, "nonce": "b"}', new)


def test_a_key_deleted_conditionally_can_be_created_again(store):
    version = store.put_if_absent("running/j1.json", b"one")
    assert store.delete_if_match("running/j1.json", version)
    again = store.put_if_absent("running/j1.json", b"two")
    assert store.get("running/j1.json") == (b"two", again)


# -- create-if-absent -----------------------------------------------------------------------------

def test_second_put_if_absent_fails_and_keeps_the_first(store):
    version = store.put_if_absent("running/j1.json", b'{"worker": "a"}')
    with pytest.raises(AlreadyExists):
        store.put_if_absent("running/j1.json", b'{"worker": "b"}')
    assert store.get("running/j1.json") == (b'{"worker": "a"}', version)


def test_put_if_absent_succeeds_again_after_delete(store):
    store.put_if_absent("running/j1.json", b"a")
    store.delete("running/j1.json")
    store.put_if_absent("running/j1.json", b"b")
    assert store.get("running/j1.json").data == b"b"


# -- compare-and-swap -----------------------------------------------------------------------------

def test_put_if_match_with_the_current_version_replaces(store):
    v1 = store.put_if_absent("running/j1.json", b'{"generation": 1}')
    v2 = store.put_if_match("running/j1.json", b'{"generation": 2}', v1)
    assert v2 != v1
    assert store.get("running/j1.json") == (b'{"generation": 2}', v2)
    v3 = store.put_if_match("running/j1.json", b'{"generation": 3}', v2)
    assert store.get("running/j1.json") == (b'{"generation": 3}', v3)


def test_put_if_match_with_a_stale_version_fails_and_changes_nothing(store):
    v1 = store.put_if_absent("running/j1.json", b'{"generation": 1}')
    v2 = store.put_if_match("running/j1.json", b'{"generation": 2}', v1)
    with pytest.raises(PreconditionFailed):
        store.put_if_match("running/j1.json", b'{"generation": 99}', v1)
    assert store.get("running/j1.json") == (b'{"generation": 2}', v2)


def test_put_if_match_with_a_listed_version(store):
    store.put("running/j1.json", b"a")
    [entry] = store.list("running")
    store.put_if_match("running/j1.json", b"b", entry.version)
    with pytest.raises(PreconditionFailed):
        store.put_if_match("running/j1.json", b"c", entry.version)


def test_identical_bytes_rewrite_and_a_stale_version(store):
    """ABA: A reads v1, B rewrites the same bytes. Where versions are unique, A's stale version must
    fail; where they are content hashes (S3-compatible ETags), the store says so and the stale write
    lands: that is why every stado document carries a generation and a nonce."""
    body = b'{"state": "running", "generation": 1}'
    v1 = store.put_if_absent("running/j1.json", body)
    store.put_if_match("running/j1.json", body, v1)  # identical bytes, through a CAS
    if store.unique_versions:
        with pytest.raises(PreconditionFailed):
            store.put_if_match("running/j1.json", b"stale writer", v1)
        store.put("running/j1.json", body)  # identical bytes, unconditionally
        with pytest.raises(PreconditionFailed):
            store.put_if_match("running/j1.json", b"stale writer", v1)
    else:
        assert store.put_if_match("running/j1.json", body, v1) == v1  # the hazard, as documented
    # Documents whose bytes differ (a new generation) always fence the stale writer.
    store.put("running/j1.json", b'{"state": "running", "generation": 2}')
    with pytest.raises(PreconditionFailed):
        store.put_if_match("running/j1.json", b"stale writer", v1)


def test_stale_version_fails_after_delete_and_identical_recreate(store):
    body = b'{"state": "queued"}'
    v1 = store.put_if_absent("queue/j1.json", body)
    store.delete("queue/j1.json")
    with pytest.raises(PreconditionFailed):
        store.put_if_match("queue/j1.json", b"x", v1)
    store.put_if_absent("queue/j1.json", body)
    if store.unique_versions:
        with pytest.raises(PreconditionFailed):
            store.put_if_match("queue/j1.json", b"x", v1)


def test_put_if_match_on_a_missing_key_fails(store):
    version = store.put("elsewhere.json", b"{}")
    with pytest.raises(PreconditionFailed):
        store.put_if_match("running/missing.json", b"{}", version)
    with pytest.raises(NotFound):
        store.get("running/missing.json")


# -- list -------------------------------------------------------------------------------------------

LISTED = ["queue/a.json", "queue/b.json", "queue/sub/c.json", "queue2/d.json", "queued.json",
          "status/j1/heartbeat", "status/j1/output/0001", "status/j10/heartbeat"]


def test_list_matches_whole_segments_in_key_order(store):
    for key in reversed(LISTED):
        store.put(key, key.encode())
    queue = ["queue/a.json", "queue/b.json", "queue/sub/c.json"]
    assert keys_of(store.list("queue/")) == queue
    assert keys_of(store.list("queue")) == queue
    assert keys_of(store.list("status/j1/")) == ["status/j1/heartbeat", "status/j1/output/0001"]
    assert keys_of(store.list("status/j1")) == ["status/j1/heartbeat", "status/j1/output/0001"]
    assert keys_of(store.list("que")) == []
    assert keys_of(store.list("nothing/here")) == []
    assert keys_of(store.list("")) == sorted(LISTED)
    sizes = {entry.key: entry.size for entry in store.list("")}
    assert sizes == {key: len(key) for key in LISTED}


@pytest.mark.parametrize("bad", ["", "/queue/a.json", "queue//a.json", "queue/../a.json", "./a", "queue/"])
def test_bad_keys_are_refused(store, bad):
    with pytest.raises(InvalidKey):
        store.put(bad, b"x")
    with pytest.raises(InvalidKey):
        store.get(bad)


# -- URL prefixes, credentials, reachability --------------------------------------------------------

@pytest.mark.parametrize("backend", ["file", "s3", "azure"])
def test_the_url_prefix_isolates_stores(request, tmp_path, backend):
    base = make_target(backend, tmp_path, server_for(request, backend))
    a = StoreTarget(backend, base.url + "/a", base.options, base.env).open()
    b = StoreTarget(backend, base.url + "/b", base.options, base.env).open()
    a.put("queue/j1.json", b"in a")
    assert keys_of(b.list("")) == []
    with pytest.raises(NotFound):
        b.get("queue/j1.json")
    b.put_if_absent("queue/j1.json", b"in b")
    assert a.get("queue/j1.json").data == b"in a"
    b.delete("queue/j1.json")
    assert keys_of(a.list("queue")) == ["queue/j1.json"]
    if backend != "file":  # a parent prefix sees the child's objects under the child's prefix
        parent = base.open()
        assert keys_of(parent.list("")) == ["a/queue/j1.json"]


def _every_verb(store):
    yield "get", lambda: store.get("queue/j1.json")
    yield "get_range", lambda: store.get_range("queue/j1.json", 0, 10)
    yield "put_if_absent", lambda: store.put_if_absent("queue/j1.json", b"x")
    yield "put", lambda: store.put("queue/j1.json", b"x")
    yield "list", lambda: list(store.list("queue"))
    yield "delete", lambda: store.delete("queue/j1.json")


@pytest.mark.parametrize("backend", CLOUD)
def test_wrong_credentials_are_access_denied(request, tmp_path, backend):
    target = make_target(backend, tmp_path, server_for(request, backend))
    wrong = dict(target.env)
    secret = "AWS_SECRET_ACCESS_KEY" if backend == "s3" else "AZURE_STORAGE_ACCOUNT_KEY"
    wrong[secret] = "d3Jvbmcgc2VjcmV0IGZvciB0ZXN0aW5nIG9ubHk="
    store = open_store(target.url, target.options, env=wrong)
    for verb, call in _every_verb(store):
        with pytest.raises(AccessDenied) as caught:
            call()
        message = str(caught.value)
        assert "\n" not in message and "403" in message, (verb, message)
    target.open().put("queue/j1.json", b"the right key still works")


@pytest.mark.parametrize("backend", CLOUD)
def test_an_unreachable_endpoint_is_store_unavailable(request, tmp_path, backend):
    target = make_target(backend, tmp_path, server_for(request, backend))
    port = free_port()  # nothing listens there
    endpoint = f"http://127.0.0.1:{port}" + ("/devstoreaccount1" if backend == "azure" else "")
    store = open_store(target.url, {**target.options, "endpoint": endpoint}, env=target.env)
    for verb, call in _every_verb(store):
        started = time.monotonic()
        with pytest.raises(StoreUnavailable) as caught:
            call()
        message = str(caught.value)
        assert "\n" not in message and f"127.0.0.1:{port}" in message and "refused" in message, (verb, message)
        assert time.monotonic() - started < 15, verb


# -- races between processes -----------------------------------------------------------------------

RACERS = 16
RACE_KEYS = [f"running/job-{i:04d}.json" for i in range(200)]


def _check_one_winner_per_key(store, results, racers):
    reported = {}
    for worker, won, _ in results:
        assert isinstance(won, list), f"worker {worker} failed: {won}"
        for key in won:
            assert key not in reported, f"double winners for {key}: workers {reported[key]} and {worker}"
            reported[key] = worker
    stored = {key: json.loads(store.get(key).data)["worker"] for key in RACE_KEYS}
    # A client retry can turn a landed create into "already exists" for its own writer (the domain
    # reads its nonce back then): that key has no reported winner, and the stored body names the writer.
    own_retries = sorted(set(RACE_KEYS) - set(reported))
    assert {key: stored[key] for key in reported} == reported
    seconds = max(elapsed for *_, elapsed in results)
    attempts = len(RACE_KEYS) * racers
    print(f"\n{len(RACE_KEYS)} keys x {racers} racers: {attempts} creates in {seconds:.2f} s "
          f"= {attempts / seconds:.0f} ops/s; {len(set(reported.values()))} distinct winners; "
          f"{len(own_retries)} keys won through a retried request")
    assert len(own_retries) <= len(RACE_KEYS) // 20, f"too many keys with no reported winner: {own_retries}"


def test_claim_race_threads_memory():
    store = MemoryStore()
    barrier = threading.Barrier(RACERS)
    results = []

    def run(worker):
        results.append((worker, *claim_keys(store, worker, RACE_KEYS, barrier)))

    threads = [threading.Thread(target=run, args=(worker,)) for worker in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(results) == RACERS
    _check_one_winner_per_key(store, results, RACERS)


def _run_spawned(target_fn, args_for, count):
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(count), ctx.Queue()
    procs = [ctx.Process(target=target_fn, args=(*args_for(i), barrier, results)) for i in range(count)]
    for proc in procs:
        proc.start()
    try:
        collected = [results.get(timeout=180) for _ in procs]
    finally:
        for proc in procs:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
    return collected


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["file", "s3", "azure"])
def test_claim_race_processes(request, tmp_path, backend):
    """16 processes, released together, race put_if_absent over the same 200 keys in the same order."""
    target = make_target(backend, tmp_path, server_for(request, backend))
    results = _run_spawned(claim_process, lambda i: (target.url, target.options, target.env, i, RACE_KEYS), RACERS)
    _check_one_winner_per_key(target.open(), results, RACERS)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["file", "s3", "azure"])
def test_compare_and_swap_race_loses_no_update(request, tmp_path, backend):
    """4 processes each add 1 to one counter 20 times through get + put_if_match: the total is exact."""
    target = make_target(backend, tmp_path, server_for(request, backend))
    store = target.open()
    store.put_if_absent("counter.json", json.dumps({"count": 0, "nonce": ""}).encode())
    workers, times = 4, 20
    started = time.perf_counter()
    results = _run_spawned(increment_process,
                           lambda i: (target.url, target.options, target.env, "counter.json", times), workers)
    assert all(isinstance(r, int) for r in results), results
    assert json.loads(store.get("counter.json").data)["count"] == workers * times
    print(f"\n{workers * times} contended increments, {sum(results)} conflicts retried, "
          f"{time.perf_counter() - started:.2f} s including process start")


def test_keys_with_spaces_unicode_and_url_characters(store):
    keys = sorted(["status/j1/artifacts/my file (1).txt", "status/j1/artifacts/ünïcødé.bin",
                   "status/j1/artifacts/a+b=c%20d&e#f?g.txt", "status/j1/artifacts/~tilde'quote\".txt"])
    for key in keys:
        store.put_if_absent(key, key.encode())
    assert keys_of(store.list("status/j1/artifacts")) == keys
    for key in keys:
        assert store.get(key).data == key.encode()
        store.delete(key)
    assert keys_of(store.list("status/j1")) == []
