"""The options of `jobman run`, declared once, read two ways.

`jobman run` starts for every job, and argparse with what it pulls in (gettext, locale, shutil) costs
it ~15 ms. So well-formed options are read by a small parser over this table, and argparse, built from
the same table, takes over for --help and for anything the small parser does not accept, so every
error message comes from one place.
"""

DESCRIPTION = (
    "Submit COMMAND as a background job and print its id.\n\n"
    "The id is printed once the job's own detached supervisor has claimed it; the command may start\n"
    "later (dependencies, delays, retries and concurrency limits). Closing the terminal or pressing\n"
    "Ctrl-C after the id is committed does not affect the job.\n\n"
    "Windows (settings stored with each job): JOBMAN_CLAIM_WINDOW (10s), JOBMAN_LEASE (15s),\n"
    "JOBMAN_RENEW_INTERVAL (5s), JOBMAN_POLL_INTERVAL (1s, a waiting job's fallback poll).")

DEPENDENCY = {"--after-success": "success", "--after-failure": "failure", "--after": "end"}

# flag, dest, kind (value | append | flag | dep), type (str | int | duration | choice:...), default, metavar, help
OPTIONS = [
    ("--name", "name", "value", "str", None, "NAME", "a display name; commands accept it wherever they take JOB"),
    ("--cwd", "cwd", "value", "str", None, "DIR", "working directory (default: the current one)"),
    ("--env", "env", "append", "str", None, "K=V", "set a variable for the job (repeatable)"),
    ("--env-policy", "env_policy", "value", "str", "inherit", "inherit|clean|allow:A,B",
     "which of this shell's variables the job gets (default inherit: a snapshot taken now)"),
    ("--after-success", "deps", "dep", "str", None, "JOB", "start only after JOB succeeded (repeatable)"),
    ("--after-failure", "deps", "dep", "str", None, "JOB", "start only after JOB ended any way but succeeded"),
    ("--after", "deps", "dep", "str", None, "JOB", "start after JOB ended, whatever its outcome"),
    ("--not-before", "not_before", "value", "str", None, "TIME",
     "do not start before TIME (ISO 8601, HH:MM, or @UNIX_SECONDS)"),
    ("--delay", "delay", "value", "duration", None, "D", "do not start before D from now (e.g. 30s, 5m)"),
    ("--retries", "retries", "value", "int", 0, "N", "up to N more attempts after a failed one"),
    ("--retryable-exit-code", "exit_codes", "append", "int", None, "C",
     "retry only these exit codes (repeatable; default: any non-zero exit)"),
    ("--retry-delay", "retry_delay", "value", "duration", 0.0, "D", "wait D before each retry"),
    ("--retry-backoff", "retry_backoff", "value", "choice:constant,exponential", "constant", None,
     "exponential doubles the delay after each failed attempt"),
    ("--retry-max-delay", "retry_max_delay", "value", "duration", None, "D", "cap of the exponential backoff (default 1h)"),
    ("--retry-on-timeout", "retry_on_timeout", "flag", None, False, None, "also retry an attempt that timed out"),
    ("--timeout", "timeout", "value", "duration", None, "D", "time limit of each attempt"),
    ("--kill-after", "kill_after", "value", "duration", None, "D",
     "SIGKILL this long after SIGTERM, on timeout or cancel (default 10s)"),
    ("--group", "group", "value", "str", "default", "NAME", "concurrency group (default: default, limit = CPUs)"),
    ("--priority", "priority", "value", "int", 0, "N", "higher starts first within its group"),
    ("--log-limit", "log_limit", "value", "str", None, "SIZE",
     "cap each attempt's log, keeping the newest output (default 1GB; 0 = no cap)"),
    ("--separate-stderr", "separate_stderr", "flag", None, False, None, "keep stderr in a log file of its own"),
    ("--json", "json", "flag", None, False, None, "print {id, name, supervisor_id} as JSON"),
]
_BY_FLAG = {o[0]: o for o in OPTIONS}


class Namespace:
    def __init__(self, **values):
        self.__dict__.update(values)


def defaults() -> dict:
    values = {dest: ([] if kind in ("append", "dep") else default) for _, dest, kind, _, default, _, _ in OPTIONS}
    values["exit_codes"] = None
    return values


def _convert(kind: str, text: str):
    if kind == "str":
        return text
    if kind == "int":
        return int(text)
    if kind == "duration":
        from runkit.durations import parse_duration

        return parse_duration(text)
    choices = kind.split(":", 1)[1].split(",")
    if text not in choices:
        raise ValueError(text)
    return text


def fast_parse(options: list[str]) -> Namespace | None:
    """Well-formed options -> a namespace; None for anything else (argparse then says what is wrong)."""
    values = defaults()
    i = 0
    while i < len(options):
        flag, eq, value = options[i].partition("=")
        option = _BY_FLAG.get(flag)
        if option is None:
            return None
        _, dest, kind, typ, _, _, _ = option
        if kind == "flag":
            if eq:
                return None
            values[dest] = True
        else:
            if not eq:
                i += 1
                if i >= len(options):
                    return None
                value = options[i]
            if value.startswith("-"):
                return None
            try:
                converted = _convert(typ, value)
            except ValueError:
                return None
            if kind == "dep":
                values[dest].append((converted, DEPENDENCY[flag]))
            elif kind == "append":
                values[dest] = (values[dest] or []) + [converted]
            else:
                values[dest] = converted
        i += 1
    return Namespace(command=[], **values)


def argparse_parse(options: list[str], make_parser) -> Namespace:
    """The same options through argparse: --help, and one-line errors for what fast_parse refused."""
    import argparse

    p = make_parser("jobman run", DESCRIPTION)
    p.usage = "jobman run [OPTIONS] -- COMMAND [ARG...]"
    for flag, dest, kind, typ, default, metavar, help_text in OPTIONS:
        kwargs = {"dest": dest, "help": help_text}
        if kind == "flag":
            p.add_argument(flag, action="store_true", **kwargs)
            continue
        if metavar:
            kwargs["metavar"] = metavar
        if typ.startswith("choice:"):
            kwargs["choices"] = typ.split(":", 1)[1].split(",")
        elif typ != "str" or kind == "dep":
            kwargs["type"] = _argparse_type(flag, kind, typ)
        if kind in ("append", "dep"):
            kwargs["action"] = "append"
        else:
            kwargs["default"] = default
        p.add_argument(flag, **kwargs)
    p.add_argument("command", nargs="*", help=argparse.SUPPRESS)
    ns = p.parse_args(options)
    values = vars(ns)
    values["deps"] = values.get("deps") or []
    values["env"] = values.get("env") or []
    return Namespace(**values)


def _argparse_type(flag: str, kind: str, typ: str):
    import argparse

    def convert(text: str):
        try:
            value = _convert(typ, text)
        except ValueError as e:
            if typ == "int":
                raise argparse.ArgumentTypeError(f"{flag} takes a whole number, got {text!r}") from None
            raise argparse.ArgumentTypeError(f"{flag}: {e}") from None
        return (value, DEPENDENCY[flag]) if kind == "dep" else value

    return convert


def parse(args: list[str], make_parser) -> tuple[Namespace, list[str] | None]:
    """(options, command). The command is what follows `--` (None if there is no `--`)."""
    if "--" in args:
        split = args.index("--")
        options, command = args[:split], args[split + 1:]
    else:
        options, command = args, None
    ns = fast_parse(options) if command is not None else None
    if ns is None:
        ns = argparse_parse(options, make_parser)
        if command is None:
            command = ns.command
        elif ns.command:
            from .errors import BadInput

            raise BadInput(f"jobman run: unexpected arguments before --: {' '.join(ns.command)} "
                           f"(see jobman run --help)")
    return ns, command
