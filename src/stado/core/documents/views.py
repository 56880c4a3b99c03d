"""What readers show of a job: its records resolved into one view (terminal first), and the status JSON."""
from ..keys import TERMINAL_STATES
from .changes import retry_earned
from .records import FINISHING, Job, QUEUED, RUNNING, RUNNING_PHASE


# -- what readers show ---------------------------------------------------------------------------------

class JobView:
    """A job as readers resolve it: terminal records first (in TERMINAL_STATES order), then running,
    then queued. `also` lists the other records found (a move still under way).

    `terminal` means the job has stopped moving: a terminal record, and no process of it that may still
    run. A running job cancelled has its cancelled/ record at once, but until its agent has seen its
    process group gone and deleted running/ (phase `cancelling`, an owner), `stopping` names that phase
    and the job is not terminal yet."""

    __slots__ = ("id", "state", "doc", "also", "problems", "stopping")

    def __init__(self, id: str, state: str, doc: Job, also: list[str] | None = None, stopping: str | None = None):
        self.id, self.state, self.doc, self.also = id, state, doc, list(also or ())
        self.problems: list[str] = []  # corrupt records of this job that readers skipped
        self.stopping = stopping

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES and self.stopping is None

    @property
    def phase(self) -> str | None:
        if self.state == RUNNING:
            return self.doc.phase
        return self.stopping

    @property
    def outcome(self) -> str | None:
        return self.doc.outcome if self.state in TERMINAL_STATES else None


def process_may_run(running: Job) -> bool:
    """Whether a running document still stands for a process its agent has not seen gone: it has an owner
    (a cancel tombstone has none: nothing ever started) and no outcome decided yet (a `result` is written
    only once the process group is gone: 'finishing', or a cancel that overtook a finishing move)."""
    return running.owner is not None and not running.finishing and running.result is None


def decided(running: Job) -> bool:
    """Whether the running document's move is decided, so that any writer may finish it (settle): an outcome
    ('finishing'), or a cancel that no process of the job can outlive (a tombstone, or a cancel of a job whose
    attempt had ended). A cancel of a running process is its owner's to finish once it has seen the group gone
    (or the reaper's, once the owner's promise has passed)."""
    return running.finishing or (running.cancelling and not process_may_run(running))


def goes_back_to_queue(running: Job) -> bool:
    """Whether a finishing document's decision sends the job back to the queue (a requeue after a lost worker, or
    a retry the spec allows), rather than to a terminal record."""
    res = running.result
    return running.finishing and bool(running.requeue or (res and retry_earned(running, res)))


def resolve(job_id: str, records: dict[str, Job]) -> JobView | None:
    """Pick the record that states the job's truth from those present (state -> document)."""
    for state in TERMINAL_STATES + (RUNNING, QUEUED):
        if state in records:
            stopping = None
            if state in TERMINAL_STATES and RUNNING in records and process_may_run(records[RUNNING]):
                stopping = records[RUNNING].phase or RUNNING_PHASE
            return JobView(job_id, state, records[state], [s for s in records if s != state], stopping)
    return None


def status_json(view: JobView) -> dict:
    """What `stado machine status` prints: state, terminal and outcome kept apart."""
    d = view.doc
    spec = d.get("spec", {})
    ended = view.state in TERMINAL_STATES
    res = d.raw if ended else (d.result or {}) if view.phase == FINISHING else {}
    cancel = d.get("cancel") or {}  # a cancel under way (or its tombstone): who asked, and why
    return {
        "id": view.id, "name": spec.get("name"), "state": view.state, "terminal": view.terminal,
        "outcome": view.outcome, "phase": view.phase,
        "exit_code": res.get("exit_code"), "signal": res.get("signal"), "error": res.get("error"),
        "submitted_at": d.get("submitted_at"), "claimed_at": d.get("claimed_at"), "started_at": d.get("started_at"),
        "finished_at": d.get("finished_at") if ended else None,
        "lease_expires_at": d.get("lease_expires_at") if view.state == RUNNING else None,
        "owner": d.get("owner"), "instance_ref": d.get("instance_ref"),
        "requeues": d.get("requeues", 0), "failures": d.get("failures", 0), "handbacks": d.get("handbacks", 0),
        "generation": d.get("generation"), "rerun_of": d.get("rerun_of"), "rerun_inputs": d.get("rerun_inputs"),
        "command": spec.get("command"),
        "cancelled_by": d.get("cancelled_by") or cancel.get("by"),
        "cancel_reason": d.get("cancel_reason") or cancel.get("reason"), "cost_usd": res.get("cost_usd"), "moving": view.also,
        "held": d.get("held") if view.state == QUEUED else None,
        "retry_at": d.get("retry_at") if view.state == QUEUED else None, "dependency": res.get("dependency"),
        "problems": view.problems, "schedule": d.get("schedule"),
    }
