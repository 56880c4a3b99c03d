"""Dependencies between jobs (`stado submit --after-success/--after-failure/--after JOB`) and the retry policy's
delays: what the words mean, judged from the terminal states of the jobs depended on (pure).

A dependency's condition holds, can never hold, or is not known yet (the job depended on has not ended). A
terminal state is final, so once a condition can never hold the dependent can be ended `dependency_failed` at
once, whatever its other dependencies do. `completed` is the only state that counts as succeeded: a dependency
that failed, was cancelled, or itself ended `dependency_failed` holds an after-failure condition.
"""
from .errors import BadInput

# The spec's fields, in the words `jobman run` uses (and the batch file's field names).
CONDITIONS = ("after_success", "after_failure", "after")
FLAGS = {"after_success": "--after-success", "after_failure": "--after-failure", "after": "--after"}
READY, WAIT = "ready", "wait"


def holds(condition: str, state: str) -> bool:
    """Whether `condition` holds once the job depended on ended in terminal `state`."""
    if condition == "after_success":
        return state == "completed"
    if condition == "after_failure":
        return state != "completed"
    return True


def edges(spec) -> list[tuple[str, str]]:
    """(condition, job id) of each dependency of a spec (a JobSpec or a stored Spec), in the order given."""
    return [(condition, job) for condition in CONDITIONS for job in (_field(spec, condition) or ())]


def judge(spec, state_of) -> "str | dict":
    """READY (every condition holds), WAIT (none fails, one is not known yet) or, when one can never hold, what
    the dependent's record says of it: {"job", "condition", "state"}. `state_of(job id)`: its terminal state, or
    None while it has none. Every dependency is looked at (a failed one decides, even behind one that waits)."""
    waiting = False
    for condition, job in edges(spec):
        state = state_of(job)
        if state is None:
            waiting = True
        elif not holds(condition, state):
            return {"job": job, "condition": condition, "state": state}
    return WAIT if waiting else READY


def failed_message(failed: dict) -> str:
    """The words of a dependency_failed record: which dependency, how it ended, what it needed."""
    wanted = {"after_success": "it needed it to succeed", "after_failure": "it needed it to fail"}
    return (f"dependency {failed['job']} ({FLAGS.get(failed['condition'], failed['condition'])}) ended "
            f"{failed['state']}: {wanted.get(failed['condition'], 'it can never run')}")


def retry_delay(spec, failures: int) -> float:
    """Seconds the retry after failed attempt number `failures` + 1 waits: --retry-delay, multiplied by
    --retry-backoff once for every failed attempt before it."""
    delay = _field(spec, "retry_delay") or 0.0
    return float(delay) * float(_field(spec, "retry_backoff") or 1.0) ** max(0, failures)


def retryable(spec, exit_code: int | None) -> bool:
    """Whether a failed attempt's exit may be retried: any failure, unless --retryable-exit-code names the codes
    (then only an exit with one of them: a signal has no exit code)."""
    codes = _field(spec, "retryable_exit_codes") or ()
    return not codes or exit_code in codes


def parse_backoff(text: str) -> float:
    """--retry-backoff F: a factor >= 1, or jobman's words (constant: 1, exponential: 2)."""
    named = {"constant": 1.0, "exponential": 2.0}
    if text.strip().lower() in named:
        return named[text.strip().lower()]
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 1.0 <= value <= 100.0:
        raise BadInput(f"bad --retry-backoff {text!r}: give a factor from 1 to 100 (each retry waits that many times "
                       "longer than the one before), or constant (1) / exponential (2)")
    return value


def _field(spec, name: str):
    """A field of a JobSpec (a submission's) or of a stored Spec: both name them alike."""
    return getattr(spec, name)
