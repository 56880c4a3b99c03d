"""What one lease round costs at 2,000, 10,000 and 50,000 waiting jobs. Run with `make bench-round`.

The round's holder is the only waiting supervisor that wakes every renewal interval (jobman/supervisor/
lease_round.py), so its CPU time is most of what a waiting sweep costs. Submitting 50,000 real jobs would
take half an hour and 14 GiB of lean waiters; this bench builds the database instead: one real job submitted
into a paused group, its rows copied N times with the identities of 200 live `sleep` processes as their
supervisors (so each verification reads a real /proc entry), leases spread over a lease as a running round
leaves them. Then it runs the round's own function on a virtual clock, a round every 4.5 s (the mean of the
jittered 5 s interval), and reports its CPU time per round, per waiting job and as a share of a core, beside
the real peer every waking waiter pays: the start of the venv's own `python -c pass`; and the CPU time of the
round a new holder runs first, when it watches every covered supervisor (one pidfd per process: here 200 of
them, shared by the jobs, where a real sweep has one per job).

    python bench/round_bench.py [--sizes 2000,10000,50000] [--rounds 40]

Results go to stdout (markdown) and bench/results/round.json. The figure for all of jobman at 10,000 real
waiting jobs is `make bench-queue`'s.
"""
import argparse
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from jobman.store import database  # noqa: E402
from jobman.supervisor import lease_round  # noqa: E402
from jobman.supervisor.lease import PRUNE_EVERY  # noqa: E402
from runkit.system import proc  # noqa: E402
from runkit.system.deathwatch import DeathWatch  # noqa: E402

PERIOD, LEASE = 5.0, 15.0
MEAN_GAP = 0.9 * PERIOD  # rounds come 0.8-1.0 periods apart
SLEEPERS = 200


def python_start_ms(reps: int = 20) -> float:
    times = []
    for _ in range(reps):
        before = os.times()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        after = os.times()
        times.append(after.children_user - before.children_user + after.children_system - before.children_system)
    times.sort()
    return times[len(times) // 2] * 1000


def build(home: Path, size: int, identities) -> str:
    env = {**os.environ, "JOBMAN_HOME": str(home), "JOBMAN_LEAN_WAIT": "0"}
    jobman = [sys.executable, "-m", "jobman"]
    subprocess.run(jobman + ["group", "set", "paused", "--limit", "0"], env=env, check=True, capture_output=True)
    template = subprocess.run(jobman + ["run", "--print-id", "--group", "paused", "--", "true"], env=env, check=True,
                              capture_output=True, text=True).stdout.strip()
    conn = sqlite3.connect(home / "jobman.db", isolation_level=None, timeout=30)
    deadline = time.time() + 30
    while conn.execute("SELECT waiting_for FROM job_state WHERE job_id = ?", (template,)).fetchone()[0] != "slot":
        if time.time() > deadline:
            raise SystemExit("the template job never started waiting")
        time.sleep(0.05)
    os.kill(conn.execute("SELECT supervisor_pid FROM job_state WHERE job_id = ?", (template,)).fetchone()[0], 9)
    jobs_columns = [r[1] for r in conn.execute("PRAGMA table_info(jobs)")]
    state_columns = [r[1] for r in conn.execute("PRAGMA table_info(job_state)")]
    jobs_select = ",".join({"id": "?", "handle": "?"}.get(c, c) for c in jobs_columns)
    state_select = ",".join({"job_id": "?", "supervisor_pid": "?", "supervisor_start_time": "?",
                             "supervisor_boot_id": "?", "lease_expires_at": "?"}.get(c, c) for c in state_columns)
    jobs_sql = f"INSERT INTO jobs ({','.join(jobs_columns)}) SELECT {jobs_select} FROM jobs WHERE id = ?"
    state_sql = f"INSERT INTO job_state ({','.join(state_columns)}) SELECT {state_select} FROM job_state WHERE job_id = ?"
    now = time.time()
    conn.execute("BEGIN")
    for i in range(size):
        job_id = str(uuid.uuid4())
        # (the ?s in the order of the table's columns)
        job_values = {"id": job_id, "handle": 1000000 + i}
        conn.execute(jobs_sql, tuple(job_values[c] for c in jobs_columns if c in job_values) + (template,))
        ident = identities[i % len(identities)]
        values = {"job_id": job_id, "supervisor_pid": ident.pid, "supervisor_start_time": ident.start_time,
                  "supervisor_boot_id": ident.boot_id, "lease_expires_at": now + LEASE * (i % 97) / 97}
        conn.execute(state_sql, tuple(values[c] for c in state_columns if c in values) + (template,))
    conn.execute("DELETE FROM lease_round")
    conn.execute("COMMIT")
    conn.close()
    return template


def measure(home: Path, template: str, rounds: int) -> dict:
    """CPU per round in the steady state, and of the round that takes the round up (its holder then watches every
    covered supervisor: a pidfd each, here shared by the jobs of one of the SLEEPERS processes)."""
    conn = database.connect(str(home / "jobman.db"), create=False)
    now = time.time()
    watch, term, period, count = DeathWatch(), None, None, 0

    def one_round(at: float) -> None:
        nonlocal term, period, count
        count += 1
        result = lease_round.run(conn, "bench", template, at, PERIOD, proc.verify, watch, term,
                                 count % PRUNE_EVERY == 0, period)
        period, term = result[0], result[3]

    for _ in range(10):  # the leases settle into the round's rhythm: every job covered
        one_round(now)
        now += MEAN_GAP
    before_rows = conn.total_changes
    cpu = time.process_time()
    for _ in range(rounds):
        one_round(now)
        now += MEAN_GAP
    cpu = time.process_time() - cpu
    written = (conn.total_changes - before_rows) / rounds
    watch.close()
    taking = time.process_time()  # another holder, whose watch starts empty
    lease_round.run(conn, "bench-2", template, now + 2 * PERIOD + 1, PERIOD, proc.verify, DeathWatch(), None)
    taking = time.process_time() - taking
    conn.close()
    return {"ms_per_round": cpu / rounds * 1000, "rows_written_per_round": written, "takeover_ms": taking * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="2000,10000,50000")
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(SLEEPERS)]
    try:
        identities = [proc.identity(p.pid) for p in sleepers]
        start = python_start_ms()
        results = []
        for size in [int(s) for s in args.sizes.split(",")]:
            with tempfile.TemporaryDirectory(prefix="round-bench-") as tmp:
                template = build(Path(tmp), size, identities)
                row = {"waiting": size, **measure(Path(tmp), template, args.rounds)}
                row["us_per_job"] = row["ms_per_round"] * 1000 / size
                row["core_percent"] = row["ms_per_round"] / (MEAN_GAP * 1000) * 100
                row["python_starts"] = row["ms_per_round"] / start
                results.append(row)
    finally:
        for p in sleepers:
            p.kill()
            p.wait()
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Linux {platform.release()}, Python {platform.python_version()}"
    print(f"lease round, {time.strftime('%Y-%m-%d')}, {machine}; `python -c pass`: {start:.1f} ms of CPU\n")
    print("| waiting jobs | rows written per round | CPU per round | per waiting job | share of a core | in Python starts"
          " | taking the round up |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['waiting']:,} | {r['rows_written_per_round']:,.0f} | {r['ms_per_round']:.1f} ms"
              f" | {r['us_per_job']:.2f} us | {r['core_percent']:.2f}% | {r['python_starts']:.2f} |"
              f" {r['takeover_ms']:.0f} ms |")
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "round.json").write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "machine": machine,
                                                "python_start_ms": start, "rounds": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
