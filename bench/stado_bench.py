"""stado benchmark: submit latency, claim-to-start latency, and object-store requests per job lifecycle
(submit to terminal) by kind, on the local directory and on SeaweedFS (started here, on 127.0.0.1).

    .venv/bin/python bench/stado_bench.py [--jobs N] [--backends file,s3]

Requests are counted by a wrapper store with the same interface (stado.objectstore.metered.MeteredStore) around the
real backend; the agent runs in this process so that every request it makes is counted. Submit latency
is measured both for the library call and for the `stado submit` command as a subprocess (a bare
`python -c pass` from the same venv is the peer it is compared with). Claim-to-start is read from the
job records: started_at (the process spawned) minus claimed_at (the claim write).
"""
from runkit.core.clock import SYSTEM
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from stado.store import cas  # noqa: E402
from stado.core import keys  # noqa: E402
from stado.queue import submission  # noqa: E402
from stado.agent import Agent, AgentConfig  # noqa: E402
from stado.core.documents import parse_iso  # noqa: E402
from stado.queue.submission import Submission  # noqa: E402
from stado.objectstore.metered import KINDS, MeteredStore  # noqa: E402
from stado.objectstore.connect import open_store  # noqa: E402
from stado.core.spec import JobSpec  # noqa: E402

BIN = Path(sys.executable).parent


def median_ms(values):
    return statistics.median(values) * 1000


def cli_submit_ms(url: str, options: dict, env: dict, tmp: Path, n: int) -> tuple[float, float]:
    config = tmp / "bench.toml"
    lines = ["[store]", f'url = "{url}"'] + [f"{k} = {v!r}".replace("'", '"') for k, v in options.items()]
    config.write_text("\n".join(lines) + "\n")
    run_env = {**os.environ, **env, "STADO_CONFIG": str(config)}
    times, bare = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run([str(BIN / "stado"), "submit", "true"], env=run_env, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append(time.perf_counter() - t0)
    return median_ms(times), median_ms(bare)


def measure(name: str, url: str, options: dict, env: dict, n: int) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix=f"stado-bench-{name}-"))
    store = MeteredStore(open_store(url, options, env=env))
    submit_times = []
    for _ in range(n):
        t0 = time.perf_counter()
        submission.submit(store, [Submission(JobSpec(command="true"))], clock=SYSTEM)
        submit_times.append(time.perf_counter() - t0)
    after_submit = dict(store.counts)
    agent = Agent(store, AgentConfig(work_root=str(tmp / "work"), stado_bin=str(BIN / "stado"), slots=1,
                                     poll_seconds=0.05, until_idle=True, host="bench"), log=lambda line: None)
    t0 = time.perf_counter()
    agent.run()
    drain_s = time.perf_counter() - t0
    total = dict(store.counts)
    finished = [cas.read(store.inner, e.key)[0] for e in store.inner.list(keys.COMPLETED)]
    assert len(finished) == n, f"{len(finished)} of {n} jobs completed"
    claim_to_start = [parse_iso(doc["process"]["started_at"]) - parse_iso(doc["claimed_at"]) for doc in finished]
    # One idle poll: a claim pass over an empty queue.
    store.reset()
    for _ in range(10):
        agent.claim()
    idle = {k: v / 10 for k, v in store.counts.items()}
    idle_prefixes = sorted({prefix for (_, prefix) in store.by_prefix})
    cli_ms, bare_ms = cli_submit_ms(url, options, env, tmp, 10)
    return {
        "backend": name, "jobs": n, "submit_lib_ms": median_ms(submit_times), "submit_cli_ms": cli_ms,
        "python_pass_ms": bare_ms, "claim_to_start_ms": median_ms(claim_to_start),
        "claim_to_start_p95_ms": sorted(claim_to_start)[int(0.95 * (n - 1))] * 1000,
        "drain_jobs_per_s": n / drain_s,
        "per_job_submit": {k: after_submit[k] / n for k in KINDS},
        "per_job_lifecycle": {k: total[k] / n for k in KINDS},
        "idle_poll": idle, "idle_prefixes": idle_prefixes,
    }


def table(results: list[dict]) -> str:
    rows = [("backend", "submit lib ms", "submit CLI ms (python -c pass)", "claim->start ms (p95)", "jobs/s",
             "requests/job PUT GET LIST DELETE", "idle poll")]
    for r in results:
        life = r["per_job_lifecycle"]
        rows.append((r["backend"], f"{r['submit_lib_ms']:.1f}", f"{r['submit_cli_ms']:.0f} ({r['python_pass_ms']:.0f})",
                     f"{r['claim_to_start_ms']:.1f} ({r['claim_to_start_p95_ms']:.1f})", f"{r['drain_jobs_per_s']:.1f}",
                     " ".join(f"{life[k]:.2f}" for k in KINDS),
                     f"{r['idle_poll']['LIST']:.0f} LIST of {','.join(r['idle_prefixes'])}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(" | ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--backends", default="file,s3")
    args = parser.parse_args()
    results = []
    backends = args.backends.split(",")
    if "file" in backends:
        tmp = tempfile.mkdtemp(prefix="stado-bench-store-")
        results.append(measure("file", f"file://{tmp}", {}, {}, args.jobs))
    if "s3" in backends:
        from tests.stado.servers import start_seaweedfs

        server = start_seaweedfs(Path(tempfile.mkdtemp(prefix="stado-bench-weed-")))
        try:
            results.append(measure("seaweedfs (s3)", f"s3://{server.bucket}/bench-{os.getpid()}", server.options,
                                   server.env, args.jobs))
        finally:
            server.stop()
    print(table(results))
    for r in results:
        print(f"{r['backend']}: submit alone costs {r['per_job_submit']}; whole lifecycle {r['per_job_lifecycle']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
