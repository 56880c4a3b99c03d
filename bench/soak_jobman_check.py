"""The jobman soak's invariants, checked from durable state (`jobman list --json`, PRAGMA integrity_check), from
the jobs' own ledger and from the process table, once every job has finished (or the time ran out):

- every accepted job is on record in exactly one terminal state (an id a shell printed is never missing);
- no job's command ran twice at the same time, no attempt ran twice, none ran after its job was recorded
  finished (the target of a `lost` job may outlive its supervisor, as README says; it never starts after);
- no group ever ran more jobs at once than its limit;
- every outcome other than the one the plan gives (with the dependencies' actual outcomes) is explained by
  a recorded fault: `lost` by a SIGKILL of that job's supervisor; `submission_failed` by a kill of its CLI or
  supervisor or a full disk; anything else by a fault that touched that job or a full disk in its lifetime
  (a held write lock explains nothing: it must be waited out);
- a submission that failed without being killed printed one line, and was explained (its dependency was never
  accepted, or the disk was full);
- no process of the soak left running; no traceback and no "database is locked" in any log;
  `PRAGMA integrity_check` is ok.
"""
import json
import re
import sqlite3
import time
from collections import Counter
from pathlib import Path

from soak_common import max_concurrency, overlaps, processes_mentioning, read_ledger, scan_logs
from soak_jobman import GROUPS, expected_outcome

SLACK = 0.05  # seconds: the ledger's and jobman's clocks are the same clock, read a moment apart


def _submissions(soak) -> dict[str, dict]:
    found = {}
    for out in sorted(soak.dir.glob("shell-*.out")):
        for line in out.read_text(errors="replace").splitlines():
            parts = line.split()
            if len(parts) >= 4:
                found[parts[0]] = {"rc": int(parts[1]), "t0": float(parts[2]), "t1": float(parts[3]),
                                   "id": parts[4] if len(parts) > 4 else None}
    return found


def check(soak, shells) -> None:
    r = soak.report
    planned = {j.name: j for jobs in shells for j in jobs}
    subs = _submissions(soak)
    r.attempted = len(subs)
    listing = soak.jobman("list", "--json", "--all", timeout=300)
    if listing.returncode != 0:
        r.violate("durable state", f"jobman list --json exited {listing.returncode}: {listing.stderr.strip()[:300]}")
        return
    jobs = json.loads(listing.stdout)
    by_name: dict[str, list] = {}
    for j in jobs:
        by_name.setdefault(j["name"], []).append(j)
    r.jobs = len(jobs)
    r.outcomes = Counter(j["outcome"] or f"unfinished ({j['phase']})" for j in jobs)
    runs, bad_lines = read_ledger(soak.ledger)
    for line in bad_lines:
        r.violate("ledger", f"unreadable line {line!r}")
    faults = soak.faults
    _terminal(r, jobs, by_name, subs)
    _runs(r, jobs, runs, faults)
    _groups(r, jobs, runs)
    _explained(r, planned, by_name, subs, faults)
    _submission_errors(soak, r, planned, by_name, subs, faults)
    for p in processes_mentioning(str(soak.dir)):
        r.violate("left running", f"pid {p.pid}: {' '.join(p.argv)[:200]}")
    logs = [p for p in soak.home.rglob("*") if p.is_file() and p.suffix in (".log", "")]
    logs += list((soak.dir / "errors").iterdir()) + list(soak.dir.glob("shell-*.err"))
    problems, waited = scan_logs(logs)
    for problem in problems:
        r.violate("logs", problem)
    if waited:
        r.notes.append(f"{waited} log line(s) say a locked database was waited out (not failures)")
    r.checks["logs scanned"] = len(logs)
    _integrity(r, soak.home / "jobman.db")


def _terminal(r, jobs, by_name, subs) -> None:
    for j in jobs:
        if j["phase"] != "finished" or not j["outcome"]:
            r.violate("terminal", f"{j['name']} ({j['id']}) is {j['phase']} ({j.get('wait_detail') or ''})")
    ids = {j["id"] for j in jobs}
    for name, s in subs.items():
        if s["rc"] == 0 and s["id"] not in ids:
            r.violate("no job lost", f"{name}: `jobman run` printed {s['id']}, which is not on record")
    for name, found in by_name.items():
        if len(found) > 1:
            r.violate("one record", f"{name} is on record {len(found)} times")
    r.checks["jobs on record"] = len(jobs)


def _runs(r, jobs, runs, faults) -> None:
    finished = {j["id"]: j for j in jobs}
    now = time.time()
    outlived = 0
    for job_id, job_runs in runs.items():
        j = finished.get(job_id)
        if j is None:
            r.violate("ran unrecorded", f"job {job_id} ran ({len(job_runs)} run(s)) but is not on record")
            continue
        attempts = Counter(run.attempt for run in job_runs)
        for attempt, n in attempts.items():
            if n > 1:
                r.violate("one run per attempt", f"{j['name']}: attempt {attempt} ran {n} times")
        for a, b in overlaps(job_runs, now):
            r.violate("never twice at once", f"{j['name']}: attempts {a.attempt} (pid {a.pid}) and {b.attempt} "
                                              f"(pid {b.pid}) ran at the same time")
        end_of_record = j["finished_at"]
        if end_of_record is None:
            continue
        for run in job_runs:
            if run.start > end_of_record + SLACK:
                r.violate("nothing after terminal", f"{j['name']}: attempt {run.attempt} started "
                                                    f"{run.start - end_of_record:.2f} s after it was recorded {j['outcome']}")
            elif run.end is not None and run.end > end_of_record + SLACK:
                if j["outcome"] == "lost":
                    outlived += 1
                else:
                    r.violate("nothing after terminal", f"{j['name']}: attempt {run.attempt} ran "
                                                        f"{run.end - end_of_record:.2f} s past its {j['outcome']} record")
    if outlived:
        r.notes.append(f"{outlived} target(s) of lost jobs ran on after their supervisor was killed and the job was "
                       "recorded lost (documented: the outcome says the supervisor was lost, not the target)")
    r.checks["runs in the ledger"] = sum(len(v) for v in runs.values())


def _groups(r, jobs, runs) -> None:
    group_of = {j["id"]: j["group"] for j in jobs}
    end_of = {j["id"]: j["finished_at"] for j in jobs}
    now = time.time()
    for group, limit in GROUPS.items():
        intervals = [(run.start, run.end if run.end is not None else (end_of.get(job_id) or now))
                     for job_id, job_runs in runs.items() if group_of.get(job_id) == group for run in job_runs]
        most, at = max_concurrency(intervals)
        if most > limit:
            r.violate("group limits", f"group {group} (limit {limit}) ran {most} jobs at once at "
                                      f"{time.strftime('%H:%M:%S', time.localtime(at))}")


def _explained(r, planned, by_name, subs, faults) -> None:
    """Every outcome that is not the plan's is explained by a recorded fault."""
    def outcome_of(name):
        found = by_name.get(name)
        return found[0]["outcome"] if found else None

    for name, found in by_name.items():
        j, plan = found[0], planned.get(name)
        if plan is None:
            r.violate("explained", f"{name} ({j['id']}) is on record but was never planned")
            continue
        want = expected_outcome(plan, outcome_of)
        got = j["outcome"]
        if got is None or got == want:
            continue
        own = [f for f in faults.faults if f.job in (j["id"], name)]
        since = subs.get(name, {}).get("t0", j["submitted_at"])
        full = faults.overlapping(("disk_full",), since, j["finished_at"] or time.time(), slack=1.0)
        if got == "lost":
            why = [f for f in own if f.kind == "supervisor_kill"]
        elif got == "submission_failed":
            why = [f for f in own if f.kind in ("cli_kill", "supervisor_kill", "supervisor_stop")] + full
        else:
            why = own + full
        if not why:
            storage = sorted({f.kind for f in faults.overlapping(("disk_full", "db_lock"), since,
                                                                  j["finished_at"] or time.time(), slack=1.0)})
            under_way = f"; storage faults under way: {', '.join(storage)}" if storage else ""
            r.violate("explained", f"{name} ({j['id']}) ended {got}, the plan says {want}, and no recorded fault "
                                   f"explains it{under_way} ({(j.get('detail') or '')[:200]})")
    r.checks["outcomes checked against the plan"] = len(by_name)


def _submission_errors(soak, r, planned, by_name, subs, faults) -> None:
    killed = {f.job for f in faults.of("cli_kill")}
    for name, s in subs.items():
        if s["rc"] == 0:
            continue
        if name in killed and s["rc"] in (137, -9):
            continue
        err = (soak.dir / "errors" / name).read_text(errors="replace").strip() if (soak.dir / "errors" / name).exists() else ""
        if len(err.splitlines()) > 1:
            r.violate("one-line errors", f"{name}: `jobman run` exited {s['rc']} with {len(err.splitlines())} lines: "
                                         f"{err[:300]!r}")
        plan = planned[name]
        missing_dep = any(not by_name.get(dep) for _, dep in plan.deps)
        full = faults.overlapping(("disk_full",), s["t0"], s["t1"], slack=1.0)
        # The handoff's other half killed or stopped by the chaos: the CLI says so and records submission_failed.
        ids = {name} | {j["id"] for j in by_name.get(name) or ()} | set(re.findall(r"\bjob ([0-9a-f-]{36})\b", err))
        supervisor = [f for f in faults.overlapping(("supervisor_kill", "supervisor_stop"), s["t0"], s["t1"], slack=1.0)
                      if f.job in ids]
        if not (missing_dep or full or supervisor):
            r.violate("explained", f"{name}: `jobman run` exited {s['rc']}: {err[:300]!r}")


def _integrity(r, db: Path) -> None:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=60)
        try:
            result = [row[0] for row in conn.execute("PRAGMA integrity_check")]
        finally:
            conn.close()
    except sqlite3.Error as e:
        r.violate("integrity_check", f"{type(e).__name__}: {e}")
        return
    if result != ["ok"]:
        r.violate("integrity_check", "; ".join(result)[:400])
