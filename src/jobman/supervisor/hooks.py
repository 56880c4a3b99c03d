"""The on-finish hook (`jobman run --on-finish CMD`), run by the job's supervisor once the job has finished.

`/bin/sh -c CMD`, in the job's working directory and environment, plus JOBMAN_JOB_ID, JOBMAN_JOB_HANDLE,
JOBMAN_OUTCOME and JOBMAN_EXIT_CODE (the exit status `jobman wait` gives for the job). Its output goes
to logs/<job>/on-finish.log. It runs after the job's outcome is committed and its dependents are woken,
so nothing it does (failing, hanging, being killed) can change the job's outcome or hold up the DAG.
How it ended is recorded as an `on_finish` event. It gets HOOK_TIMEOUT, then SIGTERM, then SIGKILL.
"""
import os
import time

from runkit.system import proc
from runkit.core.outcomes import exit_status

from ..core.home import Home
from ..store import queries, transitions

HOOK_TIMEOUT = 600.0  # seconds an on-finish hook may run
HOOK_KILL_AFTER = 5.0
SHELL = "/bin/sh"


def run_on_finish(store, home: str, job_id: str, spec: dict, log) -> None:
    command = spec.get("on_finish")
    if not command:
        return
    state = store.call("read the job's outcome", transitions.load_state, job_id, give_up_after=60.0)
    if state is None or state["phase"] != "finished":
        return
    status = exit_status(state["outcome"], state["exit_code"], state["exit_signal"])
    handle = store.call("read the job's handle", queries.handle_of, job_id, give_up_after=60.0)
    env = dict(spec["env"], JOBMAN_JOB_ID=job_id, JOBMAN_OUTCOME=state["outcome"], JOBMAN_EXIT_CODE=str(status),
               JOBMAN_JOB_HANDLE=str(handle or ""))
    env.pop("JOBMAN_ATTEMPT", None)
    log_path = os.path.join(Home(home).job_logs(job_id), "on-finish.log")
    started = time.time()
    result = _run(command, env, spec.get("cwd") or "/", log_path)
    log(f"on-finish hook: {result}")
    store.call("record the on-finish hook", transitions.add_attempt_note, job_id, "on_finish", time.time(),
               give_up_after=60.0, seconds=round(time.time() - started, 3), log=log_path, **result)


def _run(command: str, env: dict, cwd: str, log_path: str) -> dict:
    """Run the hook to its end (or its time limit): {"exit_code"} / {"signal"} / {"error"}, plus timed_out."""
    null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    try:
        out = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    except OSError as e:
        os.close(null)
        return {"error": f"cannot open {log_path}: {e.strerror}"}
    try:
        pid = proc.spawn(SHELL, [SHELL, "-c", command], env, stdin=null, stdout=out, stderr=out,
                         cwd=cwd if os.path.isdir(cwd) else "/", only_std_fds=True)
    except OSError as e:
        return {"error": f"cannot start {SHELL}: {e.strerror or e}"}
    finally:
        os.close(null)
        os.close(out)
    status, timed_out = _wait(pid, time.time() + HOOK_TIMEOUT)
    code, sig = proc.describe_status(status) if status is not None else (None, None)
    result: dict[str, object] = {"exit_code": code} if code is not None else {"signal": proc.signal_name(sig)}
    if timed_out:
        result["timed_out"] = True
    return result


def _wait(pid: int, deadline: float) -> tuple[int | None, bool]:
    """The hook's wait status, and whether it had to be stopped: TERM to its session's group at the
    deadline, KILL HOOK_KILL_AFTER later."""
    timed_out, kill_at = False, None
    delay = 0.01
    while True:
        try:
            status = proc.poll_child(pid)
        except ChildProcessError:
            return None, timed_out
        if status is not None:
            return status, timed_out
        now = time.time()
        if not timed_out and now >= deadline:
            timed_out, kill_at = True, now + HOOK_KILL_AFTER
            _signal_group(pid, 15)
        elif kill_at is not None and now >= kill_at:
            _signal_group(pid, 9)
            kill_at = now + 1.0
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def _signal_group(pid: int, sig: int) -> None:
    proc.signal_group(pid, sig)  # the hook leads its own session and group (proc.spawn); it is our unreaped child
