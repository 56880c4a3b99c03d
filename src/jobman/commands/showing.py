"""`jobman show`: everything about one job, as plain data for jobman.commands.render (or --json)."""
import os
import time

from runkit.system import proc
from runkit.core.jsonfast import loads as json_loads

from ..core import home as homes
from .api import State, jobs_of, spec_of
from ..core.errors import BadInput
from ..store import queries


def show(selector: str, environ=os.environ) -> dict:
    st = State(environ, create=False, reading=True)
    job_id = st.resolve(selector)
    st.reconcile()
    from ..core.model import Attempt

    row = jobs_of([queries.job(st.conn, job_id)])[0]
    from .listing import NEVER_STARTED, annotate

    view = annotate(st.conn, [row])[0]  # as `jobman list` says it: why it waits, as its group is now
    from runkit.core.redact import mask_env

    spec, corrupt = spec_of(row)
    if corrupt:
        raise BadInput(f"job {job_id}: {corrupt}; its state is {view['state']} (jobman list still shows it)")
    view["environment"] = env_difference(spec.get("env", {}), environ)
    spec["env"] = mask_env(spec.get("env", {}))
    spec["env_overrides"] = mask_env(spec.get("env_overrides", {}))
    view["spec"] = spec
    if spec.get("restart_of"):
        view["restart_of"] = {"id": spec["restart_of"], "handle": queries.handle_of(st.conn, spec["restart_of"])}
    view["revision"] = row.revision
    view["dependencies"] = [{"job": d["depends_on"], "handle": d["handle"], "name": d["name"], "condition": d["condition"],
                             "state": d["outcome"] or d["phase"]} for d in queries.dependencies(st.conn, job_id)]
    view["supervisor"] = None if row.supervisor_id is None else _supervisor_view(st.conn, row)
    view["attempts_detail"] = [_attempt_view(Attempt.from_row(a), spec) for a in queries.attempts(st.conn, job_id)]
    view["events"] = [{"at": e["at"], "kind": e["kind"], **(json_loads(e["data"]) if e["data"] else {})}
                      for e in queries.events(st.conn, job_id)]
    view["slot_held"] = bool(row.slot_held)
    view["cancel_requested_at"] = row.cancel_requested_at
    if row.outcome == "lost":
        from . import targets

        alive = targets.processes(job_id, queries.last_attempt(st.conn, job_id))
        view["target_alive"] = bool(alive)
        view["target_processes"] = targets.describe(alive)
        view["log_cap_holds"] = False
        if not row.attempts:  # found lost while it waited: nothing of it ever ran
            view["lost_note"] = f"{NEVER_STARTED.replace('its supervisor', 'the supervisor')} (jobman restart JOB " \
                                f"submits it again)"
            return view
        view["lost_note"] = (
            "the supervisor is gone; " + ("its target process tree is still alive (jobman cancel can stop it): "
                                          + ", ".join(f"pid {p['pid']} ({p['command'][:60]})"
                                                      for p in view["target_processes"]) + "; "
                                          if alive else "its target process tree is gone; ")
            + "the log size cap no longer holds for output written after the supervisor died")
    return view


def _supervisor_view(conn, row) -> dict:
    """Who owns the job: its supervisor's identity, whether it lives, and, while it does, its form (`lean`:
    waiting as bash on its doorbell, jobman.supervisor.lean; `python`) and whether it holds the lease round."""
    from ..supervisor import lean
    from ..store import lease_round

    alive = proc.verify(row.supervisor_pid, row.supervisor_start_time, row.supervisor_boot_id)
    stat = proc.stat(row.supervisor_pid) if alive else None
    held = lease_round.holder(conn)
    return {"id": row.supervisor_id, "pid": row.supervisor_pid, "start_time": row.supervisor_start_time,
            "boot_id": row.supervisor_boot_id, "lease_expires_at": queries.lease_of(conn, row.job_id), "alive": alive,
            "stopped": bool(stat and stat.state in ("T", "t")),
            "form": ("lean" if lean.is_lean(row.supervisor_pid) else "python") if alive else None,
            "holds_lease_round": bool(alive and held and held[0] == row.supervisor_id and held[1] >= time.time()
                                      and row.phase == "waiting")}


def env_difference(job_env: dict, environ) -> dict:
    """How the job's environment differs from the one `jobman run` would snapshot here now (names only:
    values may be secrets): {"count", "changed", "only_in_job", "not_in_job"}."""
    here = {k: v for k, v in environ.items() if k not in ("JOBMAN_JOB_ID", "JOBMAN_ATTEMPT")}
    return {"count": len(job_env),
            "changed": sorted(k for k in job_env if k in here and here[k] != job_env[k]),
            "only_in_job": sorted(k for k in job_env if k not in here),
            "not_in_job": sorted(k for k in here if k not in job_env)}


def _attempt_view(a, spec: dict) -> dict:
    """The public form of an attempt (a model.Attempt)."""
    return {"number": a.number, "started_at": a.started_at, "ended_at": a.ended_at, "duration": a.duration,
            "pid": a.pid, "pgid": a.pgid, "exit_code": a.exit_code, "signal": proc.signal_name(a.signal),
            "outcome": a.outcome or ("running" if a.ended_at is None else None), "error": a.error,
            "log": a.log_path,
            "stderr_log": homes.stderr_log_path(a.log_path) if spec.get("log", {}).get("separate_stderr") else None}
