"""`jobman run --from pipeline.toml`: the jobs of a pipeline file (runkit.core.pipeline) as jobman specs.

Each job is built as `jobman run` builds one from its options: the options given on the command line apply to
every job (as they do for a --from file of command lines), and each field of the file sets the option of the same
meaning for its job (env adds to --env). Every job is validated before anything is submitted. An edge to a job of
the file becomes an edge to the id chosen for it beforehand; an external one (@REF, a UUID, a handle) is resolved
as --after-success resolves JOB.
"""
from runkit.core import pipeline

from ..core.errors import BadInput

# The fields of a pipeline file jobman honours, and the `jobman run` option (its namespace's name) each one sets.
OPTION_OF = {"retries": "retries", "retryable_exit_codes": "exit_codes", "retry_delay": "retry_delay",
             "retry_backoff": "retry_backoff", "retry_max_delay": "retry_max_delay",
             "retry_on_timeout": "retry_on_timeout", "timeout": "timeout", "kill_after": "kill_after",
             "group": "group", "priority": "priority", "cwd": "cwd", "not_before": "not_before", "delay": "delay",
             "hold": "hold", "log_limit": "log_limit", "separate_stderr": "separate_stderr", "on_finish": "on_finish"}
SUPPORTED = frozenset(OPTION_OF) | {"command", "env", "after_success", "after_failure", "after"}
# A pipeline is committed in one transaction and its supervisors all start at once: more jobs than this is a sweep,
# which --array or a --from file of command lines submits a few at a time.
MAX_PIPELINE = 500


def is_pipeline(path: str) -> bool:
    """Whether a --from FILE is a pipeline file (its name ends in .toml) rather than one command a line."""
    return path.lower().endswith(".toml")


def pipeline_jobs(ns, command, environ) -> tuple[list[tuple], list[str]]:
    """([(spec, dependencies, job id)] in submission order (each after what it depends on), [the job ids in file
    order]) of `jobman run --from FILE.toml`, every job validated."""
    from runkit.core.ids import uuid7

    from . import spec as specs

    source = ns.from_file
    if command:
        raise BadInput(f"--from {source} gives the commands: put none after --")
    if ns.array is not None:
        raise BadInput("--array and --from do not go together: give the commands in FILE, or one command with {}")
    if ns.name is not None:
        raise BadInput(f"--name: the jobs of {source} are named by their tables ([jobs.NAME])")
    try:
        jobs = pipeline.load(source)
        pipeline.refuse_unsupported(jobs, SUPPORTED, "jobman", source)
    except pipeline.PipelineError as e:
        raise BadInput(str(e)) from None
    if len(jobs) > MAX_PIPELINE:
        raise BadInput(f"{source}: {len(jobs)} jobs, more than the {MAX_PIPELINE} a pipeline file takes; submit a "
                       f"sweep with --array, or with --from a file of command lines")
    ids = {job.name: uuid7() for job in jobs}
    position = {job.name: n for n, job in enumerate(jobs, 1)}
    items = []
    for job in pipeline.submission_order(jobs, source):
        one = type(ns)(**dict(vars(ns), array=None, from_file=None, name=job.name))
        for field, option in OPTION_OF.items():
            value = getattr(job, field)
            if value is not None:
                setattr(one, option, list(value) if field == "retryable_exit_codes" else
                        str(value) if field == "log_limit" else value)
        if job.env:
            one.env = [*(ns.env or []), *(f"{k}={v}" for k, v in job.env.items())]
        if any(d.external and d.ref == "last" for d in job.depends):  # (resolved in the transaction: a job of the file)
            raise BadInput(f"{source}: job {job.name}: @last would name whichever job was submitted just before this "
                           f"one; name the job (@NAME, @HANDLE)")
        edges = [(d.ref if d.external else ids[d.ref], d.condition) for d in job.depends]
        one.deps = [*(ns.deps or []), *edges]
        try:
            spec, deps = specs.from_options(one, list(job.argv), environ)
        except BadInput as e:
            raise BadInput(f"{source}: job {job.name}: {e}") from None
        items.append((dict(spec, batch_index=position[job.name]), deps, ids[job.name]))
    return items, [ids[job.name] for job in jobs]
