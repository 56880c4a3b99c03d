"""The jobman half of the chaos soak: N jobs submitted from 8 concurrent shells (real /bin/sh scripts running
`jobman run` one after another: chains with --after-success, fan-in, --retries, --timeout, groups with
limits) while soak_jobman_chaos injects faults; then every invariant is checked (soak_jobman_check).

The plan is made of units, each a few jobs that name each other (every job has a unique display name, so a
dependent names its dependency as a user would); a unit's jobs come from one shell, in order.
"""
import json
import os
import random
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from soak_common import BIN, Deadline, FaultLog, PhaseReport, kill_leftovers, wait_until, write_job_script
from soak_jobman_chaos import JobmanChaos, mount_small_tmpfs, unmount

SHELLS = 8
GROUPS = {"default": 3, "g1": 1, "g2": 2, "g4": 4}
LEASE, RENEW, CLAIM, POLL = 2.0, 0.4, 10.0, 1.0


@dataclass
class PlannedJob:
    name: str
    shell: int
    options: list = field(default_factory=list)
    deps: list = field(default_factory=list)     # (condition, name): success | failure | end
    seconds: float = 0.1
    code: int = 0
    mode: str = "ok"                             # ok | fail-first
    own: str = "succeeded"                       # the outcome it would have with its dependencies satisfied


def _unit(rng: random.Random, shell: int, seq) -> list[PlannedJob]:
    """One unit of related jobs, chosen at random."""
    def job(**kw):
        kw.setdefault("seconds", round(rng.uniform(0.02, 0.3), 2))
        j = PlannedJob(f"s{shell}-{next(seq):05d}", shell, **kw)
        j.options = [*j.options, "--group", rng.choice(list(GROUPS))]
        if rng.random() < 0.2:
            j.options += ["--priority", str(rng.randint(-5, 5))]
        return j

    kind = rng.choices(["single", "chain", "fanin", "retry", "fail", "timeout"], [30, 20, 15, 15, 10, 10])[0]
    if kind == "single":
        return [job()]
    if kind == "chain":
        a = job()
        b = job(deps=[("success", a.name)])
        c = job(deps=[("success", b.name)])
        return [a, b, c]
    if kind == "fanin":
        parents = [job() for _ in range(3)]
        if rng.random() < 0.3:
            parents[1].code, parents[1].own = 5, "failed"
        both = [job(deps=[("success", p.name) for p in parents]), job(deps=[("end", p.name) for p in parents])]
        return parents + both
    if kind == "retry":
        return [job(mode="fail-first", options=["--retries", "2", "--retry-delay", "0.2s"])]
    if kind == "fail":
        f = job(code=4, own="failed", options=["--retries", "1", "--retry-delay", "0.1s"])
        return [f, job(deps=[("failure", f.name)]), job(deps=[("success", f.name)])]
    return [job(seconds=30, own="timed_out", options=["--timeout", "0.5s", "--kill-after", "1s"])]


def plan(rng: random.Random, n: int) -> list[list[PlannedJob]]:
    """Per shell, its jobs in submission order (about n in all)."""
    seq = iter(range(1, 10**6))
    shells = [[] for _ in range(SHELLS)]
    total = 0
    while total < n:
        shell = min(range(SHELLS), key=lambda s: len(shells[s]))
        unit = _unit(rng, shell, seq)
        shells[shell] += unit
        total += len(unit)
    return shells


def expected_outcome(job: PlannedJob, outcome_of) -> str | None:
    """What the job should end as, given its dependencies' actual outcomes (None: one was never accepted)."""
    for condition, dep in job.deps:
        got = outcome_of(dep)
        if got is None:
            return None
        if (condition == "success" and got != "succeeded") or (condition == "failure" and got == "succeeded"):
            return "dependency_failed"
    return job.own


def shell_script(jobs: list[PlannedJob], job_sh: Path, ledger: Path, out: Path, errors: Path, stop: Path) -> str:
    """A shell that submits its jobs one after another, as a user's loop would, and writes one line per
    submission: name, exit status, start and end time, and the id it printed."""
    jobman = shlex.quote(str(BIN / "jobman"))
    lines = ["#!/bin/sh", f"out={shlex.quote(str(out))}; errs={shlex.quote(str(errors))}; stop={shlex.quote(str(stop))}",
             "sub() {", '  n=$1; shift', '  [ -e "$stop" ] && return', '  t0=$(date +%s.%N)',
             f'  id=$({jobman} run --print-id --name "$n" "$@" 2>"$errs/$n")', '  rc=$?',
             '  echo "$n $rc $t0 $(date +%s.%N) $id" >> "$out"',
             # Refused on a full disk (one fast line): wait a moment before the next, as a user who reads it
             # would, so that one fill of a second or two does not use up a short soak's whole plan.
             '  [ "$rc" -ne 0 ] && grep -q "disk is full" "$errs/$n" && sleep 1', "}"]
    for j in jobs:
        deps = [f"--after-{c}" if c != "end" else "--after" for c, _ in j.deps]
        dep_args = [a for flag, (_, name) in zip(deps, j.deps) for a in (flag, name)]
        command = ["sh", str(job_sh), str(ledger), str(j.seconds), str(j.code), j.mode]
        lines.append(" ".join(shlex.quote(a) for a in ["sub", j.name, *j.options, *dep_args, "--", *command]))
    return "\n".join(lines) + "\n"


class JobmanSoak:
    def __init__(self, workdir: Path, n: int, seconds: float, rng: random.Random, chaos_gap: float):
        self.dir, self.n, self.seconds, self.rng, self.chaos_gap = workdir, n, seconds, rng, chaos_gap
        self.home = workdir / "home"
        self.ledger = workdir / "ledger"
        self.faults = FaultLog()
        self.report = PhaseReport("jobman")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("JOBMAN_")}
        self.env.update(JOBMAN_HOME=str(self.home), JOBMAN_LEASE=f"{LEASE}s", JOBMAN_RENEW_INTERVAL=f"{RENEW}s",
                        JOBMAN_CLAIM_WINDOW=f"{CLAIM}s", JOBMAN_POLL_INTERVAL=f"{POLL}s",
                        PATH=f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}")
        self.tmpfs = False

    def jobman(self, *args, timeout=120) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN / "jobman"), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def run(self) -> PhaseReport:
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        size = "256m" if self.n > 500 else "64m"
        self.tmpfs = mount_small_tmpfs(self.home, size)
        if not self.tmpfs:
            self.home.mkdir(exist_ok=True)
            self.report.notes.append("not root: the home is a plain directory and no disk_full fault was injected")
        else:
            self.report.notes.append(f"the home is a {size} tmpfs, filled to the last byte by each disk_full fault")
        try:
            return self._run()
        finally:
            kill_leftovers(str(self.dir))
            if self.tmpfs:
                self._keep_home()
                unmount(self.home)

    def _keep_home(self) -> None:
        """The tmpfs goes away: keep the logs and the database beside the rest of the soak's files."""
        shutil.copytree(self.home, self.dir / "home-copy", dirs_exist_ok=True, ignore_dangling_symlinks=True,
                        ignore=shutil.ignore_patterns("*.fifo"))

    def _run(self) -> PhaseReport:
        from soak_jobman_check import check

        deadline = Deadline(self.seconds)
        for group, limit in GROUPS.items():
            done = self.jobman("group", "set", group, "--limit", str(limit))
            if done.returncode != 0:
                raise RuntimeError(f"jobman group set {group}: {done.stderr.strip()}")
        job_sh = write_job_script(self.dir)
        shells = plan(self.rng, self.n)
        (self.dir / "errors").mkdir(exist_ok=True)
        stop = self.dir / "stop-submitting"
        procs = []
        chaos = JobmanChaos(self.rng, self.home, self.faults, LEASE, self.chaos_gap,
                            fill_path=self.home / "filler" if self.tmpfs else None)
        started = time.time()
        for i, jobs in enumerate(shells):
            script = self.dir / f"shell-{i}.sh"
            script.write_text(shell_script(jobs, job_sh, self.ledger, self.dir / f"shell-{i}.out",
                                           self.dir / "errors", stop))
            with open(self.dir / f"shell-{i}.err", "wb") as err:
                procs.append(subprocess.Popen(["/bin/sh", str(script)], env=self.env, stdin=subprocess.DEVNULL,
                                              stdout=subprocess.DEVNULL, stderr=err, cwd=self.dir))
        chaos.start()
        submit_by = Deadline(self.seconds * 0.5)
        wait_until(lambda: all(p.poll() is not None for p in procs), submit_by)
        if not all(p.poll() is not None for p in procs):
            stop.touch()  # out of time: the shells stop submitting (what they did not submit is counted)
            self.report.notes.append("the submission window ran out: the shells were told to stop")
        for p in procs:
            p.wait()
        reserve = min(20.0, max(3.0, self.seconds * 0.12))  # for the processes to end and the checks
        wait_until(lambda: self._active() < 10, Deadline(self.seconds * 0.75 - (time.time() - started)), 1.0)
        chaos.stop()
        drained = wait_until(lambda: self._active() == 0, Deadline(deadline.left() - reserve), interval=1.0)
        self.report.seconds = time.time() - started
        if not drained:
            self.report.notes.append("the time given ran out before every job had finished")
        self._settle_processes(Deadline(min(15.0, max(3.0, deadline.left()))))
        self.report.faults = self.faults.counts()
        self.faults.save(self.dir / "faults.jsonl")
        for error in chaos.errors:
            self.report.violate("chaos", error)
        check(self, shells)
        return self.report

    def _active(self) -> int:
        done = self.jobman("list", "--active", "--json")
        if done.returncode != 0:
            return 10**6  # cannot tell (the home full, say): not drained
        try:
            return len(json.loads(done.stdout))
        except ValueError:
            return 10**6

    def _settle_processes(self, deadline: Deadline) -> None:
        """Targets of lost jobs run on alone (README: a lost job's tree outlives its supervisor): stop them as a
        user would, with `jobman cancel` (which finds a lost job's tree), and give them and exiting supervisors a
        moment to end."""
        from soak_common import processes_mentioning

        listing = self.jobman("list", "--json", "--all")
        try:
            lost = [j["id"] for j in json.loads(listing.stdout) if j.get("outcome") == "lost"]
        except ValueError:
            lost = []
        for job_id in lost:
            self.jobman("cancel", job_id)
        wait_until(lambda: not processes_mentioning(str(self.dir)), deadline, interval=0.5)
