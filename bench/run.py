"""jobman benchmarks against real peers, in one run on one machine. Run with `make bench`.

Reports numbers, not verdicts (tests assert behaviour; this measures):
  1. submit latency: `jobman run -- true` until it exits (the id is printed), against the venv's own
     `python -c pass`, task-spooler (`tsp true`) and nq (`nq true`); plus the start-up of the CLI and of
     the supervisor module alone.
  2. idle supervisor memory: unique set size (USS, /proc/PID/smaps_rollup) of 50 supervisors whose
     jobs sleep, in a group of limit 50.
  3. throughput: 200 `true` jobs in a group of limit 2, against `tsp -S 2`, nq, and the floor of this
     design: 400 bare `python -c pass` starts run 2 at a time.
  4. wake-up latency: from a dependency's end to its dependent's start, over 50 chains.
  5. log throughput: a job writing 1 GiB to stdout through jobman, against the same command writing
     to a file directly.
Results go to stdout (markdown) and bench/results/latest.json.
"""
import contextlib
import json
import os
import platform
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
JOBMAN = str(BIN / "jobman")
PYTHON = sys.executable
ROOT = Path(__file__).resolve().parent.parent


def median(values):
    return statistics.median(values)


def p95(values):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def timed(argv, env=None, stdout=subprocess.DEVNULL) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=stdout, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


class Home:
    """A fresh JOBMAN_HOME for one benchmark."""

    def __init__(self, root: Path, name: str):
        self.path = root / name
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("JOBMAN_")}
        self.env["JOBMAN_HOME"] = str(self.path)

    def jobman(self, *args, check=True) -> str:
        return subprocess.run([JOBMAN, *args], env=self.env, capture_output=True, text=True, check=check).stdout

    def db(self):
        return sqlite3.connect(self.path / "jobman.db", timeout=60)


def bench_submit_latency(root: Path, rounds: int) -> dict:
    home = Home(root, "latency")
    home.jobman("run", "--", "true")  # create the database outside the measurement
    tsp_env = {**os.environ, "TS_SOCKET": str(root / "tsp.socket"), "TS_SAVELIST": str(root / "tsp.list"),
               "TMPDIR": str(root)}
    nq_dir = root / "nq"
    nq_dir.mkdir()
    nq_env = {**os.environ, "NQDIR": str(nq_dir)}
    subprocess.run(["tsp", "true"], env=tsp_env, stdout=subprocess.DEVNULL, check=True)  # start its server
    from jobman.handoff.launch import supervisor_argv as _supervisor_argv

    supervisor_argv = _supervisor_argv("")[:-1]  # exactly how `jobman run` starts one, minus the job id
    samples = {"jobman run -- true": [], "python -c pass": [], "tsp true": [], "nq true": [],
               "jobman --help (CLI start)": [], "jobman __supervise (supervisor start)": []}
    for _ in range(rounds):  # interleaved, so drift in machine load hits every contender alike
        samples["jobman run -- true"].append(timed([JOBMAN, "run", "--", "true"], env=home.env))
        samples["python -c pass"].append(timed([PYTHON, "-c", "pass"]))
        samples["tsp true"].append(timed(["tsp", "true"], env=tsp_env))
        samples["nq true"].append(timed(["nq", "true"], env=nq_env))
        samples["jobman --help (CLI start)"].append(timed([JOBMAN, "--help"]))
        start = time.perf_counter()
        subprocess.run(supervisor_argv, env=home.env, stderr=subprocess.DEVNULL)  # exits at its argument check
        samples["jobman __supervise (supervisor start)"].append(time.perf_counter() - start)
    home.jobman("wait", "-q", *[r[0] for r in home.db().execute("SELECT id FROM jobs")], check=False)
    subprocess.run(["tsp", "-K"], env=tsp_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = median(samples["python -c pass"])
    return {name: {"median_ms": round(median(v) * 1000, 1), "p95_ms": round(p95(v) * 1000, 1),
                   "vs_python": round(median(v) / base, 2)} for name, v in samples.items()}


def uss_kib(pid: int) -> int | None:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    fields = {line.split(":")[0]: int(line.split()[1]) for line in text.splitlines()[1:] if line.endswith("kB")}
    return fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0) + fields.get("Private_Hugetlb", 0)


def bench_supervisor_memory(root: Path, count: int) -> dict:
    home = Home(root, "memory")
    home.jobman("group", "set", "sleepers", "--limit", str(count))
    ids = [home.jobman("run", "--group", "sleepers", "--", "sleep", "600").strip() for _ in range(count)]
    deadline = time.time() + 120
    while time.time() < deadline:
        running = home.db().execute("SELECT count(*) FROM job_state WHERE phase = 'running'").fetchone()[0]
        if running == count:
            break
        time.sleep(0.2)
    time.sleep(1.0)  # let every supervisor settle into its idle loop
    pids = [r[0] for r in home.db().execute("SELECT supervisor_pid FROM job_state")]
    sizes = [s for s in (uss_kib(p) for p in pids) if s is not None]
    home.jobman("cancel", *ids)
    return {"supervisors": len(sizes), "uss_median_mib": round(median(sizes) / 1024, 2),
            "uss_max_mib": round(max(sizes) / 1024, 2)}


def _pool(commands, width: int, env=None) -> float:
    """Run every command, `width` at a time; the wall time for all of them."""
    start = time.perf_counter()
    running = []
    pending = list(commands)
    while pending or running:
        while pending and len(running) < width:
            running.append(subprocess.Popen(pending.pop(0), env=env, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL))
        running[0].wait()
        running = [p for p in running if p.poll() is None]
    return time.perf_counter() - start


def bench_throughput(root: Path, jobs: int) -> dict:
    results = {}
    home = Home(root, "throughput")
    home.jobman("group", "set", "two", "--limit", "2")
    start = time.perf_counter()
    # Two submitters at a time, as the floor runs its bare starts two at a time.
    _pool([[JOBMAN, "run", "--group", "two", "--", "true"] for _ in range(jobs)], 2, env=home.env)
    ids = [r[0] for r in home.db().execute("SELECT id FROM jobs")]
    home.jobman("wait", "-q", *ids)
    results["jobman (2 submitters, group limit 2)"] = time.perf_counter() - start
    outcomes = home.db().execute("SELECT outcome, count(*) FROM job_state GROUP BY outcome").fetchall()
    assert outcomes == [("succeeded", jobs)], outcomes

    tsp_env = {**os.environ, "TS_SOCKET": str(root / "tsp2.socket"), "TS_SAVELIST": str(root / "tsp2.list"),
               "TMPDIR": str(root)}
    subprocess.run(["tsp", "-S", "2"], env=tsp_env, check=True)
    start = time.perf_counter()
    tsp_ids = [subprocess.run(["tsp", "true"], env=tsp_env, capture_output=True, text=True, check=True).stdout.strip()
               for _ in range(jobs)]
    for job in tsp_ids:
        subprocess.run(["tsp", "-w", job], env=tsp_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results["tsp -S 2"] = time.perf_counter() - start
    subprocess.run(["tsp", "-K"], env=tsp_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    nq_dir = root / "nq2"
    nq_dir.mkdir()
    nq_env = {**os.environ, "NQDIR": str(nq_dir)}
    start = time.perf_counter()
    for _ in range(jobs):
        subprocess.run(["nq", "true"], env=nq_env, stdout=subprocess.DEVNULL, check=True)
    subprocess.run(["nq", "-w"], env=nq_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results["nq (one at a time)"] = time.perf_counter() - start

    results[f"floor: {2 * jobs} bare python starts, 2 at a time"] = _pool([[PYTHON, "-c", "pass"]] * (2 * jobs), 2)
    floor = results[f"floor: {2 * jobs} bare python starts, 2 at a time"]
    return {name: {"seconds": round(t, 2), "vs_floor": round(t / floor, 2)} for name, t in results.items()}


def bench_wakeup(root: Path, chains: int) -> dict:
    home = Home(root, "wakeup")
    gaps = []
    for i in range(chains):
        gate = root / f"gate-{i}"
        first = home.jobman("run", "--print-id", "--", "sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.01; done").strip()
        second = home.jobman("run", "--print-id", "--after-success", first, "--", "true").strip()
        db = home.db()
        while db.execute("SELECT waiting_for FROM job_state WHERE job_id = ?", (second,)).fetchone()[0] is None:
            time.sleep(0.01)
        gate.touch()
        home.jobman("wait", "-q", second)
        ended = db.execute("SELECT ended_at FROM attempts WHERE job_id = ?", (first,)).fetchone()[0]
        started = db.execute("SELECT started_at FROM attempts WHERE job_id = ?", (second,)).fetchone()[0]
        gaps.append(started - ended)
    return {"chains": chains, "median_ms": round(median(gaps) * 1000, 1), "p95_ms": round(p95(gaps) * 1000, 1),
            "max_ms": round(max(gaps) * 1000, 1)}


def bench_log_throughput(root: Path, size: int, rounds: int = 6) -> dict:
    """Writing `size` bytes of output: straight into a file, and as a jobman job. For each run, the writer's
    wall time (for a job, the attempt's duration as its supervisor recorded it) and the time until the
    output is on disk (that plus a sync, so a run does not gain by leaving its write-back to the next);
    for the default job also the end-to-end wall time of `jobman run` + `jobman wait`. Rounds are
    interleaved in rotating order, each after a sync."""
    home = Home(root, "logs")
    variants = {"direct to a file": None,
                "through jobman (default 1 GiB cap: not reached)": [],
                "through jobman (--log-limit 0: no cap)": ["--log-limit", "0"],
                "through jobman (--log-limit 256MB: 3/4 of it cut)": ["--log-limit", "256MB"]}
    writer = {name: [] for name in variants}
    durable = {name: [] for name in variants}
    end_to_end = []
    out = root / "direct.out"
    for round_number in range(rounds):
        order = list(variants.items())
        for name, opts in order[round_number % len(order):] + order[:round_number % len(order)]:
            os.sync()
            if opts is None:  # the same writer, into a file opened the way a supervisor opens a log
                fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                start = time.perf_counter()  # spawned and reaped the way a supervisor times an attempt
                pid = os.posix_spawn(shutil.which("head"), ["head", "-c", str(size), "/dev/zero"], os.environ,
                                     file_actions=[(os.POSIX_SPAWN_DUP2, fd, 1)])
                os.waitpid(pid, 0)
                took = time.perf_counter() - start
                os.close(fd)
            else:
                start = time.perf_counter()
                job = home.jobman("run", *opts, "--", "head", "-c", str(size), "/dev/zero").strip()
                home.jobman("wait", "-q", job)
                if not opts:
                    end_to_end.append(time.perf_counter() - start)
                took = json.loads(home.jobman("show", "--json", job))["attempts_detail"][0]["duration"]
            start = time.perf_counter()
            os.sync()
            writer[name].append(took)
            durable[name].append(took + time.perf_counter() - start)
            if opts is None:
                out.unlink()
            else:
                home.jobman("prune")
    base, base_durable = median(writer["direct to a file"]), median(durable["direct to a file"])
    report = {name: {"seconds": round(median(writer[name]), 3), "vs_direct": round(median(writer[name]) / base, 3),
                     "on_disk_seconds": round(median(durable[name]), 3),
                     "on_disk_vs_direct": round(median(durable[name]) / base_durable, 3)}
              for name in variants}
    report["through jobman, end to end (run + wait), default cap"] = {
        "seconds": round(median(end_to_end), 3), "vs_direct": round(median(end_to_end) / base, 3)}
    report["rounds"] = rounds
    return report


def machine() -> dict:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "cpu": cpu,
            "python": platform.python_version(), "kernel": platform.release(),
            "tsp": shutil.which("tsp"), "nq": shutil.which("nq")}


@contextlib.contextmanager
def _reaped(root: str):
    """On the way out (a step that failed included), kill every process left whose JOBMAN_HOME is under root
    (supervisors and their jobs; a failed step would otherwise leave them running with their home deleted)."""
    try:
        yield
    finally:
        for pid in (int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()):
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            if any(v.startswith(b"JOBMAN_HOME=" + root.encode()) for v in env):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass


USAGE = """jobman's benchmarks beside task-spooler and nq (`make bench`). Results: stdout (markdown) and
bench/results/latest.json.

    python bench/run.py [--quick] [--only STEP[,STEP...]]

--quick: fewer samples. --only: just those steps (submit_latency, supervisor_memory, throughput, wakeup,
log_throughput)."""


def main() -> int:
    for tool in ("tsp", "nq"):
        if not shutil.which(tool):
            print(f"bench: {tool} is not installed; `make bench` installs it (Debian: task-spooler, nq)",
                  file=sys.stderr)
            return 2
    args = sys.argv[1:]
    quick = "--quick" in args
    only = args[args.index("--only") + 1].split(",") if "--only" in args[:-1] else None
    known = {"--quick", "--only"} | ({args[args.index("--only") + 1]} if only else set())
    if "--help" in args or "-h" in args:
        print(USAGE)
        return 0
    if set(args) - known:
        print(f"bench: unknown option {' '.join(sorted(set(args) - known))} (--help lists them)", file=sys.stderr)
        return 2
    report = {"machine": machine()}
    with tempfile.TemporaryDirectory(prefix="jobman-bench-") as tmp, _reaped(tmp):
        root = Path(tmp)
        steps = [("submit_latency", lambda: bench_submit_latency(root, 10 if quick else 40)),
                 ("supervisor_memory", lambda: bench_supervisor_memory(root, 10 if quick else 50)),
                 ("throughput", lambda: bench_throughput(root, 40 if quick else 200)),
                 ("wakeup", lambda: bench_wakeup(root, 10 if quick else 50)),
                 ("log_throughput", lambda: bench_log_throughput(root, (128 if quick else 1024) * 1024 * 1024))]
        unknown = set(only or ()) - {name for name, _ in steps}
        if unknown:
            print(f"bench: no step named {', '.join(sorted(unknown))}; the steps: "
                  f"{', '.join(name for name, _ in steps)}", file=sys.stderr)
            return 2
        for name, step in steps:
            if only is not None and name not in only:
                continue
            print(f"... {name}", file=sys.stderr, flush=True)
            report[name] = step()
    if only is None:  # (a partial run does not replace the full one's record)
        results = ROOT / "bench" / "results"
        results.mkdir(exist_ok=True)
        (results / "latest.json").write_text(json.dumps(report, indent=2) + "\n")
    print(render(report))
    return 0


def _table(header: list[str], rows) -> list[str]:
    """A markdown table's lines."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + \
        ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]


def render(report: dict) -> str:
    m = report["machine"]
    lines = [f"Measured {m['date']} on {m['cpus']} CPUs ({m['cpu']}), Python {m['python']}, Linux {m['kernel']}.", ""]
    if "submit_latency" in report:
        lines += _table(["submit (wall, until it returns)", "median", "p95", "vs `python -c pass`"],
                        [(f"`{name}`", f"{r['median_ms']} ms", f"{r['p95_ms']} ms", f"{r['vs_python']}x")
                         for name, r in report["submit_latency"].items()])
    if "supervisor_memory" in report:
        mem = report["supervisor_memory"]
        lines += ["", f"Idle supervisor memory ({mem['supervisors']} sleeping jobs): USS median {mem['uss_median_mib']}"
                      f" MiB, max {mem['uss_max_mib']} MiB.", ""]
    if "throughput" in report:
        lines += _table(["throughput", "seconds", "vs floor"],
                        [(name, r["seconds"], f"{r['vs_floor']}x") for name, r in report["throughput"].items()])
    if "wakeup" in report:
        w = report["wakeup"]
        lines += ["", f"Wake-up latency, dependency end to dependent start ({w['chains']} chains): median "
                      f"{w['median_ms']} ms, p95 {w['p95_ms']} ms, max {w['max_ms']} ms.", ""]
    if "log_throughput" in report:
        logs = dict(report["log_throughput"])
        rounds = logs.pop("rounds")
        lines += _table([f"1 GiB of output (median of {rounds})", "writer's wall time", "vs direct",
                         "until on disk (+ sync)", "vs direct"],
                        [(name, f"{r['seconds']} s", f"{r['vs_direct']}x",
                          f"{r['on_disk_seconds']} s" if "on_disk_seconds" in r else "-",
                          f"{r['on_disk_vs_direct']}x" if "on_disk_seconds" in r else "-") for name, r in logs.items()])
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
