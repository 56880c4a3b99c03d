"""The commands that change jobs, groups and the store (cancel, restart, signal, hold, release, priority, group,
prune, reconcile): parse, call, render, with jobman.cli's helpers (imported when one of them runs)."""
import sys

from . import JSON_HELP, deliver, duration, error, json_text, parser, print_json, print_results, text


def cmd_cancel(args: list[str]) -> int:
    p = parser("jobman cancel", "Cancel waiting or running jobs (SIGTERM to the whole process tree, SIGKILL\n"
               "after --kill-after). --after-success dependents of a cancelled job end dependency_failed.\n"
               "On a lost job: stop its target tree if, and only if, its identity still verifies.", json=True)
    p.add_argument("jobs", nargs="+", metavar="JOB")
    ns = p.parse_args(args)
    from ..commands import api

    print_results(api.cancel(ns.jobs), ns.json)
    return 0


def cmd_restart(args: list[str]) -> int:
    p = _restart_parser()
    ns = p.parse_args(args)
    from ..core.errors import BadInput
    from ..store import queries

    states = [w.strip() for given in ns.state for w in given.split(",") if w.strip()]
    unknown = [w for w in states if w not in queries.STATE_WORDS]
    if unknown:
        p.error(f"--state: unknown state {unknown[0]!r}; use one of {', '.join(queries.STATE_WORDS)}")
    selecting = bool(states or ns.group is not None or ns.name is not None)
    if not ns.jobs and not selecting:
        raise BadInput("jobman restart: name the jobs to restart, or select them with --state, --group or --name "
                       "(see jobman restart --help)")
    from ..commands.restart import restart_jobs

    def emit(view: dict) -> None:
        if not ns.json:
            deliver(f"{view['handle']}\n")  # each as soon as it is handed over, as jobman run --array does

    done = restart_jobs(ns.jobs, states=states, group=ns.group, name=ns.name, with_dependents=ns.with_dependents,
                        include_started=ns.include_started, emit=emit)
    if ns.json:
        deliver(json_text(done["jobs"]))
    return _restart_report(done, selecting)


def _restart_parser():
    p = parser("jobman restart", """\
Submit finished jobs' specifications again, as new jobs that record what they restart: the JOBs named,
and every finished job the selectors match that has not been restarted yet (--state, --group, --name, as
jobman list reads them). They are submitted in submission order, and the dependency edges among them are
re-wired to the new jobs (an edge to a job not restarted keeps its old job), so a pipeline lost at a
reboot comes back whole: jobman restart --state lost. A lost job that had started may have done part of
its work: a selector takes one only with --include-started. --with-dependents: also the jobs that never
ran because of them (dependency_failed, or lost before they started). Prints each new handle, one a line
(--json: restarts, id, handle, name of each).""", json=True)
    p.add_argument("jobs", nargs="*", metavar="JOB")
    p.add_argument("--state", action="append", default=[], metavar="STATE",
                   help="also every finished job in STATE (an outcome: lost, failed, ...; repeatable or "
                        "comma-separated)")
    p.add_argument("--group", metavar="NAME", type=text("--group"), help="also (or only, with --state) jobs of group NAME")
    p.add_argument("--name", metavar="GLOB", type=text("--name"), help="... whose name matches GLOB")
    p.add_argument("--include-started", action="store_true",
                   help="a selector also takes lost jobs that had started (they may have done part of their work)")
    p.add_argument("--with-dependents", action="store_true",
                   help="also the jobs that never ran because of them")
    return p


def _restart_report(done: dict, selecting: bool) -> int:
    """What a restart did, on stderr (how many, what it left out, what it could not submit), and its exit status."""
    submitted, chosen = len(done["jobs"]), done["chosen"]
    notes = []
    if not chosen:
        notes.append("nothing to restart" + ("" if done["left_out"] else
                                             ": every finished job that matches has been restarted already"))
    elif selecting or chosen > 1:
        notes.append(f"restarted {submitted} of {chosen} job(s)" if submitted < chosen else
                     f"restarted {submitted} job(s)")
    if done["left_out"]:
        notes.append(f"left out {done['left_out']} lost job(s) that had started (they may have done part of their "
                     f"work): --include-started takes them too")
    if done["depend_on_lost"]:
        notes.append(f"{done['depend_on_lost']} dependency edge(s) point at lost jobs that are not restarted: the "
                     f"jobs on them will end dependency_failed (where they need success)")
    if notes:
        sys.stderr.write("jobman: " + "; ".join(notes) + "\n")
    handles = done["handles"]  # of the old jobs, in the order they were to be submitted
    for index, _, message in done["failures"]:
        error(f"the restart of job {handles[index]} was not submitted: {message}")
    if done["stopped_at"] is not None and (done["failures"] or done["interrupted"]):
        rest = handles[done["stopped_at"]:]
        error(f"{'interrupted' if done['interrupted'] else 'stopped'}: {len(rest)} job(s) from job {rest[0]} on "
              f"were not restarted")
    if done["interrupted"]:
        return 130
    return 1 if done["failures"] else 0


def cmd_signal(args: list[str]) -> int:
    p = parser("jobman signal", "Send signal SIG to every process of a running job's tree (each one identified\n"
               "by pid and start time, as cancel does). SIG: a name (TERM, HUP, USR1, STOP, CONT) or a number.",
               json=True)
    p.add_argument("job", metavar="JOB")
    p.add_argument("sig", metavar="SIG")
    ns = p.parse_args(args)
    from ..commands import control

    result = control.send_signal(ns.job, control.parse_signal(ns.sig))
    if ns.json:
        print_json(result)
    else:
        sys.stdout.write(f"job {result['handle']}: {result['message']}\n")
    return 0


def _cmd_hold_or_release(args: list[str], held: bool) -> int:
    verb = "hold" if held else "release"
    p = parser(f"jobman {verb}", "Hold back jobs that have not started: a held job leaves its group's line and\n"
               "starts only after jobman release." if held
               else "Let held jobs go on: each starts when it is eligible.", json=True)
    p.add_argument("jobs", nargs="+", metavar="JOB")
    ns = p.parse_args(args)
    from ..commands import control

    print_results(control.set_held(ns.jobs, held), ns.json)
    return 0


def cmd_hold(args: list[str]) -> int:
    return _cmd_hold_or_release(args, True)


def cmd_release(args: list[str]) -> int:
    return _cmd_hold_or_release(args, False)


def cmd_priority(args: list[str]) -> int:
    p = parser("jobman priority", "Move a job that has not started to priority N: within its group, jobs of a\n"
               "higher priority take a free slot first, and it keeps its place by submission order within\n"
               "its new priority (as tsp -u and pueue's switch move jobs in their queues).", json=True)
    p.add_argument("job", metavar="JOB")
    p.add_argument("priority", metavar="N", type=_priority)
    ns = p.parse_args(args)
    from ..commands import control

    result = control.set_priority(ns.job, ns.priority)
    if ns.json:
        print_json(result)
    else:
        sys.stdout.write(f"job {result['handle']}: {result['message']}\n")
    return 0


def _priority(value: str) -> int:
    from .run import INT32, whole_number

    return whole_number("N", *INT32)(value)


def cmd_group(args: list[str]) -> int:
    p = parser("jobman group", "Concurrency groups: at most LIMIT jobs of a group run at once; 0 pauses it.\n"
               "The default group's limit starts at the number of CPUs.")
    sub = p.add_subparsers(dest="action", required=True)
    s = sub.add_parser("set", help="create a group or change its limit")
    s.add_argument("name")
    s.add_argument("--limit", type=int, required=True)
    s.add_argument("--json", action="store_true", help=JSON_HELP)
    lst = sub.add_parser("list", help="groups with their limits and use")
    lst.add_argument("--json", action="store_true", help=JSON_HELP)
    rm = sub.add_parser("rm", help="remove a group no job belongs to (prune its finished jobs first)")
    rm.add_argument("name", type=text("NAME"))
    rm.add_argument("--json", action="store_true", help=JSON_HELP)
    ns = p.parse_args(args)
    from ..commands import admin, render

    if ns.action == "rm":
        admin.group_remove(ns.name)
        if ns.json:
            print_json({"name": ns.name, "removed": True})
        else:
            sys.stdout.write(f"removed group {ns.name}\n")
        return 0
    if ns.action == "set":
        rows = [admin.group_set(ns.name, ns.limit)]
    else:
        rows = admin.group_list()
    if ns.json:
        print_json(rows[0] if ns.action == "set" else rows)
    else:
        sys.stdout.write(render.groups(rows) + "\n")
    return 0


def cmd_prune(args: list[str]) -> int:
    p = parser("jobman prune", "Remove finished jobs and their logs (the JOBs named, or every finished one).\n"
               "Never touches an unfinished job, one an unfinished job depends on, or a lost job whose\n"
               "processes still run; JOBs that include one of those are refused whole.", json=True)
    p.add_argument("jobs", nargs="*", metavar="JOB", help="only these jobs (handles, names, ids, id prefixes)")
    p.add_argument("--older-than", type=duration("--older-than"), default=0.0, metavar="D",
                   help="only jobs that finished more than D ago")
    p.add_argument("--succeeded", action="store_true", help="only jobs that succeeded (keep the others to look at)")
    ns = p.parse_args(args)
    from ..commands import admin

    removed = admin.prune(older_than=ns.older_than, only_succeeded=ns.succeeded, jobs=ns.jobs)
    if ns.json:
        print_json(removed)
    else:
        sys.stdout.write(f"removed {len(removed)} finished job(s)\n")
    return 0


def cmd_reconcile(args: list[str]) -> int:
    p = parser("jobman reconcile", "Run the reconciliation pass alone: unclaimed submissions past their\n"
               "deadline become submission_failed; jobs whose supervisor is gone past its lease become lost.",
               json=True)
    ns = p.parse_args(args)
    from ..commands import api

    changes = api.reconcile_now()
    if ns.json:
        print_json(changes)
    else:
        for c in changes:
            sys.stdout.write(f"{c['id']}: {c['change']}\n")
        if not changes:
            sys.stdout.write("nothing to reconcile\n")
    return 0
