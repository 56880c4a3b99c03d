"""Every change of a job's state, one function each, with its precondition in the SQL predicate.

Mutable rows carry a revision. Each update names the expected revision (and phase) in its WHERE
clause; "no row updated" raises Conflict, and the caller reloads before deciding again. Events are
appended in the same transaction as the change they record.
"""
from .sqlite import sqlite3

from runkit.core.clock import Clock
from runkit.core.jsonfast import dumps

from ..core.errors import BadInput, Conflict
from . import queries
from .queries import load_state
from .database import Transaction, next_handle

ACTIVE = ("starting", "waiting", "running")


class ClaimRefused(Exception):
    """The supervisor's claim was not accepted; str(e) says why."""


def add_event(conn, job_id: str, kind: str, at: float, **data) -> None:
    conn.execute("INSERT INTO events (job_id, at, kind, data) VALUES (?, ?, ?, ?)",
                 (job_id, at, kind, dumps(data) if data else None))


def no_such_group(name: str) -> BadInput:
    return BadInput(f"group {name!r} does not exist; create it with: jobman group set {name} --limit N")


# Any change of a job's state ends the lease round's cover of it, its lease made its own as it stands: the round
# covers only jobs it has read as waiting at their revision (store.lease_round), and covers them again if they
# still wait.
_UNCOVER = f"lease_expires_at = {queries.lease_end('job_state')}, lease_cover = NULL"


def _update(conn, job_id: str, revision: int, phases: tuple, sets: dict, extra_where: str = "",
            extra_args: tuple = ()) -> int:
    assignments = ", ".join(f"{column} = ?" for column in sets)
    if "lease_expires_at" not in sets:
        assignments += ", " + _UNCOVER
    marks = ", ".join("?" * len(phases))
    cur = conn.execute(
        f"UPDATE job_state SET {assignments}, revision = revision + 1 "
        f"WHERE job_id = ? AND revision = ? AND phase IN ({marks}){extra_where}",
        (*sets.values(), job_id, revision, *phases, *extra_args))
    if cur.rowcount != 1:
        raise Conflict(f"job {job_id} changed (expected revision {revision} in phase {'/'.join(phases)})")
    return revision + 1


# --- submission (CLI) -------------------------------------------------------------------------

def submit(conn, *, job_id: str, spec: dict, dependencies: list[tuple[str, str]], credential_hash: bytes,
           clock: Clock, before_commit=None) -> dict:
    """One transaction: job + runtime state + dependency edges + job_submitted.

    Dependency selectors are resolved to canonical ids here, inside the transaction. before_commit
    runs just before COMMIT (the CLI ignores interrupts from there on). Returns the stored spec, with
    the job's handle (its short number), its submission time and its claim deadline added. The submission
    time is the clock's wall time once the write lock is held.
    """
    return submit_many(conn, [(job_id, spec, dependencies, credential_hash)], clock, before_commit)[0]


def submit_many(conn, jobs: list[tuple[str, dict, list, bytes]], clock: Clock,
                before_commit=None) -> list[dict]:
    """submit() for several jobs [(job_id, spec, dependencies, credential_hash)] in one transaction (one
    synced commit: a batch's jobs are committed a few at a time). All of them or none."""
    conn.execute("BEGIN IMMEDIATE")
    # A job is submitted when it is committed: BEGIN IMMEDIATE may have waited for the write lock (a backup,
    # `sqlite3` in a shell) longer than the claim window, and a deadline read before that wait would have
    # closed before the supervisor could claim. From here to COMMIT nothing waits.
    now = clock.wall()
    try:
        stored = [_insert_job(conn, *job, now) for job in jobs]
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    if before_commit is not None:
        before_commit()
    try:
        conn.execute("COMMIT")
    except KeyboardInterrupt:
        # A Ctrl-C that arrived before interrupts were ignored: if COMMIT did not run, nothing is
        # submitted; if it did, the jobs are accepted and the handoff must go on.
        if conn.in_transaction:
            conn.execute("ROLLBACK")
            raise
    return stored


def _insert_job(conn, job_id: str, spec: dict, dependencies: list[tuple[str, str]], credential_hash: bytes,
                now: float) -> dict:
    from . import selectors

    windows = spec["windows"]
    if not queries.group_exists(conn, spec["group"]):
        raise no_such_group(spec["group"])
    edges, seen = [], set()
    for selector, condition in dependencies:
        target = selectors.resolve(conn, selector)
        if (target, condition) not in seen:
            seen.add((target, condition))
            edges.append({"job": target, "condition": condition, "selector": selector})
    # --hold is how the job is submitted, not what it is: the stored spec (which a restart submits again) has none
    held = spec.get("hold", False)
    spec = {key: value for key, value in spec.items() if key != "hold"}
    spec = dict(spec, dependencies=edges)
    handle = next_handle(conn)
    conn.execute(
        "INSERT INTO jobs (id, name, spec, group_name, priority, submitted_at, claim_window, lease_duration,"
        " renew_interval, poll_interval, handle, restart_of) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (job_id, spec["name"], dumps(spec), spec["group"], spec["priority"], now,
         windows["claim"], windows["lease"], windows["renew"], windows["poll"], handle, spec.get("restart_of")))
    conn.execute(
        "INSERT INTO job_state (job_id, phase, revision, credential_hash, claim_deadline, held_at)"
        " VALUES (?, 'submitting', 1, ?, ?, ?)", (job_id, credential_hash, now + windows["claim"], now if held else None))
    conn.executemany("INSERT INTO dependencies (job_id, depends_on, condition) VALUES (?, ?, ?)",
                     [(job_id, e["job"], e["condition"]) for e in edges])
    add_event(conn, job_id, "job_submitted", now, claim_deadline=now + windows["claim"],
              **({"restart_of": spec["restart_of"]} if spec.get("restart_of") else {}))
    if held:
        add_event(conn, job_id, "held", now)
    return dict(spec, handle=handle, submitted_at=now, claim_deadline=now + windows["claim"])


def fail_submission(conn, job_id: str, revision: int, now: float, detail: str) -> int:
    """Finish an unclaimed record as submission_failed. Clearing the hash makes a late claim impossible."""
    with Transaction(conn):
        rev = _update(conn, job_id, revision, ("submitting",),
                      {"phase": "finished", "outcome": "submission_failed", "credential_hash": None,
                       "claim_deadline": None, "detail": detail, "finished_at": now})
        add_event(conn, job_id, "job_finished", now, outcome="submission_failed", detail=detail)
    return rev


# --- the supervisor's claim --------------------------------------------------------------------

def claim(conn, job_id: str, credential_hash: bytes, supervisor_id: str, pid: int, start_time: int, boot_id: str,
          now: float) -> sqlite3.Row:
    """Single-use ownership claim: accepted only while the job is submitting, the deadline is open,
    the hash matches and the revision is current. Raises ClaimRefused."""
    refusal = None
    with Transaction(conn):
        row = conn.execute(
            "SELECT s.phase, s.revision, s.credential_hash, s.claim_deadline, s.supervisor_id, j.lease_duration"
            " FROM job_state s"
            " JOIN jobs j ON j.id = s.job_id WHERE s.job_id = ?", (job_id,)).fetchone()
        if row is None:
            refusal = f"no job {job_id}"
        elif row["phase"] != "submitting" and row["supervisor_id"] == supervisor_id:
            pass  # our own claim, committed by a try whose answer was lost to a storage error
        elif row["phase"] != "submitting":
            refusal = f"job {job_id} is already {row['phase']}: it was claimed before (or finished)"
        elif row["credential_hash"] != credential_hash:
            refusal = f"wrong launch credential for job {job_id}"
        elif row["claim_deadline"] < now:
            detail = "the supervisor's claim arrived after the claim deadline"
            _update(conn, job_id, row["revision"], ("submitting",),
                    {"phase": "finished", "outcome": "submission_failed", "credential_hash": None,
                     "claim_deadline": None, "detail": detail, "finished_at": now})
            add_event(conn, job_id, "claim_refused", now, reason="deadline passed", supervisor_id=supervisor_id)
            add_event(conn, job_id, "job_finished", now, outcome="submission_failed", detail=detail)
            refusal = f"the claim window of job {job_id} closed before the claim"
        else:
            _update(conn, job_id, row["revision"], ("submitting",),
                    {"phase": "starting", "credential_hash": None, "claim_deadline": None,
                     "supervisor_id": supervisor_id, "supervisor_pid": pid, "supervisor_start_time": start_time,
                     "supervisor_boot_id": boot_id, "lease_expires_at": now + row["lease_duration"]},
                    " AND credential_hash = ? AND claim_deadline >= ?", (credential_hash, now))
            add_event(conn, job_id, "supervisor_claimed", now, supervisor_id=supervisor_id, pid=pid)
    if refusal:
        raise ClaimRefused(refusal)
    return load_state(conn, job_id)


# --- the supervisor's ownership ----------------------------------------------------------------

def renew_lease(conn, job_id: str, supervisor_id: str, revision: int, expires_at: float) -> int:
    """A single guarded statement: no transaction needed. Raises Conflict if anything moved. On a
    supervisor's relaxed connection (db.Connection.relax) it is the one write not synced on its own."""
    cur = conn.execute(RENEW, (expires_at, job_id, revision, supervisor_id))
    if cur.rowcount != 1:
        raise Conflict(f"job {job_id} changed (expected revision {revision}, owned by {supervisor_id})")
    return revision + 1


# A lease's renewal: _update's statement written out once, since thousands of waiting supervisors run it, and the
# one statement every renewal runs, a supervisor's own and the lease round's (store.lease_round.hold_and_renew):
# (expires_at, job_id, revision, supervisor_id). The revision fences it: a row read at that revision is in the
# phase it was read in, so the round, which renews only what it read as waiting, needs no guard of its own.
RENEW = ("UPDATE job_state SET lease_expires_at = ?, lease_cover = NULL, revision = revision + 1"
         " WHERE job_id = ? AND revision = ?"
         " AND phase IN ('starting', 'waiting', 'running') AND supervisor_id = ?")


def set_waiting(conn, job_id: str, revision: int, waiting_for: str, detail: str, until: float | None,
                now: float, announce: bool) -> int:
    with Transaction(conn, durable=False):  # why a job waits is re-derived by its supervisor after any crash
        rev = _update(conn, job_id, revision, ("starting", "waiting"),
                      {"phase": "waiting", "waiting_for": waiting_for, "wait_detail": detail, "wait_until": until})
        if announce:
            add_event(conn, job_id, "waiting", now, waiting_for=waiting_for, detail=detail)
    return rev


def try_begin_attempt(conn, job_id: str, revision: int, number: int, log_path: str, now: float,
                      passed=frozenset()) -> int | None:
    """Take a slot in the job's group and move it to running with a new attempt, if the group has room
    for it in priority-then-submission order. Returns the new revision, or None (no slot: stay waiting).
    passed: (job_id, revision) of waiters ahead that the caller found unable to take a slot (stopped, dead):
    stepped over unless they have moved since (queries.front_of_line)."""
    from ..core import scheduling

    # Not synced on its own: after a power cut no target of this boot runs, and the job is lost anyway.
    with Transaction(conn, durable=False):
        me = conn.execute("SELECT j.group_name, j.priority, j.submitted_at,"
                          " CASE WHEN g.paused_at IS NULL THEN g.slot_limit ELSE 0 END AS slot_limit FROM jobs j"
                          " JOIN groups g ON g.name = j.group_name WHERE j.id = ?", (job_id,)).fetchone()
        held = queries.slots_held(conn, me["group_name"])
        front = queries.front_of_line(conn, me["group_name"], max(0, me["slot_limit"] - held), passed)
        if not scheduling.slot_verdict(me["slot_limit"], held, front, (job_id, me["priority"], me["submitted_at"])):
            return None
        rev = _update(conn, job_id, revision, ("starting", "waiting"),
                      {"phase": "running", "slot_held": 1, "attempts": number, "waiting_for": None,
                       "wait_detail": None, "wait_until": None})
        conn.execute("INSERT INTO attempts (job_id, number, started_at, log_path) VALUES (?, ?, ?, ?)",
                     (job_id, number, now, log_path))
    return rev


def record_target(conn, job_id: str, number: int, pid: int, start_time: int, boot_id: str, pgid: int,
                  now: float) -> None:
    """The target's identity, recorded before anything may signal it (not synced on its own: a process
    identity means nothing after a power cut)."""
    with Transaction(conn, durable=False):
        conn.execute("UPDATE attempts SET pid = ?, start_time = ?, boot_id = ?, pgid = ?"
                     " WHERE job_id = ? AND number = ? AND ended_at IS NULL",
                     (pid, start_time, boot_id, pgid, job_id, number))
        add_event(conn, job_id, "attempt_started", now, attempt=number, pid=pid)


def end_attempt(conn, job_id: str, revision: int, number: int, *, now: float, exit_code: int | None,
                signal: int | None, attempt_outcome: str, error: str | None, retry_at: float | None,
                job_outcome: str | None, detail: str | None) -> int:
    """Close the attempt, then either schedule the next one (retry_at) or finish the job (job_outcome).
    The slot is released either way: a retry waits for a slot again."""
    from runkit.core.durations import format_time  # (only once an attempt ends: not on the claim's path)

    with Transaction(conn):
        conn.execute("UPDATE attempts SET ended_at = ?, exit_code = ?, signal = ?, outcome = ?, error = ?"
                     " WHERE job_id = ? AND number = ? AND ended_at IS NULL",
                     (now, exit_code, signal, attempt_outcome, error, job_id, number))
        add_event(conn, job_id, "attempt_exited", now, attempt=number, exit_code=exit_code, signal=signal,
                  outcome=attempt_outcome, **({"error": error} if error else {}))
        if retry_at is not None:
            rev = _update(conn, job_id, revision, ("running",),
                          {"phase": "waiting", "waiting_for": "retry", "slot_held": 0, "wait_until": retry_at,
                           "wait_detail": f"retry {number + 1} after attempt {number} {attempt_outcome},"
                                          f" not before {format_time(retry_at)}",
                           "exit_code": exit_code, "exit_signal": signal})
            add_event(conn, job_id, "retry_scheduled", now, attempt=number + 1, not_before=retry_at)
        else:
            rev = _finish(conn, job_id, revision, ("running",), job_outcome, now, detail, exit_code, signal)
    return rev


def finish(conn, job_id: str, revision: int, outcome: str, now: float, detail: str | None = None,
           phases: tuple = ACTIVE) -> int:
    """Finish a job that is not running an attempt (dependency_failed, cancelled while waiting, ...)."""
    with Transaction(conn):
        return _finish(conn, job_id, revision, phases, outcome, now, detail, None, None)


def _finish(conn, job_id, revision, phases, outcome, now, detail, exit_code, signal) -> int:
    rev = _update(conn, job_id, revision, phases,
                  {"phase": "finished", "outcome": outcome, "slot_held": 0, "waiting_for": None,
                   "wait_detail": None, "wait_until": None, "detail": detail, "finished_at": now,
                   "exit_code": exit_code, "exit_signal": signal})
    add_event(conn, job_id, "job_finished", now, outcome=outcome, **({"detail": detail} if detail else {}))
    return rev


# --- other commands ------------------------------------------------------------------------------

def mark_lost(conn, job_id: str, revision: int, now: float, detail: str, target_alive: bool) -> int:
    """Reconciliation's verdict on an expired lease whose supervisor no longer verifies. No exit code is
    invented; the slot stays held while the target tree still verifies as alive."""
    with Transaction(conn):
        rev = _update(conn, job_id, revision, ACTIVE,
                      {"phase": "finished", "outcome": "lost", "waiting_for": None, "wait_detail": None,
                       "wait_until": None, "detail": detail, "finished_at": now},
                      f" AND {queries.lease_end('job_state')} < ?", (now,))
        if not target_alive:
            conn.execute("UPDATE job_state SET slot_held = 0 WHERE job_id = ?", (job_id,))
        conn.execute("UPDATE attempts SET outcome = 'lost' WHERE job_id = ? AND ended_at IS NULL", (job_id,))
        add_event(conn, job_id, "job_finished", now, outcome="lost", detail=detail)
    return rev


def release_lost_slot(conn, job_id: str, revision: int, now: float) -> int:
    with Transaction(conn):
        rev = _update(conn, job_id, revision, ("finished",), {"slot_held": 0}, " AND slot_held = 1")
        add_event(conn, job_id, "slot_released", now, reason="the lost job's target tree is gone")
    return rev


def request_cancel(conn, job_id: str, now: float, reason: str | None = None) -> tuple[str, sqlite3.Row]:
    """Cancel what can be cancelled at once (an unclaimed submission); otherwise ask the supervisor. `reason` is kept
    with the cancel (cancel_reason, and in its event). Returns ("cancelled" | "requested" | "finished", state)."""
    why = {"reason": reason} if reason else {}
    while True:
        state = load_state(conn, job_id)
        try:
            if state["phase"] == "finished":
                return "finished", state
            if state["phase"] == "submitting":
                with Transaction(conn):
                    _update(conn, job_id, state["revision"], ("submitting",),
                            {"phase": "finished", "outcome": "cancelled", "credential_hash": None,
                             "claim_deadline": None, "detail": "cancelled before a supervisor claimed it",
                             "finished_at": now, "cancel_reason": reason})
                    add_event(conn, job_id, "job_finished", now, outcome="cancelled", **why)
                return "cancelled", load_state(conn, job_id)
            if state["cancel_requested_at"] is None:
                with Transaction(conn):
                    _update(conn, job_id, state["revision"], ACTIVE, {"cancel_requested_at": now, "cancel_reason": reason})
                    add_event(conn, job_id, "cancel_requested", now, **why)
            return "requested", load_state(conn, job_id)
        except Conflict:
            continue


HOLDABLE = ("submitting", "starting", "waiting")


def set_held(conn, job_id: str, held: bool, now: float) -> tuple[str, sqlite3.Row]:
    """Hold a job that has not started an attempt (held=True), or let it go (False). Its supervisor sees
    the change at its next look (the caller rings its doorbell). Returns ("changed" | "unchanged" |
    "not_waiting", state)."""
    while True:
        state = load_state(conn, job_id)
        if state["phase"] not in HOLDABLE:
            return "not_waiting", state
        if (state["held_at"] is not None) == held:
            return "unchanged", state
        try:
            with Transaction(conn):
                _update(conn, job_id, state["revision"], HOLDABLE, {"held_at": now if held else None},
                        " AND held_at IS " + ("NULL" if held else "NOT NULL"))
                add_event(conn, job_id, "held" if held else "released", now)
            return "changed", load_state(conn, job_id)
        except Conflict:
            continue


def set_priority(conn, job_id: str, priority: int, now: float) -> tuple[str, sqlite3.Row]:
    """Move a job that has not started to another priority: its place in its group's line (job_state) and its
    row's priority together, in submission order within the new priority. Returns ("changed" | "unchanged" |
    "not_waiting", state); the caller rings the line."""
    while True:
        state = load_state(conn, job_id)
        if state["phase"] not in HOLDABLE:
            return "not_waiting", state
        before = conn.execute("SELECT priority FROM jobs WHERE id = ?", (job_id,)).fetchone()[0]
        if before == priority:
            return "unchanged", state
        try:
            with Transaction(conn):
                _update(conn, job_id, state["revision"], HOLDABLE, {"line_priority": priority})
                conn.execute("UPDATE jobs SET priority = ? WHERE id = ?", (priority, job_id))
                add_event(conn, job_id, "priority_changed", now, before=before, after=priority)
            return "changed", load_state(conn, job_id)
        except Conflict:
            continue


def remove_group(conn, name: str) -> bool:
    """Remove a group no job belongs to (finished ones included: their rows name it). Whether it was removed."""
    with Transaction(conn):
        return conn.execute("DELETE FROM groups WHERE name = ? AND NOT EXISTS"
                            " (SELECT 1 FROM jobs WHERE group_name = ?)", (name, name)).rowcount == 1


def add_attempt_note(conn, job_id: str, kind: str, now: float, **data) -> None:
    with Transaction(conn):
        add_event(conn, job_id, kind, now, **data)


def set_group_limit(conn, name: str, limit: int) -> None:
    """Create a group, or change its limit."""
    with Transaction(conn):
        conn.execute("INSERT INTO groups (name, slot_limit) VALUES (?, ?) ON CONFLICT(name) DO UPDATE"
                     " SET slot_limit = excluded.slot_limit, revision = revision + 1", (name, limit))
