"""Read-side SQL: what commands show and what a supervisor polls."""

from runkit.core.outcomes import OUTCOMES


def load_state(conn, job_id: str):
    """A job's runtime state with the scheduling columns of its immutable row (None: no such job); lease_end is
    when its lease runs out (LEASE_END)."""
    return conn.execute("SELECT s.*, " + lease_end("s") + " AS lease_end, j.group_name, j.priority, j.submitted_at,"
                        " j.lease_duration, j.renew_interval, j.poll_interval, j.claim_window"
                        " FROM job_state s JOIN jobs j ON j.id = s.job_id WHERE s.job_id = ?", (job_id,)).fetchone()


def lease_of(conn, job_id: str) -> float | None:
    """When the job's lease runs out (LEASE_END), or None."""
    row = conn.execute("SELECT " + lease_end("s") + " FROM job_state s WHERE s.job_id = ?", (job_id,)).fetchone()
    return row[0] if row else None


# When a job's lease runs out: its own lease_expires_at, or, while the lease round covers it (lease_cover, its lease
# length), the last time the round's holder saw every covered supervisor alive plus that length, if later. Every
# reader and every guard that asks whether a lease has run out asks it of this (store.lease_round says why).
LEASE_END = ("(CASE WHEN %(t)s.lease_cover IS NULL THEN %(t)s.lease_expires_at ELSE"
             " max(coalesce(%(t)s.lease_expires_at, 0),"
             " coalesce((SELECT verified_at FROM lease_round), 0) + %(t)s.lease_cover) END)")


def lease_end(table: str) -> str:
    return LEASE_END % {"t": table}


_STALE = ("((%(t)s.phase = 'submitting' AND %(t)s.claim_deadline < :now) OR "
          "(%(t)s.phase IN ('starting', 'waiting', 'running') AND " + LEASE_END + " < :now))")

# What a waiting supervisor needs, in one query whose cost does not grow with the queue: its own
# state, its dependencies (and whether one looks abandoned), its group's limit, the slots held in the
# group (an index over holders only), whether a holder looks abandoned, and who holds the lease round. Its place in line is a
# second query (front_of_line), asked only when it is ready for a slot.
OPEN_LIMIT = "CASE WHEN paused_at IS NULL THEN slot_limit ELSE 0 END"  # the slots a group lends: none while paused
SNAPSHOT = f"""
SELECT s.*, j.group_name, j.priority, j.submitted_at, j.lease_duration, j.renew_interval, j.poll_interval,
  {lease_end("s")} AS lease_end,
  (SELECT json_group_array(json_array(d.depends_on, d.condition, ds.phase, ds.outcome, dj.name, dj.handle))
     FROM dependencies d JOIN job_state ds ON ds.job_id = d.depends_on JOIN jobs dj ON dj.id = d.depends_on
    WHERE d.job_id = s.job_id) AS deps,
  (SELECT count(*) FROM dependencies d JOIN job_state ds ON ds.job_id = d.depends_on
    WHERE d.job_id = s.job_id AND {_STALE % {"t": "ds"}}) AS deps_stale,
  (SELECT {OPEN_LIMIT} FROM groups WHERE name = j.group_name) AS slot_limit,
  (SELECT paused_at IS NOT NULL FROM groups WHERE name = j.group_name) AS group_paused,
  (SELECT count(*) FROM job_state h WHERE h.line_group = j.group_name AND h.slot_held = 1) AS slots_held,
  (SELECT count(*) FROM job_state h WHERE h.line_group = j.group_name AND h.slot_held = 1
      AND (h.phase = 'finished' OR {lease_end("h")} < :now)) AS holders_stale,
  (SELECT supervisor_id FROM lease_round) AS round_holder, (SELECT expires_at FROM lease_round) AS round_until
FROM job_state s JOIN jobs j ON j.id = s.job_id WHERE s.job_id = :id
"""


def snapshot(conn, job_id: str, now: float):
    """Everything a waiting supervisor needs to decide, in one query."""
    return conn.execute(SNAPSHOT, {"id": job_id, "now": now}).fetchone()


# The group's line: jobs waiting for a slot, in the order they may take one (an index in that order).
LINE = ("FROM job_state WHERE phase = 'waiting' AND waiting_for = 'slot' AND line_group = ?"
        " ORDER BY line_priority DESC, line_at, job_id")


def front_of_line(conn, group: str, count: int, passed=frozenset()) -> list:
    """The first `count` jobs in the group's line: (job_id, priority, submitted_at, lease end (LEASE_END), revision,
    supervisor_pid, supervisor_start_time, supervisor_boot_id). passed: (job_id, revision) of waiters found unable
    to take a slot (their supervisor stopped or dead): stepped over while their revision is the one seen then,
    so one that has woken and written since holds its place again."""
    rows = conn.execute(f"SELECT job_id, line_priority, line_at, {lease_end('job_state')}, revision, supervisor_pid,"
                        f" supervisor_start_time, supervisor_boot_id {LINE} LIMIT ?",
                        (group, count + len(passed))).fetchall()
    if passed:
        rows = [row for row in rows if (row[0], row[4]) not in passed]
    return rows[:count]


def able_waiters(conn, group: str, count: int, verify) -> list[str]:
    """The first `count` jobs of the group's line whose supervisor can take a slot (verify(pid, start_time, boot,
    awake=True): alive and not stopped), in the order they may take one: those a freed slot is for. A stopped
    or dead waiter ahead of them is stepped over (as front_of_line's passed), so it does not hold the line."""
    cursor = conn.execute(f"SELECT job_id, supervisor_pid, supervisor_start_time, supervisor_boot_id {LINE}",
                          (group,))
    found: list[str] = []
    for job_id, pid, start_time, boot in cursor:
        if len(found) >= count:
            break
        if verify(pid, start_time, boot, awake=True):
            found.append(job_id)
    cursor.close()
    return found


def line(conn, group: str) -> list[str]:
    """The whole line of a group (what `jobman list` shows positions from): plain tuples, not Row objects,
    since a sweep's line is thousands long."""
    cursor = conn.cursor()
    cursor.row_factory = None
    return [r[0] for r in cursor.execute(f"SELECT job_id {LINE}", (group,))]


def waiting_count(conn) -> int:
    """How many jobs wait (from the index of unfinished jobs: a fraction of a millisecond at 10,000)."""
    return conn.execute("SELECT count(*) FROM job_state WHERE phase != 'finished' AND phase = 'waiting'"
                        ).fetchone()[0]


def spec_json(conn, job_id: str) -> str:
    return conn.execute("SELECT spec FROM jobs WHERE id = ?", (job_id,)).fetchone()[0]


def dependents_to_wake(conn, job_id: str) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT DISTINCT d.job_id FROM dependencies d JOIN job_state s ON s.job_id = d.job_id"
        " WHERE d.depends_on = ? AND s.phase != 'finished'", (job_id,))]


def group_exists(conn, name: str) -> bool:
    return conn.execute("SELECT 1 FROM groups WHERE name = ?", (name,)).fetchone() is not None


def group_of(conn, job_id: str) -> str:
    return conn.execute("SELECT group_name FROM jobs WHERE id = ?", (job_id,)).fetchone()[0]


def slots_held(conn, group: str) -> int:
    return conn.execute("SELECT count(*) FROM job_state WHERE line_group = ? AND slot_held = 1", (group,)).fetchone()[0]


def slot_limit(conn, group: str) -> int | None:
    row = conn.execute(f"SELECT {OPEN_LIMIT} FROM groups WHERE name = ?", (group,)).fetchone()
    return row[0] if row else None


def free_slots(conn, group: str) -> int:
    row = conn.execute(f"SELECT {OPEN_LIMIT} FROM groups WHERE name = ?", (group,)).fetchone()
    return max(0, row[0] - slots_held(conn, group)) if row else 0


def last_attempt(conn, job_id: str):
    return conn.execute("SELECT * FROM attempts WHERE job_id = ? ORDER BY number DESC LIMIT 1", (job_id,)).fetchone()


def attempts(conn, job_id: str) -> list:
    return conn.execute("SELECT * FROM attempts WHERE job_id = ? ORDER BY number", (job_id,)).fetchall()


def events(conn, job_id: str) -> list:
    return conn.execute("SELECT * FROM events WHERE job_id = ? ORDER BY id", (job_id,)).fetchall()


def dependencies(conn, job_id: str) -> list:
    return conn.execute(
        "SELECT d.depends_on, d.condition, s.phase, s.outcome, j.name, j.handle FROM dependencies d"
        " JOIN job_state s ON s.job_id = d.depends_on JOIN jobs j ON j.id = d.depends_on"
        " WHERE d.job_id = ? ORDER BY d.rowid", (job_id,)).fetchall()


def job(conn, job_id: str):
    """One job as `show` reads it: the same record `list` reads (its first attempt's start included), and every
    column of its row."""
    return conn.execute(f"SELECT j.*, s.*, {_FIRST_START} FROM jobs j JOIN job_state s ON s.job_id = j.id WHERE j.id = ?",
                        (job_id,)).fetchone()


_FIRST_START = ("(SELECT a.started_at FROM attempts a WHERE a.job_id = j.id AND a.number = 1) AS started_at,"
                " (SELECT json_group_array(json_array(r.id, r.handle)) FROM jobs r WHERE r.restart_of = j.id)"
                " AS restarted_as")
LIST_COLUMNS = "j.id, j.name, j.spec, j.group_name, j.priority, j.submitted_at, j.handle, s.*, " + _FIRST_START
PHASES = ("submitting", "starting", "waiting", "running", "finished")
STATE_WORDS = PHASES + OUTCOMES + ("held",)  # what `jobman list --state` accepts


def list_filter(states=(), group: str | None = None, name_glob: str | None = None,
                hide_restarted: bool = False) -> tuple[str, list]:
    """The SQL condition (" AND ...") and its arguments for `jobman list`'s filters: any of the state words
    (a phase, an outcome, or held), a group, a glob over names (SQLite's GLOB: *, ?, [...]); hide_restarted: not
    the jobs that have been restarted."""
    parts, args = [f"NOT {RESTARTED}"] if hide_restarted else [], []
    if states:
        ors = []
        for word in states:
            if word == "held":
                ors.append("(s.held_at IS NOT NULL AND s.phase != 'finished')")
            else:
                ors.append("s.phase = ?" if word in PHASES else "s.outcome = ?")
                args.append(word)
        parts.append("(" + " OR ".join(ors) + ")")
    if group is not None:
        parts.append("j.group_name = ?")
        args.append(group)
    if name_glob is not None:
        parts.append("j.name GLOB ?")
        args.append(name_glob)
    return "".join(f" AND {p}" for p in parts), args


def list_jobs(conn, *, limit: int | None = None, active_only: bool = False, finished: int | None = None,
              waiting: int | None = None, where: tuple[str, list] = ("", [])) -> list:
    """Jobs, newest first: with `limit`, the newest `limit` jobs; else every unfinished job (but of the
    waiting ones only the newest `waiting`, unless None), plus (unless active_only) the newest `finished`
    finished ones (all when None). Each part is read from an index, so a long history or a long queue costs
    nothing unless it is asked for. where: from list_filter."""
    cond, args = where
    if limit:
        return conn.execute(f"SELECT {LIST_COLUMNS} FROM jobs j CROSS JOIN job_state s ON s.job_id = j.id"
                            f" WHERE 1{cond} ORDER BY j.submitted_at DESC, j.id DESC LIMIT ?",
                            (*args, int(limit))).fetchall()
    if waiting is None:
        rows = conn.execute(f"SELECT {LIST_COLUMNS} FROM job_state s JOIN jobs j ON j.id = s.job_id"
                            f" WHERE s.phase != 'finished'{cond}", args).fetchall()
    else:
        rows = conn.execute(f"SELECT {LIST_COLUMNS} FROM job_state s JOIN jobs j ON j.id = s.job_id"
                            f" WHERE s.phase != 'finished' AND s.phase IN ('submitting', 'starting', 'running'){cond}",
                            args).fetchall()
        rows += _newest(conn, "waiting", cond, args, waiting)
    if not active_only:
        rows += _newest(conn, "finished", cond, args, -1 if finished is None else finished)
    rows.sort(key=lambda r: (r["submitted_at"], r["id"]), reverse=True)
    return rows


def claim_deadline(conn, job_id: str) -> float | None:
    """The claim deadline of a submission (None once claimed or finished, or with no such job)."""
    row = conn.execute("SELECT claim_deadline FROM job_state WHERE job_id = ?", (job_id,)).fetchone()
    return None if row is None else row[0]


# --- selectors -------------------------------------------------------------------------------------

def job_exists(conn, job_id: str) -> bool:
    return conn.execute("SELECT 1 FROM jobs WHERE id = ?", (job_id,)).fetchone() is not None


def newest_named(conn, name: str) -> str | None:
    """The id of the newest job with display name `name`."""
    row = conn.execute("SELECT id FROM jobs WHERE name = ? ORDER BY submitted_at DESC, id DESC LIMIT 1",
                       (name,)).fetchone()
    return None if row is None else row[0]


def ids_with_prefix(conn, prefix: str, limit: int) -> list:
    """(id, name, handle) of the first `limit` jobs whose id starts with `prefix` (ids sort as text: a prefix
    is a range of the primary key)."""
    return conn.execute("SELECT id, name, handle FROM jobs WHERE id >= ? AND id < ? ORDER BY id LIMIT ?",
                        (prefix, prefix + "g", limit)).fetchall()


def id_with_handle(conn, handle: int) -> str | None:
    row = conn.execute("SELECT id FROM jobs WHERE handle = ?", (handle,)).fetchone()
    return None if row is None else row[0]


# --- groups ----------------------------------------------------------------------------------------

def groups(conn, only: str | None = None) -> list:
    """(name, slot_limit, paused_at, running, waiting) of every group (or of `only`), by name."""
    return conn.execute(
        "SELECT g.name, g.slot_limit, g.paused_at,"
        " (SELECT count(*) FROM job_state s JOIN jobs j ON j.id = s.job_id WHERE j.group_name = g.name"
        "   AND s.slot_held = 1) AS running,"
        " (SELECT count(*) FROM job_state s JOIN jobs j ON j.id = s.job_id WHERE j.group_name = g.name"
        "   AND s.phase = 'waiting' AND s.waiting_for = 'slot') AS waiting"
        " FROM groups g" + (" WHERE g.name = ?" if only else "") + " ORDER BY g.name",
        (only,) if only else ()).fetchall()


# --- reconciliation --------------------------------------------------------------------------------

# What is due, from two small indexes (claim deadlines of submissions; leases of active jobs), so
# the pass costs nothing that grows with the number of finished or healthy jobs.
_DUE = """
SELECT s.job_id, s.phase, s.revision, s.supervisor_pid, s.supervisor_start_time, s.supervisor_boot_id
FROM job_state s WHERE s.phase = 'submitting' AND s.claim_deadline < :now
UNION ALL
SELECT s.job_id, s.phase, s.revision, s.supervisor_pid, s.supervisor_start_time, s.supervisor_boot_id
FROM job_state s WHERE s.phase != 'finished' AND s.phase != 'submitting' AND """ + LEASE_END % {"t": "s"} + """ < :now
"""


def due_for_reconcile(conn, now: float) -> list:
    """Submissions past their claim deadline and active jobs past their lease."""
    return conn.execute(_DUE, {"now": now}).fetchall()


def cancels_asked(conn) -> list:
    """(job_id, phase, revision, attempts, supervisor_pid, supervisor_start_time, supervisor_boot_id) of jobs not
    running an attempt whose cancel was asked for and not yet carried out (an index of asked cancels)."""
    return conn.execute("SELECT job_id, phase, revision, attempts, supervisor_pid, supervisor_start_time,"
                        " supervisor_boot_id FROM job_state INDEXED BY job_state_cancels"  # (not every unfinished)
                        " WHERE cancel_requested_at IS NOT NULL"
                        " AND phase != 'finished' AND phase IN ('starting', 'waiting')").fetchall()


def finished_slot_holders(conn) -> list:
    """(job_id, revision) of finished jobs that still hold a slot (lost jobs whose target may live)."""
    return conn.execute("SELECT job_id, revision FROM job_state WHERE slot_held = 1 AND phase = 'finished'"
                        ).fetchall()


def _newest(conn, phase: str, cond: str, args: list, count: int) -> list:
    """The newest `count` jobs in `phase` (waiting or finished; -1: all), from the index of that phase by
    submission time (job_state.line_at), so that a long run of the other kind costs nothing."""
    return conn.execute(f"SELECT {LIST_COLUMNS} FROM job_state s CROSS JOIN jobs j ON j.id = s.job_id"
                        f" WHERE s.phase = '{phase}'{cond} ORDER BY s.line_at DESC, s.job_id DESC LIMIT ?",
                        (*args, count)).fetchall()


def count_waiting_and_finished(conn, where: tuple[str, list] = ("", [])) -> tuple[int, int]:
    """How many of the jobs that match are waiting, and how many finished (from indexes, without a filter)."""
    cond, args = where
    if not cond:
        waiting, unfinished = conn.execute(
            "SELECT count(*) FILTER (WHERE phase = 'waiting'), count(*) FROM job_state WHERE phase != 'finished'"
        ).fetchone()
        return waiting, count_jobs(conn) - unfinished
    row = conn.execute(f"SELECT count(*) FILTER (WHERE s.phase = 'waiting'),"
                       f" count(*) FILTER (WHERE s.phase = 'finished') FROM jobs j JOIN job_state s ON s.job_id = j.id WHERE 1{cond}", args).fetchone()
    return row[0], row[1]


def count_jobs(conn, where: tuple[str, list] = ("", [])) -> int:
    cond, args = where
    if not cond:
        return conn.execute("SELECT count(*) FROM jobs").fetchone()[0]
    return conn.execute(f"SELECT count(*) FROM jobs j JOIN job_state s ON s.job_id = j.id WHERE 1{cond}",
                        args).fetchone()[0]


def newest_job(conn) -> str | None:
    row = conn.execute("SELECT id FROM jobs ORDER BY submitted_at DESC, id DESC LIMIT 1").fetchone()
    return row[0] if row else None


def failed_dependents(conn, job_id: str) -> list:
    """(dependent, condition, submitted_at, outcome) of every edge onto job_id from a job that never ran because of
    it or with it: it ended dependency_failed, or lost before it started (its supervisor died while it waited)."""
    return conn.execute(
        "SELECT d.job_id, d.condition, j.submitted_at, s.outcome FROM dependencies d JOIN job_state s"
        " ON s.job_id = d.job_id JOIN jobs j ON j.id = d.job_id WHERE d.depends_on = ?"
        " AND (s.outcome = 'dependency_failed' OR (s.outcome = 'lost' AND s.attempts = 0))", (job_id,)).fetchall()


# Whether a job has been restarted: a job names it as its restart_of (an index, migration 6).
RESTARTED = "EXISTS (SELECT 1 FROM jobs r WHERE r.restart_of = s.job_id)"


def lost_not_restarted(conn, boot_id: str) -> tuple[int, int, int]:
    """Lost jobs nobody has restarted: (how many had not started, how many had, how many of either ran under an
    earlier boot), from the index of lost jobs."""
    row = conn.execute(f"SELECT count(*) FILTER (WHERE s.attempts = 0), count(*) FILTER (WHERE s.attempts > 0),"
                       f" count(*) FILTER (WHERE s.supervisor_boot_id IS NOT ?) FROM job_state s"
                       f" WHERE s.outcome = 'lost' AND NOT {RESTARTED}", (boot_id,)).fetchone()
    return row[0], row[1], row[2]


def submitted_order(conn, job_ids) -> list[str]:
    """job_ids in submission order."""
    ids = list(job_ids)
    if not ids:
        return []
    found = {}
    for start in range(0, len(ids), 500):  # (SQLite's bound on parameters)
        part = ids[start:start + 500]
        found.update(conn.execute(f"SELECT id, submitted_at FROM jobs WHERE id IN ({','.join('?' * len(part))})",
                                  part).fetchall())
    return sorted(found, key=lambda job_id: (found[job_id], job_id))


def handle_of(conn, job_id: str) -> int | None:
    row = conn.execute("SELECT handle FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return row[0] if row else None


def newest_handles_and_names(conn, limit: int) -> list:
    return conn.execute("SELECT handle, name FROM jobs ORDER BY submitted_at DESC, id DESC LIMIT ?",
                        (limit,)).fetchall()


def jobs_in_group(conn, group: str) -> int:
    return conn.execute("SELECT count(*) FROM jobs WHERE group_name = ?", (group,)).fetchone()[0]
