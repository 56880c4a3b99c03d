"""Bugs the chaos soak found in stado, each driven here on purpose, step by step, against the real agent and a
real local-directory store. Each failed before its fix (they were strict xfails until then) and guards it now."""
from stado.store.storeclock import StoreClock
from runkit.core.clock import SYSTEM
import json
import os
import signal
import subprocess
import threading
import time


from stado.queue import artifacts, submission
from stado.store import cas
from stado import jobs
from stado.core import keys
from stado.jobs import reaper
from stado.core import documents as d
from stado.agent import Agent, AgentConfig
from stado.queue.lookup import view
from stado.objectstore import AlreadyExists, open_store
from stado.core.spec import JobSpec
from stado.queue.submission import Submission
from tests.helpers import alive, kill_all, pids_with_marker, wait_for
from tests.stado.faulty import LostResponses


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


class StalledWorker(LostResponses):
    """What the soak saw, made deterministic: an agent stopped (SIGSTOP) between two ticks while a job's inputs
    are being fetched, its promise passing meanwhile; resumed, its fetch thread finishes before its loop ticks
    again. Here the loop is held where it writes its agents/ record (after a tick, before the next), its renewals
    (their own thread: a stopped agent's are stopped too) where they write the running record, the fetch of the
    producer's artifacts where it reads them; each is let go by its own event."""

    def __init__(self, inner, producer: str):
        super().__init__(inner, 0)
        self.producer = producer
        self.fetching, self.fetch_back, self.fetched = threading.Event(), threading.Event(), threading.Event()
        self.held, self.loop_back = threading.Event(), threading.Event()

    def _fetch(self, key, read):
        if not (key.startswith(keys.status_prefix(self.producer)) and "/artifacts/" in key):
            return read()
        self.fetching.set()
        self.fetch_back.wait(60)
        try:
            return read()
        finally:
            self.fetched.set()

    def get(self, key):
        return self._fetch(key, lambda: self.inner.get(key))

    def get_range(self, key, start, length):
        return self._fetch(key, lambda: self.inner.get_range(key, start, length))

    def put(self, key, data):
        if key.startswith(keys.AGENTS) and self.fetching.is_set() and not self.loop_back.is_set():
            self.held.set()
            self.loop_back.wait(60)
        return self.inner.put(key, data)

    def put_if_match(self, key, data, version):
        if key.startswith(keys.RUNNING) and self.fetching.is_set() and not self.loop_back.is_set():
            self.loop_back.wait(60)
        return super().put_if_match(key, data, version)


def test_a_job_reaped_while_its_inputs_were_fetched_is_never_started(tmp_path):
    inner = open_store(f"file://{tmp_path}/store")
    producer = _produce(inner, tmp_path, "data.txt", b"payload")
    started = tmp_path / "started"
    consumer = submission.submit(inner, [Submission(JobSpec(f"touch {started}"), ((producer, "data.txt"),))], clock=SYSTEM)[0]["id"]
    store = StalledWorker(inner, producer)
    lines: list[str] = []
    agent = Agent(store, AgentConfig(work_root=str(tmp_path / "work"), stado_bin="/bin/false", poll_seconds=0.1,
                                     settle_seconds=3600, host="h", until_idle=True, schedules=False),
                  log=lines.append)
    problems = []

    def meanwhile():  # the agent's loop runs in the main thread (signals); the world moves on in this one
        try:
            wait_for(store.held.is_set, message="the agent to fetch the consumer's input, and its loop to be held")
            promise = d.parse_iso(cas.read(inner, keys.running(consumer), consumer)[0]["lease_expires_at"])
            wait_for(lambda: time.time() > promise + 0.2, message="its promise to pass")
            assert reaper.reap(inner, writer="another agent", margin=0.0, now=time.time(), clock=StoreClock()).requeued == 1
            jobs.cancel(inner, consumer, by="op", clock=SYSTEM)  # then an operator cancels the requeued job: it is terminal
            assert view(inner, consumer).terminal
            store.fetch_back.set()  # the worker resumes: its fetch ends first, then its loop ticks on
            wait_for(store.fetched.is_set, message="the fetch to end")
        except BaseException as e:
            problems.append(e)
        finally:
            store.fetch_back.set()
            store.loop_back.set()

    world = threading.Thread(target=meanwhile, daemon=True)
    world.start()
    assert agent.run() == 0
    world.join(30)
    log = "\n".join(lines)
    if problems:
        raise AssertionError(log) from problems[0]
    assert not started.exists(), f"the job ran after it was reaped and cancelled:\n{log}"


def test_an_agent_whose_probe_write_was_retried_after_it_landed_starts(tmp_path):
    from stado.store.guarantees import ensure_safe

    class RetriedProbe(LostResponses):
        def put_if_absent(self, key, data):
            self.inner.put_if_absent(key, data)
            if key.startswith("control/probe/") and self.times > 0:
                self.times -= 1
                raise AlreadyExists(key)  # what the client's retry of a landed request reports
            return self.inner.get(key).version

    ensure_safe(RetriedProbe(open_store(f"file://{tmp_path}/store"), times=1), clock=SYSTEM)


def test_the_process_a_killed_agent_left_is_stopped_once_its_job_runs_elsewhere(tmp_path):
    """An agent SIGKILLed and not restarted: its job's process is stopped (by its keeper, once the bridge of 1 s
    is over and before the promise passes), the job runs again on another host, and an agent that starts again
    where the first one died finds nothing of it still running."""
    from tests.stado.e2e.support import STADO, submit
    from tests.stado.storekit import StoreTarget

    env = StoreTarget("file", f"file://{tmp_path / 'store'}").subprocess_env(tmp_path / "env")
    marker = tmp_path / "job-ran"
    job = submit(env, f"echo $$ >> {marker}; sleep 60")
    agents: list[subprocess.Popen] = []

    def agent(host: str, log: str) -> subprocess.Popen:
        with open(tmp_path / log, "wb") as out:
            agents.append(subprocess.Popen([STADO, "agent", "--poll-seconds", "0.1", "--settle-seconds", "0.2",
                                            "--kill-after", "1", "--bridge-seconds", "1", "--host", host,
                                            "--work-root", str(tmp_path / f"work-{host}")],
                                           env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT))
        return agents[-1]

    try:
        first = agent("host-a", "a.log")
        wait_for(lambda: marker.exists() and marker.read_text().strip(), timeout=30, message="the job to start")
        orphan = int(marker.read_text().split()[0])
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        agent("host-b", "b.log")  # a sibling on another host: its reaper requeues the job, it runs it
        wait_for(lambda: len(marker.read_text().split()) >= 2, timeout=90, message="the job to run again elsewhere")
        agent("host-a", "a2.log")  # an agent starts again where the first one died
        wait_for(lambda: not alive(orphan), timeout=10, message=f"the orphan (pid {orphan}) to be stopped")
    finally:
        for p in agents:
            if p.poll() is None:
                p.kill()
            p.wait(10)
        kill_all(pids_with_marker(str(tmp_path)))
    assert json.loads(subprocess.run([STADO, "machine", "status", job], env=env, capture_output=True,
                                     text=True).stdout)["requeues"] == 1
    assert os.path.exists(marker)


def test_the_orphan_pass_stops_a_gone_agents_job_processes_and_nothing_else(tmp_path):
    """Soak finding: an agent holding a file open in a directory left by a gone agent (its own upload of a
    job it had just finished) took itself for that job's orphan and SIGTERMed itself. Only processes that
    carry the job's WC_JOB_ID are the job's."""
    from stado.agent.takeover import stop_orphans
    from stado.agent.hostfiles import job_dir, write_owner

    store = open_store(f"file://{tmp_path}/store")
    work = tmp_path / "work"
    agent = Agent(store, AgentConfig(work_root=str(work), stado_bin="/bin/false", poll_seconds=0.1, host="h",
                                     until_idle=True, schedules=False, kill_after=1.0), log=lambda line: None)
    job_id = "01a22f09-0000-7000-8000-00000000beef"
    started_at = "2026-12-01T03:33:32.604Z"
    directory = job_dir(str(work), job_id, started_at)
    os.makedirs(directory)
    write_owner(directory, "gone-agent")  # no lock file: that agent is gone
    held = open(os.path.join(directory, "output.log"), "w")  # this process, like an agent, holds a file there
    bystander = subprocess.Popen(["sleep", "60"], cwd=directory)  # no WC_JOB_ID: not the job's
    orphan = subprocess.Popen(["sleep", "60"], cwd=directory, env={**os.environ, "WC_JOB_ID": job_id,
                                                                   "WC_JOB_STARTED_AT": started_at})
    try:
        stop_orphans(agent.ctx, set(agent.slots))
        assert orphan.wait(10) == -signal.SIGTERM
        assert bystander.poll() is None  # alive: it is not the job's
    finally:
        held.close()
        for p in (bystander, orphan):
            if p.poll() is None:
                p.kill()
                p.wait(10)


def test_the_orphan_pass_stops_the_stale_attempt_and_never_the_next_one_on_the_same_host(tmp_path):
    """Soak finding: two agents on one host shared a job's directory across attempts, and the stalled one
    removed the directory its job's next attempt ran in. Each attempt now has a directory of its own, and the
    orphan pass stops only the processes of the gone agent's attempt (WC_JOB_STARTED_AT), not the next one's."""
    from stado.agent.takeover import stop_orphans
    from stado.agent.hostfiles import job_dir, write_owner

    store = open_store(f"file://{tmp_path}/store")
    work = tmp_path / "work"
    agent = Agent(store, AgentConfig(work_root=str(work), stado_bin="/bin/false", poll_seconds=0.1, host="h",
                                     until_idle=True, schedules=False, kill_after=1.0), log=lambda line: None)
    job_id = "01a22f09-0000-7000-8000-00000000cafe"
    stale_at, next_at = "2026-12-01T03:33:32.604Z", "2026-12-01T03:33:36.995Z"
    stale_dir, next_dir = job_dir(str(work), job_id, stale_at), job_dir(str(work), job_id, next_at)
    assert stale_dir != next_dir and stale_dir.endswith(".20261201033332604")
    for directory in (stale_dir, next_dir):
        os.makedirs(directory)
    write_owner(stale_dir, "gone-agent")  # no lock file: that agent is gone
    write_owner(next_dir, "also-gone-but-its-record-says-so")
    env = {**os.environ, "WC_JOB_ID": job_id}
    stale = subprocess.Popen(["sleep", "60"], cwd=stale_dir, env={**env, "WC_JOB_STARTED_AT": stale_at})
    following = subprocess.Popen(["sleep", "60"], cwd=next_dir, env={**env, "WC_JOB_STARTED_AT": next_at})
    running = d.encode({"schema": 1, "id": job_id, "generation": 3, "nonce": "n", "state": "running",
                        "spec": {"command": "true"}, "owner": "also-gone-but-its-record-says-so",
                        "started_at": next_at, "phase": "running"})
    store.put(keys.running(job_id), running)
    try:
        stop_orphans(agent.ctx, set(agent.slots))
        assert stale.wait(10) == -signal.SIGTERM
        assert following.poll() is None  # the next attempt's process: its record still names its agent
    finally:
        for p in (stale, following):
            if p.poll() is None:
                p.kill()
                p.wait(10)
