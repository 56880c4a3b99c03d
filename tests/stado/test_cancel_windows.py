"""The cancel windows' holes, each driven in its exact interleaving on every backend (the Interleave wrapper parks one
caller between two requests, as in test_races.py): a cancel landing while a retry or a requeue is being
written, a stale worker waking after its job was claimed elsewhere and cancelled there, a worker whose clock
runs an hour ahead dying with its job, and the smaller items found on the way."""
from stado.store.storeclock import StoreClock
from runkit.core.clock import SYSTEM
import json
import os
import subprocess
import time

import pytest

from stado.store import cas
from stado import jobs
from stado.core import keys
from stado.queue import lookup, submission
from stado.jobs import reaper
from stado.core import documents as d
from stado.agent import Agent, AgentConfig
from stado.objectstore.memory import MemoryStore
from stado.core.spec import JobSpec
from stado.store.storeclock import measured

from .interleave import Interleave
from .storekit import make_target, server_for
from .test_races import FAIL, OK, claim, in_thread, state_keys, submit

LATER = 40.0  # the store's time this far on: any promise of a claim made with lease 0 has passed


@pytest.fixture(params=["memory", "file", "s3"])
def store(request, tmp_path):
    if request.param == "memory":
        yield Interleave(MemoryStore())
        return
    opened = make_target(request.param, tmp_path, server_for(request, request.param)).open()
    yield Interleave(opened)
    opened.close()


def never_runs_again(store, job):
    """The job is cancelled, final, and nothing is left that a claim pass could start."""
    view = lookup.view(store, job)
    assert (view.state, view.terminal) == ("cancelled", True), (view.state, view.also)
    assert state_keys(store, job) == [keys.terminal("cancelled", job)]
    assert claim(store, job, "next") is None


@pytest.mark.parametrize("window", ["decided", "requeue-written"])
def test_a_cancel_while_a_retry_is_being_written_stops_the_job(store, window):
    """Hole 1: the owner's failed attempt earned a retry; its fenced decision is written (`decided`), or its queue
    entry too (`requeue-written`, a fault point of stado.core.faults), when `stado cancel` lands. The cancel must be
    honoured (today it said 'already finished (failed); its record is being written' and the retry ran)."""
    job = submit(store, retries=1)
    doc, version = claim(store, job, "owner")
    parked = (store.hold("owner", "put_if_match", keys.running(job)) if window == "decided"
              else store.hold("owner", "put_if_absent", keys.queued(job)))
    owner, box = in_thread("owner", lambda: jobs.finish(store, doc, version, FAIL, now=time.time()))
    parked.wait_reached()
    report = jobs.cancel(store, job, by="op", clock=SYSTEM)
    assert (report.kind, report.honoured) == ("cancelled_finishing", True), report.message
    assert "attempt 1 had ended" in report.message and "will not run again" in report.message
    parked.release()
    owner.join()
    assert "error" not in box, box
    assert box["result"]["state"] == "cancelled"  # the owner learns its retry was overtaken by the cancel
    never_runs_again(store, job)
    cancelled = lookup.view(store, job).doc
    assert cancelled["cancelled_by"] == "op" and cancelled["result"]["exit_code"] == 1  # the attempt's end is kept


def test_a_cancel_while_the_reaper_requeues_stops_the_job(store):
    """Hole 1, the reaper's window: the reaper has decided to requeue a job whose worker stopped speaking and is
    writing the queue entry when the cancel lands."""
    job = submit(store)
    queued = cas.read(store, keys.queued(job), job)
    now = time.time()
    jobs.claim(store, queued[0], agent_id="gone", instance_ref="local@gone", now=now, lease_expires_at=now,
               queued_version=queued[1])  # lease 0: its promise passes at once
    parked = store.hold("reaper", "put_if_absent", keys.queued(job))
    thread, box = in_thread("reaper", lambda: reaper.reap(store, writer="reaper", now=time.time() + LATER, clock=StoreClock()))
    parked.wait_reached()
    report = jobs.cancel(store, job, by="op", clock=SYSTEM)
    assert (report.kind, report.honoured) == ("cancelled_finishing", True), report.message
    assert "judged lost" in report.message
    parked.release()
    thread.join()
    assert "error" not in box, box
    assert box["result"].cancelled == 1 and box["result"].requeued == 0, box["result"].lines
    never_runs_again(store, job)


def test_a_cancel_of_a_job_whose_terminal_record_is_being_written_says_it_cannot(store):
    """A decision that ends the job (no retry left) cannot be cancelled: the cancel says so and writes nothing."""
    job = submit(store, retries=0)
    doc, version = claim(store, job, "owner")
    parked = store.hold("owner", "put_if_match", keys.running(job))
    owner, _ = in_thread("owner", lambda: jobs.finish(store, doc, version, FAIL, now=time.time()))
    parked.wait_reached()
    report = jobs.cancel(store, job, by="op", clock=SYSTEM)
    assert (report.kind, report.honoured) == ("finishing", False)
    assert "already finished (failed)" in report.message
    parked.release()
    owner.join()
    assert lookup.view(store, job).state == "failed"


def test_a_cancel_whose_tombstone_another_writer_settled_reports_its_own_cancel(store):
    """Smaller item: the tombstone landed, its answer was lost and the client's retry met it (AlreadyExists), and an
    agent's leftovers pass settled it before the cancel read it back. The cancel reported 'already cancelled;
    nothing written'; it is its own cancel."""
    job = submit(store)
    inner = store.inner
    original = inner.put_if_absent

    def lost_answer(key, data):
        version = original(key, data)
        if key == keys.running(job):
            jobs.settle_leftovers(inner, writer="an agent", now=time.time())   # settled before the canceller hears back
            raise cas.AlreadyExists(key)  # the client's retry of the create that landed
        return version

    inner.put_if_absent = lost_answer
    try:
        report = jobs.cancel(store, job, by="op", clock=SYSTEM)
    finally:
        del inner.put_if_absent
    assert (report.kind, report.message) == ("cancelled_queued", f"{job}: cancelled before it started")
    never_runs_again(store, job)


def test_a_cancel_of_a_job_waiting_for_its_retry_says_it_ran(store):
    """'Messages tell the truth': a job queued again for its retry is not 'cancelled before it
    started'."""
    job = submit(store, retries=1)
    doc, version = claim(store, job, "owner")
    assert jobs.finish(store, doc, version, FAIL, now=time.time())["state"] == "queued"
    report = jobs.cancel(store, job, by="op", clock=SYSTEM)
    assert report.kind == "cancelled_queued" and "before it started" not in report.message
    assert "attempt 1 ran on local@owner" in report.message and "exited with status 1" in report.message
    never_runs_again(store, job)


def test_a_settle_meeting_a_corrupt_leftover_in_the_queue_still_records_the_outcome(store):
    """Smaller item: completed/ was written, and only a corrupt leftover in queue/ was in the way: the outcome is
    recorded, running/ is removed, the leftover is left for `stado repair`."""
    job = submit(store)
    doc, version = claim(store, job, "owner")
    store.put(keys.queued(job), b"{not json")
    assert jobs.finish(store, doc, version, OK, now=time.time())["state"] == "completed"
    assert cas.read(store, keys.running(job), job) is None
    assert lookup.view(store, job).state == "completed"


# -- hole 2: a stale worker wakes after its job was claimed elsewhere and cancelled there ---------------------

def _agent(store, tmp_path, name, lines):
    return Agent(store, AgentConfig(work_root=str(tmp_path / name), stado_bin="/bin/false", poll_seconds=0.2,
                                    host=name, cores=1), log=lines.append)


def _alive(pgid) -> bool:
    """Whether a process of the group still runs (a zombie does not: with no init to reap them here, a job's
    orphans linger as zombies)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


def _tick_until_dropped(agent, slot, lines) -> None:
    deadline = time.monotonic() + 20
    while slot.job_id in agent.slots:
        assert time.monotonic() < deadline, "\n".join(lines)
        agent.step()  # reaps its children, ticks its slots, drops a settled one
        time.sleep(0.02)


def test_a_stale_worker_never_settles_another_workers_cancel(store, tmp_path):
    """Hole 2: the reaper requeues J (A's promise passed while A was stopped), C claims and starts attempt 2, a
    cancel lands on C's attempt, and then A wakes. A's failed renewal must not take C's cancel for its own: the
    job stays `cancelling` (not terminal) until C has stopped its process, and C settles it."""
    a_lines, c_lines = [], []
    a, c = _agent(store, tmp_path, "a", a_lines), _agent(store, tmp_path, "c", c_lines)
    job = submission.submit(store, [submission.Submission(JobSpec("sleep 30"))], clock=SYSTEM)[0]["id"]
    try:
        a.claim()
        slot_a = a.slots[job]
        assert slot_a.process is not None
        # A is stopped (SIGSTOP, a laptop asleep): it renews nothing; the reaper, by the store's time, requeues J.
        summary = reaper.reap(store, writer="reaper", now=time.time() + LATER, clock=StoreClock())
        assert summary.requeued == 1, summary.lines
        c.claim()
        slot_c = c.slots[job]
        assert slot_c.process is not None and slot_c.doc["claim"] != slot_a.doc["claim"]
        assert jobs.cancel(store, job, by="op", clock=SYSTEM).kind == "cancelled_running"
        slot_a.renew_due = 0  # A wakes: its renewal is overdue; it stops its stale copy and lets the slot go
        _tick_until_dropped(a, slot_a, a_lines)
        assert not _alive(slot_a.pgid)
        view = lookup.view(store, job)
        assert (view.state, view.terminal, view.phase) == ("cancelled", False, "cancelling"), "\n".join(a_lines)
        assert cas.read(store, keys.running(job), job)[0]["claim"] == slot_c.doc["claim"]  # C's, untouched
        assert _alive(slot_c.pgid)
        assert not any("its lease lapsed" in line for line in c_lines)
        # C's next renewal sees its own cancel: it stops its process group, then settles the job.
        slot_c.renew_due = 0
        _tick_until_dropped(c, slot_c, c_lines)
        assert not _alive(slot_c.pgid)
        assert lookup.view(store, job).terminal
        assert any(f"{job}: cancelled; stopping process group {slot_c.pgid}" in line for line in c_lines)
    finally:
        for agent in (a, c):
            for slot in list(agent.slots.values()):
                if slot.pgid and _alive(slot.pgid):
                    os.killpg(slot.pgid, 9)


# -- hole 4: a worker whose clock runs ahead dies with its job ---------------------------------------------------

def test_a_dead_worker_whose_clock_ran_an_hour_ahead_is_reaped_after_its_lease(store):
    """Hole 4: a worker whose clock runs an hour ahead writes promises an hour in the future. If it dies, its job
    must not stay `running` for an hour: promises are judged by the store's clock (the record's own write time
    plus the lease it promised)."""
    job = submit(store)
    queued = cas.read(store, keys.queued(job), job)
    ahead = time.time() + 3600
    doc, _ = jobs.claim(store, queued[0], agent_id="ahead", instance_ref="local@ahead", now=ahead,
                        lease_expires_at=ahead + 0.5, queued_version=queued[1])
    assert doc["lease_seconds"] == 0.5 and d.parse_iso(doc["lease_expires_at"]) > time.time() + 3000
    deadline = time.monotonic() + 10
    while True:
        clock = measured(store, "control/clock/test")
        summary = reaper.reap(store, writer="reaper", clock=clock, margin=0.5, now=time.time())
        if summary.requeued:
            break
        assert summary.alive["promise"] == 1, summary.as_json()
        assert time.monotonic() < deadline, summary.as_json()
        time.sleep(0.2)
    assert lookup.view(store, job).state == "queued"


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_doctor_fails_and_an_agent_fires_no_schedule_with_a_clock_an_hour_off(stado_env, tmp_path):
    """Hole 4: `stado doctor` on a host whose clock is an hour ahead only warned. It fails at 5 minutes; an agent
    there refuses to fire schedules and says why, and the honest agent fires them by the store's clock."""
    from .e2e.support import STADO, stado
    from .fakeclock import faked_clock

    ahead = dict(stado_env, **faked_clock("+3600"))
    report = json.loads(stado(ahead, "doctor", "--json", ok=False).stdout)
    assert {c["check"]: c["verdict"] for c in report["checks"]}["clock skew"] == "failed", report
    assert stado(ahead, "doctor", ok=False).returncode == 4
    assert {c["check"]: c["verdict"] for c in json.loads(stado(stado_env, "doctor", "--json").stdout)["checks"]}[
        "clock skew"] == "ok"
    stado(stado_env, "schedule", "add", "tick", "* * * * * *", "--", "true")  # every second
    proc = subprocess.Popen([STADO, "agent", "--poll-seconds", "0.2", "--work-root", str(tmp_path / "w")], env=ahead,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        lines = []
        while not any("not firing schedules" in line for line in lines):
            assert time.monotonic() < deadline and proc.poll() is None, "".join(lines)
            lines.append(proc.stderr.readline())
    finally:
        proc.terminate()
        proc.wait(20)
        proc.stderr.close()
    said = next(line for line in lines if "not firing schedules" in line)
    assert "ahead of the store's" in said and "more than 300 s" in said, said
    assert json.loads(stado(stado_env, "status", "--json").stdout)["counts"] == {}  # nothing fired early
