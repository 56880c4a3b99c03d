"""The commands that change jobs, groups and the store (cancel, restart, signal, hold, release, priority, group,
prune, reconcile): parse, call, render, with jobman.cli's helpers (imported when one of them runs)."""
import sys

from . import (JSON_HELP, add_selection, deliver, duration, error, json_text, parser, print_json, print_results,
               selection_of, text)

SELECTING = """

Beside the JOBs named, --all, --state S, --group G and --name GLOB select jobs as jobman list reads them
(together they narrow each other; --all alone: every job); of those the command takes the ones it can act on
(%s). One line per job; exit 0 if each was done, 1 if one was not (its line says why), 2 for bad
input or a selection that matches nothing (nothing changed)."""


def cmd_cancel(args: list[str]) -> int:
    p = parser("jobman cancel", "Cancel waiting or running jobs (SIGTERM to the whole process tree, SIGKILL\n"
               "after --kill-after). --after-success dependents of a cancelled job end dependency_failed.\n"
               "On a lost job: stop its target tree if, and only if, its identity still verifies."
               + SELECTING % "the unfinished ones", json=True)
    p.add_argument("jobs", nargs="*", metavar="JOB")
    add_selection(p, "unfinished job")
    p.add_argument("--reason", metavar="TEXT", type=text("--reason"),
                   help="why: kept with the cancel, shown by show, list --json and this command's lines")
    ns = p.parse_args(args)
    selection = selection_of(p, ns, "cancel")
    from ..commands import api

    return print_results(api.cancel(ns.jobs, selection=selection, reason=ns.reason), ns.json)


def cmd_restart(args: list[str]) -> int:
    p = _restart_parser()
    ns = p.parse_args(args)
    selection = selection_of(p, ns, "restart")
    from ..commands.restart import restart_jobs

    def emit(view: dict) -> None:
        if not ns.json:
            deliver(f"{view['id'] if ns.print_id else view['handle']}\n")  # each once handed over, as run --array does

    done = restart_jobs(ns.jobs, selection=selection, with_dependents=ns.with_dependents,
                        include_started=ns.include_started, emit=emit)
    if ns.json:
        deliver(json_text(done["jobs"]))
    return _restart_report(done, selection is not None)


def _restart_parser():
    p = parser("jobman restart", """\
Submit finished jobs' specifications again, as new jobs that record what they restart: the JOBs named,
and every finished job the selectors match that has not been restarted yet (--state, --group, --name, as
jobman list reads them). They are submitted in submission order, and the dependency edges among them are
re-wired to the new jobs (an edge to a job not restarted keeps its old job), so a pipeline lost at a
reboot comes back whole: jobman restart --state lost. A lost job that had started may have done part of
its work: a selector takes one only with --include-started. --with-dependents: also the jobs that never
ran because of them (dependency_failed, or lost before they started). Prints each new handle, one a line
and nothing else on stdout (n=$(jobman restart 7); jobman wait $n; --print-id: each new id), --json:
restarts, id, handle, name of each. --all: every finished job not restarted yet; a selection that matches nothing exits 2.""", json=True)
    p.add_argument("jobs", nargs="*", metavar="JOB")
    add_selection(p, "finished job not restarted yet")
    p.add_argument("--include-started", action="store_true",
                   help="a selector also takes lost jobs that had started (they may have done part of their work)")
    p.add_argument("--with-dependents", action="store_true",
                   help="also the jobs that never ran because of them")
    p.add_argument("--print-id", action="store_true", help="print each new job's id instead of its handle")
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
               "by pid and start time, as cancel does). SIG (the last word): a name (TERM, HUP, USR1, STOP,\n"
               "CONT) or a number." + SELECTING % "the running ones", json=True)
    p.add_argument("jobs", nargs="*", metavar="JOB")
    p.add_argument("sig", metavar="SIG")
    add_selection(p, "running job")
    ns = p.parse_args(args)
    selection = selection_of(p, ns, "signal")
    from ..commands import control

    return print_results(control.send_signal(ns.jobs, control.parse_signal(ns.sig), selection=selection), ns.json)


def _cmd_hold_or_release(args: list[str], held: bool) -> int:
    verb = "hold" if held else "release"
    p = parser(f"jobman {verb}", ("Hold back jobs that have not started: a held job leaves its group's line and\n"
               "starts only after jobman release." if held
               else "Let held jobs go on: each starts when it is eligible.")
               + SELECTING % ("the unheld ones that have not started" if held else "the held ones"), json=True)
    p.add_argument("jobs", nargs="*", metavar="JOB")
    add_selection(p, "job that has not started" if held else "held job")
    ns = p.parse_args(args)
    selection = selection_of(p, ns, verb)
    from ..commands import control

    return print_results(control.set_held(ns.jobs, held, selection=selection), ns.json)


def cmd_hold(args: list[str]) -> int:
    return _cmd_hold_or_release(args, True)


def cmd_release(args: list[str]) -> int:
    return _cmd_hold_or_release(args, False)


def cmd_priority(args: list[str]) -> int:
    p = parser("jobman priority", "Move jobs that have not started to priority N (the last word): within its\n"
               "group, jobs of a higher priority take a free slot first, and each keeps its place by submission\n"
               "order within its new priority (as tsp -u and pueue's switch move jobs in their queues)."
               + SELECTING % "the ones that have not started", json=True)
    p.add_argument("jobs", nargs="*", metavar="JOB")
    p.add_argument("priority", metavar="N", type=_priority)
    add_selection(p, "job that has not started")
    ns = p.parse_args(args)
    selection = selection_of(p, ns, "priority")
    from ..commands import control

    return print_results(control.set_priority(ns.jobs, ns.priority, selection=selection), ns.json)


def _priority(value: str) -> int:
    from .run import INT32, whole_number

    return whole_number("N", *INT32)(value)


def cmd_group(args: list[str]) -> int:
    p = parser("jobman group", "Concurrency groups: at most LIMIT jobs of a group run at once. A paused group\n"
               "starts no new job (running ones go on) and keeps its limit for the resume.\n"
               "The default group's limit starts at the number of CPUs.")
    sub = p.add_subparsers(dest="action", required=True)
    for verb, what in (("pause", "start no new job of group NAME (running ones go on; the limit is kept)"),
                       ("resume", "let a paused group start jobs again, up to its limit")):
        sp = sub.add_parser(verb, help=what)
        sp.add_argument("name", type=text("NAME"))
        sp.add_argument("--json", action="store_true", help=JSON_HELP)
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
    if ns.action in ("pause", "resume"):
        import time

        row = admin.group_pause(ns.name, ns.action == "pause", time.time())
        if ns.json:
            print_json(row)
        else:
            state = "paused" if row["paused"] else "resumed"
            sys.stdout.write(f"group {ns.name}: {state if row['changed'] else 'already ' + state.replace('resumed', 'open')}"
                             f" (limit {row['limit']}, {row['running']} running, {row['waiting']} waiting)\n")
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
    p = parser("jobman prune", "Remove finished jobs and their logs (the JOBs named and the jobs selected, or\n"
               "with neither every finished one). Never touches an unfinished job, one an unfinished job\n"
               "depends on, or a lost job whose processes still run; JOBs named that include one of those are\n"
               "refused whole, and a selector leaves them out. One line per job removed, then how many;\n"
               "a selection that matches nothing exits 2.", json=True)
    p.add_argument("jobs", nargs="*", metavar="JOB", help="only these jobs (handles, names, ids, id prefixes)")
    add_selection(p, "finished job that may be removed")
    p.add_argument("--older-than", type=duration("--older-than"), default=0.0, metavar="D",
                   help="only jobs that finished more than D ago")
    p.add_argument("--succeeded", action="store_true", help="only jobs that succeeded (keep the others to look at)")
    ns = p.parse_args(args)
    selection = selection_of(p, ns)
    from ..commands import admin

    removed = admin.prune(older_than=ns.older_than, only_succeeded=ns.succeeded, jobs=ns.jobs, selection=selection)
    if ns.json:
        print_json([r["id"] for r in removed])
    else:
        for r in removed:
            sys.stdout.write(f"job {r['handle']}: removed\n")
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
