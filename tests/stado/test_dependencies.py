"""Dependencies (`--after-success`, `--after-failure`, `--after`), the retry policy (`--retryable-exit-code`,
`--retry-delay`, `--retry-backoff`) and why a queued job waits: real agents in process over a real in-memory store
on a ManualClock (tests/stado/inprocess.py), and the submission's resolution over a real local-directory store."""
import time
from runkit.core.clock import SYSTEM
import pytest

from runkit.core.outcomes import EXIT_DEPENDENCY_FAILED

from stado import jobs
from stado.commands.overview import overview, why_queued
from stado.commands.watch import exit_status
from stado.core import documents as d
from stado.core import keys
from stado.core.documents import status_json
from stado.core.errors import BadInput, JobNotFound
from stado.core.spec import JobSpec
from stado.jobs.hold import hold
from stado.objectstore import open_store
from stado.queue import submission
from stado.queue.lookup import view
from stado.queue.pause import pause
from stado.queue.submission import Submission
from stado.store.cas import read

from .inprocess import World


@pytest.fixture
def world(tmp_path):
    return World(tmp_path)


def submit(world: World, command: str = "run 1", *, after=(), **spec) -> str:
    return submission.submit(world.store, [Submission(JobSpec(command=command, **spec), after=tuple(after))],
                             clock=world.clock)[0]["id"]


def state(world: World, job_id: str) -> str:
    return view(world.store, job_id).state


def ended(world: World, *ids: str) -> bool:
    return all(view(world.store, job).terminal for job in ids)


def started(agent, job: str) -> list:
    """The processes the agent's host started for the job, oldest first."""
    return agent.host.of_job(job)


def test_a_dependent_starts_only_once_its_dependency_succeeded(world):
    agent = world.agent(slots=4)
    prep = submit(world, "run 20", name="prep")
    train = submit(world, "run 1", after=[("after_success", "prep")])
    world.run_until(lambda: started(agent, prep))
    world.run_until(lambda: world.clock.now > 1_015)
    assert state(world, train) == "queued" and not started(agent, train)  # four slots free: it waits for prep alone
    world.run_until(lambda: ended(world, train))
    assert view(world.store, train).doc.outcome == "succeeded"
    assert started(agent, train)[0].started >= started(agent, prep)[0].ends


def test_outcomes_of_each_condition_when_the_dependency_fails_succeeds_or_is_cancelled(world):
    agent = world.agent(slots=4)
    bad = submit(world, "run 2 exit 4")
    good = submit(world, "run 2")
    gone = submit(world, "run 600")
    cases = {  # (condition, job depended on) -> the dependent's outcome
        ("after_success", bad): "dependency_failed", ("after_failure", bad): "succeeded", ("after", bad): "succeeded",
        ("after_success", good): "succeeded", ("after_failure", good): "dependency_failed",
        ("after_success", gone): "dependency_failed", ("after_failure", gone): "succeeded",
    }
    dependents = {case: submit(world, "run 1", after=[case]) for case in cases}
    world.run_until(lambda: started(agent, gone))
    jobs.cancel(world.store, gone, by="test", clock=world.clock)
    world.run_until(lambda: ended(world, *dependents.values()))
    for (condition, job), dependent in dependents.items():
        doc = view(world.store, dependent).doc
        assert doc.outcome == cases[(condition, job)], (condition, job, doc.raw)
        if doc.outcome == "dependency_failed":
            assert not started(agent, dependent)  # never ran
            depended = {bad: "failed", good: "completed", gone: "cancelled"}[job]
            assert doc["dependency"] == {"job": job, "condition": condition, "state": depended}
            assert doc.state == "failed" and doc.error["class"] == "dependency" and job in doc.error["message"]
            assert exit_status(status_json(view(world.store, dependent))) == EXIT_DEPENDENCY_FAILED


def test_a_failed_dependency_decides_even_behind_one_that_still_runs(world):
    agent = world.agent(slots=4)
    slow = submit(world, "run 600")
    bad = submit(world, "run 1 exit 1")
    dependent = submit(world, "run 1", after=[("after_success", slow), ("after_success", bad)])
    world.run_until(lambda: ended(world, dependent), limit=60)
    assert view(world.store, dependent).doc["dependency"]["job"] == bad and not started(agent, dependent)
    assert state(world, slow) == "running"


def test_a_dependent_ends_dependency_failed_once_written_by_one_agent(world):
    """Two agents see the same dependent whose dependency failed: the claim (create-if-absent on running/) gives
    one of them the job, and only that one writes its terminal record."""
    a, b = world.agent("a", slots=2), world.agent("b", slots=2)
    bad = submit(world, "run 1 exit 1")
    dependents = [submit(world, "run 1", after=[("after_success", bad)]) for _ in range(6)]
    world.run_until(lambda: ended(world, bad, *dependents))
    for job in dependents:
        doc = view(world.store, job).doc
        assert doc.outcome == "dependency_failed"
        writers = [name for name in ("a", "b") if f"{job}: dependency -> failed" in world.log(name)]
        assert writers == [{a.id: "a", b.id: "b"}[doc.owner]], (writers, doc.owner)


def test_jobs_that_wait_keep_no_room_and_the_claim_order_holds_for_the_ready_ones(world):
    agent = world.agent(slots=1)
    first = submit(world, "run 30")
    waits = submit(world, "run 1", priority=9, after=[("after", first)])
    low = submit(world, "run 1", priority=1)
    high = submit(world, "run 1", priority=5)
    world.run_until(lambda: ended(world, low, high))
    assert started(agent, high)[0].started < started(agent, low)[0].started  # priority, then oldest
    assert state(world, waits) == "queued"  # its dependency runs still
    world.run_until(lambda: ended(world, waits))
    assert started(agent, waits)[0].started >= started(agent, first)[0].ends


def test_only_the_retryable_exit_codes_are_retried(world):
    world.agent()
    other = submit(world, "run 1 exit 3", retries=3, retryable_exit_codes=(2,))
    named = submit(world, "run 1 exit 2", retries=2, retryable_exit_codes=(2, 7))
    world.run_until(lambda: ended(world, other, named))
    assert view(world.store, other).doc.failures == 0 and view(world.store, other).doc.exit_code == 3
    assert view(world.store, named).doc.failures == 2  # the budget spent on exit 2


def test_the_retry_delay_grows_by_the_backoff_and_is_shown_while_it_waits(world):
    agent = world.agent(slots=2)
    job = submit(world, "run 1 exit 1", retries=2, retry_delay=10.0, retry_backoff=3.0)
    world.run_until(lambda: state(world, job) == "queued" and view(world.store, job).doc.failures == 1)
    queued = view(world.store, job).doc
    assert queued.retry_at is not None and d.retry_waits(queued, world.clock.wall()) > 8
    assert why_queued(world.store, queued, world.clock.wall()).startswith("retry delay: attempt 2 may be claimed")
    assert status_json(view(world.store, job))["retry_at"] == queued.retry_at
    world.run_until(lambda: ended(world, job))
    first, second, third = started(agent, job)
    assert second.started - first.ends >= 10 - 0.01 and third.started - second.ends >= 30 - 0.01
    assert second.started - first.ends < 10 + 3 and third.started - second.ends < 30 + 3  # and not much longer
    assert view(world.store, job).doc.failures == 2 and view(world.store, job).doc.retry_at is None


def test_the_retry_delay_holds_on_another_agent_whose_wall_clock_is_an_hour_ahead(world):
    """The retry time is written on the store's time and judged on it: an agent whose own clock is an hour ahead
    (it measured the store's on its first writes) still waits for it."""
    a = world.agent("a")
    job = submit(world, "run 1 exit 1", retries=1, retry_delay=60.0)
    world.run_until(lambda: view(world.store, job).doc.failures == 1 and state(world, job) == "queued", agents=[a])
    a.stop("SIGTERM")
    world.run_until(lambda: a in world.done, agents=[a])
    failed_at = world.clock.now
    b = world.agent("b", skew=3600.0)
    world.run_until(lambda: started(b, job), agents=[b], limit=300)
    assert started(b, job)[0].started - failed_at >= 60 - 2.0  # from the failed attempt's end: not claimed early


def test_why_a_queued_job_waits(world, tmp_path):
    store = world.store
    agent = world.agent(slots=4)
    producer = submit(world, "run 600", name="producer")
    world.run_until(lambda: started(agent, producer))
    behind = submit(world, "run 1", after=[("after_success", "producer")])
    consumer = submission.submit(store, [Submission(JobSpec("run 1"), (("producer", "data.txt"),))],
                                 clock=world.clock)[0]["id"]
    world.step()
    now = world.clock.wall()
    said = why_queued(store, view(store, behind).doc, now)
    assert said == f"dependency {producer} (--after-success) has not ended: it is running"
    assert why_queued(store, view(store, consumer).doc, now).startswith(f"input {producer}:data.txt: its job has not")
    listed = overview(store, now=now)
    assert listed.waiting[behind] == said and listed.waiting[consumer].startswith("input ")
    hold(store, consumer, by="me", now=now)
    assert why_queued(store, view(store, consumer).doc, now).startswith("held by me")
    pause(store, by="me", reason="maintenance", now=now)
    assert why_queued(store, view(store, behind).doc, now).startswith("the queue is paused by me at ")
    assert "(maintenance)" in why_queued(store, view(store, behind).doc, now)


# -- submission ----------------------------------------------------------------------------------------------

def test_dependencies_resolve_by_id_name_and_prefix_and_batch_names(tmp_path):
    store = open_store(f"file://{tmp_path}/store")
    prep = submission.submit(store, [Submission(JobSpec("true", name="prep"))], clock=SYSTEM)[0]["id"]
    made = submission.submit(store, [
        Submission(JobSpec("true", name="train"), after=(("after_success", "prep"), ("after", prep[:13]))),
        Submission(JobSpec("true"), after=(("after_success", "train"), ("after_failure", prep))),
    ], clock=SYSTEM)
    train = made[0]
    assert (train.spec.after_success, train.spec.after) == ([prep], [prep])
    assert made[1].spec.after_success == [train.id] and made[1].spec.after_failure == [prep]
    # A later job given the same name leaves the recorded dependency alone: ids were recorded.
    submission.submit(store, [Submission(JobSpec("true", name="prep"))], clock=SYSTEM)
    assert read(store, keys.queued(train.id), train.id)[0].spec.after_success == [prep]


def test_a_dependency_on_no_job_submits_nothing(tmp_path):
    store = open_store(f"file://{tmp_path}/store")
    with pytest.raises(JobNotFound, match="--after-failure nosuch: no job has the id or name 'nosuch'"):
        submission.submit(store, [Submission(JobSpec("true", name="a")),
                                  Submission(JobSpec("true"), after=(("after_failure", "nosuch"),))], clock=SYSTEM)
    assert not list(store.list(keys.QUEUE)) and not list(store.list(keys.NAMES))


@pytest.mark.parametrize("spec, message", [
    (dict(retryable_exit_codes=(0,)), "--retryable-exit-code"),
    (dict(retry_delay=-1.0), "--retry-delay"),
    (dict(retry_backoff=0.5), "--retry-backoff"),
    (dict(after_success=("not-an-id",)), "--after-success"),
])
def test_bad_policies_are_refused_before_anything_is_written(tmp_path, spec, message):
    store = open_store(f"file://{tmp_path}/store")
    with pytest.raises(BadInput, match=message):
        submission.submit(store, [Submission(JobSpec("true", **spec))], clock=SYSTEM)
    assert not list(store.list(keys.QUEUE))


def test_a_spec_without_dependencies_or_a_policy_is_stored_as_before():
    assert set(JobSpec("true").to_json()) == {"command", "name", "priority", "capabilities", "cores", "memory",
                                             "accelerators", "providers", "spot", "cost_cap", "timeout", "retries",
                                             "inputs", "cost_cap_advisory"}


def test_jobs_waiting_on_a_dependency_cost_almost_nothing_per_poll(tmp_path):
    """20 jobs depend on one that runs elsewhere, for 8 s, as jobs waiting on an input's producer do
    (test_agent_faults): each poll lists the index (and running/, since something waits) and reads nothing per
    waiting job. The bound: <= 0.2 requests per waiting job per poll."""
    from stado.agent import Agent, AgentConfig
    from stado.objectstore.metered import MeteredStore
    from tests.helpers import run_for

    inner = open_store(f"file://{tmp_path}/store")
    depended = submission.submit(inner, [Submission(JobSpec("prepare"))], clock=SYSTEM)[0]
    queued = read(inner, keys.queued(depended.id), depended.id)
    jobs.claim(inner, queued[0], agent_id="elsewhere", instance_ref="local@far", lease_expires_at=time.time() + 3600,
               queued_version=queued[1], now=time.time())  # runs elsewhere, its promise holding for the whole test
    waiting = submission.submit(inner, [Submission(JobSpec("train"), after=((condition, depended.id),))
                                        for condition in ("after_success", "after_failure", "after") * 7][:20], clock=SYSTEM)
    baseline: dict = {}

    class Counting(MeteredStore):
        def list_page(self, prefix, **kw):  # one page of the index per poll: count the polls
            if prefix == keys.READY and self.by_prefix.get(("LIST", "ready"), 0) == 2 and not baseline:
                baseline.update(self.counts)  # the first polls read each waiting entry once
                baseline["polls"] = 2
            return super().list_page(prefix, **kw)

    store = Counting(inner)
    lines: list[str] = []
    agent = Agent(store, AgentConfig(work_root=str(tmp_path / "work"), stado_bin="/bin/false", poll_seconds=0.5,
                                     settle_seconds=3600, index_seconds=3600, schedules=False, host="h"),
                  log=lines.append)
    assert run_for(agent, 8.0) == 0
    polls = store.by_prefix[("LIST", "ready")] - baseline["polls"]
    assert polls >= 10, polls
    requests = sum(store.counts.values()) - sum(baseline[k] for k in store.counts)
    per_job_per_poll = requests / (len(waiting) * polls)
    assert per_job_per_poll <= 0.2, (per_job_per_poll, store.counts, sorted(store.by_prefix.items()), lines[-20:])
    assert all(view(inner, job.id).state == "queued" for job in waiting)


def test_a_held_claim_of_a_job_whose_dependency_failed_ends_it_once_checked(world):
    """The claim of a job whose dependency failed lands, but its check cannot be read (a GET fails): the claim is
    held, and once found genuine the job ends dependency_failed, never started (the simulator's dependency-early
    found a held claim that ran it)."""
    from .scripted_faults import Scripted

    inner = world.store
    world.store = store = Scripted(inner)
    a = world.agent("a")  # the agent reaches the store through the script; the test reads it straight
    world.store = inner
    bad = submit(world, "run 1 exit 1")
    world.run_until(lambda: ended(world, bad))
    dependent = submit(world, "run 1", after=[("after_success", bad)])
    store.on("get", f"completed/{dependent}", fail=1)  # the claim's check of the terminal records
    world.run_until(lambda: ended(world, dependent))
    assert "held, not started" in world.log("a")
    assert view(inner, dependent).doc.outcome == "dependency_failed" and not started(a, dependent)
