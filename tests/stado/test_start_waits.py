"""An agent at start waits out a store that is briefly unwell (guarantees.ensure_safe's `wait`), through the fault
proxy in front of the real SeaweedFS; what is not unwell but wrong is refused at once, as before."""
from runkit.core.clock import SYSTEM
import re
import time

import pytest

from stado.objectstore import AccessDenied, StoreUnwell
from stado.store.guarantees import UnsafeStore, ensure_safe

from .e2e.support import machine_status, run_until_idle, submit
from .faultproxy import Rule, for_target, through
from .faulty import IgnoresConditions
from .storekit import make_target


@pytest.fixture
def target(seaweedfs, tmp_path):
    return make_target("s3", tmp_path, seaweedfs)


@pytest.fixture
def proxy(target):
    with for_target(target, seed=5) as proxy:
        yield proxy


def test_an_agent_started_in_a_503_storm_waits_it_out_and_runs_the_job(target, proxy, make_stado_env, tmp_path):
    env = make_stado_env(through(target, proxy))
    job = submit(env, "echo ran")
    proxy.storm(4)
    agent = run_until_idle(env, tmp_path, timeout=120)
    log = agent.log()
    assert agent.returncode == 0, log
    assert machine_status(env, job)["state"] == "completed"
    stormed = [e for e in proxy.ledger if e.fault == "storm"]
    assert len(stormed) > 5 and all(not e.forwarded for e in stormed)  # the probe was refused, more than once
    assert log.count("waiting up to 60 s for the store") == 1 and "answered 503 SlowDown" in log, log
    assert log.count("answered after") == 1, log


def test_a_storm_longer_than_the_wait_is_refused_after_it(target, proxy):
    store = through(target, proxy).open()
    proxy.storm(120)
    lines = []
    started = time.monotonic()
    with pytest.raises(StoreUnwell) as caught:
        ensure_safe(store, log=lines.append, wait=3, clock=SYSTEM)
    took = time.monotonic() - started
    assert 3 <= took < 15
    waited = re.search(r"; waited (\d+) s for it at the agent's start$", str(caught.value))
    assert waited and 3 <= int(waited.group(1)) <= took + 1 and "\n" not in str(caught.value), str(caught.value)
    assert len(lines) == 1 and "waiting up to 3 s" in lines[0]


def test_a_reset_during_the_probe_is_waited_for_not_fatal(target, proxy):
    """One reset of the probe's create: obstore does not try a create again on a reset; the store's policy does."""
    store = through(target, proxy).open()
    proxy.add(Rule("fail_before", kinds=("create",), answers=("reset",), limit=1))
    lines = []
    ensure_safe(store, log=lines.append, clock=SYSTEM)
    assert [e.told for e in proxy.exchanges(kind="create")][:2] == ["reset", "passed"]
    assert lines == [f"store {store.where} honours create-if-absent, compare-and-swap and conditional delete"]


def test_credentials_refused_and_an_unsafe_store_are_refused_at_once(target, proxy):
    wrong = through(target, proxy)
    wrong.env = {**wrong.env, "AWS_SECRET_ACCESS_KEY": "not-the-secret"}
    started = time.monotonic()
    with pytest.raises(AccessDenied):
        ensure_safe(wrong.open(), wait=60, clock=SYSTEM)
    with pytest.raises(UnsafeStore):
        ensure_safe(IgnoresConditions(through(target, proxy).open()), wait=60, clock=SYSTEM)
    assert time.monotonic() - started < 10
