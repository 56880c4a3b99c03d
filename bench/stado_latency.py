"""stado: from `stado submit` to the start of the job's command, with an idle `stado agent` (real processes), on the
local directory (a submit rings the agent through inotify) and on SeaweedFS (started here; the agent polls, faster
while it finds work, backing off to --poll-seconds while idle).

    .venv/bin/python bench/stado_latency.py [--jobs N] [--backends file,s3] [--idle S] [--poll-seconds S]

Each job is `date +%s.%N > FILE`; the figure is the time in FILE minus the time just before `stado submit` was
started (so the submit's own start-up is counted), and, apart, minus the time the submit returned. Between jobs the
agent is left idle for --idle seconds (default 6: past its back-off to a full poll) plus a random part of a poll,
so every job meets an idle agent at a random point of its poll.
"""
import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BIN = Path(sys.executable).parent


def write_config(tmp: Path, url: str, options: dict) -> Path:
    config = tmp / "bench.toml"
    lines = ["[store]", f'url = "{url}"'] + [f"{k} = {v!r}".replace("'", '"') for k, v in options.items()]
    config.write_text("\n".join(lines) + "\n")
    return config


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.002)
    return value


def measure(name: str, url: str, options: dict, env: dict, jobs: int, idle: float, poll: float) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix=f"stado-latency-{name.split()[0]}-"))
    run_env = {**os.environ, **env, "STADO_CONFIG": str(write_config(tmp, url, options))}
    log = open(tmp / "agent.log", "wb")
    agent = subprocess.Popen([str(BIN / "stado"), "agent", "--poll-seconds", str(poll), "--work-root",
                              str(tmp / "work")], env=run_env, stdout=log, stderr=subprocess.STDOUT)
    from_start, from_return = [], []
    rng = random.Random(23)
    try:
        wait_for(lambda: b"started on" in (tmp / "agent.log").read_bytes(), 30, "the agent to start")
        for n in range(jobs):
            time.sleep(idle + rng.uniform(0, poll))  # the agent idles (at a random point of its poll): what is measured
            mark = tmp / f"started-{n}"
            t0 = time.time()
            subprocess.run([str(BIN / "stado"), "submit", f"date +%s.%N > {mark}"], env=run_env, check=True,
                           capture_output=True)
            t1 = time.time()
            started = float(wait_for(lambda mark=mark: mark.exists() and mark.read_text().strip(), 60, "the job to start"))
            from_start.append(started - t0)
            from_return.append(started - t1)
    finally:
        agent.terminate()
        agent.wait(30)
        log.close()
    ms = sorted(x * 1000 for x in from_start)
    return {"backend": name, "jobs": jobs, "median_ms": statistics.median(ms), "max_ms": ms[-1], "min_ms": ms[0],
            "after_return_median_ms": statistics.median(x * 1000 for x in from_return),
            "after_return_max_ms": max(x * 1000 for x in from_return)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--backends", default="file,s3")
    parser.add_argument("--idle", type=float, default=6.0)
    parser.add_argument("--poll-seconds", type=float, default=5.0)
    args = parser.parse_args()
    results = []
    backends = args.backends.split(",")
    if "file" in backends:
        results.append(measure("file (local directory)", f"file://{tempfile.mkdtemp(prefix='stado-latency-store-')}",
                               {}, {}, args.jobs, args.idle, args.poll_seconds))
    if "s3" in backends:
        from tests.stado.servers import start_seaweedfs

        server = start_seaweedfs(Path(tempfile.mkdtemp(prefix="stado-latency-weed-")))
        try:
            results.append(measure("seaweedfs (s3)", f"s3://{server.bucket}/latency-{os.getpid()}", server.options,
                                   server.env, args.jobs, args.idle, args.poll_seconds))
        finally:
            server.stop()
    print(f"submit -> start of the job's command, idle agent, --poll-seconds {args.poll_seconds:g}, "
          f"{args.idle:g} s + U(0, poll) idle before each submit")
    print(f"{'backend':<24}{'jobs':>5}{'median':>10}{'min':>10}{'max':>10}{'after submit returned: median, max':>36}")
    for r in results:
        print(f"{r['backend']:<24}{r['jobs']:>5}{r['median_ms']:>8.0f}ms{r['min_ms']:>8.0f}ms{r['max_ms']:>8.0f}ms"
              f"{r['after_return_median_ms']:>26.0f}ms{r['after_return_max_ms']:>8.0f}ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
