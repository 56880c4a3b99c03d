"""Eligibility, decided by each job's own supervisor (pure: no I/O, time is an argument).

Order: dependencies, then the not-before time (and a retry's delay), then a concurrency slot.
"""

CONDITIONS = {"success": "--after-success", "failure": "--after-failure", "end": "--after"}


def condition_holds(condition: str, outcome: str) -> bool:
    if condition == "success":
        return outcome == "succeeded"
    if condition == "failure":
        return outcome != "succeeded"
    return True


def job_label(job_id: str, name: str | None, handle: int | None) -> str:
    """How a job is named to people: by name and handle, never by a run of full ids."""
    short = f"job {handle}" if handle is not None else job_id
    return f"{name} ({short})" if name else short


def dependency_verdict(deps: list) -> tuple[str, str | None]:
    """deps: [(job_id, condition, phase, outcome, name[, handle])]. Returns ("ready", None), ("wait", detail)
    or ("impossible", detail naming the dependency and why)."""
    pending = []
    for job_id, condition, phase, outcome, name, *handle in deps:
        label = job_label(job_id, name, handle[0] if handle else None)
        if phase != "finished":
            pending.append(label)
        elif not condition_holds(condition, outcome):
            return "impossible", f"dependency {label} ended {outcome}, so {CONDITIONS[condition]} can never hold"
    if pending:
        return "wait", "dependencies not finished: " + ", ".join(pending)
    return "ready", None


def time_verdict(not_before: float | None, retry_at: float | None, now: float) -> tuple[str, float | None]:
    """("not_before" | "retry", until) if a time gate is still closed, else ("ready", None)."""
    if not_before is not None and now < not_before:
        return "not_before", not_before
    if retry_at is not None and now < retry_at:
        return "retry", retry_at
    return "ready", None


def ahead_of(front: list, me: tuple) -> int:
    """How many of `front` (rows of (job_id, priority, submitted_at, ...)) stand before `me`
    ((job_id, priority, submitted_at)) in a group's line: priority first, then submission."""
    my_id, my_priority, my_at = me
    mine = (-my_priority, my_at, my_id)
    return sum(1 for job_id, priority, at, *_ in front if job_id != my_id and (-priority, at, job_id) < mine)


def slot_verdict(limit: int, held: int, front: list, me: tuple) -> bool:
    """Room for this job: a slot is free, and fewer jobs than there are free slots stand before it in
    its group's line. front: the first limit - held jobs of the line (see ahead_of). Knowing the front
    of the line is enough, so the question costs the same whatever the length of the queue."""
    free = limit - held
    return free > 0 and ahead_of(front[:free], me) < free
