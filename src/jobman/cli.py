"""jobman's command line: parse, call one api function per command, render.

Only the parser of the command being run is built, and heavier modules are imported inside the
command that needs them: `jobman run` and `jobman __supervise` start on every job.
"""
import os
import sys

USAGE = """usage: jobman COMMAND [ARGS]

Reliable background jobs on one machine, with no daemon: each job gets its own detached supervisor,
SQLite ($JOBMAN_HOME, default ~/.local/state/jobman) holds the state.

commands:
  run [OPTIONS] -- COMMAND [ARG...]   submit a job; prints its handle once a supervisor owns it
  list (ls) [--state S] [--group G] [--name GLOB]
                                      jobs, newest first, and why waiting jobs wait
  show JOB [--env]                    spec, state, outcome, attempts and events of one job
  logs [JOB]                          a job's output, the newest job's without JOB (--follow streams it)
  wait JOB... | --all | --group G     wait for jobs to end; the exit status mirrors them
  cancel JOB...                       stop waiting or running jobs
  restart JOB... | --state S [--group G] [--name GLOB] [--with-dependents]
                                      submit finished jobs again (after a reboot: --state lost)
  signal JOB SIG                      send a signal to every process of a running job
  hold JOB... / release JOB...        keep jobs that have not started from starting / let them go
  priority JOB N                      move a job that has not started to priority N in its group's line
  group set NAME --limit N | list | rm NAME
                                      concurrency groups
  reconcile                           explain abandoned jobs (every command also does this)
  prune [--older-than D] [--succeeded]
                                      remove finished jobs and their logs
  completion bash|zsh|fish            a shell completion script
  ui [--host H] [--port P]            a live web dashboard of the jobs (prints its URL; Ctrl-C stops it)

JOB is a job's handle (the number in the # column of jobman list), its id, a display name (the newest
job with it), or a unique id prefix (6+ characters). Every reading command takes --json.
`jobman COMMAND --help` explains each command; jobman --version prints the version.

exit status of wait (and logs --follow): the job's own exit code; 128+N if signal N ended it;
124 timed_out, 125 cancelled, 123 lost, 122 dependency_failed, 121 submission_failed,
127 the command could not be started; 120 wait --timeout gave up (the jobs go on).
Errors in jobman's own input exit 2; a failed launch exits 1.
"""


MAX_COUNT = 1_000_000_000  # of jobs listed or lines shown: a bound SQLite's LIMIT and slicing can take


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["__supervise"]:  # the supervisor's own process: it answers for its errors itself
        from .supervisor import main as supervise

        return supervise(args[1:])
    from runkit.climain import run_main

    return run_main(lambda: _run(args, exit_at_once=argv is None), _failure,
                    "jobman: error")


def _run(args: list[str], *, exit_at_once: bool) -> int:
    if not args:
        sys.stderr.write(USAGE)
        return 2
    if args[0] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0
    if args[0] in ("--version", "-V"):
        sys.stdout.write(f"jobman {_version()}\n")
        return 0
    command, rest = args[0], args[1:]
    handler = COMMANDS.get(command)
    if handler is None:
        _error(f"unknown command {command!r}; see jobman --help")
        return 2
    from runkit.proc import ensure_std_fds

    ensure_std_fds()
    code = handler(rest)
    if exit_at_once and command == "run":
        from runkit.climain import leave

        leave(code)  # committed and printed: skip interpreter teardown (~10 ms on every submission)
    return code


def _failure(error: Exception) -> tuple[str, int] | None:
    """jobman's own errors, and a database that cannot be used now, as (one line, exit code)."""
    from .errors import JobmanError

    if isinstance(error, JobmanError):
        return str(error), error.exit_code
    message = _storage_trouble(error)
    return None if message is None else (message, 1)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jobman-stado")
    except PackageNotFoundError:
        return "(version unknown: not installed as a package)"


def _storage_trouble(error: Exception) -> str | None:
    """One line for a database that cannot be used (busy, full, read-only, failing, damaged, a table missing),
    or None for any other error."""
    sqlite3 = sys.modules.get("_sqlite3")  # SQLite's C module, which jobman loads without the sqlite3 package
    if sqlite3 is None or not isinstance(error, sqlite3.DatabaseError):
        return None
    from .dbretry import trouble
    from .home import db_path, home_dir
    from .store.schema import explain

    if getattr(error, "sqlite_errorcode", 0) & 0xFF in (5, 6):  # busy, locked: someone else holds it, for now
        return f"the jobman database cannot be used now: {trouble(error)} ({error}); run the command again"
    return str(explain(db_path(home_dir()), error))


def _error(message: str) -> None:
    sys.stderr.write(f"jobman: error: {message}\n")


JSON_HELP = "print JSON instead of text (for scripts)"


def _parser(prog: str, description: str, *, json: bool | str = False):
    """An argparse parser whose errors are one line (runkit.cliargs), raised as BadInput (exit 2). `json`: the
    command takes --json (True: with the common help; a string: with this help)."""
    import argparse

    from runkit.cliargs import parser_class

    from .errors import BadInput

    Parser = parser_class(BadInput, "{prog}: {message} (see {prog} --help)", join_negatives=True)
    p = Parser(prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    if json:
        p.add_argument("--json", action="store_true", help=JSON_HELP if json is True else json)
    return p


def _print_json(data) -> None:
    sys.stdout.write(_json_text(data))


def _json_text(data) -> str:
    import json

    return json.dumps(data, indent=2, default=str) + "\n"


def _deliver(text: str) -> None:
    """Print what a submission reports once its jobs are owned: whatever stops it reaching stdout is said on stderr,
    and the command still exits 0 (runkit.climain.deliver)."""
    from runkit.climain import deliver

    deliver(text, "jobman")


def _duration(flag: str):
    """An argparse type for a duration flag (the same conversion `jobman run` uses)."""
    from runkit.cliargs import argparse_type

    from .run_args import duration_value

    return argparse_type(duration_value(flag))


def _whole(flag: str, low: int, high: int):
    """An argparse type for a whole number in [low, high] (the same conversion `jobman run` uses)."""
    from runkit.cliargs import argparse_type

    from .run_args import whole_number

    return argparse_type(whole_number(flag, low, high))


def _text(flag: str):
    """An argparse type for a word that must mean something: not empty, valid UTF-8 (names are stored as text)."""
    from runkit.cliargs import argparse_type

    def convert(value: str) -> str:
        if not value:
            raise ValueError(f"{flag} needs a value (an empty one matches nothing)")
        try:
            value.encode()
        except UnicodeEncodeError:
            raise ValueError(f"{flag} {value.encode(errors='surrogateescape')!r} is not valid UTF-8") from None
        return value

    return argparse_type(convert)


# --- run -----------------------------------------------------------------------------------------

def cmd_run(args: list[str]) -> int:
    from . import run_args

    ns, command = run_args.parse(args, _parser)
    if ns.array is not None or ns.from_file is not None:
        from . import spec

        return _run_batch(ns, spec.batch_from_options(ns, command, os.environ))
    # The supervisor's interpreter starts now, while this process loads the rest and commits the job; it
    # claims nothing before the commit has handed it its credential (jobman.launch).
    from runkit.ids import uuid7

    from .launch import Launch

    launch = Launch(uuid7())
    try:
        from . import api, spec

        job_spec, deps = spec.from_options(ns, command, os.environ)
        result = api.run(job_spec, deps, launch=launch)
    finally:
        launch.abandon()  # (nothing, once the credential is handed: bad input before the commit ends it here)
    if ns.json:
        _deliver(_json_text({k: result[k] for k in ("id", "handle", "name", "supervisor_id")}))
    else:
        _deliver(f"{result['id'] if ns.print_id else result['handle']}\n")
    return 0


def _run_batch(ns, jobs: list) -> int:
    """`jobman run --array/--from`: each id printed as its job is handed over; a batch stopped part way says
    which jobs were submitted."""
    from . import api

    keys = ("id", "handle", "name", "supervisor_id", "index")
    listed = []

    def emit(result: dict) -> None:
        result["index"] = jobs[result["index"]][0]["batch_index"]  # its array index, or its line's command number
        if ns.json:
            listed.append({k: result[k] for k in keys})
            return
        # Each job as soon as it is handed over: a batch killed part way has named what it submitted (and one whose
        # stdout is gone names them on stderr: the terminal is gone, the jobs are not).
        _deliver(f"{result['id'] if ns.print_id else result['handle']}\n")

    outcome = api.run_batch(jobs, emit)
    if ns.json:
        _deliver(_json_text(listed))
    done, total = outcome["submitted"], len(jobs)
    if done == total:
        return 0
    what = "--array index" if ns.array is not None else "command"
    label = lambda i: f"{what} {jobs[i][0]['batch_index']}"  # noqa: E731
    for index, job_id, message in outcome["failures"]:
        _error(f"the job of {label(index)} ({job_id or 'not committed'}) was not submitted: {message}")
    why = "interrupted" if outcome["interrupted"] else "stopped"
    rest = f"; from {label(outcome['stopped_at'])} on, nothing was" if outcome["stopped_at"] is not None else ""
    printed = "ids" if ns.print_id else "handles"
    _error(f"{why}: submitted {done} of {total} jobs (their {printed} are printed){rest}")
    return 130 if outcome["interrupted"] else 1


# --- reading -------------------------------------------------------------------------------------

def cmd_list(args: list[str]) -> int:
    p = _parser("jobman list", """\
Jobs, newest first: every running job, the newest 100 waiting and the newest 100 finished ones
(--active: every unfinished job; --all: every job; --limit N: the newest N). Waiting jobs say what
they wait for, and where they stand in their group's line.
The table fits the terminal (or COLUMNS), cutting the command; outcomes are coloured on a
terminal (not with NO_COLOR). # is the job's handle, which any command takes as JOB.""", json=True)
    p.add_argument("--active", action="store_true", help="only jobs that have not finished")
    p.add_argument("--all", action="store_true", help="every job, however old")
    p.add_argument("--limit", type=_whole("--limit", 1, MAX_COUNT), metavar="N", help="the newest N jobs")
    p.add_argument("--state", action="append", default=[], metavar="STATE",
                   help="only jobs in STATE: a phase (waiting, running, ...), an outcome (failed, ...) or held; "
                        "repeatable or comma-separated")
    p.add_argument("--group", metavar="NAME", type=_text("--group"), help="only jobs of group NAME")
    p.add_argument("--name", metavar="GLOB", type=_text("--name"), help="only jobs whose name matches GLOB (*, ?, [...])")
    ns = p.parse_args(args)
    from . import api
    from .store import queries

    states = [w.strip() for text in ns.state for w in text.split(",") if w.strip()]
    unknown = [w for w in states if w not in queries.STATE_WORDS]
    if unknown:
        p.error(f"--state: unknown state {unknown[0]!r}; use one of {', '.join(queries.STATE_WORDS)}")
    result = api.list_jobs(active_only=ns.active, limit=ns.limit, everything=ns.all, states=states,
                           group=ns.group, name=ns.name)
    views = result["jobs"]
    if ns.json:
        _print_json(views)
    elif views:
        from . import listing

        out = sys.stdout
        out.write(listing.job_table(views, listing.terminal_width(out), listing.use_colour(out)) + "\n")
    else:
        sys.stdout.write("no jobs\n" if not (states or ns.group or ns.name) else "no jobs match\n")
    left_out = [f"{n} older {what}" for what, n in result["not_shown"].items() if n]
    if left_out:
        sys.stderr.write(f"jobman: {' and '.join(left_out)} job(s) not shown (jobman list --all)\n")
    if result.get("lost_note"):
        sys.stderr.write(f"jobman: {result['lost_note']}\n")
    return 0


def cmd_show(args: list[str]) -> int:
    p = _parser("jobman show", "Everything about one job: spec, state, outcome, attempts and events.\n"
                "The environment is summed up (how many variables, those set with --env, and the names that\n"
                "differ from this shell's); --env lists it all. Values of secret-looking variables (TOKEN,\n"
                "SECRET, PASSWORD, KEY) are masked.", json=True)
    p.add_argument("job", metavar="JOB")
    p.add_argument("--env", action="store_true", help="list every variable of the job's environment")
    ns = p.parse_args(args)
    from .showing import show

    view = show(ns.job)
    if ns.json:
        _print_json(view)
    else:
        from . import render

        sys.stdout.write(render.show(view, all_env=ns.env) + "\n")
    return 0


def cmd_logs(args: list[str]) -> int:
    p = _parser("jobman logs", "A job's output (without JOB: the newest job's), every attempt in order (or one\n"
                "with --attempt). --follow streams new output, across retries, until the job ends, and then\n"
                "exits with the job's exit status (as jobman wait does).",
                json="the output of each attempt as JSON (not with --follow)")
    p.add_argument("job", metavar="JOB", nargs="?", help="default: the newest job")
    p.add_argument("--attempt", type=int, metavar="N", help="only attempt N")
    p.add_argument("--stderr", action="store_true", help="the stderr log (jobs run with --separate-stderr)")
    p.add_argument("-f", "--follow", action="store_true", help="keep streaming until the job ends")
    p.add_argument("-n", "--tail", type=_whole("--tail", 0, MAX_COUNT), metavar="N", help="only the last N lines")
    ns = p.parse_args(args)
    if ns.json and ns.follow:
        p.error("--json cannot be combined with --follow")
    from . import api

    options = {"attempt": ns.attempt, "stderr": ns.stderr, "tail": ns.tail}
    if ns.json:
        _print_json(api.logs(ns.job, **options))
        return 0
    result = api.logs(ns.job, **options, follow=ns.follow, out=sys.stdout.buffer)
    if "note" in result:
        sys.stderr.write(f"jobman: {result['note']}\n")
    return result["exit_status"]


def cmd_wait(args: list[str]) -> int:
    p = _parser("jobman wait", "Wait until every JOB has ended (with --all: every job unfinished now; with --group\n"
                "G: every job of group G unfinished now). Exit status: 0 if all succeeded, else that of\n"
                "the first job (in argument order, then submission order) that did not (see jobman --help).",
                json=True)
    p.add_argument("jobs", nargs="*", metavar="JOB")
    p.add_argument("--all", action="store_true", help="also every job unfinished now")
    p.add_argument("--group", metavar="G", type=_text("--group"), help="also every job of group G unfinished now")
    p.add_argument("--timeout", type=_duration("--timeout"), metavar="D",
                   help="give up after D (exit 120 with a message; the jobs go on)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    ns = p.parse_args(args)
    from . import api
    from .errors import BadInput

    if not ns.jobs and not ns.all and ns.group is None:
        raise BadInput("jobman wait: name the jobs to wait for, or give --all or --group G (see jobman wait --help)")
    progress = None
    if not ns.quiet and sys.stderr.isatty():
        progress = _progress_line
    result = api.wait(ns.jobs, timeout=ns.timeout, progress=progress, every=ns.all, group=ns.group)
    if progress:
        sys.stderr.write("\r\033[K")
    if ns.json:
        _print_json(result)
    if result["timed_out"]:
        pending = [f"job {v['handle']}" for v in result["jobs"] if v["phase"] != "finished"]
        sys.stderr.write(f"jobman: wait timed out; still unfinished: {', '.join(pending)} (they go on)\n")
        from runkit.outcomes import EXIT_WAIT_TIMED_OUT

        return EXIT_WAIT_TIMED_OUT
    if not ns.json:
        for v in result["jobs"]:
            if v["exit_status"] != 0 and len(result["jobs"]) > 1:
                sys.stderr.write(f"{v['id']}: {v['outcome']}\n")
    return result["exit_status"]


def _progress_line(rows, elapsed: float) -> None:
    from collections import Counter

    counts = Counter(r.outcome or r.phase for r in rows)
    text = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    sys.stderr.write(f"\r\033[Kwaiting for {len(rows)} job(s): {text} ({elapsed:.0f}s)")
    sys.stderr.flush()


def cmd_reconcile(args: list[str]) -> int:
    p = _parser("jobman reconcile", "Run the reconciliation pass alone: unclaimed submissions past their\n"
                "deadline become submission_failed; jobs whose supervisor is gone past its lease become lost.",
                json=True)
    ns = p.parse_args(args)
    from . import api

    changes = api.reconcile_now()
    if ns.json:
        _print_json(changes)
    else:
        for c in changes:
            sys.stdout.write(f"{c['id']}: {c['change']}\n")
        if not changes:
            sys.stdout.write("nothing to reconcile\n")
    return 0


# --- changing ------------------------------------------------------------------------------------

def cmd_cancel(args: list[str]) -> int:
    p = _parser("jobman cancel", "Cancel waiting or running jobs (SIGTERM to the whole process tree, SIGKILL\n"
                "after --kill-after). --after-success dependents of a cancelled job end dependency_failed.\n"
                "On a lost job: stop its target tree if, and only if, its identity still verifies.", json=True)
    p.add_argument("jobs", nargs="+", metavar="JOB")
    ns = p.parse_args(args)
    from . import api

    _print_results(api.cancel(ns.jobs), ns.json)
    return 0


def _print_results(results: list[dict], as_json: bool) -> None:
    """What a command did to each job: JSON, or a line each (job HANDLE: message)."""
    if as_json:
        _print_json(results)
    else:
        for r in results:
            sys.stdout.write(f"job {r['handle']}: {r['message']}\n")


def _elsewhere(name: str):
    """A command kept in jobman.cli_control, imported only when it runs."""
    def run(args: list[str]) -> int:
        from . import cli_control

        return getattr(cli_control, name)(args)

    return run


COMMANDS = {"run": cmd_run, "list": cmd_list, "ls": cmd_list, "show": cmd_show, "logs": cmd_logs,
            "wait": cmd_wait, "reconcile": cmd_reconcile, "cancel": cmd_cancel, "group": _elsewhere("cmd_group"),
            "prune": _elsewhere("cmd_prune"), "restart": _elsewhere("cmd_restart"), "signal": _elsewhere("cmd_signal"),
            "hold": _elsewhere("cmd_hold"), "release": _elsewhere("cmd_release"),
            "priority": _elsewhere("cmd_priority"), "completion": _elsewhere("cmd_completion"), "ui": _elsewhere("cmd_ui"),
            "__jobs": _elsewhere("cmd_jobs_words"), "__groups": _elsewhere("cmd_group_words")}
