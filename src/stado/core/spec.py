"""The job spec that travels with every job document (pure: validation and (de)serialisation).

A spec is what `stado submit` was asked to run; `stado job rerun` resubmits it unchanged under a
new id. Everything here raises BadInput with a message fit for the user, before anything is written.
"""
import math

from runkit.core.durations import parse_duration, parse_size
from runkit.core.records import record

from .errors import BadInput

SPOT_POLICIES = ("allow", "require", "never")
MAX_COMMAND_BYTES = 64 * 1024
# Character checks instead of regular expressions: `re` costs every `stado submit` ~5 ms to import.
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_HEX = frozenset("0123456789abcdef")


def _shaped(text: str, rest: str, longest: int) -> bool:
    """An ASCII letter or digit, then up to longest-1 letters, digits or characters of `rest`."""
    return (0 < len(text) <= longest and text[0] in _ALNUM
            and all(c in _ALNUM or c in rest for c in text[1:]))


def _is_name(text: str) -> bool:
    return _shaped(text, "._-", 100)


def _is_token(text: str) -> bool:
    return _shaped(text, "._:=+-", 64)


def _is_uuid_shape(text: str) -> bool:
    parts = text.split("-")
    return [len(p) for p in parts] == [8, 4, 4, 4, 12] and all(c in _HEX for p in parts for c in p)


class InputRef(record("InputRef", "job name given upload size sha256 mode",
                          defaults=(None, False, None, None, None))):
    """A file delivered into this job's work directory before it starts, under `name`: either an
    artifact another job produced (`job` is the producer's canonical id; `given` the name it was given
    by at submission, if it was a name rather than an id: what `stado job rerun --fresh-inputs` resolves again), or
    (`upload`) a local file `stado submit --upload` stored under job `job`'s status prefix, with its
    `size`, `sha256` and `mode` (permission bits). (runkit.core.records: typing.NamedTuple costs a
    submission ~7 ms to import.)"""

    __slots__ = ()

    def to_json(self) -> dict:
        out = {"job": self.job, "name": self.name}
        if self.given is not None:
            out["given"] = self.given
        if self.upload:
            out.update(upload=True, size=self.size, sha256=self.sha256, mode=self.mode)
        return out


def input_from_json(data: dict) -> InputRef:
    return InputRef(data.get("job"), data.get("name"), data.get("given"), data.get("upload", False),
                    data.get("size"), data.get("sha256"), data.get("mode"))


class JobSpec(record("JobSpec", "command name priority capabilities cores memory accelerators providers spot "
                                    "cost_cap timeout retries inputs cost_cap_advisory env after_success "
                                    "after_failure after retryable_exit_codes retry_delay retry_backoff",
                          defaults=(None, 0, (), 1, None, 0, (), "allow", None, None, 0, (), False, (), (), (), (), (),
                                    None, None))):
    """What to run and what it needs. command: str; name: str | None; priority: int; capabilities:
    tuple[str]; cores: int; memory: bytes or None; accelerators: int; providers: tuple[str] (the
    provider fence: empty allows any); spot: allow | require | never; cost_cap: US dollars for the
    whole job or None; timeout: seconds or None; retries: more attempts after a failed one; inputs:
    tuple[InputRef]; cost_cap_advisory: an agent that declares no price may run it anyway (its cost is not
    judged there; an agent with a price still stops it at its cap); env: tuple[(name, value)], sorted by name:
    variables set in the job's environment (`--env K=V`). after_success, after_failure, after: the ids of the jobs
    it depends on (core/dependencies.py); retryable_exit_codes: the exit codes a retry is for (empty: any
    failure); retry_delay: seconds before a retry may be claimed, or None; retry_backoff: the delay's factor for
    each failed attempt before (None: 1)."""

    __slots__ = ()

    def to_json(self) -> dict:
        out = {"command": self.command, "name": self.name, "priority": self.priority,
               "capabilities": list(self.capabilities), "cores": self.cores, "memory": self.memory,
               "accelerators": self.accelerators, "providers": list(self.providers), "spot": self.spot,
               "cost_cap": self.cost_cap, "timeout": self.timeout, "retries": self.retries,
               "inputs": [i.to_json() for i in self.inputs], "cost_cap_advisory": self.cost_cap_advisory}
        # Written only when given: a job without them keeps the very spec (and --key request) it had before.
        if self.env:
            out["env"] = dict(self.env)
        for name in _LATER_LISTS:
            if getattr(self, name):
                out[name] = list(getattr(self, name))
        for name in ("retry_delay", "retry_backoff"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out


_LATER_LISTS = ("after_success", "after_failure", "after", "retryable_exit_codes")


def spec_from_json(data: dict) -> JobSpec:
    """A spec read back from a stored document (validated like a submission)."""
    if not isinstance(data, dict):
        raise BadInput("job spec is not an object")
    inputs = data.get("inputs") or []
    if not isinstance(inputs, list) or not all(isinstance(i, dict) for i in inputs):
        raise BadInput("job spec: inputs must be a list of {job, name}")
    return validate(JobSpec(
        command=data.get("command"), name=data.get("name"), priority=data.get("priority", 0),
        capabilities=tuple(data.get("capabilities") or ()), cores=data.get("cores", 1),
        memory=data.get("memory"), accelerators=data.get("accelerators", 0),
        providers=tuple(data.get("providers") or ()), spot=data.get("spot", "allow"),
        cost_cap=data.get("cost_cap"), timeout=data.get("timeout"), retries=data.get("retries", 0),
        inputs=tuple(input_from_json(i) for i in inputs), cost_cap_advisory=data.get("cost_cap_advisory", False),
        env=env_pairs(data.get("env") or {}),
        **{name: tuple(data.get(name) or ()) for name in _LATER_LISTS},
        retry_delay=data.get("retry_delay"), retry_backoff=data.get("retry_backoff")))


ENV_MASK = "***"


def shown_spec(raw: dict) -> dict:
    """A stored spec as readers show it: the values of secret-looking `env` names (TOKEN, SECRET, PASSWORD, KEY,
    CREDENTIAL, ...) masked. The store keeps them, the agent sets them; no view prints them."""
    env = raw.get("env") if isinstance(raw, dict) else None
    if not isinstance(env, dict):
        return raw
    from runkit.core.redact import is_secret_name

    return dict(raw, env={k: ENV_MASK if is_secret_name(k) and v else v for k, v in env.items()})


def env_pairs(env) -> tuple[tuple[str, str], ...]:
    """A spec's or a batch entry's `env` table -> its (name, value) pairs, sorted; BadInput unless it maps names
    to text."""
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise BadInput("env must be a table of NAME = \"value\" (text values)")
    return tuple(sorted(env.items()))


def validate(spec: JobSpec) -> JobSpec:
    """The spec unchanged if it is valid; else BadInput naming the first problem."""
    if not isinstance(spec.command, str) or not spec.command.strip():
        raise BadInput("empty command: give the shell command to run, e.g. stado submit \"python train.py\"")
    if "\0" in spec.command or len(spec.command.encode(errors="surrogatepass")) > MAX_COMMAND_BYTES:
        raise BadInput(f"command must be text without NUL bytes, at most {MAX_COMMAND_BYTES} bytes")
    if not _utf8(spec.command):
        raise BadInput(f"command {spec.command.encode(errors='surrogateescape')[:60]!r} is not valid UTF-8 text: a "
                       "command is stored as UTF-8 (it may still make such bytes itself, e.g. printf '\\377')")
    if spec.name is not None:
        check_name(spec.name)
    _int(spec.priority, "priority", -1000, 1000, " (higher runs first)")
    _int(spec.cores, "cores", 1, 4096)
    _int(spec.accelerators, "accelerators", 0, 1024)
    _int(spec.retries, "retries", 0, 100)
    if spec.memory is not None and (isinstance(spec.memory, bool) or not isinstance(spec.memory, int)
                                    or not 1 <= spec.memory <= 1 << 50):
        raise BadInput(f"bad memory {spec.memory!r}: give a size from 1 byte to 1 PiB, e.g. 4G or 512M")
    for cap in spec.capabilities:
        _token(cap, "capability")
    for provider in spec.providers:
        _token(provider, "provider")
    if spec.spot not in SPOT_POLICIES:
        raise BadInput(f"bad spot policy {spec.spot!r}: use one of {', '.join(SPOT_POLICIES)}")
    if spec.cost_cap is not None:
        _number(spec.cost_cap, "cost cap", " (US dollars for the job; 0 runs it only on agents priced at $0)")
    if not isinstance(spec.cost_cap_advisory, bool):
        raise BadInput(f"bad cost_cap_advisory {spec.cost_cap_advisory!r}: use true or false")
    if spec.cost_cap_advisory and spec.cost_cap is None:
        raise BadInput("--cost-cap-advisory needs a --cost-cap: say what the cap is (e.g. --cost-cap 5)")
    if spec.timeout is not None:
        _number(spec.timeout, "timeout")
        if spec.timeout <= 0:
            raise BadInput("timeout must be greater than 0 (e.g. --timeout 30m)")
    if not isinstance(spec.env, tuple):
        raise BadInput("env must be a table of NAME = \"value\"")
    for name, value in spec.env:
        check_env(name, value)
    _check_policy(spec)
    seen = set()
    for ref in spec.inputs:
        _check_input(ref)
        if ref.name in seen:
            raise BadInput(f"two inputs are named {ref.name!r}: they would land on the same file in the work directory")
        seen.add(ref.name)
    return spec


def _check_policy(spec: JobSpec) -> None:
    """Dependencies (job ids: names are resolved before a spec is built) and the retry policy."""
    for flag, ids in (("--after-success", spec.after_success), ("--after-failure", spec.after_failure),
                      ("--after", spec.after)):
        for job in ids:
            if not isinstance(job, str) or not _is_uuid_shape(job):
                raise BadInput(f"{flag} {job!r}: the job depended on must be given by id or name")
    for code in spec.retryable_exit_codes:
        _int(code, "--retryable-exit-code", 1, 255, " (an exit status that is a failure)")
    if spec.retry_delay is not None:
        _number(spec.retry_delay, "--retry-delay", " (seconds, or e.g. 30s, 5m)")
    if spec.retry_backoff is not None:
        _number(spec.retry_backoff, "--retry-backoff")
        if not 1 <= spec.retry_backoff <= 100:
            raise BadInput(f"bad --retry-backoff {spec.retry_backoff!r}: give a factor from 1 to 100")


def _check_input(ref: InputRef) -> None:
    if not isinstance(ref.job, str) or not _is_uuid_shape(ref.job):
        raise BadInput(f"input {ref.job}:{ref.name}: the producing job must be given by id or name")
    check_artifact_name(ref.name)
    if ref.given is not None:
        check_name(ref.given)
    if not isinstance(ref.upload, bool):
        raise BadInput(f"input {ref.job}:{ref.name}: 'upload' must be true or false")
    if ref.upload and not (
            isinstance(ref.size, int) and not isinstance(ref.size, bool) and ref.size >= 0
            and isinstance(ref.sha256, str) and len(ref.sha256) == 64 and all(c in _HEX for c in ref.sha256)
            and (ref.mode is None or (isinstance(ref.mode, int) and not isinstance(ref.mode, bool)
                                      and 0 <= ref.mode <= 0o777))):
        raise BadInput(f"uploaded input {ref.name}: needs its size, SHA-256 (64 hex digits) and mode (0..0o777)")


def check_name(name) -> str:
    if not isinstance(name, str) or not _is_name(name) or _is_uuid_shape(name):
        raise BadInput(f"bad job name {name!r}: use 1-100 letters, digits, '.', '_' or '-', starting with a letter "
                       "or digit (and not shaped like a job id)")
    return name


def check_artifact_name(name) -> str:
    """An artifact name is one path segment: nothing that could climb out of a directory."""
    from .errors import UnsafeArtifactName

    if (not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name
            or "\0" in name or not _utf8(name) or len(name.encode()) > 255 or name != name.strip()):
        raise UnsafeArtifactName(f"unsafe artifact name {name!r}: a name is one file name, without '/', "
                                 "'\\', NUL or surrounding spaces, and not '.' or '..'")
    return name


def _utf8(text: str) -> bool:
    """False for text holding lone surrogates (bytes that were not UTF-8, smuggled in by the OS or a JSON escape)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def parse_input(text: str) -> tuple[str, str]:
    """'JOB:NAME' -> (JOB, NAME); JOB is an id or a display name, resolved by the caller."""
    job, sep, name = text.rpartition(":")
    if not sep or not job or not name:
        raise BadInput(f"bad input {text!r}: use --input JOB:NAME (a job id or name, and an artifact it produced)")
    check_artifact_name(name)
    return job, name


# Set by the agent for every job: a job's own --env cannot replace them (the job's calls back to stado need them).
AGENT_ONLY_ENV = ("STADO_BIN", "WC_JOB_ID", "WC_JOB_STARTED_AT", "WC_ARTIFACT_INPUTS_JSON", "WC_ARTIFACT_INPUTS_FILE")
_ENV_FIRST = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")


def parse_env(text: str) -> tuple[str, str]:
    """'NAME=VALUE' (`--env`) -> (NAME, VALUE); the value may be empty, and may hold '='."""
    name, sep, value = text.partition("=")
    if not sep:
        raise BadInput(f"bad --env {text!r}: use --env NAME=VALUE (no '=' in it)")
    check_env(name, value)
    return name, value


def check_env(name, value) -> None:
    if not isinstance(name, str) or not name:
        raise BadInput("bad --env: empty variable name; use --env NAME=VALUE")
    if name[0] not in _ENV_FIRST or not all(c in _ENV_FIRST or c.isdigit() and c.isascii() for c in name) \
            or len(name) > 255:
        raise BadInput(f"bad --env name {name!r}: use letters, digits and '_' (not starting with a digit)")
    if name in AGENT_ONLY_ENV:
        raise BadInput(f"--env {name}: the agent sets {name} for every job; choose another name")
    if not isinstance(value, str) or "\0" in value or not _utf8(value) or len(value.encode()) > MAX_COMMAND_BYTES:
        raise BadInput(f"bad --env {name}: a value is UTF-8 text without NUL bytes, at most {MAX_COMMAND_BYTES} bytes")


def parse_timeout(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as e:
        raise BadInput(f"bad --timeout: {e}") from None


def parse_retry_delay(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as e:
        raise BadInput(f"bad --retry-delay: {e}") from None


def parse_memory(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as e:
        raise BadInput(f"bad --memory: {e}") from None


def parse_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def with_inputs(spec: JobSpec, inputs: tuple[InputRef, ...]) -> JobSpec:
    return spec._replace(inputs=inputs)


def _int(value, what: str, low: int, high: int, note: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadInput(f"bad {what} {value!r}: use a whole number from {low} to {high}{note}")


def _number(value, what: str, note: str = "") -> None:
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or value < 0):
        raise BadInput(f"bad {what} {value!r}: use a finite number >= 0{note}")


def check_token(value, what: str) -> str:
    """A capability or provider name: BadInput unless it is letters, digits and . _ : = + - (at most 64)."""
    if not isinstance(value, str) or not _is_token(value):
        raise BadInput(f"bad {what} {value!r}: use letters, digits and . _ : = + - (at most 64)")
    return value


_token = check_token
