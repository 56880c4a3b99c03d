"""cancel, job hold, job release and job rerun over several jobs: the jobs chosen first (queue.selection: every id
and name given found, or the filters matched, before anything is written), then each job in turn, one outcome
each. A job the command could not do is an outcome too (its line says why), never the end of the others: the
caller prints every line and exits with the status of the first job not done."""
from runkit.core.clock import Clock
from collections.abc import Callable, Iterator

from runkit.core.records import record

from ..core.errors import StadoError
from ..objectstore.base import AccessDenied, ObjectStore, StoreError, StoreUnavailable
from ..queue.selection import select

# code: the exit status a command on this job alone would have had (0: done); message: its line; data: its JSON.
Outcome = record("Outcome", "job_id code message data")


def failure(error: Exception) -> tuple[str, int]:
    """An error met on one job as (its line, the exit status the command on that job alone exits with)."""
    if isinstance(error, StadoError):
        return str(error), error.exit_code
    if isinstance(error, (StoreUnavailable, AccessDenied)):
        return str(error), 4
    return f"object store error: {error}", 1


def _each(ids: list[str], act: Callable[[str], Outcome]) -> Iterator[Outcome]:
    for job_id in ids:
        try:
            yield act(job_id)
        except (StadoError, StoreError) as e:
            said, code = failure(e)
            line = said if job_id in said else f"{job_id}: {said}"
            yield Outcome(job_id, code, line, {"id": job_id, "done": False, "error": said, "exit_status": code})


def cancel(store: ObjectStore, selectors: list[str], *, state: str | None, name: str | None,
           reason: str | None, clock: Clock) -> tuple[list[str], Iterator[Outcome]]:
    """(the ids chosen, each one's cancel as it is made): done when the job will not run again."""
    from .. import jobs

    def one(job_id: str) -> Outcome:
        report = jobs.cancel(store, job_id, reason=reason, clock=clock)
        return Outcome(job_id, 0 if report.honoured else 1, report.message,
                       {"id": job_id, "done": report.honoured, "result": report.kind, "honoured": report.honoured,
                        "message": report.message, "state_before": report.view.state,
                        "exit_status": 0 if report.honoured else 1})

    ids = select(store, selectors, state=state, name=name)
    return ids, _each(ids, one)


def hold(store: ObjectStore, selectors: list[str], *, state: str | None, name: str | None, held: bool,
         by: str, clock: Clock) -> tuple[list[str], Iterator[Outcome]]:
    """(the ids chosen, each one's hold or release): done when it is held (released) now, already so included."""
    from ..jobs.hold import hold as hold_one, release

    def one(job_id: str) -> Outcome:
        report = (hold_one if held else release)(store, job_id, by=by, now=clock.wall())
        return Outcome(job_id, 0, report.message, {"id": job_id, "done": True, "held": report.doc.held,
                                                   "changed": report.changed, "message": report.message,
                                                   "exit_status": 0})

    ids = select(store, selectors, state=state, name=name)
    return ids, _each(ids, one)


def rerun(store: ObjectStore, selectors: list[str], *, state: str | None, name: str | None, fresh_inputs: bool,
          beside: bool, clock: Clock) -> tuple[list[str], Iterator[Outcome]]:
    """(the ids chosen, each one's rerun): done when its new job is queued."""
    from ..core.errors import OutcomeUnknown
    from ..queue.submission import rerun as rerun_one

    def one(job_id: str) -> Outcome:
        try:
            original, new = rerun_one(store, job_id, fresh_inputs=fresh_inputs, beside=beside, clock=clock)
        except OutcomeUnknown as unknown:  # the id of the job that may be queued, as a submit prints it
            return Outcome(job_id, unknown.exit_code, f"{unknown.job_id} rerun of {job_id}: {unknown}",
                           {"id": unknown.job_id, "rerun_of": job_id, "done": None, "error": str(unknown),
                            "exit_status": unknown.exit_code})
        return Outcome(job_id, 0, f"{new.id} rerun of {original.id}",
                       {"id": new.id, "rerun_of": original.id, "name": new.spec.name, "done": True,
                        "rerun_inputs": new.rerun_inputs, "inputs": new.spec.inputs, "exit_status": 0})

    ids = select(store, selectors, state=state, name=name)
    return ids, _each(ids, one)
