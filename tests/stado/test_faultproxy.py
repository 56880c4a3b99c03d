"""The fault proxy's own tests, against the real SeaweedFS: what each fault does to a request, as a client (obstore,
tried once: max_retries = 0) and the server (read directly, not through the proxy) each see it, and its ledger."""
import threading
import time

import pytest

from stado.objectstore import NotFound, StoreUnavailable
from stado.objectstore.base import Version

from .faultproxy import ANSWERS, GARBLES, KINDS, FaultProxy, Rule, for_target, through
from .storekit import make_target
from tests.helpers import wait_for

ONCE = {"max_retries": 0}


@pytest.fixture
def target(seaweedfs, tmp_path):
    return make_target("s3", tmp_path, seaweedfs)


@pytest.fixture
def proxy(target):
    with for_target(target, seed=7) as proxy:
        yield proxy


@pytest.fixture
def direct(target):
    store = target.open()
    yield store
    store.close()


def opened(target, proxy, **options):
    return through(target, proxy, **options).open()


@pytest.mark.parametrize("answer", ANSWERS)
def test_a_create_committed_then_lost_is_in_the_store_though_its_client_saw_an_error(target, proxy, direct, answer):
    store = opened(target, proxy, **ONCE)
    proxy.add(Rule("commit_then_lose", kinds=("create",), answers=(answer,)))
    with pytest.raises(StoreUnavailable):
        store.put_if_absent("queue/j1.json", b"mine")
    assert direct.get("queue/j1.json").data == b"mine"
    [exchange] = proxy.exchanges(kind="create", key="queue/j1.json")
    assert exchange.forwarded and exchange.server_status == 200 and exchange.committed and exchange.lost
    assert exchange.told.split(":")[0] == answer
    assert exchange.client_status == ({"503": 503, "500": 500}.get(answer))
    assert proxy.lost() == [exchange]


@pytest.mark.parametrize("answer", ANSWERS)
def test_a_create_failed_before_is_not_in_the_store(target, proxy, direct, answer):
    store = opened(target, proxy, **ONCE)
    proxy.add(Rule("fail_before", kinds=("create",), answers=(answer,)))
    with pytest.raises(StoreUnavailable):
        store.put_if_absent("queue/j1.json", b"mine")
    with pytest.raises(NotFound):
        direct.get("queue/j1.json")
    [exchange] = proxy.exchanges(kind="create")
    assert not exchange.forwarded and exchange.server_status is None and not exchange.committed
    assert exchange.fault == "fail_before" and exchange.told.split(":")[0] == answer


@pytest.mark.parametrize("how", GARBLES)
@pytest.mark.parametrize("kind", ["get", "put", "create"])
def test_a_garbled_answer_is_an_error_to_obstore_never_a_success(target, proxy, direct, kind, how):
    direct.put("status/j1/output", b"x" * 5000)
    store = opened(target, proxy, **ONCE)
    proxy.add(Rule("commit_then_lose", kinds=(kind,), answers=("garble",), garbles=(how,)))
    call = {"get": lambda: store.get("status/j1/output"), "put": lambda: store.put("status/j1/other", b"y"),
            "create": lambda: store.put_if_absent("queue/j1.json", b"z")}[kind]
    with pytest.raises(StoreUnavailable):
        call()
    [exchange] = proxy.exchanges(kind=kind)
    assert exchange.told == f"garble:{how}" and exchange.committed and exchange.client_status is None


def test_a_delay_holds_the_answer_and_answers_on_other_connections_overtake_it(target, proxy, direct):
    direct.put("slow", b"s")
    direct.put("fast", b"f")
    slow, fast = opened(target, proxy), opened(target, proxy)  # two clients: two connections
    proxy.add(Rule("delay", kinds=("get",), prefix="slow", delay=(1.5, 1.5)))
    got = {}

    def read_slow():
        started = time.monotonic()
        got["slow"] = (slow.get("slow").data, time.monotonic() - started)

    reader = threading.Thread(target=read_slow)
    reader.start()
    wait_for(lambda: proxy.exchanges(key="slow"), 10, message="the slow request at the proxy")
    assert fast.get("fast").data == b"f"
    reader.join(20)
    assert got["slow"][0] == b"s" and got["slow"][1] >= 1.5
    [held] = proxy.exchanges(key="slow")
    [quick] = proxy.exchanges(key="fast")
    # The proxy marks an exchange done just after its answer is passed on: the client may read it first.
    wait_for(lambda: held.done is not None and quick.done is not None, 10, message="both exchanges marked done")
    assert held.at < quick.at and quick.done < held.done  # asked first, answered last: reordered
    assert held.held == 1.5 and held.told == "passed" and quick.held == 0


def test_a_storm_answers_every_kind_503_unforwarded_until_it_ends(target, proxy, direct):
    direct.put("k", b"v")
    store = opened(target, proxy, **ONCE)
    proxy.storm(60)
    for call in (lambda: store.get("k"), lambda: store.put("k", b"w"), lambda: store.list_page(""),
                 lambda: store.put_if_absent("n", b"x"), lambda: store.delete("k"),
                 lambda: store.delete_if_match("k", direct.head("k").version)):
        with pytest.raises(StoreUnavailable):
            call()
    assert all(e.fault == "storm" and not e.forwarded and e.told == "503" for e in proxy.ledger)
    assert direct.get("k").data == b"v"
    proxy.calm()
    assert store.get("k").data == b"v" and proxy.ledger[-1].told == "passed"


def test_a_burst_makes_every_rule_fire_until_it_ends(target, proxy, direct):
    direct.put("k", b"v")
    store = opened(target, proxy, **ONCE)
    proxy.add(Rule("fail_before", kinds=("get",), rate=0.0, answers=("500",)))
    assert store.get("k").data == b"v"
    with proxy.burst(rate=1.0):
        for _ in range(3):
            with pytest.raises(StoreUnavailable):
                store.get("k")
    assert store.get("k").data == b"v"
    assert [e.told for e in proxy.exchanges(kind="get")] == ["passed", "500", "500", "500", "passed"]
    with proxy.burst(rate=1.0, seconds=0.0):  # already over: the rule's own rate again
        assert store.get("k").data == b"v"


def test_a_rule_with_a_prefix_and_a_limit_fires_only_there_and_only_so_often(target, proxy, direct):
    store = opened(target, proxy, **ONCE)
    proxy.add(Rule("fail_before", kinds=("put",), prefix="queue/", answers=("503",), limit=1))
    store.put("status/a", b"1")
    with pytest.raises(StoreUnavailable):
        store.put("queue/a", b"2")
    store.put("queue/a", b"3")
    assert [(e.key, e.told) for e in proxy.exchanges(kind="put")] == [
        ("status/a", "passed"), ("queue/a", "503"), ("queue/a", "passed")]
    assert direct.get("queue/a").data == b"3"


def test_the_ledger_names_every_kind_and_key_and_what_each_side_saw(target, proxy, direct):
    store = opened(target, proxy)
    created = store.put_if_absent("queue/j.json", b"1")
    swapped = store.put_if_match("queue/j.json", b"2", created)
    store.put("status/j/out", b"o")
    store.get("queue/j.json")
    store.head("queue/j.json")
    store.list_page("queue")
    assert store.delete_if_match("queue/j.json", swapped)
    store.delete("status/j/out")
    assert not store.delete_if_match("queue/gone.json", Version('"0123"'))
    seen = [(e.kind, e.key, e.server_status, e.told) for e in proxy.ledger]
    assert seen == [("create", "queue/j.json", 200, "passed"), ("cas", "queue/j.json", 200, "passed"),
                    ("put", "status/j/out", 200, "passed"), ("get", "queue/j.json", 200, "passed"),
                    ("head", "queue/j.json", 200, "passed"), ("list", "queue/", 200, "passed"),
                    ("delete_if_match", "queue/j.json", 204, "passed"), ("delete", "status/j/out", 200, "passed"),
                    ("delete_if_match", "queue/gone.json", seen[-1][2], "passed")]
    assert seen[-1][2] in (404, 412)
    assert set(e.kind for e in proxy.ledger) == set(KINDS)
    assert all(e.forwarded and not e.lost and e.fault is None for e in proxy.ledger)


def test_rules_are_checked_when_made_and_the_proxy_closes_cleanly(target):
    with pytest.raises(ValueError):
        Rule("explode")
    with pytest.raises(ValueError):
        Rule("fail_before", kinds=("post",))
    proxy = for_target(target)
    store = opened(target, proxy, **ONCE)
    store.put("k", b"v")
    proxy.close()
    with pytest.raises(StoreUnavailable):
        store.get("k")
    assert isinstance(proxy, FaultProxy) and not proxy._acceptor.is_alive()
