"""An agent (in this process) over a real local-directory store wrapped to fail for a moment."""
import time
from runkit.core.clock import SYSTEM
from stado.queue import artifacts, lookup, submission
from stado.store import cas
from stado import jobs
from stado.core import keys
from stado.core import documents as d
from stado.agent import Agent, AgentConfig
from stado.objectstore import open_store
from stado.core.spec import JobSpec
from stado.queue.submission import Submission

from tests.helpers import run_for

from .faulty import FailingReads


def _produce(store, tmp_path, name: str, data: bytes) -> str:
    """A completed job that produced one artifact, written through the library."""
    producer = submission.submit(store, [Submission(JobSpec("produce"))], clock=SYSTEM)[0]
    queued = cas.read(store, keys.queued(producer["id"]), producer["id"])[0]
    doc, version = jobs.claim(store, queued, agent_id="maker", instance_ref="local@h", lease_expires_at=0, now=time.time())
    area = tmp_path / "producer"
    (area / artifacts.STAGING).mkdir(parents=True)
    (area / artifacts.STAGING / name).write_bytes(data)
    artifacts.upload_staged(store, producer["id"], str(area), now=time.time())
    jobs.finish(store, doc, version, d.classify_exit(0, None, timed_out=False, timeout=None), now=time.time())
    return producer["id"]


def test_a_store_failure_while_fetching_inputs_is_retried_and_the_agent_lives_on(tmp_path):
    store = open_store(f"file://{tmp_path}/store")
    producer = _produce(store, tmp_path, "data.txt", b"payload")
    seen = tmp_path / "seen.txt"
    consumer = submission.submit(store, [Submission(JobSpec(f"cat data.txt > {seen}"), ((producer, "data.txt"),))], clock=SYSTEM)[0]
    flaky = FailingReads(store, keys.status_prefix(producer), times=1)
    lines: list[str] = []
    agent = Agent(flaky, AgentConfig(work_root=str(tmp_path / "work"), stado_bin="/bin/false", poll_seconds=0.05,
                                     host="h", until_idle=True), log=lines.append)
    assert agent.run() == 0
    assert flaky.failures == 0, "the fault was injected"
    log = "\n".join(lines)
    assert "inputs could not be fetched" in log and "retrying" in log, log
    view = lookup.view(store, consumer["id"])
    assert (view.state, view.doc["exit_code"]) == ("completed", 0), log
    assert seen.read_bytes() == b"payload"
    assert log.count(f"{consumer['id']}: claimed") == 1 and log.count(f"{consumer['id']}: started") == 1


def test_a_job_waiting_for_its_inputs_to_be_fetchable_can_be_cancelled(tmp_path):
    store = open_store(f"file://{tmp_path}/store")
    producer = _produce(store, tmp_path, "data.txt", b"payload")
    ran = tmp_path / "ran"
    consumer = submission.submit(store, [Submission(JobSpec(f"touch {ran}"), ((producer, "data.txt"),))], clock=SYSTEM)[0]
    flaky = FailingReads(store, keys.status_prefix(producer), times=10**9)  # the store stays away
    lines: list[str] = []

    def log(line):
        lines.append(line)
        if line.endswith("retrying on the next tick") and len(lines) < 50:
            if lookup.view(store, consumer["id"]).state == "running":
                jobs.cancel(store, consumer["id"], by="op", clock=SYSTEM)  # the operator gives up on it

    agent = Agent(flaky, AgentConfig(work_root=str(tmp_path / "work"), stado_bin="/bin/false", poll_seconds=0.05,
                                     host="h", until_idle=True), log=log)
    assert agent.run() == 0
    assert lookup.view(store, consumer["id"]).state == "cancelled" and not ran.exists()
    assert [e.key for e in store.list(keys.RUNNING)] == []


def test_the_agent_record_carries_a_generation_and_a_fresh_nonce(tmp_path):
    import json

    store = open_store(f"file://{tmp_path}/store")
    agent = Agent(store, AgentConfig(work_root=str(tmp_path / "work"), stado_bin="/bin/false", host="h"),
                  log=lambda _: None)
    agent._write_record()
    first = json.loads(store.get(keys.agent(agent.id)).data)
    agent._write_record()
    second = json.loads(store.get(keys.agent(agent.id)).data)
    assert (first["generation"], second["generation"]) == (1, 2)
    assert len(first["nonce"]) == 24 and first["nonce"] != second["nonce"]


def test_jobs_waiting_for_a_producer_cost_almost_nothing_per_poll(tmp_path):
    """20 jobs wait on a producer that runs elsewhere, for 10 s: each poll lists queue/ (and running/, since
    something waits) and reads nothing per waiting job. The bound: <= 0.2 requests per waiting job
    per poll (it was 4: its queue entry and the producer's three terminal records)."""
    from stado.objectstore.metered import MeteredStore

    inner = open_store(f"file://{tmp_path}/store")
    producer = submission.submit(inner, [Submission(JobSpec("produce"))], clock=SYSTEM)[0]
    queued = cas.read(inner, keys.queued(producer["id"]), producer["id"])
    jobs.claim(inner, queued[0], agent_id="elsewhere", instance_ref="local@far", lease_expires_at=time.time() + 3600,
               queued_version=queued[1], now=time.time())  # runs elsewhere, its promise holding for the whole test
    waiting = submission.submit(inner, [Submission(JobSpec("consume"), ((producer["id"], "data.txt"),))
                                        for _ in range(20)], clock=SYSTEM)
    lines: list[str] = []
    poll = 0.5
    baseline = {}

    class Counting(MeteredStore):
        def list_page(self, prefix, **kw):  # one page of the index per poll: count the polls
            if prefix == keys.READY and self.by_prefix.get(("LIST", "ready"), 0) == 2 and not baseline:
                baseline.update(self.counts)  # the first polls read each waiting entry once, and the probe ran
                baseline["polls"] = 2
            return super().list_page(prefix, **kw)

    store = Counting(inner)
    agent = Agent(store, AgentConfig(work_root=str(tmp_path / "work"), stado_bin="/bin/false", poll_seconds=poll,
                                     settle_seconds=3600, index_seconds=3600, schedules=False, host="h"),
                  log=lines.append)
    assert run_for(agent, 10.0) == 0
    polls = store.by_prefix[("LIST", "ready")] - baseline["polls"]
    assert polls >= 12, polls
    requests = sum(store.counts.values()) - sum(baseline[k] for k in store.counts)
    per_job_per_poll = requests / (len(waiting) * polls)
    assert per_job_per_poll <= 0.2, (per_job_per_poll, store.counts, sorted(store.by_prefix.items()), lines[-20:])
    print(f"{per_job_per_poll:.3f} requests per waiting job per poll over {polls} polls")
    assert all(lookup.view(inner, job["id"]).state == "queued" for job in waiting)


def test_held_jobs_cost_an_agent_nothing_per_poll_and_are_not_claimed(tmp_path):
    """20 held jobs (`stado job hold`): the agent reads each index entry once, sees the hold and skips it until its
    entry changes: no request per held job per poll, and nothing is claimed. A released job is then claimed."""

    from stado.jobs.hold import hold, release
    from stado.objectstore.metered import MeteredStore

    inner = open_store(f"file://{tmp_path}/store")
    held = submission.submit(inner, [Submission(JobSpec("true")) for _ in range(20)], clock=SYSTEM)
    for job in held:
        hold(inner, job["id"], by="op", now=time.time())
    lines: list[str] = []
    baseline = {}

    class Counting(MeteredStore):
        def list_page(self, prefix, **kw):
            if prefix == keys.READY and self.by_prefix.get(("LIST", "ready"), 0) == 2 and not baseline:
                baseline.update(self.counts)  # the first polls read each held entry once, and the probe ran
                baseline["polls"] = 2
            return super().list_page(prefix, **kw)

    store = Counting(inner)
    agent = Agent(store, AgentConfig(work_root=str(tmp_path / "work"), stado_bin="/bin/false", poll_seconds=0.3,
                                     settle_seconds=3600, index_seconds=3600, schedules=False, host="h"),
                  log=lines.append)
    assert run_for(agent, 4.0) == 0
    polls = store.by_prefix[("LIST", "ready")] - baseline["polls"]
    assert polls >= 5, polls
    others = sum(store.counts.values()) - sum(baseline[k] for k in store.counts) - polls
    assert others <= polls, (others, store.counts, lines[-10:])  # its record's refreshes, never a read per held job
    assert all(lookup.view(inner, job["id"]).state == "queued" for job in held)
    assert sum("held by op: not claimed" in line for line in lines) == 20  # said once each
    release(inner, held[0]["id"], by="op", now=time.time())
    again = Agent(inner, AgentConfig(work_root=str(tmp_path / "work"), stado_bin="/bin/false", poll_seconds=0.1,
                                     until_idle=True, schedules=False, host="h"), log=lines.append)
    assert again.run() == 0
    assert lookup.view(inner, held[0]["id"]).state == "completed"
    assert all(lookup.view(inner, job["id"]).state == "queued" for job in held[1:])


def test_a_paused_queue_is_seen_in_the_index_listing_at_no_cost_of_its_own(tmp_path):
    """The pause record sits in ready/, sorting before every job entry, so the LIST each claim pass makes anyway says
    whether the queue is paused: a pass that claims reads no pause record, and a paused queue's record is read once
    (for each version of it), not once a pass. A pause written where an older stado kept it (control/) still stops
    claims, and `stado queue resume` lifts both."""
    import json

    import pytest

    from stado.queue import pause
    from stado.objectstore.metered import MeteredStore
    from stado.objectstore import NotFound

    class Counting(MeteredStore):
        def __init__(self, inner):
            super().__init__(inner)
            self.reads: dict[str, int] = {}

        def get(self, key):
            self.reads[key] = self.reads.get(key, 0) + 1
            return super().get(key)

    inner = open_store(f"file://{tmp_path}/store")
    lines: list[str] = []

    def agent(store, **settings):
        return Agent(store, AgentConfig(work_root=str(tmp_path / "work"), stado_bin="/bin/false", schedules=False,
                                        host="h", **settings), log=lines.append)

    pause.pause(inner, by="op@host", reason="disk swap", now=time.time())
    queued = submission.submit(inner, [Submission(JobSpec("true")) for _ in range(3)], clock=SYSTEM)
    store = Counting(inner)
    assert run_for(agent(store, poll_seconds=0.1), 2.0) == 0
    polls = store.by_prefix[("LIST", "ready")]
    assert polls >= 8, polls
    assert store.reads.get(keys.QUEUE_PAUSE) == 1, (store.reads, lines[-10:])
    assert sum("queue paused by op@host" in line and "disk swap" in line for line in lines) == 1
    assert all(lookup.view(inner, job["id"]).state == "queued" for job in queued)

    assert pause.resume(inner)["reason"] == "disk swap"
    store = Counting(inner)
    assert agent(store, poll_seconds=0.1, until_idle=True).run() == 0
    assert all(lookup.view(inner, job["id"]).state == "completed" for job in queued)
    assert keys.QUEUE_PAUSE not in store.reads, store.reads
    assert store.reads.get(keys.LEGACY_QUEUE_PAUSE) == 1  # the slow cadence's look for an older stado's pause

    legacy = {"paused": True, "by": "old@host", "at": "2026-11-30T12:00:00.000Z", "reason": "old", "generation": 1,
              "nonce": "n" * 24}
    inner.put(keys.LEGACY_QUEUE_PAUSE, json.dumps(legacy).encode())  # as a stado before the move wrote it
    later = submission.submit(inner, [Submission(JobSpec("true"))], clock=SYSTEM)[0]
    assert pause.pause_record(inner)["by"] == "old@host"
    assert agent(inner, poll_seconds=0.1, until_idle=True).run() == 0
    assert lookup.view(inner, later["id"]).state == "queued"
    assert any("written by an older stado" in line for line in lines), lines[-10:]
    assert pause.resume(inner)["by"] == "old@host"
    for key in (keys.QUEUE_PAUSE, keys.LEGACY_QUEUE_PAUSE):
        with pytest.raises(NotFound):
            inner.get(key)
    assert agent(inner, poll_seconds=0.1, until_idle=True).run() == 0
    assert lookup.view(inner, later["id"]).state == "completed"


def test_an_agent_starting_reads_a_foreign_running_record_once_across_its_start_and_reaper_passes(tmp_path):
    """The restart check at start reads every running record; the reaper's first passes take what it read (the
    LIST shows the same version), so a record nobody rewrites costs one GET, not one more for the first pass."""
    from stado.objectstore.metered import MeteredStore

    inner = open_store(f"file://{tmp_path}/store")
    job = submission.submit(inner, [Submission(JobSpec("elsewhere"))], clock=SYSTEM)[0]
    queued = cas.read(inner, keys.queued(job["id"]), job["id"])
    jobs.claim(inner, queued[0], agent_id="elsewhere", instance_ref="local@far", lease_expires_at=time.time() + 3600,
               queued_version=queued[1], now=time.time())  # runs on another host, its promise holding for the whole test
    store = MeteredStore(inner)
    lines: list[str] = []
    agent = Agent(store, AgentConfig(work_root=str(tmp_path / "work"), stado_bin="/bin/false", poll_seconds=0.2,
                                     settle_seconds=0.2, index_seconds=3600, schedules=False, host="h"),
                  log=lines.append)
    assert run_for(agent, 2.0) == 0
    assert store.by_prefix[("LIST", "running")] >= 4, store.by_prefix  # the start's LIST and three reaper passes
    assert store.by_prefix[("GET", "running")] == 1, store.by_prefix
    assert lookup.view(inner, job["id"]).state == "running"
