"""jobman's command line: parse, call one api function per command, render.

This module is `main`, the dispatch, and what every command shares (its parser, JSON, the flags' converters,
the lines it prints). Each family of commands is a module of its own, imported only when one of its commands
runs (COMMANDS): jobman.cli.run (`jobman run` and its options), jobman.cli.reading (list, show, logs, wait),
jobman.cli.control (cancel, restart, signal, hold, release, priority, group, prune, reconcile) and
jobman.cli.extras (completion, ui). Only the parser of the command being run is built, and heavier modules are
imported inside the command that needs them: `jobman run` and `jobman __supervise` start on every job. Of this
package, `jobman run` loads this module and jobman.cli.run alone, which is why the shared helpers live here and
not in a module of their own.
"""
import sys

USAGE = """usage: jobman COMMAND [ARGS]

Reliable background jobs on one machine, with no daemon: each job gets its own detached supervisor,
SQLite ($JOBMAN_HOME, default ~/.local/state/jobman) holds the state.

commands:
  run [OPTIONS] -- COMMAND [ARG...]   submit a job; prints its handle once a supervisor owns it
  run --from FILE.toml                submit a pipeline file of named jobs (one handle per job)
  list (ls) [--state S] [--group G] [--name GLOB] [--hide-restarted]
                                      jobs, newest first, and why waiting jobs wait
  show JOB [--env]                    spec, state, outcome, attempts and events of one job
  logs [JOB]                          a job's output, the newest job's without JOB (--follow streams it)
  wait JOB... | SELECTORS             wait for jobs to end; the exit status mirrors them
  cancel JOB... | SELECTORS           stop waiting or running jobs (--reason TEXT)
  restart JOB... | SELECTORS [--with-dependents]
                                      submit finished jobs again (after a reboot: --state lost)
  signal JOB... | SELECTORS SIG       send a signal to every process of running jobs
  hold / release JOB... | SELECTORS   keep jobs that have not started from starting / let them go
  priority JOB... | SELECTORS N       move jobs that have not started to priority N in their group's line
  group set NAME --limit N | pause NAME | resume NAME | list | rm NAME
                                      concurrency groups
  reconcile                           explain abandoned jobs (every command also does this)
  prune [JOB... | SELECTORS] [--older-than D] [--succeeded]
                                      remove finished jobs and their logs
  completion bash|zsh|fish            a shell completion script
  ui [--host H] [--port P]            a live web dashboard of the jobs (prints its URL; Ctrl-C stops it)

SELECTORS: --all, --state S, --group G, --name GLOB (as list reads them; together they narrow each
other). Each command takes the jobs it can act on, prints a line per job, and exits 1 if one was not
done, 2 if the selection matches nothing. wait's selectors cover every job not yet pruned.
JOB is a job's handle (the number in the # column of jobman list), its id, a display name (the newest
job with it), or a unique id prefix (6+ characters). Every reading command takes --json.
`jobman COMMAND --help` explains each command; jobman --version prints the version.

exit status of wait (and logs --follow): the job's own exit code; 128+N if signal N ended it;
124 timed_out, 125 cancelled, 123 lost, 122 dependency_failed, 121 submission_failed,
127 the command could not be started; 120 wait --timeout gave up (the jobs go on).
Errors in jobman's own input exit 2; a failed launch exits 1.
"""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["__supervise"]:  # the supervisor's own process: it answers for its errors itself
        from ..supervisor import main as supervise

        return supervise(args[1:])
    from runkit.cli.climain import run_main

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
        error(f"unknown command {command!r}; see jobman --help")
        return 2
    from runkit.system.proc import ensure_std_fds

    ensure_std_fds()
    code = handler(rest)
    if exit_at_once and command == "run":
        from runkit.cli.climain import leave

        leave(code)  # committed and printed: skip interpreter teardown (~10 ms on every submission)
    return code


def _failure(error: Exception) -> tuple[str, int] | None:
    """jobman's own errors, and a database that cannot be used now, as (one line, exit code)."""
    from ..core.errors import JobmanError

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
    from ..store.trouble import trouble
    from ..core.home import Home
    from ..store.database import explain

    if getattr(error, "sqlite_errorcode", 0) & 0xFF in (5, 6):  # busy, locked: someone else holds it, for now
        return f"the jobman database cannot be used now: {trouble(error)} ({error}); run the command again"
    return str(explain(Home.from_environ().db, error))


# --- what every command shares: the family modules import these -----------------------------------

def error(message: str) -> None:
    sys.stderr.write(f"jobman: error: {message}\n")


JSON_HELP = "print JSON instead of text (for scripts)"
MAX_COUNT = 1_000_000_000  # of jobs listed or lines shown: a bound SQLite's LIMIT and slicing can take


def parser(prog: str, description: str, *, json: bool | str = False):
    """An argparse parser whose errors are one line (runkit.cli.cliargs), raised as BadInput (exit 2). `json`: the
    command takes --json (True: with the common help; a string: with this help)."""
    import argparse

    from runkit.cli.cliargs import parser_class

    from ..core.errors import BadInput

    Parser = parser_class(BadInput, "{prog}: {message} (see {prog} --help)", join_negatives=True)
    p = Parser(prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    if json:
        p.add_argument("--json", action="store_true", help=JSON_HELP if json is True else json)
    return p


def print_json(data) -> None:
    sys.stdout.write(json_text(data))


def json_text(data) -> str:
    import json

    return json.dumps(data, indent=2, default=str) + "\n"


def deliver(text: str) -> None:
    """Print what a submission reports once its jobs are owned: whatever stops it reaching stdout is said on stderr,
    and the command still exits 0 (runkit.cli.climain.deliver)."""
    from runkit.cli import climain

    climain.deliver(text, "jobman")


def duration(flag: str):
    """An argparse type for a duration flag (the same conversion `jobman run` uses)."""
    from runkit.cli.cliargs import argparse_type

    from .run import duration_value

    return argparse_type(duration_value(flag))


def whole(flag: str, low: int, high: int):
    """An argparse type for a whole number in [low, high] (the same conversion `jobman run` uses)."""
    from runkit.cli.cliargs import argparse_type

    from .run import whole_number

    return argparse_type(whole_number(flag, low, high))


def text(flag: str):
    """An argparse type for a word that must mean something: not empty, valid UTF-8 (names are stored as text)."""
    from runkit.cli.cliargs import argparse_type

    def convert(value: str) -> str:
        if not value:
            raise ValueError(f"{flag} needs a value (an empty one matches nothing)")
        try:
            value.encode()
        except UnicodeEncodeError:
            raise ValueError(f"{flag} {value.encode(errors='surrogateescape')!r} is not valid UTF-8") from None
        return value

    return argparse_type(convert)


def print_results(results: list[dict], as_json: bool) -> int:
    """What a command did to each job: JSON, or a line each (job HANDLE: message). Returns the exit status: 0 if
    every job was done (or was so already), else 1, with a line on stderr counting those that were not."""
    if as_json:
        print_json(results)
    else:
        for r in results:
            sys.stdout.write(f"job {r['handle']}: {r['message']}\n")
    undone = [r for r in results if not r.get("done", True)]
    if undone:
        error(f"{len(undone)} of {len(results)} job(s) were not changed: "
              + ", ".join(f"job {r['handle']}" for r in undone) + " (see each one's line)")
    return 1 if undone else 0


def add_selection(p, what: str) -> None:
    """The selectors every command that acts on jobs takes beside its JOBs (jobman.store.selectors.Selection):
    `what` says which of the jobs they match the command takes."""
    p.add_argument("--all", action="store_true", dest="every", help=f"every {what}")
    p.add_argument("--state", action="append", default=[], metavar="STATE",
                   help=f"every {what} in STATE (a phase, an outcome or held; repeatable or comma-separated)")
    p.add_argument("--group", metavar="G", type=text("--group"), help=f"every {what} of group G")
    p.add_argument("--name", metavar="GLOB", type=text("--name"), help=f"every {what} whose name matches GLOB")


def selection_of(p, ns, command: str | None = None):
    """The selection add_selection's flags make (None: none given). command: refuse a call with neither JOB nor
    selector (a command that would act on nothing, or guess at everything)."""
    from ..store import queries
    from ..store.selectors import Selection

    states = [w.strip() for given in ns.state for w in given.split(",") if w.strip()]
    unknown = [w for w in states if w not in queries.STATE_WORDS]
    if unknown:
        p.error(f"--state: unknown state {unknown[0]!r}; use one of {', '.join(queries.STATE_WORDS)}")
    selection = Selection(states, ns.group, ns.name, ns.every)
    if command and not selection and not getattr(ns, "jobs", None):
        from ..core.errors import BadInput

        raise BadInput(f"jobman {command}: name the jobs, or select them with --all, --state, --group or --name "
                       f"(see jobman {command} --help)")
    return selection or None


# --- the commands: each family's module is imported when one of its commands runs --------------------

def _run_family():
    from . import run

    return run


def _reading():
    from . import reading

    return reading


def _control():
    from . import control

    return control


def _extras():
    from . import extras

    return extras


def _command(family, name: str):
    """The command `name` of the module `family()` returns, imported only when it runs."""
    def command(args: list[str]) -> int:
        return getattr(family(), name)(args)

    return command


COMMANDS = {"run": _command(_run_family, "cmd_run"), "list": _command(_reading, "cmd_list"),
            "ls": _command(_reading, "cmd_list"), "show": _command(_reading, "cmd_show"),
            "logs": _command(_reading, "cmd_logs"), "wait": _command(_reading, "cmd_wait"),
            "reconcile": _command(_control, "cmd_reconcile"), "cancel": _command(_control, "cmd_cancel"),
            "group": _command(_control, "cmd_group"), "prune": _command(_control, "cmd_prune"),
            "restart": _command(_control, "cmd_restart"), "signal": _command(_control, "cmd_signal"),
            "hold": _command(_control, "cmd_hold"), "release": _command(_control, "cmd_release"),
            "priority": _command(_control, "cmd_priority"), "completion": _command(_extras, "cmd_completion"),
            "ui": _command(_extras, "cmd_ui"), "__jobs": _command(_extras, "cmd_jobs_words"),
            "__groups": _command(_extras, "cmd_group_words")}
