"""What stado's command families share: the store opened from STADO_CONFIG, text and JSON out, argument types."""
import sys

from runkit.cli.cliargs import argparse_type, non_negative, whole

PROG = "stado"
JSON_HELP = "print JSON instead of text (for scripts)"


def json_flag(parser, help: str = JSON_HELP):
    """--json, which every reading command takes. Returns the parser."""
    parser.add_argument("--json", action="store_true", help=help)
    return parser


def open_store():
    from ..objectstore.connect import store_from_environment

    return store_from_environment()


def out(text: str) -> None:
    """Text for people: each line through runkit.core.printable, so other people's text that a view did not escape
    itself still never reaches the terminal as control (escaping is idempotent: what a view escaped stays)."""
    from runkit.core.printable import printable

    lines = text[:-1] if text.endswith("\n") else text
    sys.stdout.write("\n".join(printable(line) for line in lines.split("\n")) + "\n")


def print_json(data) -> None:
    """JSON for scripts, as stored (ASCII: json's escapes keep every character)."""
    import json

    sys.stdout.write(json.dumps(data, indent=None, sort_keys=True) + "\n")


def positive(text: str) -> int:
    number = whole(text)
    if number < 1:
        raise ValueError(f"{text} is not an attempt number: attempts count from 1")
    return number


def duration(text: str) -> float:
    from runkit.core.durations import parse_duration

    return parse_duration(text)


def port(text: str) -> int:
    number = whole(text)
    if not 0 <= number <= 65535:
        raise ValueError(f"{text} is not a port: give 1-65535, or 0 for a free one")
    return number


seconds = argparse_type(non_negative)  # an argparse type: a number of seconds, 0 or more


def filtered(args) -> bool:
    """Whether a command that takes several jobs was given more than one, or a filter (--state, --name): then it
    reports one line per job; one job alone keeps its own command's answer and exit status."""
    return len(args.ids) != 1 or args.state is not None or args.name is not None


def print_outcomes(args, ids: list[str], outcomes, undone: str) -> int:
    """Each job's line (or, with --json, one object with every job's), then, if some were not done, one line on
    stderr naming them. Exit 0 if every job was done, else the status of the first that was not (the one its
    command alone would exit with: its line says why)."""
    results, failed = [], []
    for outcome in outcomes:
        results.append(outcome)
        if outcome.code != 0:
            failed.append(outcome)
        if not args.json:
            out(outcome.message)
    status = failed[0].code if failed else 0
    if args.json:
        print_json({"jobs": [o.data for o in results], "exit_status": status, "not_done": [o.job_id for o in failed]})
    if failed:
        from runkit.core.printable import printable

        sys.stderr.write(printable(f"{PROG}: {len(failed)} of {len(ids)} job(s) {undone}: "
                                   f"{', '.join(o.job_id for o in failed)} (each one's line says why)") + "\n")
    return status


def selection_flags(parser, what: str):
    """JOB... plus --state and --name: the jobs a command acts on."""
    parser.add_argument("ids", nargs="*", metavar="JOB",
                        help="ids, names, schedules' names or unique id prefixes (6+ characters)")
    parser.add_argument("--state", metavar="STATE",
                        help=f"{what} the jobs in STATE: queued, running, completed, failed or cancelled")
    parser.add_argument("--name", metavar="GLOB", help=f"{what} the jobs whose name matches GLOB, e.g. 'sweep-*' "
                                                       "(with --state: the jobs both choose)")
    return parser
