"""The supervisor's decisions, in process: a real Supervisor on a real SQLite file, driven on a ManualClock with a
fake process layer (tests/jobman/inprocess/world.py). Nothing sleeps, so hours of a supervisor's time take
milliseconds; what the subprocess tests show end to end (tests/jobman/test_*.py) is shown here decision by
decision: the claim, the wait for a dependency, a time, a hold or a slot, an attempt's end recorded (success,
failure, retries and their delay, a timeout, a cancel, a spawn that fails), the lease renewed alone and through
the round, the job taken over or settled by someone else, the database replaced, and the turn to the lean form."""
import json
import os

import pytest

import select

from jobman.handoff import doorbell
from jobman.core.model import JobSpec
from jobman.store import lease_round, queries, transitions
from jobman.supervisor import claim as claiming, lean_return
from jobman.supervisor.attempt import AttemptEnd
from jobman.supervisor.waiting import Begin, WaitLoop
from runkit.core.hashing import sha256
from runkit.system.proc import Identity

from .world import WINDOWS, OutOfTime, TurnedLean, World


@pytest.fixture
def world(tmp_path):
    w = World(tmp_path)
    yield w
    w.conn.close()


# --- the claim ------------------------------------------------------------------------------------------

def test_the_claim_takes_the_job_once_and_only_with_its_credential(world):
    job = world.submit()
    store, supervisor_id, state = world.claim(job)
    assert state["phase"] == "starting" and state["supervisor_id"] == supervisor_id
    assert state["lease_expires_at"] == world.now() + WINDOWS["lease"]
    with pytest.raises(transitions.ClaimRefused, match="already starting"):
        world.claim(job)
    other = world.submit()
    with pytest.raises(transitions.ClaimRefused, match="wrong launch credential"):
        claiming.claim(world.store(), other, sha256(b"x" * 32), "s", world.processes.identity(), world.clock)


def test_a_claim_after_the_deadline_fails_the_submission(world):
    job = world.submit()
    world.clock.advance(WINDOWS["claim"] + 1)
    with pytest.raises(transitions.ClaimRefused, match="claim window"):
        world.claim(job)
    assert world.state(job).outcome == "submission_failed"


# --- an attempt's end, recorded by the owner ------------------------------------------------------------------

def test_a_job_runs_its_target_and_records_its_success(world):
    job = world.submit(["run", "7"])
    assert world.supervise(job) == 0
    state, [attempt] = world.state(job), world.attempts(job)
    assert state.outcome == "succeeded" and state.exit_code == 0 and state.slot_held == 0
    assert attempt["outcome"] == "succeeded" and attempt["ended_at"] - attempt["started_at"] == pytest.approx(7, abs=0.1)
    assert attempt["pid"] in world.processes.targets and attempt["start_time"] == attempt["pid"] * 10
    [target] = world.processes.targets.values()
    assert target.env["JOBMAN_JOB_ID"] == job and target.env["JOBMAN_ATTEMPT"] == "1"
    assert world.events_of(job) == ["job_submitted", "supervisor_claimed", "attempt_started", "attempt_exited",
                                    "job_finished"]


def test_an_exit_code_fails_the_job_without_retries(world):
    job = world.submit(["run", "2", "exit", "3"])
    world.supervise(job)
    state = world.state(job)
    assert (state.outcome, state.exit_code, state.attempts) == ("failed", 3, 1)
    assert "attempt 1 ended with exit code 3" in state.detail


def test_a_failed_attempt_is_retried_after_its_delay_within_its_budget(world):
    job = world.submit(["run", "2", "exit", "3"], retry={"retries": 2, "exit_codes": None, "delay": 60.0,
                                                         "backoff": "exponential", "max_delay": None,
                                                         "on_timeout": False})
    world.supervise(job)
    attempts = world.attempts(job)
    assert [a["outcome"] for a in attempts] == ["failed"] * 3 and world.state(job).outcome == "failed"
    gaps = [b["started_at"] - a["ended_at"] for a, b in zip(attempts, attempts[1:])]
    # Exponential: 60 s, then 120 s; no sooner, and no later than the renewal the round's holder wakes at.
    assert 60 <= gaps[0] <= 60 + WINDOWS["renew"] and 120 <= gaps[1] <= 120 + WINDOWS["renew"], gaps
    assert world.events_of(job).count("retry_scheduled") == 2


def test_a_retry_delay_runs_from_the_end_as_recorded_while_the_clock_moves(tmp_path):
    # Every reading of the clock moves it a millisecond: an end recorded at one reading and a delay counted
    # from an earlier one would show a retry that began sooner than its delay.
    world = World(tmp_path, creep=0.001)
    try:
        job = world.submit(["run", "2", "exit", "3"], retry={"retries": 2, "exit_codes": None, "delay": 5.0,
                                                             "backoff": "constant", "max_delay": None,
                                                             "on_timeout": False})
        world.supervise(job)
        attempts = world.attempts(job)
        assert len(attempts) == 3
        assert all(b["started_at"] - a["ended_at"] >= 5.0 for a, b in zip(attempts, attempts[1:])), attempts
        retries = [e for e in queries.events(world.conn, job) if e["kind"] == "retry_scheduled"]
        # the next attempt's time is the recorded end plus the delay, to the float's rounding
        assert [json.loads(e["data"])["not_before"] - a["ended_at"] for e, a in zip(retries, attempts)] \
            == [pytest.approx(5.0, abs=1e-6)] * 2
    finally:
        world.conn.close()


def test_only_the_listed_exit_codes_are_retried(world):
    job = world.submit(["run", "1", "exit", "4"], retry={"retries": 3, "exit_codes": [3], "delay": 0.0,
                                                         "backoff": "constant", "max_delay": None, "on_timeout": False})
    world.supervise(job)
    assert world.state(job).attempts == 1 and world.state(job).exit_code == 4


def test_a_target_past_its_timeout_is_stopped_and_the_job_timed_out(world):
    job = world.submit(["run", "3600"], timeout=30.0)
    world.supervise(job)
    state, [target] = world.state(job), world.processes.targets.values()
    assert state.outcome == "timed_out" and "exceeded its timeout of 30.0s" in state.detail
    assert target.signals == [15] and target.ends - target.started == pytest.approx(30, abs=0.1)
    assert "timeout: stopping the process tree" in world.log()


def test_a_target_that_ignores_sigterm_gets_sigkill_after_kill_after(world):
    job = world.submit(["run", "3600", "ignore-term"], timeout=10.0, kill_after=3.0)
    world.supervise(job)
    [target] = world.processes.targets.values()
    assert target.signals[:2] == [15, 9] and target.ends - target.started == pytest.approx(13, abs=0.1)
    assert world.state(job).outcome == "timed_out"


def test_a_timeout_is_retried_when_the_policy_says_so(world):
    job = world.submit(["run", "3600"], timeout=5.0, retry={"retries": 1, "exit_codes": None, "delay": 0.0,
                                                            "backoff": "constant", "max_delay": None,
                                                            "on_timeout": True})
    world.supervise(job)
    assert [a["outcome"] for a in world.attempts(job)] == ["timed_out", "timed_out"]


def test_a_cancel_while_it_runs_stops_the_target_at_the_ring(world):
    job = world.submit(["run", "3600"])
    world.at(100, lambda: (transitions.request_cancel(world.conn, job, world.now()), world.ring(job)))
    world.supervise(job)
    state, [target] = world.state(job), world.processes.targets.values()
    assert state.outcome == "cancelled" and state.detail == "cancelled during attempt 1"
    assert target.signals == [15] and target.ends - target.started == pytest.approx(100, abs=0.01)


def test_a_cancel_whose_ring_was_lost_is_seen_at_the_next_renewal(world):
    job = world.submit(["run", "3600"])
    world.at(100, lambda: transitions.request_cancel(world.conn, job, world.now()))  # nobody rings
    world.supervise(job)
    [target] = world.processes.targets.values()
    assert world.state(job).outcome == "cancelled"
    assert 100 < target.ends - target.started <= 100 + WINDOWS["renew"]  # the renewal's conflict made it look


def test_without_a_doorbell_a_cancel_is_seen_at_the_fallback_poll(world):
    os.rmdir(os.path.join(world.home, "bells"))  # no room for the FIFO, say
    job = world.submit(["run", "3600"])
    world.at(100, lambda: (transitions.request_cancel(world.conn, job, world.now()), world.ring(job)))
    world.supervise(job)
    [target] = world.processes.targets.values()
    assert world.state(job).outcome == "cancelled" and "cannot make the doorbell" in world.log()
    assert 100 < target.ends - target.started <= 100 + WINDOWS["renew"]


def test_a_target_that_cannot_start_fails_the_job_with_the_reason_in_its_log(world):
    job = world.submit(["missing"], executable="/nowhere/missing")
    world.supervise(job)
    state, [attempt] = world.state(job), world.attempts(job)
    assert state.outcome == "failed" and attempt["outcome"] == "spawn_failed"
    with open(attempt["log_path"]) as f:
        assert f.read().startswith("jobman: cannot start 'missing'")


def test_an_unreadable_stored_spec_fails_the_job(world):
    job = world.submit()
    world.conn.execute("UPDATE jobs SET spec = '{}' WHERE id = ?", (job,))
    world.conn.commit()
    assert world.supervise(job) == 1
    assert "specification is unreadable" in world.state(job).detail


def test_the_owner_records_the_attempt_end_it_is_given(world):
    job = world.submit()
    sup = world.supervisor(job)
    sup.lease.open_bell()
    spec = JobSpec.from_json(queries.spec_json(world.conn, job))
    begun = WaitLoop(sup.ctx, sup.lease, spec).until_eligible()  # the slot taken, as before an attempt
    assert isinstance(begun, Begin) and begun.number == 1 and world.state(job).phase == "running"
    assert sup.record(AttemptEnd(1, 2, None, "failed", None, 50.0, "failed", "attempt 1 ended with exit code 2")) \
        is False
    state = world.state(job)
    (ended_at,), = world.conn.execute("SELECT ended_at FROM attempts WHERE job_id = ? AND number = 1", (job,))
    retry_at = ended_at + 50.0  # the delay runs from the end as recorded, not from when the attempt saw it
    assert (state.phase, state.waiting_for, state.wait_until, state.slot_held) == ("waiting", "retry", retry_at, 0)
    begun = WaitLoop(sup.ctx, sup.lease, spec).until_eligible()
    assert isinstance(begun, Begin) and begun.number == 2 and world.now() >= retry_at
    assert sup.record(AttemptEnd(2, 0, None, "succeeded", None, None, "succeeded", None)) is True
    assert world.state(job).outcome == "succeeded"
    sup.lease.close_bell()


# --- waiting until eligible ----------------------------------------------------------------------------------

def test_a_job_waits_for_its_dependency_and_runs_once_it_succeeded(world):
    first = world.submit(name="first")
    world.claim(first)
    job = world.submit(dependencies=[("first", "success")])
    world.when(world.waiting_for(job, "dependencies"), lambda: (
        transitions.finish(world.conn, first, world.state(first).revision, "succeeded", world.now()),
        world.ring(job)))
    world.supervise(job)
    assert world.state(job).outcome == "succeeded"
    assert "waiting" in world.events_of(job)


def test_a_dependency_that_fails_fails_the_job_without_running_it(world):
    first = world.submit(name="first")
    world.claim(first)
    job = world.submit(dependencies=[("first", "success")])
    world.when(world.waiting_for(job, "dependencies"), lambda: (
        transitions.finish(world.conn, first, world.state(first).revision, "failed", world.now()), world.ring(job)))
    world.supervise(job)
    state = world.state(job)
    assert state.outcome == "dependency_failed" and state.attempts == 0 and not world.processes.targets
    assert "can never hold" in state.detail


def test_a_job_waits_until_its_not_before_time(world):
    job = world.submit(not_before=world.now() + 3600)
    world.supervise(job)
    [attempt] = world.attempts(job)
    assert attempt["started_at"] >= world.clock.offset + world.start + 3600
    [waited] = world.conn.execute("SELECT data FROM events WHERE job_id = ? AND kind = 'waiting'", (job,)).fetchall()
    assert json.loads(waited[0])["waiting_for"] == "not_before"
    assert json.loads(waited[0])["detail"].startswith("not before ")


def test_a_held_job_waits_until_released_and_a_cancel_while_held_ends_it(world):
    held = world.submit()
    transitions.set_held(world.conn, held, True, world.now())
    world.when(world.waiting_for(held, "held"), lambda: world.at(
        world.clock.now - world.start + 500, lambda: (transitions.set_held(world.conn, held, False, world.now()),
                                                       world.ring(held))))
    world.supervise(held)
    [attempt] = world.attempts(held)
    assert world.state(held).outcome == "succeeded" and attempt["started_at"] - world.clock.offset >= world.start + 500

    cancelled = world.submit()
    transitions.set_held(world.conn, cancelled, True, world.now())
    world.when(world.waiting_for(cancelled, "held"), lambda: (
        transitions.request_cancel(world.conn, cancelled, world.now()), world.ring(cancelled)))
    world.supervise(cancelled)
    state = world.state(cancelled)
    assert (state.outcome, state.detail, state.attempts) == ("cancelled", "cancelled before it ran", 0)


def test_a_job_waits_for_a_slot_held_by_a_peer_and_takes_it_when_freed(world):
    transitions.set_group_limit(world.conn, "one", 1)
    peer = world.submit(group="one")
    _, _, state = world.claim(peer)  # a live peer (this process) runs attempt 1
    rev = transitions.try_begin_attempt(world.conn, peer, state["revision"], 1, "/dev/null", world.now())
    job = world.submit(group="one")

    def peer_ends():
        transitions.end_attempt(world.conn, peer, world.state(peer).revision, 1, now=world.now(), exit_code=0,
                                signal=None, attempt_outcome="succeeded", error=None, retry_at=None,
                                job_outcome="succeeded", detail=None)
        world.ring(job)

    world.when(world.waiting_for(job, "slot"), lambda: world.at(world.clock.now - world.start + 40, peer_ends))
    world.supervise(job)
    state = world.state(job)
    assert rev is not None and state.outcome == "succeeded"
    assert "group one is full (limit 1)" in [e["data"] for e in world.conn.execute(
        "SELECT data FROM events WHERE job_id = ? AND kind = 'waiting'", (job,))][0]


def test_a_paused_group_keeps_its_jobs_waiting(world):
    transitions.set_group_limit(world.conn, "paused", 0)
    job = world.submit(group="paused")
    world.when(world.waiting_for(job, "slot"), lambda: world.at(
        world.clock.now - world.start + 3600, lambda: (transitions.set_group_limit(world.conn, "paused", 1),
                                                           world.ring(job))))
    world.supervise(job)
    assert world.state(job).outcome == "succeeded"
    assert "group paused is paused (limit 0)" in world.conn.execute(
        "SELECT data FROM events WHERE job_id = ? AND kind = 'waiting'", (job,)).fetchone()[0]


def test_a_slot_held_by_a_dead_peer_is_settled_and_taken(world):
    transitions.set_group_limit(world.conn, "one", 1)
    peer = world.submit(group="one")
    gone = Identity(999_999_999, 1, "gone-boot")  # a supervisor that no longer exists
    _, _, state = world.claim(peer, identity=gone)
    transitions.try_begin_attempt(world.conn, peer, state["revision"], 1, "/dev/null", world.now())
    job = world.submit(group="one")
    world.supervise(job)  # the peer's lease runs out; the waiter's reconcile pass finds it lost
    assert world.state(peer).outcome == "lost" and world.state(job).outcome == "succeeded"


# --- the lease -----------------------------------------------------------------------------------------------

def test_the_lease_is_renewed_every_renewal_interval_while_the_target_runs(world):
    job = world.submit(["run", "600"])
    expiries = []
    for t in range(10, 600, 10):
        world.at(t, lambda: expiries.append(world.state(job).lease_end - world.now()))
    world.supervise(job)
    assert expiries and all(WINDOWS["lease"] - WINDOWS["renew"] - 0.1 <= left <= WINDOWS["lease"] + 0.1
                            for left in expiries), expiries
    assert "renewed" not in world.log()  # never late


def test_a_waiting_supervisor_holds_the_lease_round_and_renews_its_waiting_peer(world):
    peer = world.submit(name="peer", not_before=world.now() + 10 * 3600)
    _, _, state = world.claim(peer)
    transitions.set_waiting(world.conn, peer, state["revision"], "not_before", "later", None, world.now(), True)
    job = world.submit(not_before=world.now() + 600)
    leases = []
    world.at(300, lambda: leases.append(world.state(peer).lease_end - world.now()))
    world.at(500, lambda: leases.append(world.state(peer).lease_end - world.now()))
    world.supervise(job)
    assert "holds the lease round" in world.log()
    assert all(left > 0 for left in leases), leases  # the peer's lease kept by the round, not by the peer
    held = lease_round.holder(world.conn)
    assert held is None or held[1] < world.now()  # handed on when the job started
    assert world.state(peer).lease_cover is not None  # kept by cover: written once, not at every round


def test_the_rounds_holder_rings_a_waiter_whose_ring_was_lost(world):
    transitions.set_group_limit(world.conn, "g", 1)
    dep = world.submit(name="dep")
    world.claim(dep)
    peer = world.submit(name="peer", dependencies=[("dep", "end")])
    _, _, state = world.claim(peer)
    transitions.set_waiting(world.conn, peer, state["revision"], "dependencies", "dep", None, world.now(), True)
    bell = doorbell.Doorbell(world.home, peer)  # the peer listens on its doorbell
    job = world.submit(not_before=world.now() + 3600)
    world.at(100, lambda: transitions.finish(world.conn, dep, world.state(dep).revision, "succeeded", world.now()))
    rung = []
    world.when(lambda: bool(os.read(bell.fd, 16) if _readable(bell.fd) else b""), lambda: rung.append(world.clock.now))
    world.supervise(job)
    bell.close()
    assert rung and rung[0] - world.start <= 100 + 3 * WINDOWS["renew"], rung  # two rounds saw it, then it rang
    assert "whose reason to wait had gone for two rounds" in world.log()


def test_the_rounds_holder_rings_at_once_the_waiter_behind_a_stopped_one(world):
    """A group's slot is free and the first of its line is stopped: it cannot take the slot, and nobody rings the
    one behind it (a ringer rang the line as it was). The round's holder steps over the stopped waiter and rings
    the next at its first round, without waiting two rounds."""
    transitions.set_group_limit(world.conn, "g", 1)
    me = world.processes.identity()
    stopped = Identity(me.pid, me.start_time + 1, me.boot_id)  # (a process declared stopped: alive, not awake)
    world.processes.stopped.add((stopped.pid, stopped.start_time))
    waiters = []
    for name, identity in (("first", stopped), ("second", None)):
        job_id = world.submit(name=name, group="g")
        _, _, state = world.claim(job_id, identity=identity)
        transitions.set_waiting(world.conn, job_id, state["revision"], "slot", "g", None, world.now(), True)
        waiters.append(job_id)
    bell = doorbell.Doorbell(world.home, waiters[1])
    job = world.submit(not_before=world.now() + 3600)
    rung = []
    world.when(lambda: bool(os.read(bell.fd, 16) if _readable(bell.fd) else b""), lambda: rung.append(world.clock.now))
    world.supervise(job)
    bell.close()
    assert rung and rung[0] - world.start <= 2 * WINDOWS["renew"], rung  # its first round or so, not two after
    assert "whose turn a stopped or dead waiter ahead could not take" in world.log()
    assert world.state(waiters[0]).phase == "waiting"  # kept: its place and its job


def _readable(fd: int) -> bool:
    p = select.poll()
    p.register(fd, select.POLLIN)
    return bool(p.poll(0))


def test_a_supervisor_whose_job_another_took_over_exits_without_touching_it(world):
    job = world.submit(not_before=world.now() + 3600)

    def overtaken():
        world.conn.execute("UPDATE job_state SET supervisor_id = 'someone-else', revision = revision + 1"
                           " WHERE job_id = ?", (job,))
        world.conn.commit()
        world.ring(job)

    world.when(world.waiting_for(job, "not_before"), overtaken)
    assert world.supervise(job) == 0
    state = world.state(job)
    assert state.phase == "waiting" and state.supervisor_id == "someone-else" and not world.processes.targets
    assert "no longer the owner of the job (owned by supervisor someone-else)" in world.log()


def test_a_running_job_settled_as_lost_by_another_is_left_alone(world):
    job = world.submit(["run", "3600"])

    def lost():
        state = world.state(job)
        world.conn.execute("UPDATE job_state SET lease_expires_at = 0 WHERE job_id = ?", (job,))
        world.conn.commit()
        transitions.mark_lost(world.conn, job, state.revision, world.now(), "judged lost", True)

    world.at(20, lost)
    assert world.supervise(job) == 0
    state = world.state(job)
    assert (state.outcome, state.detail) == ("lost", "judged lost")  # not overwritten
    assert "no longer the owner of the job (finished lost by another process)" in world.log()


def test_a_conflicting_write_is_read_again_and_the_owner_goes_on(world):
    job = world.submit(["run", "30"])
    world.when(world.running(job), lambda: (
        world.conn.execute("UPDATE job_state SET revision = revision + 1 WHERE job_id = ?", (job,)),
        world.conn.commit()))
    world.supervise(job)
    assert world.state(job).outcome == "succeeded" and "no longer the owner" not in world.log()


def test_a_database_replaced_while_the_job_waits_is_abandoned(world):
    job = world.submit(not_before=world.now() + 3600)

    def replace():
        os.rename(world.path, world.path + ".moved")
        open(world.path, "w").close()

    world.at(100, replace)
    assert world.supervise(job) == 0
    assert "was replaced" in world.log() and "no target was running" in world.log()


# --- the lean form -------------------------------------------------------------------------------------------

def test_a_long_wait_turns_to_the_lean_form_with_the_command_that_brings_it_back(world):
    world.processes.lean = True
    job = world.submit(not_before=world.now() + 3600)
    # Another waiter holds the lease round (its holder never turns lean).
    world.conn.execute("INSERT INTO lease_round (one, supervisor_id, expires_at) VALUES (1, 'peer', ?)",
                       (world.now() + 10_000,))
    world.conn.commit()
    sup = world.supervisor(job)
    with pytest.raises(TurnedLean):
        sup.run()
    [argv] = world.processes.execs
    assert argv[0] == "jobman-wait" and argv[-5:-1] == ["__resume", job, sup.ctx.supervisor_id,
                                                        "{}:{}".format(*sup.ctx.db.identity)]
    assert "from jobman.supervisor import resume" in argv[argv.index("-c", 3) + 1]
    assert world.state(job).waiting_for == "not_before"


def _turned_lean(world) -> tuple[str, list[str]]:
    """A job waiting an hour, turned lean (another waiter holds the round): its id and what it execs back into."""
    world.processes.lean = True
    job = world.submit(not_before=world.now() + 3600)
    world.conn.execute("INSERT INTO lease_round (one, supervisor_id, expires_at) VALUES (1, 'peer', ?)",
                       (world.now() + 10_000,))
    world.conn.commit()
    with pytest.raises(TurnedLean):
        world.supervisor(job).run()
    [argv] = world.processes.execs
    world.processes.lean = False
    args = argv[argv.index("__resume") + 1:]
    # The doorbell's descriptor is not this process's across a fake exec (the run's end closed it): a descriptor
    # that is no FIFO, which the supervisor closes and replaces with a new doorbell, as after a real exec that lost it.
    return job, args[:-1] + [str(os.open(os.devnull, os.O_RDONLY))]


def test_back_from_the_lean_form_the_supervisor_reads_its_job_again_and_runs_it(world, monkeypatch):
    job, args = _turned_lean(world)
    monkeypatch.setenv("JOBMAN_HOME", world.home)
    world.clock.advance(3600)  # its timer fired
    assert lean_return.resume(args, clock=world.clock, processes=world.processes) == 0
    assert world.state(job).outcome == "succeeded" and world.state(job).supervisor_id == args[1]


def test_back_from_the_lean_form_a_job_no_longer_its_own_is_left_alone(world, monkeypatch, capfd):
    job, args = _turned_lean(world)
    monkeypatch.setenv("JOBMAN_HOME", world.home)
    world.conn.execute("UPDATE job_state SET supervisor_id = 'someone-else', revision = revision + 1 WHERE job_id = ?",
                       (job,))
    world.conn.commit()
    assert lean_return.resume(args, clock=world.clock, processes=world.processes) == 0
    assert world.state(job).phase == "waiting" and not world.processes.targets
    assert "no longer the owner of job" in capfd.readouterr().err
    assert lean_return.resume([job, args[1], "not-a-file", "0"], clock=world.clock) == 2  # refused arguments


def test_no_lean_form_for_a_wait_shorter_than_a_renewal_interval(world):
    world.processes.lean = True
    job = world.submit(not_before=world.now() + WINDOWS["renew"] / 2)
    world.supervise(job)
    assert not world.processes.execs and world.state(job).outcome == "succeeded"


def test_the_tier_fails_loudly_when_nothing_happens_in_time(tmp_path):
    world = World(tmp_path, limit=100.0)
    job = world.submit(["run", "3600"])
    with pytest.raises(OutOfTime):
        world.supervise(job)
    world.conn.close()

