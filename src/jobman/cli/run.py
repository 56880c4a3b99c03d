"""`jobman run`: the command, and its options declared once (runkit.cli.fastargs reads them without argparse on the
start-up path of every submission; argparse, from the same table, gives help and errors). Every job starts with
this module: at load time it imports the table's reader alone (jobman.cli, whose helpers it uses, is loaded
already)."""
import os

from runkit.cli.fastargs import Option, add_to_argparse, fast_parse, to_namespace

from . import deliver, error, json_text, parser

DESCRIPTION = (
    "Submit COMMAND as a background job and print its handle (the # of jobman list; --print-id: its\n"
    "UUID).\n\n"
    "The handle is printed once the job's own detached supervisor has claimed it; the command may start\n"
    "later (dependencies, delays, retries and concurrency limits). Closing the terminal or pressing\n"
    "Ctrl-C after the id is committed does not affect the job.\n\n"
    "Windows (settings stored with each job): JOBMAN_CLAIM_WINDOW (10s), JOBMAN_LEASE (15s),\n"
    "JOBMAN_RENEW_INTERVAL (5s), JOBMAN_POLL_INTERVAL (30s, a waiting job's fallback poll, every 1-1.5 times it).")

INT32 = (-2**31, 2**31 - 1)
MAX_RETRIES = 1_000_000


def whole_number(flag: str, low: int, high: int):
    """A converter to a whole number in [low, high] (SQLite and the supervisor's arithmetic need a bound)."""
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{flag} takes a whole number, got {text[:40]!r}") from None
        if not low <= value <= high:
            raise ValueError(f"{flag} must be between {low} and {high}, got {text.strip()[:40]}")
        return value

    return convert


MAX_BATCH = 100_000  # jobs of one --array or --from: each is a process while it waits


def array_indices(text: str) -> tuple[int, ...]:
    """--array SPEC: indices and ranges, comma-separated: `1-5000`, `0-99:10` (every 10th), `1,5,7`."""
    indices: list[int] = []
    for part in text.split(","):
        first, dash, rest = part.strip().partition("-")
        last, colon, step = rest.partition(":")
        try:
            low = int(first)
            high = int(last) if dash else low
            stride = int(step) if colon else 1
        except ValueError:
            raise ValueError(f"--array takes indices and ranges such as 1-5000, 0-99:10 or 1,5,7; got {text[:40]!r}") \
                from None
        if low < 0 or high < low or stride < 1 or (colon and not dash):
            raise ValueError(f"--array: {part.strip()[:40]!r} is no range of indices from 0 up"
                             f" (A-B, A-B:STEP, with A <= B)")
        if len(indices) + (high - low) // stride + 1 > MAX_BATCH:
            raise ValueError(f"--array {text[:40]!r} makes more than {MAX_BATCH} jobs; submit them in parts")
        indices.extend(range(low, high + 1, stride))
    if len(set(indices)) != len(indices):
        raise ValueError(f"--array {text[:40]!r} names an index twice")
    return tuple(indices)


def duration_value(flag: str):
    def convert(text: str) -> float:
        from runkit.core.durations import parse_duration

        try:
            return parse_duration(text)
        except ValueError as e:
            raise ValueError(f"{flag}: {e}") from None

    return convert


OPTIONS = [
    Option("--name", "name", metavar="NAME", help="a display name; commands accept it wherever they take JOB"),
    Option("--cwd", "cwd", metavar="DIR", help="working directory (default: the current one)"),
    Option("--env", "env", "append", metavar="K=V", help="set a variable for the job (repeatable)"),
    Option("--env-policy", "env_policy", default="inherit", metavar="inherit|clean|allow:A,B",
           help="which of this shell's variables the job gets (default inherit: a snapshot taken now)"),
    Option("--after-success", "deps", "append", tag="success", metavar="JOB",
           help="start only after JOB succeeded (repeatable; JOB may be `last`, the newest job, as tsp -d)"),
    Option("--after-failure", "deps", "append", tag="failure", metavar="JOB",
           help="start only after JOB ended any way but succeeded"),
    Option("--after", "deps", "append", tag="end", metavar="JOB", help="start after JOB ended, whatever its outcome"),
    Option("--not-before", "not_before", metavar="TIME",
           help="do not start before TIME (ISO 8601, HH:MM, or @UNIX_SECONDS)"),
    Option("--delay", "delay", convert=duration_value("--delay"), metavar="D",
           help="do not start before D from now (e.g. 30s, 5m)"),
    Option("--retries", "retries", convert=whole_number("--retries", 0, MAX_RETRIES), default=0, metavar="N",
           help="up to N more attempts after a failed one"),
    Option("--retryable-exit-code", "exit_codes", "append", convert=whole_number("--retryable-exit-code", 0, 255), metavar="C",
           help="retry only these exit codes (repeatable; default: any non-zero exit)"),
    Option("--retry-delay", "retry_delay", convert=duration_value("--retry-delay"), default=0.0, metavar="D",
           help="wait D before each retry"),
    Option("--retry-backoff", "retry_backoff", default="constant", choices=("constant", "exponential"),
           help="exponential doubles the delay after each failed attempt"),
    Option("--retry-max-delay", "retry_max_delay", convert=duration_value("--retry-max-delay"), metavar="D",
           help="cap of the exponential backoff (default 1h)"),
    Option("--retry-on-timeout", "retry_on_timeout", "flag", default=False, help="also retry an attempt that timed out"),
    Option("--timeout", "timeout", convert=duration_value("--timeout"), metavar="D", help="time limit of each attempt"),
    Option("--kill-after", "kill_after", convert=duration_value("--kill-after"), metavar="D",
           help="SIGKILL this long after SIGTERM, on timeout or cancel (default 10s)"),
    Option("--group", "group", default="default", metavar="NAME",
           help="concurrency group (default: default, limit = CPUs)"),
    Option("--priority", "priority", convert=whole_number("--priority", *INT32), default=0, metavar="N",
           help="higher starts first within its group"),
    Option("--log-limit", "log_limit", metavar="SIZE",
           help="cap each attempt's log, keeping the newest output (default 1GB; 0 = no cap)"),
    Option("--separate-stderr", "separate_stderr", "flag", default=False, help="keep stderr in a log file of its own"),
    Option("--on-finish", "on_finish", metavar="CMD",
           help="once the job has finished, run /bin/sh -c CMD with JOBMAN_JOB_ID, JOBMAN_OUTCOME and "
                "JOBMAN_EXIT_CODE set (its failure never changes the job's outcome)"),
    Option("--array", "array", convert=array_indices, metavar="SPEC",
           help="submit one job per index of SPEC (1-5000, 0-99:10, 1,5,7); {} in the command and in --name becomes "
                "the index, which each job also finds in JOBMAN_ARRAY_INDEX"),
    Option("--from", "from_file", metavar="FILE",
           help="submit one job per line of FILE (- reads stdin): each line a command in shell words; blank lines "
                "and # comments are skipped; the other options apply to every job"),
    Option("--hold", "hold", "flag", default=False,
           help="submit it held: it does not start until jobman release (as pueue's stash)"),
    Option("--print-id", "print_id", "flag", default=False,
           help="print the job's id (its UUID) instead of its handle"),
    Option("--json", "json", "flag", default=False,
           help="print {id, handle, name, supervisor_id} as JSON (a list of them for --array or --from)"),
]


def parse(args: list[str], make_parser):
    """(options, command). The command is what follows `--`; without `--`, argparse reads it all."""
    if "--" in args:
        split = args.index("--")
        options, command = args[:split], args[split + 1:]
        ns = fast_parse(options, OPTIONS, max_positionals=0)
        if ns is not None:
            return ns, command
    else:
        options, command = args, None
    import argparse

    p = make_parser("jobman run", DESCRIPTION)
    p.usage = "jobman run [OPTIONS] -- COMMAND [ARG...]"
    add_to_argparse(p, OPTIONS)
    p.add_argument("command", nargs="*", help=argparse.SUPPRESS)
    ns = to_namespace(p.parse_args(options), OPTIONS, "command")
    positionals = ns.positionals  # type: ignore[attr-defined]  # fast_parse's Namespace carries them
    if command is None:
        command = positionals
    elif positionals:
        from ..core.errors import BadInput

        raise BadInput(f"jobman run: unexpected arguments before --: {' '.join(positionals)} "
                       f"(see jobman run --help)")
    return ns, command


def cmd_run(args: list[str]) -> int:
    ns, command = parse(args, parser)
    if ns.from_file is not None and ns.from_file.lower().endswith(".toml"):  # (handoff.pipelines.is_pipeline)
        return _run_pipeline(ns, command)
    if ns.array is not None or ns.from_file is not None:
        from ..handoff import spec

        return _run_batch(ns, spec.batch_from_options(ns, command, os.environ))
    # The supervisor's interpreter starts now, while this process loads the rest and commits the job; it
    # claims nothing before the commit has handed it its credential (jobman.handoff.launch).
    from runkit.core.ids import uuid7

    from ..handoff.launch import Launch

    launch = Launch(uuid7())
    try:
        from ..commands import api
        from ..handoff import spec

        job_spec, deps = spec.from_options(ns, command, os.environ)
        result = api.run(job_spec, deps, launch=launch)
    finally:
        launch.abandon()  # (nothing, once the credential is handed: bad input before the commit ends it here)
    if ns.json:
        deliver(json_text({k: result[k] for k in ("id", "handle", "name", "supervisor_id")}))
    else:
        deliver(f"{result['id'] if ns.print_id else result['handle']}\n")
    return 0


def _run_batch(ns, jobs: list) -> int:
    """`jobman run --array/--from`: each id printed as its job is handed over; a batch stopped part way says
    which jobs were submitted."""
    from ..commands import api

    keys = ("id", "handle", "name", "supervisor_id", "index")
    listed = []

    def emit(result: dict) -> None:
        result["index"] = jobs[result["index"]][0]["batch_index"]  # its array index, or its line's command number
        if ns.json:
            listed.append({k: result[k] for k in keys})
            return
        # Each job as soon as it is handed over: a batch killed part way has named what it submitted (and one whose
        # stdout is gone names them on stderr: the terminal is gone, the jobs are not).
        deliver(f"{result['id'] if ns.print_id else result['handle']}\n")

    outcome = api.run_batch(jobs, emit)
    if ns.json:
        deliver(json_text(listed))
    done, total = outcome["submitted"], len(jobs)
    if done == total:
        return 0
    what = "--array index" if ns.array is not None else "command"
    label = lambda i: f"{what} {jobs[i][0]['batch_index']}"  # noqa: E731
    for index, job_id, message in outcome["failures"]:
        error(f"the job of {label(index)} ({job_id or 'not committed'}) was not submitted: {message}")
    why = "interrupted" if outcome["interrupted"] else "stopped"
    rest = f"; from {label(outcome['stopped_at'])} on, nothing was" if outcome["stopped_at"] is not None else ""
    printed = "ids" if ns.print_id else "handles"
    error(f"{why}: submitted {done} of {total} jobs (their {printed} are printed){rest}")
    return 130 if outcome["interrupted"] else 1


def _run_pipeline(ns, command) -> int:
    """`jobman run --from FILE.toml`: the whole file in one transaction, then a handle (--print-id: id) per job in
    file order; a job whose handoff failed is named on stderr (exit 1)."""
    from ..commands import api
    from ..handoff import pipelines

    items, order = pipelines.pipeline_jobs(ns, command, os.environ)
    handed: dict[str, dict] = {}
    outcome = api.run_batch(items, lambda result: handed.__setitem__(result["id"], result), whole=True)
    shown = [handed[job_id] for job_id in order if job_id in handed]
    if ns.json:
        deliver(json_text([{"id": r["id"], "handle": r["handle"], "name": r["name"], "supervisor_id": r["supervisor_id"],
                            "index": items[r["index"]][0]["batch_index"]} for r in shown]))
    else:
        deliver("".join(f"{r['id'] if ns.print_id else r['handle']}\n" for r in shown))
    for index, job_id, message in outcome["failures"]:
        error(f"job {items[index][0]['name']} of {ns.from_file} ({job_id or 'not committed'}) was not submitted: "
              f"{message}")
    if outcome["submitted"] == len(items):
        return 0
    error(f"{'interrupted' if outcome['interrupted'] else 'stopped'}: submitted {outcome['submitted']} of "
          f"{len(items)} jobs of {ns.from_file}")
    return 130 if outcome["interrupted"] else 1
