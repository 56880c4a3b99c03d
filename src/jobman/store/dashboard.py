"""Read-side SQL of the dashboard (`jobman ui`, jobman.ui.reads): one page of jobs under server-side filters, the
attempts, dependency edges and slot holders of the jobs in view, counts by state, and a fingerprint that moves
with every change a page shows. Reads only; each costs what one page costs, however many jobs are stored."""
from .queries import LIST_COLUMNS


def search_filter(text: str) -> tuple[str, list]:
    """The SQL condition (" AND ...") for the search box: a handle, an id prefix, or words found in the name or
    the command (each word must be found, case-insensitively; the environment is never searched: it may hold
    secrets)."""
    text = text.strip()
    if not text:
        return "", []
    if text.lstrip("#").isdigit():
        return " AND j.handle = ?", [int(text.lstrip("#"))]
    parts, args = [], []
    for word in text.split():
        pattern = "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        parts.append("(j.name LIKE ? ESCAPE '\\' OR json_extract(j.spec, '$.argv') LIKE ? ESCAPE '\\'"
                     " OR j.id LIKE ? ESCAPE '\\')")
        args += [pattern, pattern, word.replace("%", "").replace("_", "") + "%"]
    return "".join(f" AND {p}" for p in parts), args


def page(conn, where: tuple[str, list], offset: int, limit: int) -> list:
    """Jobs matching `where` (queries.list_filter plus search_filter), newest first, `limit` from `offset`."""
    cond, args = where
    return conn.execute(f"SELECT {LIST_COLUMNS} FROM jobs j CROSS JOIN job_state s ON s.job_id = j.id"
                        f" WHERE 1{cond} ORDER BY j.submitted_at DESC, j.id DESC LIMIT ? OFFSET ?",
                        (*args, int(limit), int(offset))).fetchall()


def jobs_by_id(conn, ids: list[str]) -> list:
    """The listed form of the jobs with these ids (those that exist)."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    return conn.execute(f"SELECT {LIST_COLUMNS} FROM jobs j CROSS JOIN job_state s ON s.job_id = j.id"
                        f" WHERE j.id IN ({marks})", ids).fetchall()


def counts(conn) -> dict[str, int]:
    """How many jobs are in each state word (a phase, or a finished job's outcome), and how many are held."""
    found = dict(conn.execute("SELECT CASE WHEN phase = 'finished' THEN outcome ELSE phase END, count(*)"
                              " FROM job_state GROUP BY 1").fetchall())
    found["held"] = conn.execute("SELECT count(*) FROM job_state WHERE phase != 'finished'"
                                 " AND held_at IS NOT NULL").fetchone()[0]
    return {word: n for word, n in found.items() if word is not None}


def edges(conn, ids: list[str]) -> list:
    """(job_id, depends_on, condition) of every dependency edge that starts or ends at one of `ids`."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    return conn.execute(f"SELECT job_id, depends_on, condition FROM dependencies WHERE job_id IN ({marks})"
                        f" UNION SELECT job_id, depends_on, condition FROM dependencies WHERE depends_on IN ({marks})",
                        ids + ids).fetchall()


def attempts(conn, ids: list[str]) -> list:
    """Every attempt of the jobs `ids`, in job and attempt order."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    return conn.execute(f"SELECT * FROM attempts WHERE job_id IN ({marks}) ORDER BY job_id, number", ids).fetchall()


def retries(conn, ids: list[str]) -> list:
    """(job_id, at, data) of each retry_scheduled event of the jobs `ids` (when a retry's delay began, and until)."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    return conn.execute(f"SELECT job_id, at, data FROM events WHERE job_id IN ({marks}) AND kind = 'retry_scheduled'"
                        " ORDER BY id", ids).fetchall()


def holders(conn) -> list:
    """(group_name, id, handle, name, phase, outcome) of every job holding a slot (an index over holders only)."""
    return conn.execute("SELECT j.group_name, j.id, j.handle, j.name, s.phase, s.outcome FROM job_state s"
                        " JOIN jobs j ON j.id = s.job_id WHERE s.slot_held = 1 ORDER BY j.group_name, j.submitted_at"
                        ).fetchall()


def fingerprint(conn) -> tuple:
    """Something that differs whenever a job, a group or a slot may look different: every change of a job appends
    an event (in the same transaction), prune removes jobs, and groups change only their own rows."""
    return conn.execute("SELECT (SELECT max(id) FROM events), (SELECT count(*) FROM jobs),"
                        " (SELECT group_concat(name || '=' || slot_limit || coalesce('p' || paused_at, '')) FROM groups)").fetchone()[:]



def dependents(conn, job_id: str) -> list:
    """(job_id, handle, name, condition, phase, outcome) of every job that depends on `job_id`, oldest first."""
    return conn.execute("SELECT d.job_id, j.handle, j.name, d.condition, s.phase, s.outcome FROM dependencies d"
                        " JOIN jobs j ON j.id = d.job_id JOIN job_state s ON s.job_id = d.job_id"
                        " WHERE d.depends_on = ? ORDER BY j.submitted_at, j.id", (job_id,)).fetchall()


def component(conn, job_id: str, most: int) -> list[str]:
    """The ids of the jobs connected to `job_id` by dependency edges, either way (its pipeline), `job_id` first;
    at most `most` of them. Each step follows the two indexes of the edges, so it costs what the pipeline holds,
    whatever else is stored."""
    rows = conn.execute("WITH RECURSIVE comp(id) AS (SELECT ? UNION"
                        " SELECT d.depends_on FROM dependencies d JOIN comp c ON d.job_id = c.id UNION"
                        " SELECT d.job_id FROM dependencies d JOIN comp c ON d.depends_on = c.id)"
                        " SELECT id FROM comp LIMIT ?", (job_id, int(most))).fetchall()
    return [r[0] for r in rows]


def group_ids(conn, group: str, most: int) -> list[str]:
    """The newest `most` jobs of a group (where a group's graph starts)."""
    return [r[0] for r in conn.execute("SELECT id FROM jobs WHERE group_name = ? ORDER BY submitted_at DESC LIMIT ?",
                                       (group, int(most))).fetchall()]


def restarts(conn, job_id: str) -> list:
    """(id, handle) of the jobs that restart `job_id`, oldest first (the restart_of index)."""
    return conn.execute("SELECT id, handle FROM jobs WHERE restart_of = ? ORDER BY submitted_at, id", (job_id,)
                        ).fetchall()
