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


def dependency_verdict(deps: list) -> tuple[str, str | None]:
    """deps: [(job_id, condition, phase, outcome, name)]. Returns ("ready", None), ("wait", detail) or
    ("impossible", detail naming the dependency and why)."""
    pending = []
    for job_id, condition, phase, outcome, name in deps:
        label = f"{name} ({job_id})" if name else job_id
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


def slot_verdict(limit: int, held: int, ahead: int) -> bool:
    """Room for this job: the group's held slots plus the slot-waiters ordered before it stay under the limit."""
    return held + ahead < limit
