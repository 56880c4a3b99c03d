"""Human output: tables and detail views. (--json output is the api's data as it is.)"""
import json
import shlex

from runkit.core.durations import format_duration, format_time
from runkit.core.printable import printable


def _when(ts: float | None) -> str:
    return "-" if ts is None else format_time(ts)


def _ago(ts: float | None, now: float) -> str:
    return "-" if ts is None else format_duration(max(0.0, now - ts)) + " ago"


def command_text(argv) -> str:
    return printable(shlex.join(argv)) if argv else "?"


def table(headers: list[str], rows: list[list[str]]) -> str:
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row[:-1]):
            widths[i] = max(widths[i], len(cell))
    lines = []
    for row in [headers, *rows]:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])] + [row[-1]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def state_text(view: dict) -> str:
    if view.get("stopped"):
        return "stopped"
    if view["phase"] != "finished":
        return view["phase"]
    if view["outcome"] == "failed" and view["exit_code"] is not None:
        return f"failed ({view['exit_code']})"
    if view["outcome"] == "failed" and view["signal"]:
        return f"failed ({view['signal']})"
    return view["outcome"]


def why_text(view: dict, now: float) -> str:
    if view.get("corrupt"):
        return view["corrupt"]
    if view["phase"] == "waiting":
        detail = view["wait_detail"] or view["waiting_for"]
        return detail
    if view["outcome"] == "lost" and view.get("wait_detail"):
        return view["wait_detail"]  # what is left of it now (its recorded detail is from when it was found)
    if view["phase"] == "finished" and view["outcome"] not in ("succeeded", "failed") and view["detail"]:
        reason = view.get("cancel_reason") if view["outcome"] == "cancelled" else None
        return view["detail"] + (f" (reason: {reason})" if reason else "")
    if view.get("wait_detail"):
        return view["wait_detail"]
    return ""


ENV_SHOWN = 12  # names of differing variables shown (show --env lists every variable)


def show(view: dict, all_env: bool = False) -> str:
    """`jobman show`: the job's state, its spec, its environment, its supervisor and history, in that order."""
    spec = view["spec"]
    out: list[str] = []

    def add(line: str) -> None:
        out.append(printable(line))  # names, commands, environments and events carry other people's text

    _show_state(view, add)
    _show_spec(view, spec, add)
    _show_environment(view, spec, add)
    _show_history(view, add)
    if all_env:
        add("environment variables (secret-looking values masked):")
        for k in sorted(spec["env"]):
            add(f"  {k}={spec['env'][k]}")
    return "\n".join(out)


def _show_state(view: dict, add) -> None:
    add(f"job:         {view['handle']}  (id {view['id']})")
    if view["name"]:
        add(f"name:        {view['name']}")
    add(f"state:       {state_text(view)}" + ("  [held: jobman release lets it go on]" if view.get("held")
                                                  and view["phase"] != "finished" else "")
        + (f"  [{view['wait_detail']}]" if view.get("stopped") else ""))
    if view.get("restart_of"):
        was = view["restart_of"]
        add("restart of:  " + (f"job {was['handle']} (id {was['id']})" if was["handle"] else f"{was['id']} (pruned)"))
    if view["phase"] == "waiting":
        add(f"waiting for: {view['waiting_for']}: {view['wait_detail']}")
    if view["detail"]:
        add(f"detail:      {view['detail']}")
    if view.get("cancel_reason"):
        add(f"cancelled:   {view['cancel_reason']}" if view["outcome"] == "cancelled" else
            f"cancel asked: {view['cancel_reason']}")
    if view.get("restarted_as"):
        now = view["restarted_as"]
        add("restarted as: " + ", ".join(f"job {r['handle']}" for r in now))
    if view.get("lost_note"):
        add(f"lost:        {view['lost_note']}")
    if view["phase"] == "finished":
        add(f"exit status: {view['exit_status']}" + (f" (exit code {view['exit_code']})" if view["exit_code"] is not None
                                                     else f" (signal {view['signal']})" if view["signal"] else ""))


def _show_spec(view: dict, spec: dict, add) -> None:
    add(f"command:     {command_text(spec['argv'])}")
    add(f"executable:  {spec['executable']}")
    add(f"cwd:         {spec['cwd']}")
    add(f"group:       {view['group']} (priority {view['priority']})" + ("  [holds a slot]" if view["slot_held"] else ""))
    add(f"submitted:   {_when(view['submitted_at'])}")
    if view["finished_at"]:
        add(f"finished:    {_when(view['finished_at'])}")
    for dep in view["dependencies"]:
        label = (f"{dep['name']} " if dep["name"] else "") + f"(job {dep['handle']}, id {dep['job']})"
        add(f"after-{dep['condition']}: {label}: {dep['state']}")
    retry = spec["retry"]
    policy = [f"retries {retry['retries']}"]
    if retry["retries"]:
        policy.append("exit codes " + (",".join(map(str, retry["exit_codes"])) if retry["exit_codes"] else "any non-zero"))
        policy.append(f"delay {format_duration(retry['delay'])} {retry['backoff']}")
        if retry.get("on_timeout"):
            policy.append("also on timeout")
    add(f"retry:       {', '.join(policy)}")
    add(f"timeout:     {format_duration(spec['timeout']) if spec['timeout'] else 'none'}"
        f" (then SIGKILL after {format_duration(spec['kill_after'])})")
    if spec.get("not_before"):
        add(f"not before:  {_when(spec['not_before'])}")
    add(f"log:         limit {spec['log']['limit']} bytes" + (", stderr separate" if spec['log']['separate_stderr'] else ""))
    if spec.get("on_finish"):
        add(f"on finish:   {spec['on_finish']}")


def _show_environment(view: dict, spec: dict, add) -> None:
    env = view["environment"]
    add(f"environment: {spec['env_policy']}, {env['count']} variables (jobman show --env lists them)")
    if spec["env_overrides"]:
        add("  set with --env: " + " ".join(f"{k}={v}" for k, v in spec["env_overrides"].items()))
    differs = [f"{k} (changed)" for k in env["changed"]] + [f"{k} (only in the job)" for k in env["only_in_job"]] + \
              [f"{k} (not in the job)" for k in env["not_in_job"]]
    if differs:
        more = f" and {len(differs) - ENV_SHOWN} more" if len(differs) > ENV_SHOWN else ""
        add("  differs from this shell: " + ", ".join(differs[:ENV_SHOWN]) + more)


def _show_history(view: dict, add) -> None:
    sup = view["supervisor"]
    if sup:
        alive = "gone" if not sup["alive"] else "stopped" if sup["stopped"] else "alive"
        if sup["form"] == "lean":
            alive += ", waiting in its lean form (bash on its doorbell)"
        elif sup["holds_lease_round"]:
            alive += ", holds the lease round"
        add(f"supervisor:  {sup['id']} pid {sup['pid']} ({alive}), lease until {_when(sup['lease_expires_at'])}")
    if view["attempts_detail"]:
        add("attempts:")
        for a in view["attempts_detail"]:
            end = (f"exit code {a['exit_code']}" if a["exit_code"] is not None
                   else f"signal {a['signal']}" if a["signal"] else (a["error"] or "-"))
            add(f"  #{a['number']}  {a['outcome'] or '-':<12} {end:<16} started {_when(a['started_at'])}  "
                f"duration {format_duration(a['duration'])}  pid {a['pid'] or '-'}  log {a['log']}")
    add("events:")
    for e in view["events"]:
        extra = {k: v for k, v in e.items() if k not in ("at", "kind")}
        add(f"  {_when(e['at'])}  {e['kind']}" + (f"  {json.dumps(extra)}" if extra else ""))


def groups(rows: list[dict]) -> str:
    return table(["GROUP", "LIMIT", "STATE", "RUNNING", "WAITING"],
                 [[r["name"], str(r["limit"]), "paused" if r.get("paused") else "open", str(r["running"]),
                   str(r["waiting"])] for r in rows])
