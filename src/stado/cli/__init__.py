"""stado command line: parse, call one library function per command, render.

    __init__.py   main: the fast `stado submit` path, dispatch to a command family, every argument's text checked,
                  stado's errors as one line and an exit code
    common.py     what the families share: the store opened from STADO_CONFIG, text and JSON out, argument types
    options.py    `stado submit`'s options, one table read by both the fast path and argparse
    parser.py     the argparse parser, one function per family (help and errors)
    submitting.py submit, job rerun;   reading.py status, machine status, job watch, logs, wait, results
    control.py    cancel, job hold and release, queue pause and resume;   schedules.py schedule add, list, rm ...
    fleet.py      reap, machine may-delete, repair, doctor, ui;   agent.py `stado agent` (its flags and config)
    in_job.py     checkpoint put, artifact put (run inside a job)

Exit codes: 0 done; 1 a failure while doing it; 2 bad input (nothing written); 3 no such job;
4 the object store is unreachable, refused the credentials, is not an object store, does not honour conditional writes (`stado
doctor` says which), or a transfer stopped moving past a stall_timeout set in STADO_CONFIG (a submit or a cancel
exits 4 only when its write did not land: nothing was submitted, or written); 5 artifacts failed verification;
6 `results` of a job that has not finished; 7 a submit or a cancel could not tell whether its write landed (the
store's answer was lost and it could not be read back in time: `stado status ID` tells; a submit prints the id).
A command over several jobs (cancel, job rerun/hold/release) exits 0 when it did every one, else with the code of
the first it did not do; a selection that matches nothing is 3. `stado job watch` exits with the job's own status
(see docs/stado.md).
"""
import sys

from ..core.errors import BadInput, StadoError
from .common import PROG

# (words) -> (family module, function): a command loads its own family only.
COMMANDS = {
    ("submit",): ("submitting", "cmd_submit"), ("job", "rerun"): ("submitting", "cmd_rerun"),
    ("status",): ("reading", "cmd_status"), ("machine", "status"): ("reading", "cmd_machine_status"),
    ("job", "watch"): ("reading", "cmd_watch"), ("logs",): ("reading", "cmd_logs"), ("wait",): ("reading", "cmd_wait"),
    ("results",): ("reading", "cmd_results"),
    ("cancel",): ("control", "cmd_cancel"), ("job", "hold"): ("control", "cmd_hold"),
    ("job", "release"): ("control", "cmd_hold"), ("queue", "pause"): ("control", "cmd_pause"),
    ("queue", "resume"): ("control", "cmd_resume"),
    ("schedule", "add"): ("schedules", "cmd_schedule_add"), ("schedule", "list"): ("schedules", "cmd_schedule_list"),
    ("schedule", "rm"): ("schedules", "cmd_schedule_change"), ("schedule", "pause"): ("schedules", "cmd_schedule_change"),
    ("schedule", "resume"): ("schedules", "cmd_schedule_change"),
    ("agent",): ("agent", "cmd_agent"), ("agent", "forget"): ("agent", "cmd_agent_forget"), ("reap",): ("fleet", "cmd_reap"), ("machine", "may-delete"): ("fleet", "cmd_may_delete"),
    ("repair",): ("fleet", "cmd_repair"), ("doctor",): ("fleet", "cmd_doctor"), ("ui",): ("fleet", "cmd_ui"),
    ("artifact", "put"): ("in_job", "cmd_artifact_put"), ("checkpoint", "put"): ("in_job", "cmd_checkpoint_put"),
}
WITH_SUBCOMMANDS = ("job", "queue", "machine", "artifact", "schedule", "checkpoint", "agent")


def fast_submit(argv: list[str]):
    """`stado submit` with well-formed options, read without argparse; None to let argparse read it."""
    if not argv or argv[0] != "submit":
        return None
    from runkit.cli.fastargs import fast_parse

    from .options import SUBMIT_OPTIONS

    ns = fast_parse(argv[1:], SUBMIT_OPTIONS, max_positionals=1)
    if ns is None:
        return None
    positionals = ns.positionals  # type: ignore[attr-defined]  # fast_parse's Namespace carries them
    ns.command, ns.cmd = "submit", (positionals[0] if positionals else None)  # type: ignore[attr-defined]
    return ns


def main(argv: list[str] | None = None) -> int:
    from runkit.cli.climain import leave, run_main

    code = run_main(lambda: _run(sys.argv[1:] if argv is None else argv), _failure, PROG)
    if argv is None and sys.argv[1:2] == ["submit"]:
        # A submit's writes are made (and synced, on the local directory) before it prints the id: the
        # interpreter's teardown would only add 2.5 ms to the one command scripts run thousands of times.
        leave(code)
    return code


def _run(argv: list[str]) -> int:
    args = fast_submit(argv)
    if args is None:
        from .parser import build

        parser = build()
        if argv and argv[0] in ("--version", "-V"):
            sys.stdout.write(f"{PROG} {_version()}\n")
            return 0
        if not argv or argv[0] in ("-h", "--help", "help"):
            parser.print_help(sys.stdout if argv else sys.stderr)
            return 0 if argv else 2
        command_words = None
        if argv[:2] == ["schedule", "add"] and "--" in argv:  # the command is everything after --
            cut = argv.index("--")
            argv, command_words = argv[:cut], argv[cut + 1:]
        args = parser.parse_args(argv)
        args.cmd_words = command_words
    check_text(args)
    sub = getattr(args, f"{args.command}_command", None) if args.command in WITH_SUBCOMMANDS else None
    key = (args.command, sub) if sub is not None else (args.command,)
    if key not in COMMANDS:
        raise BadInput(f"`stado {args.command}` needs a subcommand; see `stado {args.command} --help`")
    return command(key)(args)


def command(key: tuple):
    """The function that runs the command named by `key` (its words), its family loaded now (by __import__:
    importlib's package would load warnings on every submit)."""
    family, name = COMMANDS[key]
    module = f"{__name__}.{family}"
    __import__(module)
    return getattr(sys.modules[module], name)


# Arguments that name local files: any bytes a file name may hold are accepted (what becomes a stored name, an
# upload's or an artifact's, is checked where it is made). Every other text argument is stored or compared as text.
PATH_ARGS = frozenset(("dir", "work_root", "batch", "paths", "upload"))
SHOWN_AS = {"cmd": "CMD", "id": "ID", "sched_name": "NAME", "cron": "CRON", "dir": "DIR", "paths": "PATH",
            "instance_ref": "INSTANCE_REF", "ids": "JOB", "cmd_words": "the command after --", "agent_id": "ID"}


def check_text(args) -> None:
    """Every text argument means something: BadInput, in one line, for an empty value or one whose bytes are not
    UTF-8 (the shell passes any bytes; Python hands them over as lone surrogates, which no document can hold).
    One check over every parsed value, so an option added later is covered too."""
    from runkit.cli.cliargs import text_problem

    for dest, value in vars(args).items():
        if dest == "positionals":  # the fast path's list, also set as `cmd`
            continue
        values = value if isinstance(value, list) else [value]
        for item in values:
            if not isinstance(item, str):
                continue
            problem = text_problem(item, empty_ok=dest in ("cmd", "cmd_words"), any_bytes=dest in PATH_ARGS)
            if problem:
                shown = SHOWN_AS.get(dest) or "--" + dest.replace("_", "-")
                hint = ("; a command may still make such bytes itself, e.g. printf '\\377'"
                        if dest in ("cmd", "cmd_words") and item else "")
                raise BadInput(f"{shown} {problem}{hint}")


def _failure(error: Exception) -> tuple[str, int] | None:
    """stado's errors as (one line, exit code); the store's keep their own root and are translated here too."""
    from runkit.core.printable import printable

    said = _said(error)
    return None if said is None else (printable(said[0]), said[1])  # a message may quote other people's text


def _said(error: Exception) -> tuple[str, int] | None:
    if isinstance(error, StadoError):
        return str(error), error.exit_code
    from ..objectstore.base import AccessDenied, ConfigError, StoreError, StoreUnavailable

    if isinstance(error, ConfigError):
        return str(error), 2
    if isinstance(error, (StoreUnavailable, AccessDenied)):
        return str(error), 4
    if isinstance(error, StoreError):
        return f"object store error: {error}", 1
    if isinstance(error, OSError):  # a file or directory the command could not use: one line, never a traceback
        where = f" ({error.filename})" if getattr(error, "filename", None) else ""
        return f"{error.strerror or error}{where}", 1
    return None


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jobman-stado")
    except PackageNotFoundError:
        return "(version unknown: not installed as a package)"
