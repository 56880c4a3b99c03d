"""A pipeline file: named jobs and the edges between them, in TOML, read the same way by every tool.

    [defaults]                                  # optional: every job's value of a field it does not set
    retries = 1
    [jobs.prepare]
    command = ["sh", "-c", "echo prep"]         # a list (argv), or a string (run by sh -c)
    [jobs.train]
    command = "python train.py"
    after_success = ["prepare"]                 # a job of this file, or an existing job written @REF
    env = { SEED = "1" }

parse() checks what it can without a tool: unknown tables and fields, values of the wrong type or range, an edge
to a name the file does not define (unless it is an external reference: @REF, a UUID, or a number, which the tool
resolves), and cycles. Every error is one line naming the file, the job and the field. It returns plain values:
a tuple of PipelineJob in file order. A tool states the fields it can honour (refuse_unsupported) and submits the
jobs in submission_order(), where each comes after what it depends on.
"""
from .records import record

# name: the table key. argv: the command (a string becomes sh -c STRING). depends: (Dependency, ...) in the order
# written, after_success then after_failure then after. Durations are seconds (float), sizes bytes (int), a field
# not given None. set: the fields the file gave it (its own or [defaults]).
PipelineJob = record("PipelineJob", "name argv depends retries retryable_exit_codes retry_delay retry_backoff "
                                    "retry_max_delay retry_on_timeout timeout kill_after group priority env cwd "
                                    "not_before delay hold log_limit separate_stderr on_finish cores memory "
                                    "accelerators capabilities set")
# ref: a job of the file (its name) or, when external, what the tool resolves (without the @). condition:
# success, failure (any end but success) or end (any end).
Dependency = record("Dependency", "ref condition external")

EDGES = {"after_success": "success", "after_failure": "failure", "after": "end"}
DURATIONS = ("retry_delay", "retry_max_delay", "timeout", "kill_after", "delay")  # given as "90s" or seconds
SIZES = ("log_limit", "memory")  # given as "1GB" or bytes
BACKOFFS = ("constant", "exponential")
MAX_JOBS = 10_000


class PipelineError(ValueError):
    """A pipeline file that cannot be used: str(e) is one line naming the file, the job and the field."""


def _text(value) -> bool:
    return isinstance(value, str)


def _count(low: int, high: int):
    def check(value) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return "must be a whole number"
        return None if low <= value <= high else f"must be from {low} to {high}"
    return check


def _flag(value) -> str | None:
    return None if isinstance(value, bool) else "must be true or false"


def _word(value) -> str | None:
    return None if _text(value) and value.strip() else "must be a non-empty string"


def _words(value) -> str | None:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(_text(v) and v.strip() for v in value):
        return "must be a list of non-empty strings"
    return None


def _duration(value) -> str | None:
    from .durations import parse_duration

    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return "must be a duration (a string such as \"90s\" or \"2h\", or a number of seconds)"
    if isinstance(value, (int, float)):
        return None if 0 <= value < float("inf") else "must be a duration of 0 seconds or more"
    try:
        parse_duration(value)
    except ValueError as e:
        return f"is not a duration: {e}"
    return None


def _size(value) -> str | None:
    from .durations import parse_size

    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return "must be a size (a string such as \"1GB\", or a number of bytes)"
    if isinstance(value, int):
        return None if value >= 0 else "must be a size of 0 bytes or more"
    try:
        parse_size(value)
    except ValueError as e:
        return f"is not a size: {e}"
    return None


def _env(value) -> str | None:
    if not isinstance(value, dict) or not all(_text(k) and k and "=" not in k and _text(v) for k, v in value.items()):
        return "must be a table of NAME = \"value\" strings (no = in a name)"
    return None


def _codes(value) -> str | None:
    if not isinstance(value, list) or not value or any(_count(1, 255)(v) for v in value):
        return "must be a list of exit codes from 1 to 255"
    return None


def _backoff(value) -> str | None:
    return None if value in BACKOFFS else f"must be one of {', '.join(BACKOFFS)}"


def _command(value) -> str | None:
    if _text(value):
        return None if value.strip() else "must not be empty"
    if isinstance(value, list) and value and all(_text(v) for v in value) and value[0]:
        return None
    return "must be a string (run by sh -c) or a non-empty list of strings (argv)"


# Every field a job may have, and how its value is checked. A tool honours a subset (refuse_unsupported).
FIELDS = {
    "command": _command, "after_success": _words, "after_failure": _words, "after": _words,
    "retries": _count(0, 1_000_000), "retryable_exit_codes": _codes, "retry_delay": _duration,
    "retry_backoff": _backoff, "retry_max_delay": _duration, "retry_on_timeout": _flag, "timeout": _duration,
    "kill_after": _duration, "group": _word, "priority": _count(-2**31, 2**31 - 1), "env": _env, "cwd": _word,
    "not_before": _word, "delay": _duration, "hold": _flag, "log_limit": _size, "separate_stderr": _flag,
    "on_finish": _word, "cores": _count(1, 1_000_000), "memory": _size, "accelerators": _count(0, 1_000_000),
    "capabilities": _words,
}


def load(path: str) -> tuple:
    """The jobs of the pipeline file at `path` (parse())."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise PipelineError(f"{path}: cannot read it: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise PipelineError(f"{path}: not UTF-8 text") from None
    return parse(text, path)


def parse(text: str, source: str) -> tuple:
    """The jobs of a pipeline file's text, in file order (source: the file's name, for the errors)."""
    import tomllib

    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PipelineError(f"{source}: not valid TOML: {e}") from None
    unknown = [key for key in document if key not in ("defaults", "jobs")]
    if unknown:
        raise PipelineError(f"{source}: unknown table or key {unknown[0]!r} (a pipeline has [defaults] and [jobs.NAME])")
    defaults = document.get("defaults", {})
    if not isinstance(defaults, dict):
        raise PipelineError(f"{source}: defaults must be a table ([defaults])")
    if "command" in defaults:
        raise PipelineError(f"{source}: defaults: field command belongs to each job, not to [defaults]")
    _check_fields(source, "defaults", defaults)
    tables = document.get("jobs")
    if not isinstance(tables, dict) or not tables:
        raise PipelineError(f"{source}: no job in it (each job is a table [jobs.NAME] with a command)")
    if len(tables) > MAX_JOBS:
        raise PipelineError(f"{source}: {len(tables)} jobs, more than {MAX_JOBS}")
    jobs = tuple(_job(source, name, table, defaults, tables) for name, table in tables.items())
    submission_order(jobs, source)  # refuses a cycle
    return jobs


def _check_fields(source: str, where: str, table: dict) -> None:
    for field, value in table.items():
        check = FIELDS.get(field)
        if check is None:
            raise PipelineError(f"{source}: {where}: field {field} is unknown (fields: {', '.join(FIELDS)})")
        problem = check(value)
        if problem:
            raise PipelineError(f"{source}: {where}: field {field} {problem}")


def is_external(ref: str) -> bool:
    """Whether a dependency names a job outside the file: @REF, a UUID or a number (a handle)."""
    if ref.startswith("@"):
        return True
    compact = ref.replace("-", "")
    return ref.isdigit() or (len(ref) == 36 and len(compact) == 32 and all(c in "0123456789abcdefABCDEF"
                                                                            for c in compact))


def _job(source: str, name, table, defaults: dict, tables: dict):
    from .durations import parse_size

    where = f"job {name}"
    if not isinstance(table, dict):
        raise PipelineError(f"{source}: {where} must be a table ([jobs.{name}])")
    if not name.strip() or not name.isprintable():
        raise PipelineError(f"{source}: job {name!r}: a job's name must be printable and not empty")
    _check_fields(source, where, table)
    if "command" not in table:
        raise PipelineError(f"{source}: {where}: field command is missing (a string, or a list of strings)")
    merged = {**defaults, **table}
    if "env" in defaults and "env" in table:
        merged["env"] = {**defaults["env"], **table["env"]}  # a job's variables are added to the defaults'
    command = merged["command"]
    argv = ("sh", "-c", command) if _text(command) else tuple(command)
    depends = []
    for field, condition in EDGES.items():
        refs = merged.get(field, [])
        for ref in [refs] if _text(refs) else refs:
            external = ref.startswith("@") or (ref not in tables and is_external(ref))  # the file's own first
            if not external and ref not in tables:
                raise PipelineError(f"{source}: {where}: field {field}: no job {ref!r} in this file (an existing "
                                    f"job is written @{ref})")
            if ref == name:
                raise PipelineError(f"{source}: {where}: field {field}: a job cannot depend on itself")
            depends.append(Dependency(ref[1:] if ref.startswith("@") else ref, condition, external))
    values = {field: merged.get(field) for field in PipelineJob._fields
              if field not in ("name", "argv", "depends", "set")}
    for field in DURATIONS:  # as seconds, and sizes as bytes: what every tool takes
        if values[field] is not None:
            values[field] = _seconds(values[field])
    for field in SIZES:
        size = values[field]
        if isinstance(size, str):
            values[field] = parse_size(size)
    values["capabilities"] = _list(merged.get("capabilities"))
    if values["retryable_exit_codes"] is not None:
        values["retryable_exit_codes"] = tuple(values["retryable_exit_codes"])
    return PipelineJob(name=name, argv=argv, depends=tuple(depends), set=frozenset(merged), **values)


def _seconds(value) -> float:
    from .durations import parse_duration

    return parse_duration(value) if _text(value) else float(value)


def _list(value):
    return None if value is None else tuple([value] if _text(value) else value)


def refuse_unsupported(jobs: tuple, supported, tool: str, source: str) -> None:
    """Refuse, in one line, the first job that uses a field `tool` cannot honour (supported: the field names)."""
    for job in jobs:
        for field in FIELDS:
            if field in job.set and field not in supported:
                raise PipelineError(f"{source}: job {job.name}: field {field} is not supported by {tool}")


def submission_order(jobs: tuple, source: str = "pipeline") -> tuple:
    """The jobs in an order where each comes after the jobs of the file it depends on (file order otherwise kept).
    A cycle is a PipelineError naming it."""
    by_name = {job.name: job for job in jobs}
    placed: dict[str, None] = {}
    for job in jobs:
        stack = [(job.name, iter(_inside(job)))]  # the path from `job` down to the one being looked at
        while stack:
            name, rest = stack[-1]
            following = next((ref for ref in rest if ref not in placed), None)
            if following is None:
                stack.pop()
                placed.setdefault(name)
                continue
            path = [n for n, _ in stack]
            if following in path:
                cycle = " -> ".join(path[path.index(following):] + [following])
                raise PipelineError(f"{source}: job {following}: its dependencies make a cycle: {cycle}")
            stack.append((following, iter(_inside(by_name[following]))))
    return tuple(by_name[name] for name in placed)


def _inside(job) -> list[str]:
    return [d.ref for d in job.depends if not d.external]
