"""`stado submit`'s options: one table, read by runkit.cli.fastargs on the fast path and by argparse for help and errors
(`stado schedule add` takes them too, but --batch and --key)."""
from runkit.cli.cliargs import non_negative, whole
from runkit.cli.fastargs import Option

# `stado submit` runs for every job: its options are a table that runkit.cli.fastargs reads without
# argparse (~20 ms with what it imports); argparse, built from the same table, gives help and errors.
SUBMIT_OPTIONS = [
    Option("--batch", "batch", metavar="FILE", help="one command per line, or a JSON/TOML list of jobs; all or nothing"),
    Option("--name", "name", help="a display name; commands that take an id also take it (in a batch, a template: "
                                   "{n} is each job's number, from 1, e.g. 'sweep-{n}')"),
    Option("--cores", "cores", convert=whole, default=1,
           help="cores reserved (CARGO_BUILD_JOBS, OMP_NUM_THREADS, MKL_NUM_THREADS, OPENBLAS_NUM_THREADS); default 1"),
    Option("--env", "env", "append", metavar="NAME=VALUE",
           help="set a variable in the job's environment (repeatable; `stado status ID` masks secret-looking ones)"),
    Option("--memory", "memory", help="memory the job needs, e.g. 4G"),
    Option("--accelerators", "accelerators", convert=whole, default=0, help="accelerators the job needs"),
    Option("--priority", "priority", convert=whole, default=0,
           help="claim order, -1000 to 1000 (default 0): agents claim the highest first, then the oldest; it never "
                "stops a running job"),
    Option(("--capabilities", "--capability"), "capabilities", "append", metavar="CAP[,CAP]",
           help="capabilities an agent must declare (repeatable)"),
    Option("--provider", "provider", "append", metavar="NAME[,NAME]",
           help="providers allowed to run it (the provider fence; repeatable; default any)"),
    Option("--spot", "spot", default="allow", choices=("allow", "require", "never"), help="spot policy"),
    Option("--cost-cap", "cost_cap", convert=non_negative,
           help="cost cap in US dollars: stopped once its share of its agent's --price-per-hour passes it; not run "
                "on an agent that declares no price (unless --cost-cap-advisory)"),
    Option("--cost-cap-advisory", "cost_cap_advisory", "flag", default=False,
           help="an agent with no price may run it anyway (its cost is not judged there)"),
    Option("--timeout", "timeout", help="stop the job after this long, e.g. 30m"),
    Option("--retries", "retries", convert=whole, default=0, help="more attempts after a failed one"),
    Option("--retryable-exit-code", "retryable_exit_code", "append", convert=whole, metavar="N",
           help="retry only an attempt that exited with N (repeatable; default: any failure)"),
    Option("--retry-delay", "retry_delay", metavar="D",
           help="a retry is not claimed before D after the failed attempt ended, e.g. 30s (default 0)"),
    Option("--retry-backoff", "retry_backoff", metavar="F",
           help="multiply the retry delay by F after each failed attempt (constant = 1, exponential = 2)"),
    Option("--after-success", "after_success", "append", metavar="JOB",
           help="start only after JOB succeeded (repeatable; JOB by id, name or id prefix)"),
    Option("--after-failure", "after_failure", "append", metavar="JOB",
           help="start only after JOB ended any way but succeeded (repeatable)"),
    Option("--after", "after", "append", metavar="JOB", help="start after JOB ended, whatever its outcome (repeatable)"),
    Option("--input", "input", "append", metavar="JOB:NAME",
           help="an artifact of another job, delivered into the work directory (repeatable)"),
    Option("--upload", "upload", "append", metavar="PATH",
           help="a local file, stored with the job and delivered into its work directory (repeatable)"),
    Option("--key", "key", metavar="KEY",
           help="an idempotency key: the same submit again with the same key returns the job it made (exit 0) "
                "instead of making another; the key with another command or flags is refused (exit 2)"),
    Option("--json", "json", "flag", default=False),
]
