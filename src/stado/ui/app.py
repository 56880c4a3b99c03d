"""The dashboard's routes. Reading: the main page (stado.ui.reads.board: the queue one page at a time in claim
order, running jobs, agents, schedules, recent terminal jobs, costs), a job's page (stado.ui.reads.job) and its
stored output, tailed while it runs. Changing: cancel, rerun, pause and resume, each the library call of its
command, so each keeps its guarantees and its one-line errors."""
import time
from runkit.core.clock import SYSTEM
from pathlib import Path

from runkit.web.app import body_of, build, download, selection, shell, stream_response, tail, whole
from runkit.web.server import Launch

from . import reads
from ..core.errors import BadInput, JobNotFound, StadoError

STATIC = Path(__file__).parent / "static"
REFRESH = 0.5  # seconds between looks for a change while a page is open: one LIST per prefix (~50 ms at 10,000)
TAIL_EVERY = 0.5  # seconds between looks at a running job's output (agents upload it in chunks)
ACTIONS = ("cancel", "rerun")
DEAR_SHARE = 0.002  # of a core for the full listings of the queue and terminal jobs (reads.Watch)


def create(launch: Launch, store):
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from ..objectstore.base import AccessDenied, StoreError, StoreUnavailable

    watch = reads.Watch(DEAR_SHARE)

    def main(request):
        q = request.query_params
        return JSONResponse(reads.board(store, offset=whole(q.get("offset"), 0, "offset"),
                                        limit=whole(q.get("limit"), 100, "limit"), search=q.get("q", ""), now=time.time()))

    def job(request):
        return JSONResponse(reads.job(store, request.path_params["job"]))

    async def output(request):
        from ..queue.lookup import find

        job_id = await run_in_threadpool(find, store, request.path_params["job"])
        return stream_response(tail(lambda after: reads.output(store, job_id, tuple(after)), (0, 0),
                                    request.app.state.stopping.event, TAIL_EVERY))

    def raw_output(request):
        """The whole stored output as a file to save (the output pane's download link)."""
        job_id, data = reads.whole_output(store, request.path_params["job"])
        return download(data, f"stado-{job_id}.log")

    def artifact(request):
        """One artifact the job's result manifest lists, as a file to save."""
        job_id, name, data = reads.artifact(store, request.path_params["job"], request.path_params["name"])
        return download(data, name)

    async def act(request):
        body = await body_of(request)
        action, selected = selection(body, ACTIONS)
        return JSONResponse(await run_in_threadpool(_act, store, action, selected))

    async def queue(request):
        body = await body_of(request)
        action, reason = body.get("action"), body.get("reason") or None
        if action not in ("pause", "resume"):
            raise BadInput(f"unknown queue action {action!r}: use pause or resume")
        if reason is not None and not isinstance(reason, str):
            raise BadInput("a pause's reason is text")
        return JSONResponse(await run_in_threadpool(_queue, store, action, reason))

    routes = [Route("/api/board", main), Route("/api/job/{job}", job), Route("/api/job/{job}/output", output),
              Route("/api/job/{job}/output.txt", raw_output), Route("/api/job/{job}/artifact/{name:path}", artifact),
              Route("/api/actions", act, methods=["POST"]), Route("/api/queue", queue, methods=["POST"])]
    page = shell("stado", ["/static/log.js", "/app/stado.js"], [], [("#/", "main", "Fleet")])
    return build(launch, tool_routes=routes, page_html=page, app_static=STATIC,
                 fingerprint=lambda poked: watch(store, time.monotonic(), poked),
                 interval=REFRESH, errors={BadInput: 400, JobNotFound: 404, StadoError: 409, ValueError: 400,
                                           StoreUnavailable: 503, AccessDenied: 503, StoreError: 502})


def _act(store, action: str, selected: list[str]) -> dict:
    """cancel and rerun, one job at a time as `stado cancel ID` and `stado job rerun ID` take them; each job's
    answer (or one-line error) is said apart."""
    from .. import jobs
    from ..queue import submission

    results = []
    for selector in selected:
        try:
            if action == "cancel":
                report = jobs.cancel(store, selector, clock=SYSTEM)
                results.append({"id": report.job_id, "message": report.message,
                                **({} if report.honoured else {"error": report.message})})
            else:
                original, new = submission.rerun(store, selector, clock=SYSTEM)
                results.append({"id": original["id"], "message": f"rerun as {new['id']}"})
        except StadoError as e:
            results.append({"id": selector, "error": str(e)})
    return {"results": results}


def _queue(store, action: str, reason: str | None) -> dict:
    from ..queue import pause

    if action == "pause":
        record, already = pause.pause(store, reason=reason, now=time.time())
        return {"paused": True, "record": record,
                "message": f"queue {'was already' if already else 'is now'} paused by {record.get('by')}"}
    resumed = pause.resume(store)
    return {"paused": False, "message": "queue resumed; agents claim again" if resumed else "queue was not paused"}
