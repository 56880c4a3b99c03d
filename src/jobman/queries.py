"""Read-side SQL: what commands show and what a supervisor polls."""
from .transitions import load_state  # noqa: F401  (re-exported: the one way to read a job's state)

_STALE = ("((%(t)s.phase = 'submitting' AND %(t)s.claim_deadline < :now) OR "
          "(%(t)s.phase IN ('starting', 'waiting', 'running') AND %(t)s.lease_expires_at < :now))")

# Everything a waiting supervisor needs, in one query: its own state, its dependencies, the room in
# its group, and whether anything it waits on looks abandoned (then, and only then, it reconciles).
SNAPSHOT = f"""
SELECT s.*, j.group_name, j.priority, j.submitted_at, j.lease_duration, j.renew_interval, j.poll_interval,
  (SELECT json_group_array(json_array(d.depends_on, d.condition, ds.phase, ds.outcome, dj.name))
     FROM dependencies d JOIN job_state ds ON ds.job_id = d.depends_on JOIN jobs dj ON dj.id = d.depends_on
    WHERE d.job_id = s.job_id) AS deps,
  (SELECT count(*) FROM dependencies d JOIN job_state ds ON ds.job_id = d.depends_on
    WHERE d.job_id = s.job_id AND {_STALE % {"t": "ds"}}) AS deps_stale,
  (SELECT slot_limit FROM groups WHERE name = j.group_name) AS slot_limit,
  (SELECT count(*) FROM job_state s2 JOIN jobs j2 ON j2.id = s2.job_id
    WHERE s2.slot_held = 1 AND j2.group_name = j.group_name) AS slots_held,
  (SELECT count(*) FROM job_state s2 JOIN jobs j2 ON j2.id = s2.job_id
    WHERE j2.group_name = j.group_name
      AND ((s2.slot_held = 1 AND (s2.phase = 'finished' OR s2.lease_expires_at < :now))
        OR (s2.phase = 'waiting' AND s2.waiting_for = 'slot' AND s2.lease_expires_at < :now))) AS slots_stale,
  (SELECT count(*) FROM job_state s3 JOIN jobs j3 ON j3.id = s3.job_id
    WHERE s3.phase = 'waiting' AND s3.waiting_for = 'slot' AND j3.group_name = j.group_name
      AND s3.job_id != s.job_id
      AND (j3.priority > j.priority OR (j3.priority = j.priority AND (j3.submitted_at, j3.id) < (j.submitted_at, j.id))))
   AS slots_ahead
FROM job_state s JOIN jobs j ON j.id = s.job_id WHERE s.job_id = :id
"""


def snapshot(conn, job_id: str, now: float):
    """Everything a waiting supervisor needs to decide, in one query."""
    return conn.execute(SNAPSHOT, {"id": job_id, "now": now}).fetchone()


def spec_json(conn, job_id: str) -> str:
    return conn.execute("SELECT spec FROM jobs WHERE id = ?", (job_id,)).fetchone()[0]


def dependents_to_wake(conn, job_id: str) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT DISTINCT d.job_id FROM dependencies d JOIN job_state s ON s.job_id = d.job_id"
        " WHERE d.depends_on = ? AND s.phase != 'finished'", (job_id,))]


def slot_waiters(conn, group: str, limit: int = -1) -> list[str]:
    """Jobs waiting for a slot in `group`, in the order they may take one."""
    return [r[0] for r in conn.execute(
        "SELECT s.job_id FROM job_state s JOIN jobs j ON j.id = s.job_id"
        " WHERE s.phase = 'waiting' AND s.waiting_for = 'slot' AND j.group_name = ?"
        " ORDER BY j.priority DESC, j.submitted_at, j.id LIMIT ?", (group, limit))]


def group_of(conn, job_id: str) -> str:
    return conn.execute("SELECT group_name FROM jobs WHERE id = ?", (job_id,)).fetchone()[0]


def free_slots(conn, group: str) -> int:
    row = conn.execute(
        "SELECT g.slot_limit - (SELECT count(*) FROM job_state s JOIN jobs j ON j.id = s.job_id"
        " WHERE s.slot_held = 1 AND j.group_name = g.name) FROM groups g WHERE g.name = ?", (group,)).fetchone()
    return max(0, row[0]) if row else 0


def last_attempt(conn, job_id: str):
    return conn.execute("SELECT * FROM attempts WHERE job_id = ? ORDER BY number DESC LIMIT 1", (job_id,)).fetchone()


def attempts(conn, job_id: str) -> list:
    return conn.execute("SELECT * FROM attempts WHERE job_id = ? ORDER BY number", (job_id,)).fetchall()


def events(conn, job_id: str) -> list:
    return conn.execute("SELECT * FROM events WHERE job_id = ? ORDER BY id", (job_id,)).fetchall()


def dependencies(conn, job_id: str) -> list:
    return conn.execute(
        "SELECT d.depends_on, d.condition, s.phase, s.outcome, j.name FROM dependencies d"
        " JOIN job_state s ON s.job_id = d.depends_on JOIN jobs j ON j.id = d.depends_on"
        " WHERE d.job_id = ? ORDER BY d.rowid", (job_id,)).fetchall()


def job(conn, job_id: str):
    return conn.execute(
        "SELECT j.*, s.* FROM jobs j JOIN job_state s ON s.job_id = j.id WHERE j.id = ?", (job_id,)).fetchone()


def list_jobs(conn, *, limit: int | None = None, active_only: bool = False) -> list:
    where = "WHERE s.phase != 'finished'" if active_only else ""
    lim = f"LIMIT {int(limit)}" if limit else ""
    return conn.execute(
        f"SELECT j.id, j.name, j.spec, j.group_name, j.priority, j.submitted_at, s.* FROM jobs j"
        f" JOIN job_state s ON s.job_id = j.id {where} ORDER BY j.submitted_at DESC, j.id DESC {lim}").fetchall()
