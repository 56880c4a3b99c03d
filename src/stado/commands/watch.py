"""`stado job watch`: the job's state changes and its output, live, until it is terminal. A generator of
events (the CLI prints them); the exit status mirrors the job's through the table both tools share
(runkit.core.outcomes)."""
import time

from runkit.core.outcomes import stado_exit_status
from runkit.core.records import record

from ..core.documents import QUEUED, RUNNING_PHASE, status_json
from ..queue.lookup import find, view
from ..queue.selection import select
from ..objectstore.base import ObjectStore
from .overview import output_since, why_queued

State = record("State", "data label")              # the job's status_json when its state/phase changed
Output = record("Output", "attempt seq data header")  # header: this is the first chunk shown of an attempt
End = record("End", "exit_status")
Waiting = record("Waiting", "job_id reason")  # why a queued job waits changed (None: an agent has room now)
WAITING_EVERY = 5.0  # seconds between looks at the agents and running jobs while the job is queued


def exit_status(data: dict) -> int:
    return stado_exit_status(data.get("outcome"), data.get("exit_code"), data.get("signal"),
                             (data.get("error") or {}).get("class"))


def events(store: ObjectStore, selector: str, *, interval: float = 1.0):
    """State changes, output chunks (each attempt's, in order; a header once a job has more than one
    attempt), then End with the job's exit status."""
    job_id = find(store, selector)
    last, after, headed = None, (0, 0), set[int]()
    reason, reason_due = None, 0.0
    while True:
        current = view(store, job_id)
        data = status_json(current)
        label = data["state"] + ("" if data["phase"] in (None, RUNNING_PHASE) else f"/{data['phase']}")
        if label != last:
            last = label
            yield State(data, label)
        if current.state == QUEUED and time.monotonic() >= reason_due:
            reason_due = time.monotonic() + max(interval, WAITING_EVERY)
            now_reason = why_queued(store, current.doc, time.time())
            if now_reason != reason:
                reason = now_reason
                yield Waiting(job_id, reason)
        chunks = output_since(store, job_id, after)
        several = any(attempt > 1 for (attempt, _), _ in chunks) or any(a > 1 for a in headed) or after[0] > 1
        for (attempt, seq), chunk in chunks:
            header = several and attempt not in headed
            if header:
                headed.add(attempt)
            yield Output(attempt, seq, chunk, header)
            after = (attempt, seq)
        if data["terminal"]:
            yield End(exit_status(data))
            return
        time.sleep(interval)


def wait(store: ObjectStore, selectors: list[str], *, timeout: float | None = None, interval: float = 1.0,
         now=time.monotonic, sleep=time.sleep, state: str | None = None, name: str | None = None) -> dict:
    """`stado wait`: look until every named job is terminal, or `timeout` seconds have passed. Each look reads only
    the jobs still unfinished; looks start 0.1 s apart and slow to `interval`. Returns {"jobs": [status_json with
    its exit_status], "exit_status": 0 if all succeeded else the first (in argument order) that did not, None on a
    timeout, "timed_out": bool}. Every selector is resolved first: an unknown one is JobNotFound, before any wait;
    `state` and `name` choose the jobs as queue.selection does."""
    ids = select(store, selectors, state=state, name=name) if state or name else list(
        dict.fromkeys(find(store, s) for s in selectors))
    give_up = None if timeout is None else now() + timeout
    seen: dict[str, dict] = {}
    pending, delay = list(ids), min(0.1, interval)
    while True:
        for job_id in pending:
            seen[job_id] = status_json(view(store, job_id))
        pending = [job_id for job_id in pending if not seen[job_id]["terminal"]]
        if not pending or (give_up is not None and now() >= give_up):
            break
        sleep(delay if give_up is None else max(0.0, min(delay, give_up - now())))
        delay = min(delay * 1.5, interval)
    jobs = [dict(seen[j], exit_status=exit_status(seen[j]) if seen[j]["terminal"] else None) for j in ids]
    if pending:
        return {"jobs": jobs, "exit_status": None, "timed_out": True}
    return {"jobs": jobs, "exit_status": next((j["exit_status"] for j in jobs if j["exit_status"] != 0), 0),
            "timed_out": False}
