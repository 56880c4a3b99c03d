"""Turning command-line flags and batch files into submissions (validated before anything is written)."""
import os

from ..core.brief import brief
from ..core.errors import BadInput
from ..queue.submission import Submission
from ..queue.submitkeys import check_key
from ..core.dependencies import CONDITIONS, parse_backoff
from ..core.spec import (JobSpec, check_name, env_pairs, parse_env, parse_input, parse_list, parse_memory,
                         parse_retry_delay, parse_timeout, validate)

FIELDS = ("command", "name", "cores", "memory", "accelerators", "priority", "capabilities", "providers", "provider",
          "spot", "cost_cap", "cost_cap_advisory", "timeout", "retries", "inputs", "key", "env", "retryable_exit_codes",
          "retry_delay", "retry_backoff") + CONDITIONS
NUMBER = "{n}"  # in a batch's --name: each job's number in the file, from 1


def submission_from_args(args, command: str) -> Submission:
    template = args.name if getattr(args, "batch", None) is not None and NUMBER in (args.name or "") else None
    spec = JobSpec(
        command=command, name=None if template else args.name, priority=args.priority,
        capabilities=tuple(c for v in args.capabilities for c in parse_list(v)), cores=args.cores,
        memory=parse_memory(args.memory) if args.memory else None, accelerators=args.accelerators,
        providers=tuple(p for v in args.provider for p in parse_list(v)), spot=args.spot, cost_cap=args.cost_cap,
        timeout=parse_timeout(args.timeout) if args.timeout else None, retries=args.retries,
        cost_cap_advisory=bool(getattr(args, "cost_cap_advisory", False)),
        env=tuple(sorted(dict(parse_env(text) for text in getattr(args, "env", None) or ()).items())),
        retryable_exit_codes=tuple(getattr(args, "retryable_exit_code", None) or ()),
        retry_delay=parse_retry_delay(args.retry_delay) if getattr(args, "retry_delay", None) else None,
        retry_backoff=parse_backoff(args.retry_backoff) if getattr(args, "retry_backoff", None) else None)
    if spec.name is not None:
        check_name(spec.name)
    inputs = tuple(parse_input(text) for text in args.input)
    validate(spec)
    if template is not None:
        spec = spec._replace(name=template)  # a batch's template: each job's name is checked once numbered
    key = getattr(args, "key", None)
    after = tuple((condition, selector) for condition in CONDITIONS for selector in getattr(args, condition, None) or ())
    return Submission(spec, inputs, tuple(getattr(args, "upload", None) or ()), None if key is None else check_key(key),
                      after)


def read_batch(path: str, defaults: Submission) -> list[Submission]:
    """Every job in the file, or BadInput naming the first bad entry (then nothing is submitted).

    The format: a file named .json is JSON and one named .toml is TOML; any other file is JSON or TOML
    when its content parses as such (a JSON list or object; TOML with [[job]] tables), else one command
    per line, so a shell line that starts with '[' or '{' stays a command.

    The submit flags are defaults for every entry: an entry's own field wins (its `inputs` replace the
    --input flags; --upload files go to every job, uploaded once). --name names the one job of a one-entry batch; with more entries it is refused."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise BadInput(f"cannot read batch file {path}: {e.strerror}") from None
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise BadInput(f"batch file {path} is not UTF-8 text") from None
    ext = os.path.splitext(path)[1].lower()
    if ext == ".toml":
        entries = _toml_entries(path, text)
    elif ext == ".json":
        entries = _json_entries(path, text)
    else:
        entries = _sniffed_entries(path, text)
    if not entries:
        raise BadInput(f"batch file {path} holds no jobs: one command per line, or a JSON/TOML list of jobs")
    template = defaults.spec.name if defaults.spec.name is not None and NUMBER in defaults.spec.name else None
    if template is None and defaults.spec.name is not None and len(entries) > 1:
        raise BadInput(f"--name names one job, but batch file {path} holds {len(entries)}: give a template with "
                       f"{NUMBER} (e.g. --name 'sweep-{NUMBER}'), or each job its name in a JSON or TOML batch (the "
                       "name field); nothing was submitted")
    if defaults.key is not None and len(entries) > 1:
        raise BadInput(f"--key names one job, but batch file {path} holds {len(entries)}: give each job its key in "
                       "a JSON or TOML batch (the key field) instead; nothing was submitted")
    out = []
    for n, (where, entry) in enumerate(entries, 1):
        try:
            named = defaults if template is None else defaults._replace(
                spec=defaults.spec._replace(name=name_template(template, n)))
            out.append(_entry(entry, named))
        except BadInput as e:
            raise BadInput(f"batch file {path}, {where}: {e}; nothing was submitted") from None
    return out


def name_template(template: str, n: int) -> str:
    """A batch's --name for its n-th job: {n} replaced by n (every other character kept), checked as a name."""
    name = template.replace(NUMBER, str(n))
    try:
        return check_name(name)
    except BadInput:
        raise BadInput(f"bad --name template {template!r}: it makes {name!r}, and a job name is 1-100 letters, "
                       f"digits, '.', '_' or '-' ({NUMBER} is the job's number)") from None


def _line_entries(text: str) -> list:
    return [(f"line {n}", line.strip()) for n, line in enumerate(text.splitlines(), 1)
            if line.strip() and not line.lstrip().startswith("#")]


def _sniffed_entries(path: str, text: str) -> list:
    """JSON or TOML if the content parses as such, else lines."""
    if text.lstrip().startswith(("[", "{")):
        try:
            return _json_entries(path, text)
        except BadInput:
            pass
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        data = None
    if isinstance(data, dict) and ("job" in data or "jobs" in data):
        return _toml_entries(path, text)
    return _line_entries(text)


def _json_entries(path: str, text: str) -> list:
    try:
        import json

        data = json.loads(text)
    except ValueError as e:
        raise BadInput(f"batch file {path} is not valid JSON ({e})") from None
    if isinstance(data, dict):
        data = data.get("jobs")
    if not isinstance(data, list):
        raise BadInput(f"batch file {path}: expected a JSON list of jobs (or {{\"jobs\": [...]}})")
    return [(f"entry {n}", e) for n, e in enumerate(data, 1)]


def _toml_entries(path: str, text: str) -> list:
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BadInput(f"batch file {path} is not valid TOML ({e})") from None
    from .pipelines import entries, is_pipeline

    if is_pipeline(data):  # [jobs.NAME] tables: a pipeline file, the one jobman run --from reads
        return entries(text, path)
    jobs = data.get("job", data.get("jobs"))
    if not isinstance(jobs, list):
        raise BadInput(f"batch file {path}: expected [[job]] tables (or jobs = [...])")
    return [(f"job {n}", e) for n, e in enumerate(jobs, 1)]


def _strings(value, key: str) -> tuple[str, ...]:
    """A field that takes 'a,b' or a list of strings."""
    if isinstance(value, str):
        return parse_list(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value if v.strip())
    raise BadInput(brief(f"{key} must be a string \"a,b\" or a list of strings, not {value!r}", 200))


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _entry(entry, defaults: Submission) -> Submission:
    if isinstance(entry, str):
        return Submission(validate(defaults.spec._replace(command=entry)), defaults.inputs, defaults.uploads,
                          defaults.key, defaults.after)
    if not isinstance(entry, dict):
        raise BadInput("each job is a command string or a table/object with a command")
    unknown = sorted(set(entry) - set(FIELDS))
    if unknown:
        raise BadInput(f"unknown field(s) {', '.join(unknown)}: use {', '.join(FIELDS)}")
    for key in ("command", "name", "spot", "key"):
        if key in entry and not isinstance(entry[key], str) and not (key in ("name", "key") and entry[key] is None):
            raise BadInput(brief(f"{key} must be text, not {entry[key]!r}", 200))
    for key in ("memory", "timeout"):
        if key in entry and entry[key] is not None and not isinstance(entry[key], str) and not _number(entry[key]):
            raise BadInput(brief(f"{key} must be text such as \"4G\" / \"30m\" or a number, not {entry[key]!r}", 200))
    changes = {}
    for key in ("command", "name", "cores", "accelerators", "priority", "spot", "cost_cap", "cost_cap_advisory",
                "retries"):
        if key in entry:
            changes[key] = entry[key]
    if "memory" in entry:
        changes["memory"] = parse_memory(entry["memory"]) if isinstance(entry["memory"], str) else entry["memory"]
    if "timeout" in entry:
        changes["timeout"] = parse_timeout(entry["timeout"]) if isinstance(entry["timeout"], str) else entry["timeout"]
    changes.update(_retry_policy(entry))
    for key, field in (("capabilities", "capabilities"), ("providers", "providers"), ("provider", "providers")):
        if key in entry:
            changes[field] = _strings(entry[key], key)
    if "env" in entry:  # over the --env flags: a name both set takes the entry's value
        changes["env"] = tuple(sorted({**dict(defaults.spec.env), **dict(env_pairs(entry["env"]))}.items()))
    spec = validate(defaults.spec._replace(**changes))
    key = check_key(entry["key"]) if entry.get("key") is not None else defaults.key
    after = _after(entry, defaults.after)
    if "inputs" not in entry:
        return Submission(spec, defaults.inputs, defaults.uploads, key, after)
    inputs = entry["inputs"]
    if not isinstance(inputs, list) or not all(isinstance(i, str) for i in inputs):
        raise BadInput(brief(f"inputs must be a list of \"JOB:NAME\" strings, not {inputs!r}", 200))
    return Submission(spec, tuple(parse_input(i) for i in inputs), defaults.uploads, key, after)


def _after(entry: dict, defaults: tuple) -> tuple:
    """The entry's dependencies, (condition, job selector) pairs: its own fields (a job name or id, or a list of
    them: jobs earlier in the batch by name, or jobs already submitted) replace the flags' when it has any."""
    if not any(condition in entry for condition in CONDITIONS):
        return defaults
    after = []
    for condition in CONDITIONS:
        for selector in _strings(entry.get(condition, []), condition):
            after.append((condition, selector))
    return tuple(after)


def _retry_policy(entry: dict) -> dict:
    changes: dict = {}
    if "retryable_exit_codes" in entry:
        codes = entry["retryable_exit_codes"]
        codes = [codes] if isinstance(codes, int) and not isinstance(codes, bool) else codes
        if not isinstance(codes, list) or not all(isinstance(c, int) and not isinstance(c, bool) for c in codes):
            raise BadInput(brief(f"retryable_exit_codes must be a list of whole numbers, not {codes!r}", 200))
        changes["retryable_exit_codes"] = tuple(codes)
    if "retry_delay" in entry:
        delay = entry["retry_delay"]
        if delay is not None and not isinstance(delay, str) and not _number(delay):
            raise BadInput(brief(f"retry_delay must be text such as \"30s\" or a number, not {delay!r}", 200))
        changes["retry_delay"] = parse_retry_delay(delay) if isinstance(delay, str) else delay
    if "retry_backoff" in entry:
        factor = entry["retry_backoff"]
        if factor is not None and not isinstance(factor, str) and not _number(factor):
            raise BadInput(brief(f"retry_backoff must be a number or constant/exponential, not {factor!r}", 200))
        changes["retry_backoff"] = parse_backoff(factor) if isinstance(factor, str) else factor
    return changes
