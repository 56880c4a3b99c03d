"""One retry policy for every request kind of a cloud store, within the bound STADO_CONFIG sets, through the fault
proxy in front of the real SeaweedFS: what is tried again, how often, for how long, and what is said at the end."""
import time
from dataclasses import replace

import pytest

from stado.objectstore import AlreadyExists, PreconditionFailed, StoreUnavailable, StoreUnwell
from stado.objectstore.base import Version

from .faultproxy import MORE_ANSWERS, Rule, for_target, through
from .servers import free_port
from .storekit import make_target

KIND_CALLS = {
    "create": lambda s, v: s.put_if_absent("queue/new.json", b"n"),
    "cas": lambda s, v: s.put_if_match("queue/k.json", b"c", v),
    "put": lambda s, v: s.put("status/j/out", b"p"),
    "get": lambda s, v: s.get("queue/k.json"),
    "head": lambda s, v: s.head("queue/k.json"),
    "list": lambda s, v: s.list_page("queue"),
    "delete": lambda s, v: s.delete("queue/k.json"),
    "delete_if_match": lambda s, v: s.delete_if_match("queue/k.json", v),
}


@pytest.fixture
def target(seaweedfs, tmp_path):
    return make_target("s3", tmp_path, seaweedfs)


@pytest.fixture
def proxy(target):
    with for_target(target, seed=11) as proxy:
        yield proxy


@pytest.fixture
def direct(target):
    store = target.open()
    yield store
    store.close()


@pytest.mark.parametrize("answer", ["503", "500", "reset", "garble", *MORE_ANSWERS])
@pytest.mark.parametrize("kind", list(KIND_CALLS))
def test_every_kind_is_tried_again_after_a_failure_that_may_pass(target, proxy, direct, kind, answer):
    """Nothing landed on the first try: the second one does, and the call succeeds as if nothing happened."""
    version = direct.put("queue/k.json", b"k")
    store = through(target, proxy).open()
    proxy.add(Rule("fail_before", kinds=(kind,), answers=(answer,), limit=1))
    result = KIND_CALLS[kind](store, version)
    tries = proxy.exchanges(kind=kind)
    assert [e.forwarded for e in tries] == [False, True], [(e.told, e.server_status) for e in tries]
    assert tries[1].committed
    if kind == "delete_if_match":
        assert result is True
    if kind in ("create", "cas", "put"):
        key = {"create": "queue/new.json", "cas": "queue/k.json", "put": "status/j/out"}[kind]
        assert direct.get(key).data == {"create": b"n", "cas": b"c", "put": b"p"}[kind]


@pytest.mark.parametrize("kind", ["create", "cas", "delete", "delete_if_match", "get", "list"])
def test_a_request_that_gets_no_answer_in_time_is_tried_again(target, proxy, direct, kind):
    """The answer is held past the request timeout (the server has committed it): the next try is made. A create
    or a put-if-match then meets its own first try, as the caller's read-back by nonce is there for."""
    version = direct.put("queue/k.json", b"k")
    store = through(target, proxy, timeout=1).open()
    proxy.add(Rule("delay", kinds=(kind,), delay=(2.0, 2.0), limit=1))
    if kind in ("create", "cas"):
        with pytest.raises((AlreadyExists, PreconditionFailed)):
            KIND_CALLS[kind](store, version)
    else:
        KIND_CALLS[kind](store, version)
    tries = proxy.exchanges(kind=kind)
    assert len(tries) == 2 and tries[0].committed and tries[0].held == 2.0


@pytest.mark.parametrize("kind", list(KIND_CALLS))
def test_a_storm_is_tried_max_retries_times_and_then_said_in_one_line(target, proxy, direct, kind):
    version = direct.put("queue/k.json", b"k")
    store = through(target, proxy, max_retries=3, retry_timeout=20).open()
    proxy.storm(120)
    started = time.monotonic()
    with pytest.raises(StoreUnwell) as caught:
        KIND_CALLS[kind](store, version)
    message = str(caught.value)
    assert len(proxy.ledger) == 4, [e.kind for e in proxy.ledger]
    assert time.monotonic() - started < 20
    said = "503 Service Unavailable" if kind == "head" else "503 SlowDown"  # a HEAD's answer has no body to name a code
    assert f"answered {said} to 4 tries over" in message and "raise max_retries" in message, message
    assert "cannot reach" not in message and "\n" not in message
    assert isinstance(caught.value, StoreUnavailable)  # exit 4, as before


@pytest.mark.parametrize("kind", ["get", "create", "delete_if_match"])
def test_retry_timeout_bounds_the_tries_when_it_comes_first(target, proxy, direct, kind):
    version = direct.put("queue/k.json", b"k")
    store = through(target, proxy, max_retries=100, retry_timeout=1.5).open()
    proxy.storm(120)
    started = time.monotonic()
    with pytest.raises(StoreUnwell) as caught:
        KIND_CALLS[kind](store, version)
    took = time.monotonic() - started
    assert 1.5 <= took < 4, took
    assert 2 < len(proxy.ledger) < 100
    assert f"to {len(proxy.ledger)} tries over" in str(caught.value) and "raise retry_timeout" in str(caught.value)


@pytest.mark.parametrize("kind", ["create", "cas", "delete"])
def test_the_tries_obstore_makes_and_ours_count_against_one_bound(target, proxy, direct, kind):
    """Two 503s (obstore tries again itself), then a reset (it does not, for these kinds), then 503s: five tries in
    all with max_retries = 4, whoever made them."""
    version = direct.put("queue/k.json", b"k")
    store = through(target, proxy).open()
    proxy.set_rules([Rule("fail_before", kinds=(kind,), answers=("503",), limit=2),
                     Rule("fail_before", kinds=(kind,), answers=("reset",), limit=1),
                     Rule("fail_before", kinds=(kind,), answers=("503",))])
    with pytest.raises(StoreUnwell) as caught:
        KIND_CALLS[kind](store, version)
    assert [e.told for e in proxy.ledger] == ["503", "503", "reset", "503", "503"]
    assert "to 5 tries over" in str(caught.value)


def test_a_listing_cut_short_mid_way_goes_on_from_the_last_key_it_gave(target, proxy, direct):
    for n in range(5):
        direct.put(f"queue/{n}.json", b"x")
    store = through(target, proxy).open()
    proxy.add(Rule("commit_then_lose", kinds=("list",), answers=("garble",), garbles=("short_body",), limit=1))
    assert [e.key for e in store.list("queue")] == [f"queue/{n}.json" for n in range(5)]
    assert [e.told for e in proxy.exchanges(kind="list")] == ["garble:short_body", "passed"]


def test_a_lost_answer_to_a_conditional_delete_is_false_and_the_key_is_gone(target, proxy, direct):
    """base.py's contract: False says the version no longer stands, here because this very call removed it."""
    version = direct.put("queue/k.json", b"k")
    store = through(target, proxy).open()
    proxy.add(Rule("commit_then_lose", kinds=("delete_if_match",), answers=("503",), limit=1))
    assert store.delete_if_match("queue/k.json", version) is False
    assert [e.server_status for e in proxy.exchanges(kind="delete_if_match")][0] == 204
    assert not direct.list_page("queue")


@pytest.mark.parametrize("how", ["cut_status", "cut_headers", "short_body"])
def test_a_garbled_answer_to_a_conditional_delete_is_a_store_error(target, proxy, direct, how):
    version = direct.put("queue/k.json", b"k")
    store = through(target, proxy, max_retries=0).open()
    proxy.add(Rule("fail_before", kinds=("delete_if_match",), answers=("garble",), garbles=(how,)))
    with pytest.raises(StoreUnwell) as caught:
        store.delete_if_match("queue/k.json", version)
    assert "\n" not in str(caught.value)
    assert direct.get("queue/k.json").data == b"k"


def test_a_refused_connection_is_still_cannot_reach(target):
    closed = f"http://127.0.0.1:{free_port()}"
    store = replace(target, options={**target.options, "endpoint": closed, "max_retries": 1}).open()
    for call in (lambda: store.get("k"), lambda: store.put_if_absent("k", b"x"),
                 lambda: store.delete_if_match("k", Version('"e"'))):
        with pytest.raises(StoreUnwell) as caught:
            call()
        message = str(caught.value)
        assert message.startswith("cannot reach ") and "connection refused, 2 tries over" in message, message
