"""Reconciliation: one explicit, conservative pass that explains abandoned records. Run cheaply by
every command and alone by `jobman reconcile`. It never re-runs anything and never invents an exit code.

- `submitting` past its claim deadline -> finished `submission_failed`.
- lease expired and the supervisor no longer verifies (pid + start time + boot id; a zombie does
  not verify) -> finished `lost`. An expired lease whose process still verifies is left alone.
- a `lost` job's slot is freed once its target tree no longer verifies as alive.
- a cancel asked of a job that waits (runs no attempt) whose supervisor cannot answer it, stopped (SIGSTOP, a
  debugger) or dead, is carried out: the job finishes `cancelled`, guarded by its revision, so a supervisor
  that woke and moved the job meanwhile keeps it; one that wakes later finds it cancelled and leaves.
"""
from runkit.system import proc

from ..handoff import doorbell
from ..core.errors import Conflict
from ..store import queries
from ..store.transitions import fail_submission, finish, mark_lost, release_lost_slot
from .targets import Finder


def target_alive(job_id: str, attempt, finder: Finder | None = None) -> bool:
    """Whether anything of an attempt's target tree still lives: the recorded root if it verifies, what
    is left of its session and process group, and any process carrying the job's id (which also covers
    a target its supervisor never got to record)."""
    return (finder or Finder()).alive(job_id, attempt)


def run(conn, home: str, now: float) -> list[tuple[str, str]]:
    """One pass. Returns [(job_id, what happened)]."""
    changes = []
    finder = Finder()
    for row in queries.due_for_reconcile(conn, now):
        job_id = row["job_id"]
        try:
            if row["phase"] == "submitting":
                fail_submission(conn, job_id, row["revision"], now,
                                "no supervisor claimed the job before its claim deadline")
                changes.append((job_id, "submission_failed"))
            elif not proc.verify(row["supervisor_pid"], row["supervisor_start_time"], row["supervisor_boot_id"]):
                alive = target_alive(job_id, queries.last_attempt(conn, job_id), finder)
                detail = ("its supervisor stopped renewing its lease and no longer exists"
                          + ("; the target process tree is still alive" if alive else ""))
                mark_lost(conn, job_id, row["revision"], now, detail, alive)
                doorbell.remove(home, job_id)  # its listener is gone: the FIFO would wait for a prune otherwise
                changes.append((job_id, "lost"))
            else:
                continue
        except Conflict:
            continue  # someone else moved it first: their word stands
        wake_after(conn, home, job_id)
    for row in queries.cancels_asked(conn):
        pid = row["supervisor_pid"]
        if proc.verify(pid, row["supervisor_start_time"], row["supervisor_boot_id"], awake=True):
            continue  # it answers the cancel itself
        gone = not proc.verify(pid, row["supervisor_start_time"], row["supervisor_boot_id"])
        detail = (("cancelled before it ran" if row["attempts"] == 0
                   else f"cancelled while waiting for attempt {row['attempts'] + 1}")
                  + f"; its supervisor (pid {pid}) {'is gone' if gone else 'was stopped'}, so the cancel was carried"
                    " out without it")
        try:
            finish(conn, row["job_id"], row["revision"], "cancelled", now, detail, phases=("starting", "waiting"))
        except Conflict:
            continue  # it woke and moved the job first: it answers the cancel itself
        changes.append((row["job_id"], "cancelled"))
        wake_after(conn, home, row["job_id"])
    for row in queries.finished_slot_holders(conn):
        if not target_alive(row["job_id"], queries.last_attempt(conn, row["job_id"]), finder):
            try:
                release_lost_slot(conn, row["job_id"], row["revision"], now)
            except Conflict:
                continue
            changes.append((row["job_id"], "slot released"))
            group = queries.group_of(conn, row["job_id"])
            doorbell.ring_all(home, queries.able_waiters(conn, group, queries.free_slots(conn, group), proc.verify))
    return changes


def wake_after(conn, home: str, job_id: str) -> None:
    """Ring the jobs that `job_id`'s end lets go on: its dependents to wake, and the waiters its group's free slots
    are for (after a reconcile pass or a cancel has finished it)."""
    doorbell.ring_all(home, queries.dependents_to_wake(conn, job_id))
    group = queries.group_of(conn, job_id)
    doorbell.ring_all(home, queries.able_waiters(conn, group, queries.free_slots(conn, group), proc.verify))
