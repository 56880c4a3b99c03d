"""Every transition of a jobman job, once as it is meant to happen and once against a precondition that
no longer holds (the guarded WHERE clause refuses it: Conflict, or the claim's refusal)."""
import pytest

from jobman.core.errors import BadInput, Conflict, NotFound
from jobman.core.model import JobState
from jobman.store import groups, pruning, queries, transitions
from runkit.core.hashing import sha256

from .conftest import WINDOWS, claim, submit


def state(conn, job_id) -> JobState:
    return JobState.from_row(queries.load_state(conn, job_id))


def kinds(conn, job_id) -> list[str]:
    return [e["kind"] for e in queries.events(conn, job_id)]


def running(conn, now=1002.0):
    """A claimed job that took a slot and runs attempt 1: (job_id, revision)."""
    job_id = submit(conn)
    rev = claim(conn, job_id)["revision"]
    return job_id, transitions.try_begin_attempt(conn, job_id, rev, 1, "/tmp/attempt-1.log", now)


def test_submit_records_job_state_edges_and_event(conn):
    first = submit(conn, name="first")
    second = submit(conn, dependencies=[("first", "success")])
    assert state(conn, second).phase == "submitting" and state(conn, second).revision == 1
    assert state(conn, second).claim_deadline == 1000.0 + WINDOWS["claim"]
    assert [tuple(d)[:2] for d in queries.dependencies(conn, second)] == [(first, "success")]
    assert kinds(conn, second) == ["job_submitted"]


def test_submit_refuses_an_unknown_group_or_dependency_and_writes_nothing(conn):
    with pytest.raises(BadInput, match="group 'nope' does not exist"):
        submit(conn, group="nope")
    with pytest.raises(NotFound):
        submit(conn, dependencies=[("no-such-job", "end")])
    assert queries.count_jobs(conn) == 0 and not conn.in_transaction


def test_claim_takes_a_submission_once(conn):
    job_id = submit(conn)
    claimed = claim(conn, job_id, supervisor_id="01900000-0000-7000-8000-000000000001")
    assert claimed["phase"] == "starting" and claimed["credential_hash"] is None
    assert claimed["lease_expires_at"] == 1001.0 + WINDOWS["lease"]
    with pytest.raises(transitions.ClaimRefused, match="already starting"):
        claim(conn, job_id)
    # The same supervisor asking again (its first answer lost to storage trouble) gets its claim back.
    again = claim(conn, job_id, supervisor_id="01900000-0000-7000-8000-000000000001")
    assert again["revision"] == claimed["revision"]


def test_claim_refuses_a_wrong_credential_and_a_late_claim(conn):
    job_id = submit(conn)
    with pytest.raises(transitions.ClaimRefused, match="wrong launch credential"):
        transitions.claim(conn, job_id, sha256(b"x" * 32), "s", 1, 1, "b", 1001.0)
    assert state(conn, job_id).phase == "submitting"
    with pytest.raises(transitions.ClaimRefused, match="claim window"):
        claim(conn, job_id, now=1000.0 + WINDOWS["claim"] + 0.1)
    assert (state(conn, job_id).outcome, kinds(conn, job_id)[-2:]) == ("submission_failed",
                                                                       ["claim_refused", "job_finished"])


def test_fail_submission_needs_the_submission_unclaimed(conn):
    job_id = submit(conn)
    claim(conn, job_id)
    with pytest.raises(Conflict):
        transitions.fail_submission(conn, job_id, 1, 1003.0, "launch failed")
    other = submit(conn)
    transitions.fail_submission(conn, other, 1, 1003.0, "launch failed")
    assert state(conn, other).outcome == "submission_failed"
    with pytest.raises(transitions.ClaimRefused, match="already finished"):
        claim(conn, other)  # the hash is gone: a late claim is impossible


def test_renew_lease_names_owner_and_revision(conn):
    job_id = submit(conn)
    owner = "01900000-0000-7000-8000-0000000000aa"
    rev = claim(conn, job_id, supervisor_id=owner)["revision"]
    assert transitions.renew_lease(conn, job_id, owner, rev, 2000.0) == rev + 1
    assert state(conn, job_id).lease_expires_at == 2000.0
    with pytest.raises(Conflict):
        transitions.renew_lease(conn, job_id, owner, rev, 3000.0)  # stale revision
    with pytest.raises(Conflict):
        transitions.renew_lease(conn, job_id, "someone-else", rev + 1, 3000.0)
    assert state(conn, job_id).lease_expires_at == 2000.0


def test_set_waiting_only_before_running(conn):
    job_id = submit(conn)
    rev = claim(conn, job_id)["revision"]
    rev = transitions.set_waiting(conn, job_id, rev, "slot", "group full", None, 1002.0, announce=True)
    assert (state(conn, job_id).phase, state(conn, job_id).waiting_for) == ("waiting", "slot")
    rev = transitions.try_begin_attempt(conn, job_id, rev, 1, "/tmp/a.log", 1003.0)
    with pytest.raises(Conflict):
        transitions.set_waiting(conn, job_id, rev, "slot", "group full", None, 1004.0, announce=False)


def test_try_begin_attempt_takes_a_free_slot_and_waits_when_full(conn):
    transitions.set_group_limit(conn, "one", 1)
    first, second = submit(conn, group="one"), submit(conn, group="one", now=1000.5)
    rev1, rev2 = claim(conn, first)["revision"], claim(conn, second)["revision"]
    assert transitions.try_begin_attempt(conn, first, rev1, 1, "/tmp/1.log", 1002.0) == rev1 + 1
    assert state(conn, first).slot_held == 1 and queries.last_attempt(conn, first)["number"] == 1
    assert transitions.try_begin_attempt(conn, second, rev2, 1, "/tmp/2.log", 1002.0) is None  # full
    assert state(conn, second).phase == "starting" and queries.last_attempt(conn, second) is None
    transitions.set_group_limit(conn, "one", 2)
    with pytest.raises(Conflict):  # room now, but a stale revision
        transitions.try_begin_attempt(conn, second, rev2 - 1, 1, "/tmp/2.log", 1002.0)


def test_end_attempt_schedules_a_retry_or_finishes(conn):
    job_id, rev = running(conn)
    transitions.record_target(conn, job_id, 1, 4242, 7, "boot", 4242, 1002.5)
    rev = transitions.end_attempt(conn, job_id, rev, 1, now=1003.0, exit_code=1, signal=None,
                                  attempt_outcome="failed", error=None, retry_at=1010.0, job_outcome=None,
                                  detail=None)
    s = state(conn, job_id)
    assert (s.phase, s.waiting_for, s.wait_until, s.slot_held) == ("waiting", "retry", 1010.0, 0)
    rev = transitions.try_begin_attempt(conn, job_id, rev, 2, "/tmp/attempt-2.log", 1011.0)
    rev = transitions.end_attempt(conn, job_id, rev, 2, now=1012.0, exit_code=0, signal=None,
                                  attempt_outcome="succeeded", error=None, retry_at=None, job_outcome="succeeded",
                                  detail=None)
    assert (state(conn, job_id).outcome, [a["pid"] for a in queries.attempts(conn, job_id)]) == ("succeeded",
                                                                                               [4242, None])
    with pytest.raises(Conflict):
        transitions.end_attempt(conn, job_id, rev, 2, now=1013.0, exit_code=0, signal=None,
                                attempt_outcome="succeeded", error=None, retry_at=None, job_outcome="succeeded",
                                detail=None)


def test_finish_only_an_active_job(conn):
    job_id = submit(conn)
    rev = claim(conn, job_id)["revision"]
    rev = transitions.finish(conn, job_id, rev, "dependency_failed", 1003.0, "dependency x failed")
    assert (state(conn, job_id).outcome, state(conn, job_id).detail) == ("dependency_failed", "dependency x failed")
    with pytest.raises(Conflict):
        transitions.finish(conn, job_id, rev, "cancelled", 1004.0)
    assert state(conn, job_id).outcome == "dependency_failed"


def test_mark_lost_only_past_the_lease_and_keeps_a_live_targets_slot(conn):
    job_id, rev = running(conn)
    lease_end = state(conn, job_id).lease_expires_at
    with pytest.raises(Conflict):
        transitions.mark_lost(conn, job_id, rev, lease_end - 1, "gone", target_alive=False)
    assert state(conn, job_id).phase == "running"
    rev = transitions.mark_lost(conn, job_id, rev, lease_end + 1, "gone", target_alive=True)
    s = state(conn, job_id)
    assert (s.outcome, s.slot_held, queries.last_attempt(conn, job_id)["outcome"]) == ("lost", 1, "lost")
    rev = transitions.release_lost_slot(conn, job_id, rev, lease_end + 2)
    assert state(conn, job_id).slot_held == 0
    with pytest.raises(Conflict):
        transitions.release_lost_slot(conn, job_id, rev, lease_end + 3)  # no slot held any more


def test_request_cancel_by_phase(conn):
    unclaimed = submit(conn)
    assert transitions.request_cancel(conn, unclaimed, 1001.0)[0] == "cancelled"
    assert state(conn, unclaimed).outcome == "cancelled"
    assert transitions.request_cancel(conn, unclaimed, 1002.0)[0] == "finished"
    job_id, _ = running(conn)
    what, row = transitions.request_cancel(conn, job_id, 1003.0)
    assert (what, row["phase"], row["cancel_requested_at"]) == ("requested", "running", 1003.0)
    assert transitions.request_cancel(conn, job_id, 1004.0)[1]["cancel_requested_at"] == 1003.0  # asked once


def test_group_limit_and_prune(conn):
    transitions.set_group_limit(conn, "batch", 3)
    transitions.set_group_limit(conn, "batch", 0)
    assert [tuple(r) for r in queries.groups(conn, "batch")] == [("batch", 0, None, 0, 0)]
    done = submit(conn, name="done")
    transitions.fail_submission(conn, done, 1, 1001.0, "x")
    waiting = submit(conn, dependencies=[("done", "end")])
    old = submit(conn)
    transitions.fail_submission(conn, old, 1, 1001.0, "x")
    assert pruning.prune(conn, 1000.0) == ([], [])  # nothing finished that long ago
    assert [r[0] for r in pruning.prune(conn, 1001.0)[0]] == [old]  # `done` stays: an unfinished job depends on it
    assert queries.job_exists(conn, done) and queries.job_exists(conn, waiting) and not queries.job_exists(conn, old)


def test_a_paused_group_lends_no_slot_and_keeps_its_limit(conn):
    transitions.set_group_limit(conn, "batch", 3)
    assert groups.set_paused(conn, "batch", True, 50.0) is True
    assert groups.set_paused(conn, "batch", True, 51.0) is False  # already paused: unchanged
    assert groups.is_paused(conn, "batch") and queries.free_slots(conn, "batch") == 0
    assert queries.slot_limit(conn, "batch") == 0 and [tuple(r) for r in queries.groups(conn, "batch")] == [
        ("batch", 3, 50.0, 0, 0)]
    assert groups.set_paused(conn, "batch", False, 52.0) is True
    assert not groups.is_paused(conn, "batch") and queries.free_slots(conn, "batch") == 3
    assert groups.set_paused(conn, "nosuch", True, 53.0) is None
