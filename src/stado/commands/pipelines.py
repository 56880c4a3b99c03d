"""`stado submit --batch pipeline.toml`: a pipeline file (runkit.core.pipeline, the one `jobman run --from` reads)
as a batch's entries, so one file runs on the laptop and on the fleet with the same meaning for every field both
tools honour. A field stado cannot honour (a jobman group, a working directory, a log cap, ...) is refused in one
line and nothing is submitted.

Each job becomes an entry named by its table, in an order where each comes after the jobs of the file it depends
on (a batch entry names only earlier entries); an edge to a job outside the file (`@REF`) names that job as
`stado submit --after-success REF` would.
"""
from runkit.core import pipeline

from ..core.errors import BadInput

# The fields of a pipeline file stado honours, each the batch entry's field of the same name.
SUPPORTED = frozenset({"command", "after_success", "after_failure", "after", "retries", "retryable_exit_codes",
                       "retry_delay", "retry_backoff", "timeout", "priority", "env", "cores", "memory",
                       "accelerators", "capabilities"})
CONDITION_FIELD = {"success": "after_success", "failure": "after_failure", "end": "after"}
_PLAIN = ("retries", "retry_delay", "retry_backoff", "timeout", "priority", "cores", "memory", "accelerators")


def is_pipeline(document: dict) -> bool:
    """Whether a parsed TOML batch is a pipeline file: its jobs are [jobs.NAME] tables, not [[job]] entries."""
    jobs = document.get("jobs")
    return isinstance(jobs, dict) and "job" not in document


def entries(text: str, source: str) -> list[tuple[str, dict]]:
    """(where, entry) of every job of the pipeline file, dependencies first; BadInput for a file that cannot be
    used, or a field stado cannot honour."""
    try:
        jobs = pipeline.parse(text, source)
        pipeline.refuse_unsupported(jobs, SUPPORTED, "stado", source)
        ordered = pipeline.submission_order(jobs, source)
    except pipeline.PipelineError as e:
        raise BadInput(f"{e}; nothing was submitted") from None
    return [(f"job {job.name}", entry(job)) for job in ordered]


def entry(job) -> dict:
    """One pipeline job as a batch entry."""
    out: dict = {"name": job.name, "command": command_text(job.argv)}
    for dependency in job.depends:
        out.setdefault(CONDITION_FIELD[dependency.condition], []).append(dependency.ref)
    for field in _PLAIN:
        value = getattr(job, field)
        if value is not None:
            out[field] = value
    if job.retryable_exit_codes:
        out["retryable_exit_codes"] = list(job.retryable_exit_codes)
    if job.capabilities:
        out["capabilities"] = list(job.capabilities)
    if job.env:
        out["env"] = dict(job.env)
    return out


def command_text(argv) -> str:
    """The shell command stado runs (with /bin/sh -c) for a pipeline job's argv: a string command as written, a
    list quoted word by word."""
    argv = list(argv)
    if len(argv) == 3 and argv[:2] == ["sh", "-c"]:
        return argv[2]
    import shlex

    return shlex.join(argv)
