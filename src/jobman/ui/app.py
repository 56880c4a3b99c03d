"""The dashboard's routes. Reading: one page of jobs (jobman.ui.reads.page), groups, a job as `jobman show` gives
it, its output as `jobman logs` reads it and then tailed live. Changing: cancel, restart, hold and release, each
the library call of its command (api.cancel, restart.restart, control.set_held), so each keeps its guarantees
and its errors (a job that cannot be held is refused, nothing changed, the same one line)."""
import os
import threading
import time
from pathlib import Path

from runkit.web.app import body_of, build, download, selection, shell, stream_response, tail, whole
from runkit.web.server import Launch

from . import reads
from ..core.errors import BadInput, JobmanError, NotFound

STATIC = Path(__file__).parent / "static"
REFRESH = 0.5  # seconds between looks for a change while a page is open (a PRAGMA; three queries after a write)
RECONCILE_EVERY = 5.0  # seconds between reconcile passes while a page is open (finds a supervisor that died)
TAIL_EVERY = 0.25  # seconds between looks at a running job's log
ACTIONS = ("cancel", "restart", "hold", "release")


class Homes:
    """A reading state of the home per worker thread (a SQLite connection stays in the thread that opened it)."""

    def __init__(self, environ):
        self.environ, self.local = environ, threading.local()

    def __call__(self):
        st = getattr(self.local, "st", None)
        if st is None or st.conn is None:
            st = self.local.st = reads.open_home(self.environ)
        return st


def create(launch: Launch, environ=os.environ):
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    home = Homes(environ)
    watch = reads.Watch(RECONCILE_EVERY)

    def jobs(request):
        q = request.query_params
        states = [w for text in q.getlist("state") for w in text.split(",") if w]
        return JSONResponse(reads.page(home(), states=states, group=q.get("group") or None,
                                       name=q.get("name") or None, search=q.get("q", ""),
                                       offset=whole(q.get("offset"), 0, "offset"),
                                       limit=whole(q.get("limit"), 100, "limit")))

    def groups(request):
        return JSONResponse(reads.groups(home()))

    async def act(request):
        body = await body_of(request)
        action, selected = selection(body, ACTIONS)
        return JSONResponse(await run_in_threadpool(_act, action, selected, bool(body.get("with_dependents")),
                                                    environ))

    async def group_limit(request):
        """A group's limit, as `jobman group set NAME --limit N` sets it (0 pauses the group)."""
        from ..commands.admin import group_set

        body = await body_of(request)
        name, limit = body.get("group"), body.get("limit")
        if not isinstance(name, str) or not name:
            raise BadInput("name the group to set")
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise BadInput(f"a group's limit is a whole number (0 pauses it), not {limit!r}")
        return JSONResponse(await run_in_threadpool(group_set, name, limit, environ))

    routes = [Route("/api/jobs", jobs), Route("/api/groups", groups),
              Route("/api/groups/limit", group_limit, methods=["POST"]), *_job_routes(home, environ),
              Route("/api/actions", act, methods=["POST"])]
    page = shell("jobman", ["/static/vendor/dagre/dagre.min.js", "/static/log.js", "/app/jobman.js"], ["/app/jobman.css"],
                 [("#/", "jobs", "Jobs"), ("#/graph", "graph", "Graph"), ("#/timeline", "timeline", "Timeline"),
                  ("#/groups", "groups", "Groups")])
    return build(launch, tool_routes=routes, page_html=page, app_static=STATIC,
                 fingerprint=lambda poked: watch(home(), time.monotonic()),
                 interval=REFRESH, errors={NotFound: 404, BadInput: 400, JobmanError: 409, ValueError: 400})


def _job_routes(home, environ) -> list:
    """The routes of one job: its page's data, its log (live, and whole to save) and its pipeline's graph."""
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    def graph(request):
        from . import graphs

        q = request.query_params
        return JSONResponse(graphs.graph(home(), job=q.get("job") or None, group=q.get("group") or None))

    def job(request):
        from ..commands.showing import show

        view = show(request.path_params["job"], environ)
        view["dependents"] = reads.dependents(home(), view["id"])
        view["restarted_as"] = reads.restarts(home(), view["id"])
        return JSONResponse(view)

    def raw_log(request):
        """The whole log as a file to save (the log pane's download link)."""
        stderr = request.query_params.get("stderr") == "1"
        job_id, data = reads.whole_log(home(), request.path_params["job"], stderr=stderr)
        return download(data, f"jobman-{job_id}{'.stderr' if stderr else ''}.log")

    async def log(request):
        """The job's output from its start, then as it is written, until the job has finished (server-sent
        events: `output` {attempt, text}, then `end`)."""
        selector, stderr = request.path_params["job"], request.query_params.get("stderr") == "1"
        job_id = await run_in_threadpool(lambda: home().resolve(selector))

        def since(after):  # in a worker thread, with that thread's connection
            return reads.output_since(home(), job_id, after, stderr=stderr)

        return stream_response(tail(since, (0, 0), request.app.state.stopping.event, TAIL_EVERY))

    return [Route("/api/graph", graph), Route("/api/job/{job}", job), Route("/api/job/{job}/log", log),
            Route("/api/job/{job}/log.txt", raw_log)]


def _act(action: str, selected: list[str], with_dependents: bool, environ) -> dict:
    """The command's own library call. cancel, hold and release take the whole selection at once (every job is
    resolved and checked first: one that cannot be changed refuses them all, nothing changed); restart takes one
    finished job at a time, as `jobman restart` does, and says for each what happened."""
    if action == "cancel":
        from ..commands import api

        return {"results": [{"id": r["id"], "message": r["message"]} for r in api.cancel(selected, environ)]}
    if action in ("hold", "release"):
        from ..commands import control

        return {"results": [{"id": r["id"], "message": r["message"]}
                            for r in control.set_held(selected, action == "hold", environ)]}
    from ..commands.restart import restart

    results = []
    for selector in selected:
        try:
            for r in restart(selector, with_dependents=with_dependents, environ=environ):
                results.append({"id": r["restarts"], "message": f"restarted as job {r['handle']} ({r['id']})"})
        except JobmanError as e:
            results.append({"id": selector, "error": str(e)})
    return {"results": results}
