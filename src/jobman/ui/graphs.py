"""The Graph of one pipeline in `jobman ui`: the connected component of a job (the jobs it waits for and those
waiting for it, transitively), or of a group's newest jobs, walked on the server over the dependency edges
(jobman.store.dashboard.component), sweeps folded (runkit.web.graphs.collapse). It costs what the pipeline holds,
whatever else the home stores."""
from runkit.web.graphs import collapse

from ..commands import listing
from ..commands.api import State, jobs_of
from ..core.errors import BadInput
from ..store import dashboard as sql

MOST = 5000  # jobs in one graph (a bigger component is cut, and says so)
GROUP_SEEDS = 200  # of a group, the newest jobs whose pipelines are drawn


def graph(st: State, *, job: str | None = None, group: str | None = None) -> dict:
    """{"nodes", "edges", "total", "cut", "of": what was asked for}: the pipeline of `job` (a selector), or those
    of a group's newest jobs."""
    if (job is None) == (group is None):
        raise BadInput("a graph is of one job (job=ID) or one group (group=NAME)")
    if st.conn is None:
        return {"nodes": [], "edges": [], "total": 0, "cut": False, "of": job or group}
    conn = st.conn
    job_id = st.resolve(job) if job is not None else None
    conn.execute("BEGIN")  # one snapshot: the walk, the jobs and their edges agree
    try:
        ids: list[str] = []
        seen: set[str] = set()
        seeds = [job_id] if job_id is not None else sql.group_ids(conn, str(group), GROUP_SEEDS)
        for seed in seeds:
            if seed in seen:
                continue
            for found in sql.component(conn, seed, MOST + 1 - len(ids)):
                if found not in seen:
                    seen.add(found)
                    ids.append(found)
            if len(ids) > MOST:
                break
        cut = len(ids) > MOST
        ids = ids[:MOST]
        views = listing.annotate(conn, jobs_of(sql.jobs_by_id(conn, ids)))
        edges = [e for e in sql.edges(conn, ids) if e["job_id"] in seen and e["depends_on"] in seen]
    finally:
        conn.execute("COMMIT")
    nodes = [{"id": v["id"], "handle": v["handle"], "name": v["name"], "state": v["state"], "held": v["held"],
              "in_view": True} for v in views]
    folded = collapse(nodes, [{"from": e["depends_on"], "to": e["job_id"], "condition": e["condition"]}
                              for e in edges], keep=job_id)
    return {**folded, "total": len(nodes), "cut": cut, "of": job_id or group}
