"""A queue held and drained: jobman against task-spooler and nq. Run with `make bench-queue`.

For each size (default 100, 500 and 2,000 `true` jobs):
  1. hold: submit every job into a paused queue (jobman: a group of limit 0; tsp: one slot kept busy
     by a gate job; nq: a gate job that the rest queue behind). Then measure, over an idle window,
     the CPU time all of that queue's processes use per second (the scheduler's run time from
     /proc/PID/schedstat, kernel time included), and their unique memory (USS).
  2. drain: open the queue (jobman: limit 2; tsp: 2 slots; nq runs one at a time, it has no limit)
     and time until every job has ended; report seconds per job.
Beside them, the floor of the design: as many bare Python processes that only wake at a supervisor's
renewal cadence. Then `jobman list` and `jobman show` latency with 10,000 finished jobs against a database holding one.

Every process of a contender carries BENCH_QUEUE=<tag> in its environment; that is how its processes
are found. Results go to stdout (markdown) and bench/results/queue.json.

    python bench/queue_bench.py [--sizes 100,500,2000] [--idle 20] [--skip-peers] [--skip-windows] [--skip-reading]
"""
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from run import uss_kib  # bench/run.py: this script runs from bench/, as `make bench-queue` starts it

BIN = Path(sys.executable).parent
JOBMAN = str(BIN / "jobman")
ROOT = Path(__file__).resolve().parent.parent
SETTLE = 10.0  # seconds between the last submission and an idle window
# The memory guard: no submission starts while the machine has less than this available, so that a heavy
# waiting form (4.4 MiB per job before the lean form) can never take the machine down.
MEMORY_FLOOR_MIB = 2048


class OutOfMemory(Exception):
    """Submitting stopped: the machine's available memory fell under MEMORY_FLOOR_MIB."""


def mem_available_mib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    return 0


def guard(done: int, total: int, what: str) -> None:
    """Raise OutOfMemory (after one clear line) if submitting more could exhaust the machine's memory."""
    available = mem_available_mib()
    if available < MEMORY_FLOOR_MIB:
        message = (f"bench: stopped submitting {what} at {done} of {total}: MemAvailable is {available} MiB, under"
                   f" the {MEMORY_FLOOR_MIB} MiB floor")
        print(message, file=sys.stderr, flush=True)
        raise OutOfMemory(message)


def tagged_pids(tag: str) -> list[int]:
    from runkit.envfind import processes_with

    return [st.pid for st in processes_with("BENCH_QUEUE", [tag]).get(tag, [])]


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""  # gone meanwhile


def cpu_ns(pid: int) -> int | None:
    """Nanoseconds the process has run on a CPU, user and kernel (the scheduler's own count: utime and
    stime are sampled at timer ticks, which misjudges processes that run for microseconds at a time)."""
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def idle_cost(tag: str, seconds: float) -> dict:
    """CPU share of one core used by the tagged processes over `seconds`, and their memory."""
    pids = tagged_pids(tag)
    before = {p: cpu_ns(p) for p in pids}
    loadavg_before = os.getloadavg()[0]
    start = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - start
    used = 0
    for pid, ns in before.items():
        now = cpu_ns(pid)
        if ns is not None and now is not None:
            used += now - ns
    sizes = [s for s in (uss_kib(p) for p in pids) if s is not None]
    return {"processes": len(pids), "cpu_percent": round(100.0 * used / 1e9 / elapsed, 2),
            "uss_total_mib": round(sum(sizes) / 1024, 1),
            "uss_median_kib": round(statistics.median(sizes)) if sizes else 0,
            "loadavg_1m": round(max(loadavg_before, os.getloadavg()[0]), 2)}


def _pool(argv_list, width: int, env: dict, what: str = "jobs") -> list[subprocess.CompletedProcess]:
    """Run the commands `width` at a time; every result, in order (those never started, after the memory guard
    stopped submitting, are missing from the end)."""
    results = [None] * len(argv_list)
    running = {}
    pending = list(enumerate(argv_list))
    while pending or running:
        while pending and len(running) < width:
            if pending[0][0] % 20 == 0:
                try:
                    guard(pending[0][0], len(argv_list), what)
                except OutOfMemory:
                    pending = []
                    break
            i, argv = pending.pop(0)
            running[i] = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if not running:
            break
        done = next(iter(running))
        p = running.pop(done)
        out, err = p.communicate()
        results[done] = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    return results


# --- jobman -------------------------------------------------------------------------------------------

class JobmanQueue:
    def __init__(self, root: Path, size: int, windows: dict | None = None):
        label = f"{size}-" + "-".join(f"{k}{v}" for k, v in (windows or {}).items())
        self.home = root / f"jobman-{label}"
        self.tag = f"jobman-{label}-{os.getpid()}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("JOBMAN_")}
        self.env.update(JOBMAN_HOME=str(self.home), BENCH_QUEUE=self.tag, **(windows or {}))

    def jobman(self, *args, check=True) -> subprocess.CompletedProcess:
        return subprocess.run([JOBMAN, *args], env=self.env, capture_output=True, text=True, check=check)

    def db(self):
        conn = sqlite3.connect(f"file:{self.home / 'jobman.db'}?mode=ro", uri=True, timeout=120)
        return conn

    def counts(self) -> dict:
        with self.db() as conn:
            return dict(conn.execute("SELECT coalesce(outcome, phase || coalesce(':' || waiting_for, '')), count(*)"
                                     " FROM job_state GROUP BY 1").fetchall())

    def hold(self, size: int) -> dict:
        self.jobman("group", "set", "q", "--limit", "0")
        start = time.monotonic()
        results = _pool([[JOBMAN, "run", "--group", "q", "--", "true"] for _ in range(size)], 2, self.env)
        took = time.monotonic() - start
        never = sum(1 for r in results if r is None)
        results = [r for r in results if r is not None]
        failed = [r.stderr.strip() for r in results if r.returncode != 0]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.counts().get("waiting:slot", 0) < len(results) - len(failed):
            time.sleep(0.5)
        return {"submitted": len(results) - len(failed), "submit_failures": len(failed), "not_submitted": never,
                "first_failure": failed[0] if failed else None, "submit_seconds_per_job": round(took / size, 4)}

    def drain(self, size: int) -> dict:
        start = time.monotonic()
        self.jobman("group", "set", "q", "--limit", "2")
        while True:
            counts = self.counts()
            unfinished = sum(n for k, n in counts.items() if k.split(":")[0] in
                             ("submitting", "starting", "waiting", "running"))
            if not unfinished:
                break
            time.sleep(0.1)
        took = time.monotonic() - start
        return {"seconds": round(took, 2), "ms_per_job": round(1000 * took / size, 1), "outcomes": counts}

    def problems(self) -> dict:
        tracebacks = locked = 0
        for log in (self.home / "logs").rglob("supervisor.log"):
            text = log.read_text(errors="replace")
            tracebacks += "Traceback" in text
            locked += "database is locked" in text
        return {"supervisor_logs_with_traceback": tracebacks, "supervisor_logs_saying_locked": locked}


def bench_jobman(root: Path, size: int, idle: float, windows: dict | None = None) -> dict:
    q = JobmanQueue(root, size, windows)
    report = {"hold": q.hold(size)}
    time.sleep(SETTLE)  # let the last supervisors settle into their idle loop
    report["idle"] = q.idle_cost = idle_cost(q.tag, idle)
    report["idle"]["cpu_percent_per_1000_jobs"] = round(report["idle"]["cpu_percent"] * 1000 / size, 2)
    report["after_idle"] = q.counts()
    report["drain"] = q.drain(size)
    report.update(q.problems())
    if not windows:  # the floor's database: this queue's, as it is now
        src = sqlite3.connect(q.home / "jobman.db")
        with sqlite3.connect(root / f"floor-{size}.db") as dst:
            src.backup(dst)
        src.close()
    shutil.rmtree(q.home, ignore_errors=True)
    return report


# --- the floor of the design -------------------------------------------------------------------------

# The floor of the design, twice: a Python process that does nothing but wake at a supervisor's renewal
# cadence (every 4-5 s, jittered), and one that also renews its job's row in a copy of the queue's
# database, as a supervisor does (one UPDATE, not synced on its own). One process per waiting job,
# renewing its lease: this much is the seed's design, whatever a supervisor does besides.
FLOOR = ("import os, select\np = select.poll()\n"
         "while True: p.poll(int(5000 * (0.8 + 0.2 * int.from_bytes(os.urandom(2), 'big') / 65535)))")
FLOOR_RENEWING = """
import os, select, sqlite3, sys, time
c = sqlite3.connect(f"file:{sys.argv[1]}?mode=rw", uri=True, isolation_level=None, timeout=1)
c.execute("PRAGMA synchronous = NORMAL")
c.execute("PRAGMA cache_size = 16")
p = select.poll()
while True:
    p.poll(int(5000 * (0.8 + 0.2 * int.from_bytes(os.urandom(2), 'big') / 65535)))
    c.execute("UPDATE job_state SET lease_expires_at = ?, revision = revision + 1 WHERE job_id = ?",
              (time.time() + 15, sys.argv[2]))
"""


def bench_floor(root: Path, size: int, idle: float) -> dict:
    report = {}
    db = root / f"floor-{size}.db"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        jobs = [r[0] for r in conn.execute("SELECT job_id FROM job_state LIMIT ?", (size,))]
    for name, code, args in (("bare", FLOOR, [[]] * size), ("renewing", FLOOR_RENEWING, [[str(db), j] for j in jobs])):
        tag = f"floor-{name}-{size}-{os.getpid()}"
        env = {**os.environ, "BENCH_QUEUE": tag}
        procs = [subprocess.Popen([sys.executable, "-I", "-S", "-c", code, *a], env=env, stdin=subprocess.DEVNULL,
                                  start_new_session=True) for a in args]
        try:
            time.sleep(SETTLE)
            cost = idle_cost(tag, idle)
        finally:
            for p in procs:
                p.kill()
            for p in procs:
                p.wait()
        cost["cpu_percent_per_1000"] = round(cost["cpu_percent"] * 1000 / len(args), 2)
        report[name] = cost
    return report


# --- task-spooler ---------------------------------------------------------------------------------------

def bench_tsp(root: Path, size: int, idle: float) -> dict:
    """task-spooler: one server; each queued job is also a client process connected to it, waiting."""
    tag = f"tsp-{size}-{os.getpid()}"
    gate = root / f"tsp-gate-{size}"
    env = {**os.environ, "TS_SOCKET": str(root / f"tsp-{size}.socket"), "TS_SAVELIST": str(root / f"tsp-{size}.list"),
           "TMPDIR": str(root), "BENCH_QUEUE": tag, "TS_MAXFINISHED": str(size + 10)}

    def tsp(*args):
        return subprocess.run(["tsp", *args], env=env, capture_output=True, text=True, check=True, timeout=20).stdout

    report = {}
    try:
        tsp("-S", "1")
        tsp("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done")
        start = time.monotonic()
        for n in range(size):
            try:
                tsp("true")
            except subprocess.TimeoutExpired:
                report["stuck_at"] = n  # the server takes no more clients: it cannot hold this queue
                return report
        report["submit_seconds_per_job"] = round((time.monotonic() - start) / size, 4)
        time.sleep(1.0)
        # The server and the queued clients; the gate job's own polling loop is not the queue's cost.
        queue = [p for p in tagged_pids(tag) if cmdline(p).split(b"\0")[0].endswith(b"tsp")
                 and b"while" not in cmdline(p)]
        report["idle"] = _cost_of(queue, idle)
        start = time.monotonic()
        tsp("-S", "2")
        gate.touch()
        while sum(1 for line in tsp("-l").splitlines()[1:] if " finished " in line) < size + 1:
            time.sleep(0.05)
        took = time.monotonic() - start
        report["drain"] = {"seconds": round(took, 2), "ms_per_job": round(1000 * took / size, 1)}
        return report
    finally:
        subprocess.run(["tsp", "-K"], env=env, capture_output=True, timeout=20)
        for pid in tagged_pids(tag):
            try:
                os.kill(pid, 9)
            except OSError:
                pass


def _cost_of(pids: list[int], seconds: float) -> dict:
    before = {p: cpu_ns(p) for p in pids}
    start = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - start
    used = sum((cpu_ns(p) or 0) - (t or 0) for p, t in before.items() if cpu_ns(p) is not None)
    sizes = [s for s in (uss_kib(p) for p in pids) if s is not None]
    return {"processes": len(pids), "cpu_percent": round(100.0 * used / 1e9 / elapsed, 2),
            "uss_total_mib": round(sum(sizes) / 1024, 2)}


# --- nq ------------------------------------------------------------------------------------------------

def bench_nq(root: Path, size: int, idle: float) -> dict:
    tag = f"nq-{size}-{os.getpid()}"
    gate = root / f"nq-gate-{size}"
    nqdir = root / f"nq-{size}"
    nqdir.mkdir()
    env = {**os.environ, "NQDIR": str(nqdir), "BENCH_QUEUE": tag}
    subprocess.run(["nq", "sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done"], env=env,
                   capture_output=True, check=True)
    start = time.monotonic()
    for _ in range(size):
        subprocess.run(["nq", "true"], env=env, capture_output=True, check=True)
    submit = time.monotonic() - start
    time.sleep(1.0)
    waiting = [p for p in tagged_pids(tag) if cmdline(p) and b"sleep" not in cmdline(p) and b"while" not in cmdline(p)]
    cost = _cost_of(waiting, idle)
    start = time.monotonic()
    gate.touch()
    subprocess.run(["nq", "-w"], env=env, capture_output=True)
    took = time.monotonic() - start
    return {"submit_seconds_per_job": round(submit / size, 4), "idle_waiting_processes": cost,
            "drain_one_at_a_time": {"seconds": round(took, 2), "ms_per_job": round(1000 * took / size, 1)}}


# --- reading with many finished jobs ------------------------------------------------------------------

def _fill_finished(home: Path, env: dict, count: int) -> str:
    """One real finished job, cloned `count` times (every row: jobs, state, attempt, events)."""
    sys.path.insert(0, str(ROOT / "src"))
    from runkit.ids import uuid7

    job = subprocess.run([JOBMAN, "run", "--name", "seed", "--", "true"], env=env, capture_output=True, text=True,
                         check=True).stdout.strip()
    subprocess.run([JOBMAN, "wait", job], env=env, capture_output=True, check=True)
    conn = sqlite3.connect(home / "jobman.db", timeout=60)
    conn.execute("BEGIN IMMEDIATE")
    base = time.time() - 86400
    for n in range(count):  # a day's worth, one every few seconds
        at = base + n * 86400 / (count + 1)
        new = uuid7(int(at * 1e9))
        conn.execute("INSERT INTO jobs (id, name, spec, group_name, priority, submitted_at, claim_window,"
                     " lease_duration, renew_interval, poll_interval, handle) SELECT ?, 'clone-' || ?, spec, group_name,"
                     " priority, ?, claim_window, lease_duration, renew_interval, poll_interval, ? FROM jobs"
                     " WHERE id = ?", (new, n, at, n + 2, job))
        columns = [r[1] for r in conn.execute("PRAGMA table_info(job_state)")]
        picks = ", ".join("?" if c == "job_id" else c for c in columns)
        conn.execute(f"INSERT INTO job_state ({', '.join(columns)}) SELECT {picks} FROM job_state WHERE job_id = ?",
                     (new, job))
        conn.execute("INSERT INTO attempts SELECT ?, number, started_at, ended_at, pid, start_time, boot_id, pgid,"
                     " exit_code, signal, outcome, error, log_path FROM attempts WHERE job_id = ?", (new, job))
        conn.execute("INSERT INTO events (job_id, at, kind, data) SELECT ?, at, kind, data FROM events"
                     " WHERE job_id = ? ORDER BY id", (new, job))
    conn.execute("UPDATE handle_sequence SET last = ?", (count + 1,))
    conn.execute("COMMIT")
    conn.close()
    return job


def bench_reading(root: Path, rounds: int = 15) -> dict:
    homes = {}
    for label, extra in (("1 job", 0), ("10,001 jobs", 10_000)):
        home = root / f"reading-{extra}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("JOBMAN_")}
        env["JOBMAN_HOME"] = str(home)
        homes[label] = (env, _fill_finished(home, env, extra))
    commands = {"jobman list": lambda job: ["list"], "jobman show JOB": lambda job: ["show", job],
                "jobman show PREFIX": lambda job: ["show", job[:13]], "jobman show HANDLE": lambda job: ["show", "1"],
                "jobman list --state failed": lambda job: ["list", "--state", "failed"]}
    samples = {(label, name): [] for label in homes for name in commands}
    for _ in range(rounds):  # interleaved, so drift in machine load hits both alike
        for label, (env, job) in homes.items():
            for name, args in commands.items():
                start = time.perf_counter()
                subprocess.run([JOBMAN, *args(job)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               check=True)
                samples[(label, name)].append(time.perf_counter() - start)
    report = {}
    for name in commands:
        empty = statistics.median(samples[("1 job", name)])
        full = statistics.median(samples[("10,001 jobs", name)])
        report[name] = {"1 job ms": round(empty * 1000, 1), "10,001 jobs ms": round(full * 1000, 1),
                        "ratio": round(full / empty, 2)}
    return report


def machine() -> dict:
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "cpu": cpu,
            "python": platform.python_version(), "kernel": platform.release(),
            "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)}


def render(report: dict) -> str:
    m = report["machine"]
    lines = [f"Measured {m['date']} on {m['cpus']} CPUs ({m['cpu']}, {m['mem_gib']} GiB), Python {m['python']},"
             f" Linux {m['kernel']}; idle window {report['idle_seconds']} s.", ""]
    lines += ["| waiting jobs | submit failures | idle CPU, all supervisors | per 1,000 jobs | USS per supervisor"
              " | drain per job (limit 2) | outcomes | logs with a traceback |", "|---|---|---|---|---|---|---|---|"]
    for size, r in report["jobman"].items():
        per_1000 = r["idle"]["cpu_percent"] * 1000 / int(str(size).split()[0])
        r["idle"]["cpu_percent_per_1000_jobs"] = round(per_1000, 2)
        lines.append(f"| {size} | {r['hold']['submit_failures']} | {r['idle']['cpu_percent']}% |"
                     f" {r['idle']['cpu_percent_per_1000_jobs']}% | {r['idle']['uss_median_kib'] / 1024:.2f} MiB |"
                     f" {r['drain']['ms_per_job']} ms | {r['drain']['outcomes']} |"
                     f" {r['supervisor_logs_with_traceback']} |")
    if report.get("floor"):
        lines += ["", "| floor of the design, one Python process per job waking every 4-5 s | idle CPU | per 1,000 |"
                      " USS each |", "|---|---|---|---|"]
        for size, floors in report["floor"].items():
            for name, r in floors.items():
                what = "bare (it only wakes)" if name == "bare" else "renewing its row in the queue's database"
                lines.append(f"| {size}, {what} | {r['cpu_percent']}% | {r['cpu_percent_per_1000']}% |"
                             f" {r['uss_median_kib'] / 1024:.2f} MiB |")
    if report.get("tsp"):
        lines += ["", "| peer, same queue | idle CPU | memory (USS) | drain per job |", "|---|---|---|---|"]
        for size, r in report["tsp"].items():
            if "stuck_at" in r:
                lines.append(f"| tsp, {size} queued | - | - | cannot hold it: submission {r['stuck_at'] + 1} never"
                             f" returned (the server takes no more clients) |")
                continue
            w = r["idle"]
            lines.append(f"| tsp, {size} queued (server + {w['processes'] - 1} waiting clients) | {w['cpu_percent']}% |"
                         f" {w['uss_total_mib']} MiB | {r['drain']['ms_per_job']} ms (2 slots) |")
        for size, r in report["nq"].items():
            w = r["idle_waiting_processes"]
            lines.append(f"| nq, {size} queued ({w['processes']} waiting processes) | {w['cpu_percent']}% |"
                         f" {w['uss_total_mib']} MiB | {r['drain_one_at_a_time']['ms_per_job']} ms (one at a time) |")
    if report.get("reading"):
        lines += ["", "| reading | 1 job | 10,001 jobs | ratio |", "|---|---|---|---|"]
        for name, r in report["reading"].items():
            lines.append(f"| `{name}` | {r['1 job ms']} ms | {r['10,001 jobs ms']} ms | {r['ratio']}x |")
    return "\n".join(lines)


def main() -> int:
    args = sys.argv[1:]
    sizes = [100, 500, 2000]
    idle = 20.0
    if "--sizes" in args:
        sizes = [int(s) for s in args[args.index("--sizes") + 1].split(",")]
    if "--idle" in args:
        idle = float(args[args.index("--idle") + 1])
    peers = "--skip-peers" not in args
    if peers:
        for tool in ("tsp", "nq"):
            if not shutil.which(tool):
                print(f"bench: {tool} is not installed; `make bench-deps` installs it", file=sys.stderr)
                return 2
    report = {"machine": machine(), "idle_seconds": idle, "jobman": {}, "floor": {}, "tsp": {}, "nq": {}}
    with tempfile.TemporaryDirectory(prefix="jobman-queue-bench-") as tmp:
        root = Path(tmp)
        for size in sizes:
            print(f"... jobman, {size} jobs", file=sys.stderr, flush=True)
            report["jobman"][size] = bench_jobman(root, size, idle)
            print(json.dumps(report["jobman"][size]), file=sys.stderr, flush=True)
            report["floor"][size] = bench_floor(root, size, idle)
            print(json.dumps(report["floor"][size]), file=sys.stderr, flush=True)
            if peers:
                print(f"... tsp and nq, {size} jobs", file=sys.stderr, flush=True)
                report["tsp"][size] = bench_tsp(root, size, idle)
                report["nq"][size] = bench_nq(root, size, idle)
        if "--skip-windows" not in args:
            # The same queue with longer lease windows (settings of each job): what the renewal cadence costs.
            windows = {"JOBMAN_RENEW_INTERVAL": "30s", "JOBMAN_LEASE": "90s"}
            label = f"{max(sizes)} (renew 30s, lease 90s)"
            print(f"... jobman, {label}", file=sys.stderr, flush=True)
            report["jobman"][label] = bench_jobman(root, max(sizes), idle, windows)
            print(json.dumps(report["jobman"][label]), file=sys.stderr, flush=True)
        if "--skip-reading" not in args:
            print("... reading with 10,000 finished jobs", file=sys.stderr, flush=True)
            report["reading"] = bench_reading(root)
    results = ROOT / "bench" / "results"
    results.mkdir(exist_ok=True)
    (results / "queue.json").write_text(json.dumps(report, indent=2) + "\n")
    print(render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
