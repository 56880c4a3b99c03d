"""A queue held and drained: jobman against task-spooler and nq. Run with `make bench-queue`.

For each size (default 100, 2,000 and 10,000 `true` jobs):
  1. hold: submit every job into a paused queue (jobman: a group of limit 0, with `jobman run --array`;
     tsp: one slot kept busy by a gate job; nq: a gate job that the rest queue behind). Then measure, over an
     idle window, the CPU time all of that queue's processes use per second (the scheduler's run time from
     /proc/PID/schedstat, kernel time included), and their unique memory (USS); and, for jobman, `list`,
     `show` and `wait` against a home where one job waits.
  2. drain: open the queue (jobman: limit 2; tsp: 2 slots; nq runs one at a time, it has no limit)
     and time until every job has ended; report seconds per job.
Beside them: submitting the same number from one shell loop of `jobman run` (a home of its own, killed
afterwards); up to 2,000 jobs, the floor of the old design (as many bare Python processes that only wake at
a supervisor's renewal cadence). Then `jobman list` and `jobman show` latency with 10,000 finished jobs
against a database holding one.

Every process of a contender carries BENCH_QUEUE=<tag> in its environment; that is how its processes
are found. Results go to stdout (markdown) and bench/results/queue.json.

    python bench/queue_bench.py [--sizes 100,2000,10000] [--idle 20] [--skip-peers] [--skip-windows] [--skip-reading]
        [--skip-history] [--skip-loop] [--skip-floor]

The memory guard: no submission (of any contender) starts while MemAvailable is under 2 GiB; the bench then
says so in one line and goes on with what it has.
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
BATCH_PART = 1000  # jobs per `jobman run --array` of the hold (the memory guard looks between parts)
LOOP_PART = 250  # submissions per shell loop of the loop measurement (the same)
FLOOR_MAX = 2000  # the floor (a Python process per job) is not run above this: 10,000 would take ~35 GiB
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
    from runkit.system.envfind import processes_with

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
    def __init__(self, root: Path, size: int, windows: dict | None = None, label: str = ""):
        label = f"{size}-{label}" + "-".join(f"{k}{v}" for k, v in (windows or {}).items())
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
        """Submit `size` jobs into the paused group q with the batch form (jobman run --array), in parts of
        BATCH_PART so that the memory guard is looked at between parts."""
        self.jobman("group", "set", "q", "--limit", "0")
        submitted, failures, first_failure, took = 0, 0, None, 0.0
        for first in range(1, size + 1, BATCH_PART):
            try:
                guard(first - 1, size, "jobman (batch)")
            except OutOfMemory:
                break
            last = min(first + BATCH_PART - 1, size)
            started = time.monotonic()
            result = subprocess.run([JOBMAN, "run", "--print-id", "--array", f"{first}-{last}", "--group", "q", "--", "true"],
                                    env=self.env, capture_output=True, text=True)
            took += time.monotonic() - started
            printed = len(result.stdout.split())
            submitted += printed
            if result.returncode != 0:
                failures += last - first + 1 - printed
                first_failure = first_failure or result.stderr.strip()
        self.wait_in_line(submitted)
        return {"submitted": submitted, "submit_failures": failures, "not_submitted": size - submitted - failures,
                "first_failure": first_failure, "submit_seconds": round(took, 1),
                "submit_seconds_per_job": round(took / max(submitted, 1), 4)}

    def wait_in_line(self, count: int, limit: float = 300) -> None:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline and self.counts().get("waiting:slot", 0) < count:
            time.sleep(0.5)

    def drain(self, size: int) -> dict:
        start = time.monotonic()
        self.jobman("group", "set", "q", "--limit", "2")
        while True:
            counts = self.counts()
            unfinished = sum(n for k, n in counts.items() if k.split(":")[0] in
                             ("submitting", "starting", "waiting", "running"))
            if not unfinished:
                break
            time.sleep(0.1 if size <= 2000 else 0.5)  # (counting 10,000 rows ten times a second costs 3% of a core)
        took = time.monotonic() - start
        return {"seconds": round(took, 2), "ms_per_job": round(1000 * took / size, 1), "outcomes": counts}

    def problems(self) -> dict:
        tracebacks = locked = 0
        for log in (self.home / "logs").rglob("supervisor.log"):
            text = log.read_text(errors="replace")
            tracebacks += "Traceback" in text
            locked += "database is locked" in text
        return {"supervisor_logs_with_traceback": tracebacks, "supervisor_logs_saying_locked": locked}


def bench_jobman(root: Path, size: int, idle: float, windows: dict | None = None, reading: bool = True) -> dict:
    q = JobmanQueue(root, size, windows)
    report = {"hold": q.hold(size)}
    time.sleep(SETTLE)  # let the last supervisors settle into their idle loop
    report["idle"] = q.idle_cost = idle_cost(q.tag, idle)
    report["idle"]["cpu_percent_per_1000_jobs"] = round(report["idle"]["cpu_percent"] * 1000 / size, 2)
    report["idle"].update(waiter_memory(q.tag))
    report["after_idle"] = q.counts()
    if reading:
        report["reading"] = bench_reading_waiting(root, q)
    report["drain"] = q.drain(size)
    report.update(q.problems())
    if not windows and size <= FLOOR_MAX:  # the floor's database: this queue's, as it is now
        src = sqlite3.connect(q.home / "jobman.db")
        with sqlite3.connect(root / f"floor-{size}.db") as dst:
            src.backup(dst)
        src.close()
    shutil.rmtree(q.home, ignore_errors=True)
    return report


def waiter_memory(tag: str) -> dict:
    """USS of the queue's lean waiters (bash blocked on a doorbell) and of its Python supervisors (the
    lease round's holder, any waiter about to change form), apart."""
    lean, python = [], []
    for pid in tagged_pids(tag):
        size = uss_kib(pid)
        if size is not None:
            (lean if cmdline(pid).startswith(b"jobman-wait\0") else python).append(size)
    return {"lean_waiters": len(lean), "lean_uss_median_kib": round(statistics.median(lean)) if lean else 0,
            "python_supervisors": len(python), "python_uss_total_mib": round(sum(python) / 1024, 1)}


def bench_loop_submission(root: Path, size: int) -> dict:
    """Submitting `size` jobs from a shell loop of `jobman run` (into a paused group of a home of its own,
    whose processes are killed afterwards): what a sweep written as `for s in ...; do jobman run ...` pays."""
    q = JobmanQueue(root, size, label="loop")
    q.jobman("group", "set", "q", "--limit", "0")
    took, done, failed = 0.0, 0, 0
    try:
        for first in range(0, size, LOOP_PART):
            guard(first, size, "jobman (shell loop)")
            count = min(LOOP_PART, size - first)
            script = (f'i=0; while [ $i -lt {count} ]; do "{JOBMAN}" run --group q -- true > /dev/null || exit 1;'
                      f' i=$((i+1)); done')
            started = time.monotonic()
            result = subprocess.run(["/bin/sh", "-c", script], env=q.env, capture_output=True, text=True)
            took += time.monotonic() - started
            if result.returncode != 0:
                failed += 1
                break
            done += count
    except OutOfMemory:
        pass
    finally:
        for pid in tagged_pids(q.tag):
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        shutil.rmtree(q.home, ignore_errors=True)
    return {"submitted": done, "failed_loops": failed, "seconds": round(took, 1),
            "ms_per_job": round(1000 * took / max(done, 1), 1)}


def bench_reading_waiting(root: Path, q: JobmanQueue, rounds: int = 15) -> dict:
    """`jobman list`, `show` and `wait` with the queue's jobs waiting, against a home where one job waits (and
    one has finished, for `wait`), median of interleaved rounds."""
    small = JobmanQueue(root, 1, label="reading")
    small.jobman("group", "set", "q", "--limit", "0")
    small.jobman("run", "--print-id", "--group", "q", "--", "true")
    done_small = small.jobman("run", "--print-id", "--", "true").stdout.strip()
    small.jobman("wait", done_small)
    done_big = q.jobman("run", "--print-id", "--", "true").stdout.strip()
    q.jobman("wait", done_big)
    waiting_big = q.jobman("list", "--limit", "2", "--state", "waiting", "--json").stdout
    waiting_big = json.loads(waiting_big)[0]["id"]
    commands = {"jobman list": lambda done, waiting: ["list"],
                "jobman show JOB": lambda done, waiting: ["show", waiting],
                "jobman wait JOB (finished)": lambda done, waiting: ["wait", done]}
    homes = {"one waiting": (small, done_small, small.jobman("list", "--json").stdout),
             "the queue": (q, done_big, None)}
    small_waiting = [j["id"] for j in json.loads(homes["one waiting"][2]) if j["phase"] == "waiting"][0]
    ids = {"one waiting": (done_small, small_waiting), "the queue": (done_big, waiting_big)}
    samples = {(label, name): [] for label in homes for name in commands}
    for _ in range(rounds):
        for label, (home, _, _) in homes.items():
            for name, args in commands.items():
                started = time.perf_counter()
                subprocess.run([JOBMAN, *args(*ids[label])], env=home.env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
                samples[(label, name)].append(time.perf_counter() - started)
    for pid in tagged_pids(small.tag):
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    shutil.rmtree(small.home, ignore_errors=True)
    report = {}
    for name in commands:
        one = statistics.median(samples[("one waiting", name)])
        many = statistics.median(samples[("the queue", name)])
        report[name] = {"one ms": round(one * 1000, 1), "queue ms": round(many * 1000, 1),
                        "ratio": round(many / one, 2)}
    return report


# --- the floor of the design -------------------------------------------------------------------------

# The floor of the design, twice: a Python process that does nothing but wake at a supervisor's renewal
# cadence (every 4-5 s, jittered), and one that also renews its job's row in a copy of the queue's
# database, as a supervisor does (one UPDATE, not synced on its own). One process per waiting job,
# renewing its lease: this much the design itself costs, whatever a supervisor does besides.
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
        procs = []
        try:
            for n, a in enumerate(args):
                if n % 100 == 0:
                    guard(n, len(args), f"the floor ({name})")
                procs.append(subprocess.Popen([sys.executable, "-I", "-S", "-c", code, *a], env=env,
                                              stdin=subprocess.DEVNULL, start_new_session=True))
        except OutOfMemory:
            pass
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
            if n % 100 == 0:
                try:
                    guard(n, size, "tsp")
                except OutOfMemory:
                    report["stopped_at"] = n
                    return report
            try:
                tsp("true")
            except subprocess.TimeoutExpired:
                report["stuck_at"] = n  # the server takes no more clients: it cannot hold this queue
                report["submit_seconds_per_job"] = round((time.monotonic() - start - 20) / max(n, 1), 4)
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
    submitted = 0
    for n in range(size):
        if n % 100 == 0:
            try:
                guard(n, size, "nq")
            except OutOfMemory:
                break
        subprocess.run(["nq", "true"], env=env, capture_output=True, check=True)
        submitted += 1
    submit = time.monotonic() - start
    time.sleep(1.0)
    waiting = [p for p in tagged_pids(tag) if cmdline(p) and b"sleep" not in cmdline(p) and b"while" not in cmdline(p)]
    cost = _cost_of(waiting, idle)
    start = time.monotonic()
    gate.touch()
    subprocess.run(["nq", "-w"], env=env, capture_output=True)
    took = time.monotonic() - start
    return {"submitted": submitted, "submit_seconds": round(submit, 1),
            "submit_seconds_per_job": round(submit / max(submitted, 1), 4), "idle_waiting_processes": cost,
            "drain_one_at_a_time": {"seconds": round(took, 2), "ms_per_job": round(1000 * took / size, 1)}}


# --- reading with many finished jobs ------------------------------------------------------------------

def _fill_finished(home: Path, env: dict, count: int) -> str:
    """One real finished job, cloned `count` times (every row: jobs, state, attempt, events)."""
    sys.path.insert(0, str(ROOT / "src"))
    from runkit.core.ids import uuid7

    job = subprocess.run([JOBMAN, "run", "--print-id", "--name", "seed", "--", "true"], env=env, capture_output=True, text=True,
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
    lines += ["| waiting jobs | submitted (batch) | submission failures | submit, batch form | idle CPU, all of"
              " jobman | USS per lean waiter | USS, all of jobman | drain per job (limit 2) | outcomes |"
              " logs with a traceback |", "|---|---|---|---|---|---|---|---|---|---|"]
    for size, r in report["jobman"].items():
        idle, hold = r["idle"], r["hold"]
        lines.append(f"| {size} | {hold['submitted']} | {hold['submit_failures']} | {hold['submit_seconds']} s |"
                     f" {idle['cpu_percent']}% | {idle.get('lean_uss_median_kib', 0)} KiB |"
                     f" {idle['uss_total_mib']} MiB | {r['drain']['ms_per_job']} ms | {r['drain']['outcomes']} |"
                     f" {r['supervisor_logs_with_traceback']} |")
    if report.get("loop"):
        lines += ["", "| submitting N jobs | jobman, one shell loop of `jobman run` | jobman, batch form |"
                      " tsp, one loop | nq, one loop |", "|---|---|---|---|---|"]
        for size, r in report["loop"].items():
            batch = report["jobman"].get(size, {}).get("hold", {})
            tsp = report.get("tsp", {}).get(size, {})
            nq = report.get("nq", {}).get(size, {})
            tsp_text = ("-" if not tsp else f"cannot: stuck at {tsp['stuck_at'] + 1}" if "stuck_at" in tsp
                        else f"{tsp['submit_seconds_per_job'] * size:.1f} s")
            nq_text = f"{nq['submit_seconds']} s" if nq else "-"
            lines.append(f"| {size} | {r['seconds']} s ({r['ms_per_job']} ms each) | {batch.get('submit_seconds')} s |"
                         f" {tsp_text} | {nq_text} |")
    reading = {size: r["reading"] for size, r in report["jobman"].items() if r.get("reading")}
    if reading:
        lines += ["", "| reading, N waiting against 1 | " + " | ".join(str(s) for s in reading) + " |",
                  "|---|" + "---|" * len(reading)]
        for name in next(iter(reading.values())):
            lines.append(f"| `{name}` | " + " | ".join(f"{r[name]['queue ms']} ms vs {r[name]['one ms']} ms"
                                                      f" ({r[name]['ratio']}x)" for r in reading.values()) + " |")
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
            if "stuck_at" in r or "stopped_at" in r:
                lines.append(f"| tsp, {size} queued | - | - | cannot hold it: submission"
                             f" {r.get('stuck_at', r.get('stopped_at', 0)) + 1} never returned (the server takes no"
                             f" more clients) |")
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


KNOWN = {"--sizes", "--idle", "--skip-peers", "--skip-windows", "--skip-reading", "--skip-history", "--skip-loop",
         "--skip-floor"}


def main() -> int:
    args = sys.argv[1:]
    flags = [a for i, a in enumerate(args) if a.startswith("-") and not (i and args[i - 1] in ("--sizes", "--idle"))]
    if "-h" in args or "--help" in args or set(flags) - KNOWN:
        print(__doc__)  # it holds thousands of processes for minutes: nothing starts on a flag it does not know
        return 0 if "-h" in args or "--help" in args else 2
    sizes = [100, 2000, 10000]
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
    report = {"machine": machine(), "idle_seconds": idle, "jobman": {}, "loop": {}, "floor": {}, "tsp": {}, "nq": {}}
    print(f"bench: MemAvailable {mem_available_mib()} MiB; submitting stops under {MEMORY_FLOOR_MIB} MiB",
          file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="jobman-queue-bench-") as tmp:
        root = Path(tmp)
        for size in sizes:
            print(f"... jobman, {size} jobs", file=sys.stderr, flush=True)
            report["jobman"][size] = bench_jobman(root, size, idle, reading="--skip-reading" not in args)
            print(json.dumps(report["jobman"][size]), file=sys.stderr, flush=True)
            if "--skip-loop" not in args:
                print(f"... jobman, {size} jobs from a shell loop", file=sys.stderr, flush=True)
                report["loop"][size] = bench_loop_submission(root, size)
                print(json.dumps(report["loop"][size]), file=sys.stderr, flush=True)
            if size <= FLOOR_MAX and "--skip-floor" not in args:
                report["floor"][size] = bench_floor(root, size, idle)
                print(json.dumps(report["floor"][size]), file=sys.stderr, flush=True)
            if peers:
                print(f"... tsp and nq, {size} jobs", file=sys.stderr, flush=True)
                report["tsp"][size] = bench_tsp(root, size, idle)
                report["nq"][size] = bench_nq(root, size, idle)
        if "--skip-windows" not in args:
            # The same queue with longer lease windows (settings of each job): what the renewal cadence costs.
            windows = {"JOBMAN_RENEW_INTERVAL": "30s", "JOBMAN_LEASE": "90s"}
            size = max(sizes)
            label = f"{size} (renew 30s, lease 90s)"
            print(f"... jobman, {label}", file=sys.stderr, flush=True)
            report["jobman"][label] = bench_jobman(root, size, idle, windows, reading=False)
            print(json.dumps(report["jobman"][label]), file=sys.stderr, flush=True)
        if "--skip-reading" not in args and "--skip-history" not in args:
            print("... reading with 10,000 finished jobs", file=sys.stderr, flush=True)
            report["reading"] = bench_reading(root)
    results = ROOT / "bench" / "results"
    results.mkdir(exist_ok=True)
    (results / "queue.json").write_text(json.dumps(report, indent=2) + "\n")
    print(render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
