"""The reading commands (list, show, logs, wait): parse, call, render, with jobman.cli's helpers (imported when
one of them runs)."""
import time
import sys

from . import MAX_COUNT, add_selection, duration, parser, print_json, selection_of, text, whole


def cmd_list(args: list[str]) -> int:
    p = parser("jobman list", """\
Jobs, newest first: every running job, the newest 100 waiting and the newest 100 finished ones
(--active: every unfinished job; --all: every job; --limit N: the newest N). Waiting jobs say what
they wait for, and where they stand in their group's line.
The table fits the terminal (or COLUMNS), cutting the command; outcomes are coloured on a
terminal (not with NO_COLOR). # is the job's handle, which any command takes as JOB.""", json=True)
    p.add_argument("--active", action="store_true", help="only jobs that have not finished")
    p.add_argument("--all", action="store_true", help="every job, however old")
    p.add_argument("--limit", type=whole("--limit", 1, MAX_COUNT), metavar="N", help="the newest N jobs")
    p.add_argument("--state", action="append", default=[], metavar="STATE",
                   help="only jobs in STATE: a phase (waiting, running, ...), an outcome (failed, ...) or held; "
                        "repeatable or comma-separated")
    p.add_argument("--group", metavar="NAME", type=text("--group"), help="only jobs of group NAME")
    p.add_argument("--name", metavar="GLOB", type=text("--name"), help="only jobs whose name matches GLOB (*, ?, [...])")
    p.add_argument("--hide-restarted", action="store_true",
                   help="leave out the jobs that have been restarted (their restart stands for them)")
    ns = p.parse_args(args)
    from ..commands import api
    from ..store import queries

    states = [w.strip() for given in ns.state for w in given.split(",") if w.strip()]
    unknown = [w for w in states if w not in queries.STATE_WORDS]
    if unknown:
        p.error(f"--state: unknown state {unknown[0]!r}; use one of {', '.join(queries.STATE_WORDS)}")
    result = api.list_jobs(active_only=ns.active, limit=ns.limit, everything=ns.all, states=states,
                           group=ns.group, name=ns.name, hide_restarted=ns.hide_restarted)
    views = result["jobs"]
    if ns.json:
        print_json(views)
    elif views:
        from ..commands import listing

        out = sys.stdout
        out.write(listing.job_table(views, listing.terminal_width(out), listing.use_colour(out), now=time.time()) + "\n")
    else:
        sys.stdout.write("no jobs\n" if not (states or ns.group or ns.name or ns.hide_restarted) else "no jobs match\n")
    left_out = [f"{n} older {what}" for what, n in result["not_shown"].items() if n]
    if left_out:
        sys.stderr.write(f"jobman: {' and '.join(left_out)} job(s) not shown (jobman list --all)\n")
    if result.get("lost_note"):
        sys.stderr.write(f"jobman: {result['lost_note']}\n")
    return 0


def cmd_show(args: list[str]) -> int:
    p = parser("jobman show", "Everything about one job: spec, state, outcome, attempts and events.\n"
               "The environment is summed up (how many variables, those set with --env, and the names that\n"
               "differ from this shell's); --env lists it all. Values of secret-looking variables (TOKEN,\n"
               "SECRET, PASSWORD, KEY) are masked.", json=True)
    p.add_argument("job", metavar="JOB")
    p.add_argument("--env", action="store_true", help="list every variable of the job's environment")
    ns = p.parse_args(args)
    from ..commands.showing import show

    view = show(ns.job)
    if ns.json:
        print_json(view)
    else:
        from ..commands import render

        sys.stdout.write(render.show(view, all_env=ns.env) + "\n")
    return 0


def cmd_logs(args: list[str]) -> int:
    p = parser("jobman logs", "A job's output (without JOB: the newest job's), every attempt in order (or one\n"
               "with --attempt). --follow streams new output, across retries, until the job ends, and then\n"
               "exits with the job's exit status (as jobman wait does).",
               json="the output of each attempt as JSON (not with --follow)")
    p.add_argument("job", metavar="JOB", nargs="?", help="default: the newest job")
    p.add_argument("--attempt", type=int, metavar="N", help="only attempt N")
    p.add_argument("--stderr", action="store_true", help="the stderr log (jobs run with --separate-stderr)")
    p.add_argument("-f", "--follow", action="store_true", help="keep streaming until the job ends")
    p.add_argument("-n", "--tail", type=whole("--tail", 0, MAX_COUNT), metavar="N", help="only the last N lines")
    ns = p.parse_args(args)
    if ns.json and ns.follow:
        p.error("--json cannot be combined with --follow")
    from ..commands import api

    options = {"attempt": ns.attempt, "stderr": ns.stderr, "tail": ns.tail}
    if ns.json:
        print_json(api.logs(ns.job, **options))
        return 0
    result = api.logs(ns.job, **options, follow=ns.follow, out=sys.stdout.buffer)
    if "note" in result:
        sys.stderr.write(f"jobman: {result['note']}\n")
    return result["exit_status"]


def cmd_wait(args: list[str]) -> int:
    p = parser("jobman wait", """\
Wait until every JOB has ended, and every job the selectors match: --all, --state S, --group G,
--name GLOB (as jobman list reads them; together they narrow each other). A selector covers every job
of the home not yet pruned, finished ones included, so the answer is the same whenever it is asked:
a failure counts until jobman prune removes it, or until it is restarted: a restarted job is answered
by its restart. Exit status: 0 if all succeeded, else that of the
first job (in argument order, then submission order) that did not (see jobman --help); 2 if the
selectors match no job.""", json=True)
    p.add_argument("jobs", nargs="*", metavar="JOB")
    add_selection(p, "job not yet pruned")
    p.add_argument("--timeout", type=duration("--timeout"), metavar="D",
                   help="give up after D (exit 120 with a message; the jobs go on)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    ns = p.parse_args(args)
    selection = selection_of(p, ns, "wait")
    from ..commands import api

    progress = None
    if not ns.quiet and sys.stderr.isatty():
        progress = _progress_line
    result = api.wait(ns.jobs, timeout=ns.timeout, progress=progress, selection=selection)
    if progress:
        sys.stderr.write("\r\033[K")
    if ns.json:
        print_json(result)
    if result["timed_out"]:
        pending = [f"job {v['handle']}" for v in result["jobs"] if v["phase"] != "finished"]
        sys.stderr.write(f"jobman: wait timed out; still unfinished: {', '.join(pending)} (they go on)\n")
        from runkit.core.outcomes import EXIT_WAIT_TIMED_OUT

        return EXIT_WAIT_TIMED_OUT
    if not ns.json and len(result["jobs"]) > 1:
        for v in result["jobs"]:
            if v["exit_status"] != 0:
                from runkit.core.printable import printable

                named = f" ({printable(v['name'])})" if v["name"] else ""
                why = f"; reason: {printable(v['cancel_reason'])}" if v["cancel_reason"] else ""
                sys.stderr.write(f"jobman: job {v['handle']}{named}: {v['outcome']} (exit status {v['exit_status']}"
                                 f"{why})\n")
    return result["exit_status"]


def _progress_line(rows, elapsed: float) -> None:
    from collections import Counter

    counts = Counter(r.outcome or r.phase for r in rows)
    summary = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    sys.stderr.write(f"\r\033[Kwaiting for {len(rows)} job(s): {summary} ({elapsed:.0f}s)")
    sys.stderr.flush()
