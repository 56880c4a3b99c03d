"""The claim-order index (ready/): priority first, then creation time; kept in step with the queue."""
import time
from runkit.core.clock import SYSTEM

from stado.store import cas
from stado import jobs
from stado.core import keys
from stado.queue import submission
from stado.core import documents as d
from stado.objectstore.memory import MemoryStore
from stado.queue.readyindex import reconcile
from stado.core.spec import JobSpec

FAIL = d.classify_exit(1, None, timed_out=False, timeout=None)


def submit(store, command, priority=0, retries=0):
    return submission.submit(store, [submission.Submission(JobSpec(command, priority=priority, retries=retries))], clock=SYSTEM)[0]


def order(store):
    return [cas.read(store, e.key)[0]["spec"]["command"] for e in store.list(keys.READY)]


def test_the_index_lists_priority_first_then_creation_time():
    store = MemoryStore()
    for command, priority in (("low-1", -5), ("mid-1", 0), ("top", 1000), ("mid-2", 0), ("bottom", -1000),
                              ("low-2", -5), ("high", 7)):
        submit(store, command, priority)
    assert order(store) == ["top", "high", "mid-1", "mid-2", "low-1", "low-2", "bottom"]


def test_claims_requeues_and_cancels_keep_the_index_in_step():
    store = MemoryStore()
    flaky = submit(store, "flaky", retries=1)
    other = submit(store, "other")
    queued = cas.read(store, keys.queued(flaky["id"]))
    doc, version = jobs.claim(store, queued[0], agent_id="a", instance_ref="local@h", lease_expires_at=0,
                              queued_version=queued[1], now=time.time())
    assert order(store) == ["other"]                                      # claimed: off the index
    jobs.finish(store, doc, version, FAIL, now=time.time())
    assert sorted(order(store)) == ["flaky", "other"]                     # its retry is indexed again
    entry = cas.read(store, keys.ready(0, flaky["id"]))[0]
    assert entry["failures"] == 1 and entry == cas.read(store, keys.queued(flaky["id"]))[0]
    jobs.cancel(store, other["id"], by="op", clock=SYSTEM)
    assert order(store) == ["flaky"]


def test_reconcile_indexes_what_is_missing_and_drops_what_points_at_nothing():
    store = MemoryStore()
    kept = submit(store, "kept")
    lost = submit(store, "lost-from-index")
    store.delete(keys.ready(0, lost["id"]))                               # e.g. queued by an older stado
    dangling = d.queued_doc("0190aaaa-0000-7000-8000-000000000000", {"command": "gone"}, now=0, submitter="t",
                            nonce="n")
    store.put(keys.ready(0, dangling["id"]), d.encode(dangling))          # claimed before it was unindexed
    lines = reconcile(store)
    assert sorted(lines) == sorted([f"{lost['id']}: queued but missing from the claim-order index; indexed",
                                    f"{dangling['id']}: removed a claim-order index entry whose job is no longer "
                                    "queued"])
    assert sorted(order(store)) == ["kept", "lost-from-index"] and kept
    assert reconcile(store) == []


def test_a_high_priority_job_behind_ten_thousand_low_ones_starts_next(tmp_path):
    from stado.agent import Agent, AgentConfig
    from stado.objectstore.metered import MeteredStore

    from .inprocess import FakeHost, FakeIO, FakeWorkspace

    inner = MemoryStore()
    submission.submit(inner, [submission.Submission(JobSpec(f"sleep {n}", priority=-1)) for n in range(10_000)], clock=SYSTEM)
    urgent = submit(inner, "urgent", priority=5)
    store = MeteredStore(inner)
    started = []
    host = FakeHost(SYSTEM)
    agent = Agent(store, AgentConfig(work_root=str(tmp_path), stado_bin="/bin/false", host="h"),
                  log=lambda _: None, host=host, workspace=FakeWorkspace(), new_io=lambda *a, **k: FakeIO())
    agent.claim()
    started += [p.command for p in host.procs.values()]
    assert started == ["urgent"]
    assert store.by_prefix[("LIST", "ready")] == 1 and ("LIST", "queue") not in store.by_prefix
    assert store.counts["GET"] < 20, store.counts                          # the head only, not 10,000 entries
    assert cas.read(inner, keys.running(urgent["id"]))[0]["owner"] == agent.id


def test_a_window_full_of_jobs_this_agent_cannot_run_is_looked_past(tmp_path):
    from stado.agent import Agent, AgentConfig

    from .inprocess import FakeHost, FakeIO, FakeWorkspace

    store = MemoryStore()
    submission.submit(store, [submission.Submission(JobSpec("on a gpu", capabilities=("gpu",), priority=9))
                              for _ in range(30)], clock=SYSTEM)
    cpu = submit(store, "on a cpu")
    agent = Agent(store, AgentConfig(work_root=str(tmp_path), stado_bin="/bin/false", host="h", window=10),
                  log=lambda _: None, host=FakeHost(SYSTEM), workspace=FakeWorkspace(), new_io=lambda *a, **k: FakeIO())
    for _ in range(6):
        agent.claim()
        started = list(agent.slots)
        if started:
            break
    assert started == [cpu["id"]]
