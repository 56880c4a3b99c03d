"""The stado half of the chaos soak: N jobs drained by 6 agents (`stado agent` processes, two on each of three
hosts) on the local-directory backend or on SeaweedFS, submitted in batches (`stado submit --batch`, and some
one at a time) by three concurrent submitters, while soak_stado_chaos kills and restarts agents, stops them
past their promise, kills some for good, cancels random jobs and (SeaweedFS) slows, stalls and cuts the link to
the store. On SeaweedFS every client (agents and CLIs) also reaches the store through a fault proxy whose regime
`--faults` picks (soak_faults: writes that commit and lose their answer, reads that fail, late answers, a burst,
storms of 503s), and a watcher runs `stado status --json --all` through it now and then. Then every invariant is
checked (soak_stado_check), the CLIs' answers against the store among them.

Each job's command is `sh job.sh LEDGER SECONDS EXIT MODE MARKER`, whose MARKER path (unique per planned
job) maps any job found in the store back to the plan.
"""
import json
import random
import shlex
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from soak_common import (BIN, Deadline, FaultLog, PhaseReport, kill_leftovers, processes_mentioning, wait_until,
                         write_job_script)
from soak_faults import FaultRegime
from soak_stado_chaos import ChaosProxy, Fleet, StadoChaos

SUBMITTERS = 3
STATUS_EVERY = 8.0  # seconds between the watcher's `stado status --json --all`
PRODUCE = ('echo "$WC_JOB_ID" > art.txt && "$STADO_BIN" artifact put art.txt > /dev/null || exit 7; ')
CONSUME = '[ -s art.txt ] || exit 8; '


@dataclass
class Submit:
    """One `stado submit` (a batch or a single job) and what it said."""
    t0: float
    t1: float
    code: int
    keys: list[str]                 # the planned jobs it was given, in order
    printed: list[dict]             # what its --json printed per job (id, queued: true or null), in order
    stderr: str


@dataclass
class Status:
    """One `stado status --json --all` of the watcher: the ids it showed (None: it did not answer, exit != 0)."""
    t0: float
    t1: float
    code: int
    ids: set[str] | None
    corrupt: int = 0
    problems: int = 0
    stderr: str = ""


@dataclass
class CancelAnswer:
    t0: float
    t1: float
    job: str
    code: int
    answer: dict | None             # its --json (exit 0 or 1)
    stderr: str


@dataclass
class PlannedJob:
    key: str
    command: str
    own: str                 # completed | failed (exit 4) | timed_out | consumer (as its producer)
    entry: dict
    producer: str | None = None


def plan(rng: random.Random, n: int, job_sh: Path, ledger: Path, markers: Path,
         singles: float = 0.25) -> list[list[PlannedJob]]:
    """Batches of 1 to 40 jobs (about n in all), in submission order; `singles` of them of one job."""
    batches, count, seq = [], 0, 0
    while count < n:
        size = 1 if rng.random() < singles else rng.randint(5, 40)
        batch = []
        while len(batch) < size:
            seq += 1
            batch += _jobs(rng, f"k{seq:05d}", job_sh, ledger, markers)
        batches.append(batch)
        count += len(batch)
    return batches


def _jobs(rng, key, job_sh, ledger, markers) -> list[PlannedJob]:
    def job(k, seconds, code=0, mode="ok", own="completed", prefix="", **entry):
        command = prefix + " ".join(shlex.quote(str(a)) for a in
                                    ["sh", job_sh, ledger, seconds, code, mode, markers / k])
        if rng.random() < 0.2:
            entry["priority"] = rng.randint(-3, 3)
        return PlannedJob(k, command, own, dict(entry, command=command))

    kind = rng.choices(["ok", "long", "retry", "fail", "timeout", "pair"], [55, 10, 10, 8, 5, 12])[0]
    if kind == "ok":
        return [job(key, round(rng.uniform(0.05, 0.5), 2))]
    if kind == "long":
        return [job(key, round(rng.uniform(2.0, 4.0), 1))]
    if kind == "retry":
        return [job(key, 0.1, mode="fail-first", retries=1)]
    if kind == "fail":
        return [job(key, 0.1, code=4, own="failed")]
    if kind == "timeout":
        return [job(key, 30, own="timed_out", timeout="1s")]
    producer = job(key + "p", 0.2, prefix=PRODUCE, name=f"p-{key}")
    consumer = job(key + "c", 0.1, prefix=CONSUME, own="consumer", inputs=[f"p-{key}:art.txt"])
    consumer.producer = producer.key
    return [producer, consumer]


class StadoSoak:
    def __init__(self, workdir: Path, backend: str, n: int, seconds: float, rng: random.Random, chaos_gap: float,
                 faults: str = "none"):
        self.dir, self.backend, self.n, self.seconds, self.rng = workdir, backend, n, seconds, rng
        self.regime = faults if backend == "s3" else "none"
        self.chaos_gap = chaos_gap
        self.ledger = workdir / "ledger"
        self.faults = FaultLog()
        self.report = PhaseReport("stado, local directory" if backend == "file" else "stado, SeaweedFS")
        self.report.regime = self.regime
        self.planned_batches: list[list[PlannedJob]] = []
        self.accepted: dict[str, str] = {}       # job id -> plan key (from what the submitting CLIs printed)
        self.unsure: dict[str, str] = {}         # the same, for an id printed with "could not tell" (exit 7)
        self.cli_failures: list[str] = []
        self.cancels: list[tuple[float, float, str, str]] = []   # t0, t1, job id, what the CLI said
        self.submits: list[Submit] = []                           # every `stado submit` and what it said
        self.statuses: list[Status] = []                          # every `stado status --json --all` of the watcher
        self.cancel_answers: list[CancelAnswer] = []
        self.retrying: set[str] = set()                           # plan keys of jobs that fail first and retry
        self._lock = threading.Lock()
        self.skipped = 0
        self.server = self.proxy = self.fault_proxy = None

    def stado(self, *args, timeout=120) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN / "stado"), *args], env=self.env, capture_output=True, text=True, timeout=timeout)

    def run(self) -> PhaseReport:
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        try:
            self._open_store()
            return self._run()
        finally:
            if self.proxy is not None:
                self.proxy.close()
            if self.fault_proxy is not None:
                self.fault_proxy.close()
            if self.server is not None:
                self.server.stop()
            kill_leftovers(str(self.dir))

    def _open_store(self) -> None:
        from tests.stado.storekit import StoreTarget

        if self.backend == "file":
            self.target = self.direct = StoreTarget("file", f"file://{self.dir / 'store'}")
        else:
            from tests.stado.servers import start_seaweedfs

            from tests.stado.faultproxy import FaultProxy

            self.server = start_seaweedfs(self.dir / "seaweedfs")
            # clients -> ChaosProxy (the link: throttled, stalled, cut) -> FaultProxy (the answers) -> SeaweedFS
            self.fault_proxy = FaultProxy.for_endpoint(self.server.endpoint, bucket=self.server.bucket,
                                                       store_prefix="soak", seed=self.rng.randrange(1 << 30))
            self.proxy = ChaosProxy.for_endpoint(self.fault_proxy.endpoint)
            self.proxy_clock = time.time() - time.monotonic()  # the proxy's ledger is on the monotonic clock
            options = dict(self.server.options, endpoint=self.proxy.endpoint_for(self.server.endpoint), timeout=5)
            url = f"s3://{self.server.bucket}/soak"
            self.target = StoreTarget("s3", url, options, self.server.env)
            self.direct = StoreTarget("s3", url, self.server.options, self.server.env)
        self.env = self.target.subprocess_env(self.dir / "env")

    def _run(self) -> PhaseReport:
        from soak_stado_check import check

        deadline = Deadline(self.seconds)
        job_sh = write_job_script(self.dir)
        (self.dir / "markers").mkdir()
        # Under a fault regime, more submits of one job: more answers to check against the store.
        batches = plan(self.rng, self.n, job_sh, self.ledger, self.dir / "markers",
                       singles=0.25 if self.regime == "none" else 0.6)
        self.retrying = {j.key for batch in batches for j in batch if j.entry.get("retries")}
        self.planned_batches = batches
        self.deaths = self.dir / "deaths"
        deaths = subprocess.Popen([sys.executable, str(Path(__file__).with_name("soak_deaths.py")), str(self.ledger),
                                   str(self.deaths)], stdin=subprocess.PIPE)
        fleet = Fleet(self.dir, self.env, self.backend)
        fleet.start_all()
        chaos = StadoChaos(self.rng, fleet, self.faults, self.chaos_gap, self._cancel_one, self.proxy)
        # The burst and the storms fall while jobs are still being submitted (about n/10 s: see _submitter).
        window = min(self.seconds * 0.6, max(30.0, self.n / 10))
        regime = FaultRegime(self.fault_proxy, self.regime, self.faults, self.rng, window) \
            if self.fault_proxy is not None else None
        watching = threading.Event()
        watcher = threading.Thread(target=self._watch_status, args=(watching,), daemon=True, name="status-watch")
        started = time.time()
        if regime is not None:
            regime.start()
        submit_by = Deadline(self.seconds * 0.6)
        threads = [threading.Thread(target=self._submitter, args=(batches[i::SUBMITTERS], i, submit_by), daemon=True)
                   for i in range(SUBMITTERS)]
        for t in threads:
            t.start()
        chaos.start()
        if self.backend == "s3":
            watcher.start()
        for t in threads:
            t.join(max(1.0, deadline.left()))
        if self.skipped:
            self.report.notes.append(f"the submission window ran out: {self.skipped} batch(es) were not submitted")
        store = self.direct.open()
        reserve = min(20.0, max(3.0, self.seconds * 0.12))  # to stop the agents and check
        wait_until(lambda: self._unfinished(store) < 5, Deadline(self.seconds * 0.75 - (time.time() - started)))
        chaos.stop()
        if regime is not None:
            regime.stop()
        calm = time.time()
        drained = wait_until(lambda: self._unfinished(store) == 0, Deadline(deadline.left() - reserve), 1.0)
        self.report.seconds = time.time() - started
        self.report.drain_after_faults = time.time() - calm
        # A submit that could not tell (exit 7) may have sent a create that lands only now (held in a stalled
        # link until the chaos ended): the queue is drained once it has stayed empty for a few seconds.
        while drained and deadline.left() > reserve:
            time.sleep(3.0)
            if self._unfinished(store) == 0:
                break
            self.report.notes.append("a job appeared after the queue had drained (a create that landed late)")
            drained = wait_until(lambda: self._unfinished(store) == 0, Deadline(deadline.left() - reserve), 1.0)
            self.report.seconds = time.time() - started
            self.report.drain_after_faults = time.time() - calm
        watching.set()
        if watcher.is_alive():
            watcher.join(130)
        if self.fault_proxy is not None:
            from soak_faults import injected

            self.report.injected = injected(self.fault_proxy)
        if not drained:
            self.report.notes.append(f"the time given ran out before every job had finished "
                                     f"({self._unfinished(store)} unfinished)")
        for problem in fleet.stop_all(timeout=max(10.0, deadline.left() - 5)):
            self.report.violate("agents", problem)
        # A keeper outlives its agent by its bridge (--bridge-seconds, 30 s) and a promise at most.
        keepers_by = Deadline(45.0)
        while not keepers_by.passed() and any("stado.agent.keeper" in " ".join(p.argv)
                                              for p in processes_mentioning(str(self.dir))):
            time.sleep(0.5)
        time.sleep(0.2)  # the watcher of deaths sees the last ones
        deaths.stdin.close()
        deaths.wait(10)
        self.report.faults = self.faults.counts()
        self.faults.save(self.dir / "faults.jsonl")
        for error in chaos.errors:
            self.report.violate("chaos", error)
        self.report.gone = len(chaos.gone)
        check(self, store, batches, fleet)
        store.close()
        return self.report

    def _submitter(self, batches: list[list[PlannedJob]], which: int, until: Deadline) -> None:
        pace = min(self.seconds * 0.4, self.n / 10) / max(1, len(batches))  # ~10 jobs/s, in the first part of the time
        for i, batch in enumerate(batches):
            if until.passed():
                self.skipped += len(batches) - i
                return
            if i:
                time.sleep(self.rng.uniform(0, 2 * pace))
            if len(batch) == 1:
                entry = batch[0].entry
                args = ["submit", entry["command"], "--json"]
                for flag in ("priority", "retries", "timeout", "name"):
                    if flag in entry:
                        args += [f"--{flag}", str(entry[flag])]
                args += [a for i_ in entry.get("inputs", []) for a in ("--input", i_)]
            else:
                path = self.dir / f"batch-{which}-{i}.json"
                path.write_text(json.dumps([j.entry for j in batch]))
                args = ["submit", "--batch", str(path), "--json"]
            t0 = time.time()
            done = self.stado(*args, timeout=300)
            t1 = time.time()
            try:  # a batch stopped part way prints the jobs it queued (and the one it could not tell about) too
                printed = json.loads(done.stdout)["jobs"] if done.stdout.strip() else []
            except (ValueError, KeyError, TypeError):
                printed = []
                self.cli_failures.append(f"{t0:.3f} {t1:.3f} exit {done.returncode}: unreadable stdout "
                                         f"{done.stdout[:200]!r}")
            with self._lock:
                self.submits.append(Submit(t0, t1, done.returncode, [j.key for j in batch], printed, done.stderr))
                for j, said in zip(batch, printed):
                    (self.accepted if said.get("queued") else self.unsure)[said["id"]] = j.key
                if done.returncode != 0:
                    self.cli_failures.append(f"{t0:.3f} {t1:.3f} exit {done.returncode}: {done.stderr.strip()}")

    def _cancel_one(self) -> bool:
        """Cancel one of the newest jobs (most likely still queued or running), now and then any job; a third of
        the time one that fails first and retries (a cancel landing while its retry is written)."""
        with self._lock:
            ids = list(self.accepted)
            retrying = [i for i in ids[-60:] if self.accepted[i] in self.retrying]
        if retrying and self.rng.random() < 0.33:
            ids = retrying
        elif self.rng.random() < 0.8:
            ids = ids[-40:]
        if not ids:
            return False
        job_id = self.rng.choice(ids)
        t0 = time.time()
        done = self.stado("cancel", job_id, "--reason", "soak", "--json", timeout=300)
        t1 = time.time()
        try:  # exit 1 with its answer: the job had already ended otherwise
            answer = json.loads(done.stdout) if done.returncode in (0, 1) else None
            said = f"{answer['result']}: {answer['message']}" if answer else None
        except (ValueError, KeyError, TypeError):
            answer = said = None
        said = said or f"exit {done.returncode}: {done.stderr.strip()}"
        self.cancels.append((t0, t1, job_id, said))
        with self._lock:
            self.cancel_answers.append(CancelAnswer(t0, t1, job_id, done.returncode, answer, done.stderr))
        self.faults.add("cancel", t0, t1, job=job_id, detail=said)
        return True

    def _watch_status(self, stop: threading.Event) -> None:
        """`stado status --json --all` through the faulty path every STATUS_EVERY seconds until `stop`: what each
        answer showed is checked against the jobs accepted before it began (soak_stado_check)."""
        while not stop.wait(STATUS_EVERY):
            t0 = time.time()
            try:
                done = self.stado("status", "--json", "--all", timeout=120)
            except subprocess.TimeoutExpired:
                self.statuses.append(Status(t0, time.time(), -1, None, stderr="timed out after 120 s"))
                continue
            t1 = time.time()
            try:
                view = json.loads(done.stdout) if done.returncode == 0 else None
            except ValueError:
                view = None
            if view is None:
                self.statuses.append(Status(t0, t1, done.returncode, None, stderr=done.stderr.strip()[-300:]))
                continue
            self.statuses.append(Status(t0, t1, 0, {job["id"] for job in view.get("jobs", [])},
                                        corrupt=view.get("corrupt") or 0, problems=len(view.get("problems") or [])))

    def _unfinished(self, store) -> int:
        """Accepted jobs without a terminal record, plus queue and running entries (a move under way)."""
        from stado.core import keys

        try:
            terminal = {keys.job_id_of(e.key, p) for p in (keys.COMPLETED, keys.FAILED, keys.CANCELLED)
                        for e in store.list(p)}
            moving = sum(1 for p in (keys.QUEUE, keys.RUNNING) for _ in store.list(p))
        except Exception:  # the store is being stalled by the chaos: not drained yet
            return 10**6
        with self._lock:
            waiting = sum(1 for job_id in self.accepted if job_id not in terminal)
        return waiting + moving
