"""What `jobman ui` reads, beside `jobman show` (jobman.commands.showing) and `jobman logs` (jobman.commands.api.logs), which it
calls as they are: one page of jobs under server-side filters, with the dependency graph and the attempts of the
jobs in that page, read in one snapshot; the groups with their limits and the jobs holding their slots; a job's
output since a position (the live tail); and a fingerprint that moves whenever any of it may have changed.

Each read costs what one page costs (indexes: newest first, the line, slot holders), so a home of 10,000 jobs
pages as fast as one of ten. Plain data out, for the dashboard's JSON (or a command's --json)."""
import os

from runkit.core.jsonfast import loads

from ..commands import listing
from ..commands.api import State, jobs_of
from ..core.errors import BadInput
from ..store import dashboard as sql
from ..store import queries

PAGE_MAX = 500  # jobs in one page; the graph and timeline show the page
LOG_FIRST = 1 << 20  # of each attempt, a page opened on a job shows its newest MiB (jobman logs shows all)


def open_home(environ=os.environ) -> State:
    """A reading state of the home (no database yet: a state with no connection; the pages are then empty)."""
    return State(environ, create=False, reading=True)


def page(st: State, *, states=(), group: str | None = None, name: str | None = None, search: str = "",
         offset: int = 0, limit: int = 100) -> dict:
    """{"jobs", "total", "offset", "limit", "counts", "graph", "timeline"}: the jobs matching the filters (states as
    `jobman list --state` takes them, a group, a name glob, the search box's words), newest first, and of those
    on the page: the dependency graph (with the jobs at the other end of an edge that the page does not show) and
    every attempt. Read in one snapshot, so the list, the graph and the timeline agree."""
    unknown = [w for w in states if w not in queries.STATE_WORDS]
    if unknown:
        raise BadInput(f"unknown state {unknown[0]!r}: use one of {', '.join(queries.STATE_WORDS)}")
    if not (0 <= offset and 1 <= limit <= PAGE_MAX):
        raise BadInput(f"a page starts at 0 or later and holds 1 to {PAGE_MAX} jobs")
    empty = {"jobs": [], "total": 0, "offset": offset, "limit": limit, "counts": {}, "graph": {"nodes": [],
             "edges": []}, "timeline": []}
    if st.conn is None:
        return empty
    cond, args = queries.list_filter(states, group, name)
    more, more_args = sql.search_filter(search)
    where = (cond + more, args + more_args)
    conn = st.conn
    conn.execute("BEGIN")  # deferred: a read snapshot (WAL), never a lock on writers
    try:
        rows = jobs_of(sql.page(conn, where, offset, limit))
        total = queries.count_jobs(conn, where)
        views = listing.annotate(conn, rows)
        ids = [v["id"] for v in views]
        edges = sql.edges(conn, ids)
        outside = sorted({end for e in edges for end in (e["job_id"], e["depends_on"])} - set(ids))
        others = listing.annotate(conn, jobs_of(sql.jobs_by_id(conn, outside)))
        attempts = sql.attempts(conn, ids)
        retries = sql.retries(conn, ids)
        counts = sql.counts(conn)
    finally:
        conn.execute("COMMIT")
    return {"jobs": views, "total": total, "offset": offset, "limit": limit, "counts": counts,
            "graph": _graph(views, others, edges), "timeline": _timeline(views, attempts, retries)}


def _node(view: dict, in_view: bool) -> dict:
    return {"id": view["id"], "handle": view["handle"], "name": view["name"], "state": view["state"],
            "held": view["held"], "in_view": in_view}


def _graph(views: list[dict], others: list[dict], edges) -> dict:
    nodes = [_node(v, True) for v in views] + [_node(v, False) for v in others]
    return {"nodes": nodes, "edges": [{"from": e["depends_on"], "to": e["job_id"], "condition": e["condition"]}
                                      for e in edges]}


def _timeline(views: list[dict], attempts, retries) -> list[dict]:
    """Per job in view: when it was submitted and finished, each attempt (start, end, outcome), and each retry's
    delay (from the attempt's end until the time it may start): what a bar chart of the page needs."""
    by_job: dict[str, list] = {}
    for a in attempts:
        by_job.setdefault(a["job_id"], []).append(
            {"number": a["number"], "started_at": a["started_at"], "ended_at": a["ended_at"],
             "outcome": a["outcome"] or ("running" if a["ended_at"] is None else None), "exit_code": a["exit_code"],
             "signal": a["signal"]})
    delays: dict[str, list] = {}
    for r in retries:
        data = loads(r["data"]) if r["data"] else {}
        delays.setdefault(r["job_id"], []).append({"from": r["at"], "until": data.get("not_before"),
                                                   "attempt": data.get("attempt")})
    return [{"id": v["id"], "handle": v["handle"], "name": v["name"], "state": v["state"],
             "submitted_at": v["submitted_at"], "finished_at": v["finished_at"],
             "attempts": by_job.get(v["id"], []), "retry_delays": delays.get(v["id"], [])} for v in views]


def groups(st: State) -> list[dict]:
    """Every group: its limit, how many run and wait, and the jobs that hold its slots (a lost job whose target
    still lives keeps one: it is named here)."""
    if st.conn is None:
        return []
    conn = st.conn
    conn.execute("BEGIN")
    try:
        rows, holders = queries.groups(conn), sql.holders(conn)
    finally:
        conn.execute("COMMIT")
    held: dict[str, list] = {}
    for h in holders:
        held.setdefault(h["group_name"], []).append({"id": h["id"], "handle": h["handle"], "name": h["name"],
                                                     "state": h["outcome"] or h["phase"]})
    return [{"name": g["name"], "limit": g["slot_limit"], "paused": g["paused_at"] is not None,
             "running": g["running"], "waiting": g["waiting"],
             "holders": held.get(g["name"], [])} for g in rows]


class Watch:
    """The fingerprint an open page's change stream compares, made cheap for the common case of nothing changed:
    SQLite's data_version (it moves when another connection commits) and the connection's own count of changes
    say whether anything was written since this connection last looked; only then are the three queries of
    sql.fingerprint run. The reconcile pass (a supervisor that died writes nothing: the pass finds it) runs once
    every `reconcile_every` seconds, not at each look."""

    def __init__(self, reconcile_every: float):
        import weakref

        self.reconcile_every = reconcile_every
        self.reconciled_at: float | None = None
        self.seen: weakref.WeakKeyDictionary[State, tuple] = weakref.WeakKeyDictionary()  # per connection

    def __call__(self, st: State, now: float) -> tuple:
        """now: a monotonic clock's reading (when the last reconcile pass ran is measured by it)."""
        if st.conn is None:
            return ("no database",)
        if self.reconciled_at is None or now - self.reconciled_at >= self.reconcile_every:
            self.reconciled_at = now
            st.reconcile()
        marks = (st.conn.execute("PRAGMA data_version").fetchone()[0], st.conn.total_changes)
        seen = self.seen.get(st)  # (marks, fingerprint) of this connection's last look
        if seen is None or seen[0] != marks:
            seen = self.seen[st] = (marks, sql.fingerprint(st.conn))
        return seen[1]


def output_since(st: State, selector: str, after: tuple[int, int], *, stderr: bool = False) -> dict:
    """A job's output after `after` ((attempt, offset in it)): {"id", "pieces": [(attempt, bytes)], "after": the
    position reached, "done": whether nothing more will come}. The live tail of the job's page; an attempt read
    from its start gives its newest LOG_FIRST bytes (a browser is no place for a gigabyte of log)."""
    from ..commands import logs

    job_id = st.resolve(selector)
    pieces, reached, done = logs.since(st.conn, job_id, after, stderr=stderr, first_max=LOG_FIRST)
    return {"id": job_id, "pieces": pieces, "after": reached, "done": done}


def dependents(st: State, job_id: str) -> list[dict]:
    """The jobs that depend on this one, as a job's page links them (`jobman show` lists only its dependencies)."""
    if st.conn is None:
        return []
    return [{"job": r["job_id"], "handle": r["handle"], "name": r["name"], "condition": r["condition"],
             "state": r["outcome"] or r["phase"]} for r in sql.dependents(st.conn, job_id)]


def restarts(st: State, job_id: str) -> list[dict]:
    """The jobs that restart this one (its page links them, as the restart links back)."""
    if st.conn is None:
        return []
    return [{"id": r["id"], "handle": r["handle"]} for r in sql.restarts(st.conn, job_id)]


def whole_log(st: State, selector: str, *, stderr: bool = False) -> tuple[str, bytes]:
    """(the job's id, its whole log as stored: every attempt's bytes, a line before each when it has several):
    the page's download link."""
    from ..commands import logs

    job_id = st.resolve(selector)
    pieces, _, _ = logs.since(st.conn, job_id, (0, 0), stderr=stderr)
    attempts = {attempt for attempt, _ in pieces}
    out, shown = [], None
    for attempt, data in pieces:
        if len(attempts) > 1 and attempt != shown:
            out.append(f"==> attempt {attempt} <==\n".encode())
            shown = attempt
        out.append(data)
    return job_id, b"".join(out)
