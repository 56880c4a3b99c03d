"""The immutable job specification: resolved once, at submission, from the command line and the
submitter's environment. The supervisor reads it back and never reconstructs policy from argv.
"""
import os

from runkit.system.proc import which

from ..core.errors import BadInput

SPEC_VERSION = 1
MAX_BATCH = 100_000  # jobs of one --from file (jobman.cli.run.MAX_BATCH bounds --array)
DEFAULT_KILL_AFTER = 10.0
DEFAULT_LOG_LIMIT = 1024 * 1024 * 1024  # per attempt and stream; guards the disk against runaway output
DEFAULT_MAX_RETRY_DELAY = 3600.0

# The handoff's claim window and the supervisor's lease and renewal windows: settings stored with each job,
# overridable for tests (the suite runs them at fractions of a second; a few tests keep these defaults).
# The fallback poll of a waiting job is long: doorbells wake waiters in time, the poll only guarantees
# progress if a ring is lost (and it is made at a lease renewal, so it costs no wake-up of its own).
WINDOW_DEFAULTS = {"claim": 10.0, "lease": 15.0, "renew": 5.0, "poll": 30.0}
WINDOW_ENV = {"claim": "JOBMAN_CLAIM_WINDOW", "lease": "JOBMAN_LEASE", "renew": "JOBMAN_RENEW_INTERVAL",
              "poll": "JOBMAN_POLL_INTERVAL"}


def windows_from_env(environ) -> dict:
    """Claim window, lease, renewal and fallback-poll intervals in seconds."""
    from runkit.core.durations import parse_duration

    windows = dict(WINDOW_DEFAULTS)
    for key, var in WINDOW_ENV.items():
        raw = environ.get(var)
        if raw:
            try:
                windows[key] = parse_duration(raw)
            except ValueError as e:
                raise BadInput(f"{var}: {e}") from None
            if windows[key] <= 0:
                raise BadInput(f"{var} must be greater than zero")
    if windows["renew"] >= windows["lease"]:
        raise BadInput(f"{WINDOW_ENV['renew']} ({windows['renew']}s) must be shorter than "
                       f"{WINDOW_ENV['lease']} ({windows['lease']}s)")
    return windows


def parse_env_pairs(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name or "\0" in pair or not _valid_env_name(name):
            raise BadInput(f"malformed --env {pair!r}: use --env NAME=VALUE with a name of letters, digits and _")
        env[name] = value
    return env


def _valid_env_name(name: str) -> bool:
    return (name[0].isalpha() or name[0] == "_") and all(c.isalnum() or c == "_" for c in name) and name.isascii()


def parse_env_policy(text: str) -> tuple[str, list[str]]:
    if text in ("inherit", "clean"):
        return text, []
    if text.startswith("allow:"):
        names = [n for n in text[6:].split(",") if n]
        if names and all(_valid_env_name(n) for n in names):
            return "allow", names
    raise BadInput(f"malformed --env-policy {text!r}: use inherit, clean or allow:NAME,NAME")


def resolve_environment(policy: str, allowed: list[str], overrides: dict[str, str], environ) -> dict[str, str]:
    if policy == "inherit":
        env = dict(environ)
    elif policy == "clean":
        env = {}
    else:
        env = {name: environ[name] for name in allowed if name in environ}
    env.update(overrides)
    return env


def resolve_command(argv: list[str], cwd: str, env: dict[str, str]) -> str:
    """The executable to start: a name with a '/' is taken relative to the job's cwd (it may be made
    by an earlier job); a bare name must be found on the job's PATH now."""
    if not argv or not argv[0]:
        raise BadInput("no command given: put the command after --, as in: jobman run -- COMMAND [ARG...]")
    program = argv[0]
    if "/" in program:
        return os.path.normpath(os.path.join(cwd, program))
    found = which(program, env.get("PATH", os.defpath))
    if found is None:
        raise BadInput(f"command not found: {program!r} is not on the job's PATH; give a path or fix PATH")
    return found


def resolve_cwd(cwd: str | None) -> str:
    if cwd is not None:
        if not cwd:
            raise BadInput("--cwd is empty; give a directory (or leave --cwd out for the current one)")
    path = os.path.abspath(cwd) if cwd else os.getcwd()
    if not os.path.isdir(path):
        raise BadInput(f"working directory {cwd!r} does not exist or is not a directory; pass an existing --cwd")
    return path


def build(*, argv: list[str], cwd: str | None, env_policy: str, env_pairs: list[str], environ, name: str | None,
          group: str, priority: int, not_before: float | None, retry: dict, timeout: float | None,
          kill_after: float, log_limit: int, separate_stderr: bool, windows: dict,
          on_finish: str | None = None) -> dict:
    """Validate and resolve everything except dependencies (resolved inside the submit transaction)."""
    if name is not None:
        check_name(name)
    check_group_name(group, "--group")
    if on_finish is not None:
        check_text("--on-finish", on_finish)
        if not on_finish.strip() or "\0" in on_finish:
            raise BadInput("--on-finish is empty: give a shell command, e.g. --on-finish 'notify-send done'")
    policy, allowed = parse_env_policy(env_policy)
    overrides = parse_env_pairs(env_pairs)
    workdir = resolve_cwd(cwd)
    env = resolve_environment(policy, allowed, overrides, environ)
    executable = resolve_command(argv, workdir, env)
    umask = os.umask(0)
    os.umask(umask)
    return {
        "v": SPEC_VERSION,
        "argv": list(argv),
        "executable": executable,
        "cwd": workdir,
        "env_policy": env_policy,
        "env_overrides": overrides,
        "env": env,
        "umask": umask,
        "name": name,
        "dependencies": [],
        "not_before": not_before,
        "retry": retry,
        "timeout": timeout,
        "kill_after": kill_after,
        "log": {"limit": log_limit, "separate_stderr": separate_stderr},
        "group": group,
        "priority": priority,
        "windows": windows,
        **({"on_finish": on_finish} if on_finish is not None else {}),
    }


def check_name(name: str) -> None:
    check_text("--name", name)
    if not name or name.strip() != name or len(name) > 200 or any(_is_control(c) for c in name):
        raise BadInput(f"bad --name {name!r}: use a non-empty name of printable characters, without leading "
                       f"or trailing spaces")
    if name == "last":
        raise BadInput("bad --name 'last': `last` names the newest job wherever a command takes JOB; "
                       "choose another name")
    if name.isascii() and name.isdigit():
        raise BadInput(f"bad --name {name!r}: a name of digits only would read as a job's handle; "
                       f"add a letter (e.g. --name job-{name})")


def check_text(flag: str, text: str) -> None:
    """Refuse text that is not valid UTF-8 (the shell passed bytes Python could only smuggle through)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        raise BadInput(f"{flag} {text!r} is not valid UTF-8; jobman stores names and paths as text") from None


def _is_control(c: str) -> bool:
    return c < " " or "\x7f" <= c <= "\x9f"


def check_group_name(name: str, what: str = "group name") -> None:
    if not name or not all(c.isascii() and (c.isalnum() or c in "-_.") for c in name):
        raise BadInput(f"bad {what} {name!r}: use letters, digits, '-', '_' or '.'")


def min_log_limit(environ) -> int:
    """Two blocks of the filesystem holding the logs: the cap is kept by whole blocks (runkit.system.logcap), so a
    smaller one could not be kept exactly."""
    from ..core.home import Home

    path: str = Home.from_environ(environ)
    while path and not os.path.exists(path):
        path = os.path.dirname(path)
    try:
        block = os.statvfs(path or "/").f_bsize
    except OSError:
        block = 4096
    return 2 * max(block, 4096)


def check_log_limit(text: str, limit: int, environ) -> None:
    if limit == 0:
        number = text.strip().rstrip("bBkKmMgGiI").strip()
        try:
            exact_zero = float(number) == 0
        except ValueError:
            exact_zero = False
        if not exact_zero:
            raise BadInput(f"--log-limit {text!r} rounds to 0 bytes, which means no cap; give at least "
                           f"{min_log_limit(environ)} bytes, or 0 for no cap")
    elif limit < (smallest := min_log_limit(environ)):
        raise BadInput(f"--log-limit {text!r} is below {smallest} bytes (two filesystem blocks, the unit the cap is "
                       f"kept in); give at least {smallest // 1024}K, or 0 for no cap")


def default_retry() -> dict:
    return {"retries": 0, "exit_codes": None, "delay": 0.0, "backoff": "constant",
            "max_delay": DEFAULT_MAX_RETRY_DELAY, "on_timeout": False}


def from_options(ns, command: list[str], environ) -> tuple[dict, list]:
    """The spec and the dependencies of `jobman run`, from its options (jobman.cli.run) and command."""
    import time

    from runkit.core.durations import parse_size, parse_time

    if not command:
        raise BadInput("no command given: put the command after --, as in: jobman run -- COMMAND [ARG...]")
    if getattr(ns, "array", None) is not None or getattr(ns, "from_file", None) is not None:
        raise BadInput("--array and --from make several jobs: use batch_from_options")
    now = time.time()
    not_before = None
    if ns.not_before is not None:
        try:
            not_before = parse_time(ns.not_before, now)
        except ValueError as e:
            raise BadInput(f"--not-before: {e}") from None
    if ns.delay is not None:
        not_before = max(not_before or 0.0, now + ns.delay)
    if ns.timeout is not None and ns.timeout <= 0:
        raise BadInput("--timeout must be greater than zero")
    log_limit = DEFAULT_LOG_LIMIT
    if ns.log_limit is not None:
        try:
            log_limit = parse_size(ns.log_limit)
        except ValueError as e:
            raise BadInput(f"--log-limit: {e}") from None
        check_log_limit(ns.log_limit, log_limit, environ)
    retry = default_retry()
    retry.update(retries=ns.retries, exit_codes=sorted(set(ns.exit_codes)) if ns.exit_codes else None,
                 delay=ns.retry_delay, backoff=ns.retry_backoff, on_timeout=ns.retry_on_timeout)
    if ns.retry_max_delay is not None:
        retry["max_delay"] = ns.retry_max_delay
    spec = build(
        argv=command, cwd=ns.cwd, env_policy=ns.env_policy, env_pairs=ns.env, environ=environ, name=ns.name,
        group=ns.group, priority=ns.priority, not_before=not_before, retry=retry, timeout=ns.timeout,
        kill_after=DEFAULT_KILL_AFTER if ns.kill_after is None else ns.kill_after, log_limit=log_limit,
        separate_stderr=ns.separate_stderr, windows=windows_from_env(environ), on_finish=ns.on_finish)
    if getattr(ns, "hold", False):
        spec["hold"] = True  # how it is submitted, taken out before the spec is stored (jobman.store.transitions)
    return spec, list(ns.deps or [])


def batch_from_options(ns, command: list[str], environ) -> list[tuple[dict, list]]:
    """The jobs of `jobman run --array SPEC -- COMMAND` or `jobman run --from FILE`: [(spec, dependencies)],
    every one validated before any is submitted (a bad line or a command not found refuses the batch)."""
    if ns.array is not None and ns.from_file is not None:
        raise BadInput("--array and --from do not go together: give the commands in FILE, or one command with {}")
    if ns.from_file is not None:
        if command:
            raise BadInput(f"--from {ns.from_file} gives the commands: put none after --")
        commands: list = [(n, argv, {}) for n, argv in enumerate(read_commands(ns.from_file), 1)]
        where = lambda n: f"--from {ns.from_file}, command {n}"  # noqa: E731
    else:
        if not command:
            raise BadInput("no command given: put the command after --, as in: jobman run --array 1-10 -- CMD {}")
        commands = [(i, [fill_index(word, i) for word in command], {"JOBMAN_ARRAY_INDEX": str(i)})
                    for i in ns.array]
        where = lambda i: f"--array index {i}"  # noqa: E731
    name = ns.name
    one = type(ns)(**dict(vars(ns), array=None, from_file=None, name=None))  # the options every job shares
    try:
        base, deps = from_options(one, commands[0][1], environ)
    except BadInput as e:
        raise BadInput(f"{where(commands[0][0])}: {e}") from None
    jobs, found = [], {}
    for n, argv, extra in commands:
        try:
            key = argv[0] if argv else ""
            if key not in found:
                found[key] = resolve_command(argv, base["cwd"], base["env"])
            job_name = None
            if name is not None:
                job_name = fill_index(name, n) if "{}" in name.replace("{{}}", "") else f"{name}-{n}"
                check_name(job_name)
        except BadInput as e:
            raise BadInput(f"{where(n)}: {e}") from None
        env = dict(base["env"], **extra) if extra else base["env"]
        jobs.append((dict(base, argv=list(argv), executable=found[key], name=job_name, env=env, batch_index=n), deps))
    return jobs


def fill_index(word: str, index: int) -> str:
    """A word of an --array command (or its --name) for one index: each {} becomes the index, and {{}} a literal {}
    (as in format strings), so that `python -c 'd = {{}}'` keeps its braces."""
    return "{}".join(part.replace("{}", str(index)) for part in word.split("{{}}"))


def read_commands(path: str) -> list[list[str]]:
    """The commands of a --from file: one per line in shell words (shlex), blank lines and comments skipped."""
    import shlex
    import sys

    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
    except OSError as e:
        raise BadInput(f"--from {path}: cannot read it: {e.strerror}") from None
    except UnicodeDecodeError:
        raise BadInput(f"--from {path}: not UTF-8 text") from None
    commands = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            words = shlex.split(line, comments=True)
        except ValueError as e:
            raise BadInput(f"--from {path} line {number}: {e} (lines are commands in shell words)") from None
        if words:
            commands.append(words)
    if not commands:
        raise BadInput(f"--from {path}: no command in it (one per line; blank lines and # comments are skipped)")
    if len(commands) > MAX_BATCH:
        raise BadInput(f"--from {path}: {len(commands)} commands, more than {MAX_BATCH}; submit them in parts")
    return commands
