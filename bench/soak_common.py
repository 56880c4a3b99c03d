"""What both halves of the chaos soak share: the fault log, the jobs' ledger, the process table, log scans,
deadlines and the report.

The jobs of the soak run `job.sh` (written by `write_job_script`), which appends one line to a ledger file
when it starts and one when it ends (or is told to stop):

    S <job id> <attempt> <pid> <process group> <owner pid> <unix time>
    E <job id> <attempt> <pid> <unix time> <how>

so the invariants about runs (never two at once, never after the record says it ended) are checked from the
jobs' own side effects, not from what the tools say about them. The attempt is jobman's JOBMAN_ATTEMPT, or
stado's WC_JOB_STARTED_AT (the attempt's start, kept across a re-adoption). The owner is the parent of the
job's process-group leader when the job started: its jobman supervisor, or its stado agent.
"""
import os
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = REPO / ".venv" / "bin"

JOB_SCRIPT = r"""#!/bin/sh
# The soak's job: ledger SECONDS EXIT MODE [MARKER]. MODE: ok | fail-first (fails its first attempt).
ledger=$1; secs=$2; code=$3; mode=$4
id=${JOBMAN_JOB_ID:-$WC_JOB_ID}; att=${JOBMAN_ATTEMPT:-$WC_JOB_STARTED_AT}
pg=0; owner=0
read -r _ _ _ _ pg _ < /proc/$$/stat 2>/dev/null; read -r _ _ _ owner _ < /proc/$pg/stat 2>/dev/null
echo "S $id $att $$ $pg $owner $(date +%s.%N)" >> "$ledger"
trap 'echo "E $id $att $$ $(date +%s.%N) term" >> "$ledger"; exit 143' TERM
if [ "$mode" = fail-first ]; then
  if [ -n "$JOBMAN_ATTEMPT" ]; then [ "$JOBMAN_ATTEMPT" = 1 ] && code=3
  elif [ ! -e "$5" ]; then : > "$5"; code=3; fi
fi
sleep "$secs" & wait $!
echo "E $id $att $$ $(date +%s.%N) exit $code" >> "$ledger"
exit "$code"
"""


def write_job_script(directory: Path) -> Path:
    path = directory / "job.sh"
    path.write_text(JOB_SCRIPT)
    path.chmod(0o755)
    return path


# -- faults -----------------------------------------------------------------------------------------------

@dataclass
class Fault:
    kind: str
    t0: float
    t1: float
    pid: int | None = None      # the process it hit (a supervisor, a CLI, an agent)
    job: str | None = None      # the job it concerns (an id, or a jobman display name for a killed CLI)
    detail: str = ""


class FaultLog:
    """Every fault the chaos injected, with when; thread-safe (faults that last run on threads of their own)."""

    def __init__(self):
        self.faults: list[Fault] = []
        self._lock = threading.Lock()

    def add(self, kind: str, t0: float, t1: float | None = None, **fields) -> Fault:
        fault = Fault(kind, t0, t0 if t1 is None else t1, **fields)
        with self._lock:
            self.faults.append(fault)
        return fault

    def save(self, path: Path) -> None:
        """The log as JSON lines (kept with the soak's files, to read a violation's story)."""
        import json

        with open(path, "w") as f:
            for fault in sorted(self.faults, key=lambda x: x.t0):
                f.write(json.dumps(vars(fault)) + "\n")

    def counts(self) -> Counter:
        return Counter(f.kind for f in self.faults)

    def of(self, *kinds: str) -> list[Fault]:
        return [f for f in self.faults if f.kind in kinds]

    def overlapping(self, kinds, t0: float, t1: float, slack: float = 0.0) -> list[Fault]:
        return [f for f in self.faults if f.kind in kinds and f.t0 <= t1 + slack and f.t1 >= t0 - slack]


class ChaosUser:
    """A tool's faults (JobmanChaos, StadoChaos): its actions run by `self.chaos`, a Chaos."""

    chaos: "Chaos"

    def start(self) -> None:
        self.chaos.start()

    def stop(self) -> None:
        self.chaos.stop()

    @property
    def errors(self) -> list[str]:
        return self.chaos.errors


class Chaos:
    """Runs `actions` (kind -> (weight, callable)) at random moments until stopped; each action records its
    own fault. An action that finds nothing to hit (no supervisor alive at that moment) records nothing."""

    def __init__(self, rng: random.Random, actions: dict, mean_gap: float, early: tuple = ()):
        self.rng, self.actions, self.mean_gap = rng, actions, mean_gap
        self.early = early  # kinds whose targets live only while the phase starts (a submitting CLI): tried first
        self.stopping = threading.Event()
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._run, name="chaos", daemon=True)
        self._lasting: list[threading.Thread] = []

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self._thread.join(60)
        for t in self._lasting:
            t.join(60)

    def lasting(self, fn, *args) -> None:
        """A fault that lasts (a stop, a lock held, a full disk) runs on its own thread, so others go on."""
        t = threading.Thread(target=self._guarded, args=(fn, *args), daemon=True)
        self._lasting.append(t)
        t.start()

    def sleep(self, seconds: float) -> None:
        """Hold a fault this long (a stop of the soak cuts it short: faults always end)."""
        self.stopping.wait(seconds)

    def _run(self) -> None:
        """Every kind once, in a random order (so even a short soak injects each), then at random by weight."""
        kinds = list(self.actions)
        weights = [self.actions[k][0] for k in kinds]
        later = [k for k in kinds if k not in self.early]
        first = self.rng.sample(later, len(later)) + [k for k in kinds if k in self.early]  # pop() takes the end
        misses: dict[str, int] = {}
        soon = False
        while not self.stopping.wait(0.05 if soon else self.rng.expovariate(1.0 / self.mean_gap)):
            from_first = bool(first)
            kind = first.pop() if first else self.rng.choices(kinds, weights)[0]
            soon = False
            if not self._guarded(self.actions[kind][1]) and from_first:
                # Nothing to hit yet (no CLI mid-handoff, say): its targets may live only a moment, so it is
                # tried again at once, a few dozen times, before the others' turn; it stays due either way.
                misses[kind] = misses.get(kind, 0) + 1
                soon = misses[kind] % 40 != 0
                first.append(kind) if soon else first.insert(0, kind)

    def _guarded(self, fn, *args):
        """fn's result (an action returns whether it hit something); None when it failed."""
        try:
            return fn(*args)
        except Exception as e:  # a chaos action must never end the soak; its error is reported
            self.errors.append(f"{getattr(fn, '__name__', fn)}: {type(e).__name__}: {e}")
            return None


# -- the ledger -------------------------------------------------------------------------------------------

@dataclass
class Run:
    job: str
    attempt: str
    pid: int
    pgid: int
    owner: int          # the supervisor (jobman) or agent (stado) that started it
    start: float
    end: float | None = None
    how: str | None = None


def read_ledger(path: Path) -> tuple[dict[str, list[Run]], list[str]]:
    """job id -> its runs in start order; and the ledger lines that could not be read."""
    runs: dict[tuple, Run] = {}
    bad = []
    try:
        lines = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        lines = []
    for line in lines:
        parts = line.split()
        try:
            if parts[0] == "S" and len(parts) == 7:
                key = (parts[1], parts[2], int(parts[3]))
                runs[key] = Run(parts[1], parts[2], int(parts[3]), int(parts[4]), int(parts[5]), float(parts[6]))
            elif parts[0] == "E" and len(parts) >= 6:
                run = runs.get((parts[1], parts[2], int(parts[3])))
                if run is None:
                    bad.append(f"an end with no start: {line}")
                else:
                    run.end, run.how = float(parts[4]), " ".join(parts[5:])
            else:
                bad.append(line)
        except (IndexError, ValueError):
            bad.append(line)
    by_job: dict[str, list[Run]] = {}
    for run in sorted(runs.values(), key=lambda r: r.start):
        by_job.setdefault(run.job, []).append(run)
    return by_job, bad


def overlaps(runs: list[Run], now: float) -> list[tuple[Run, Run]]:
    """Pairs of one job's runs that ran at the same time (a run with no end counts as running until `now`)."""
    found = []
    for i, a in enumerate(runs):
        for b in runs[i + 1:]:
            if b.start < (a.end if a.end is not None else now):
                found.append((a, b))
    return found


def max_concurrency(intervals: list[tuple[float, float]]) -> tuple[int, float]:
    """The most intervals open at once, and when."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    best, at, open_ = 0, 0.0, 0
    for t, step in events:
        open_ += step
        if open_ > best:
            best, at = open_, t
    return best, at


# -- processes and logs -----------------------------------------------------------------------------------

@dataclass
class Proc:
    pid: int
    ppid: int
    state: str
    argv: list[str]

    def environ(self) -> bytes:
        try:
            with open(f"/proc/{self.pid}/environ", "rb") as f:
                return f.read()
        except OSError:
            return b""


def processes() -> list[Proc]:
    """Every live process (zombies left out)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        fields = stat.rsplit(b")", 1)[1].split()
        state = fields[0].decode()
        if state in ("Z", "X"):
            continue
        found.append(Proc(int(entry), int(fields[1]), state, argv))
    return found


def processes_mentioning(marker: str) -> list[Proc]:
    """Processes whose command line or environment names `marker` (the soak's directory), this one aside."""
    needle = marker.encode()
    me = os.getpid()
    return [p for p in processes() if p.pid != me and (any(marker in a for a in p.argv) or needle in p.environ())]


def kill_leftovers(marker: str) -> int:
    """SIGKILL whatever of the soak still runs (after it was reported): a soak leaves nothing behind."""
    import signal

    found = processes_mentioning(marker)
    for p in found:
        signal_quietly(p.pid, signal.SIGCONT)
        signal_quietly(p.pid, signal.SIGKILL)
    return len(found)


def signal_quietly(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except OSError:
        return False


TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
LOCKED = re.compile(r"database is locked")
# A line that says the lock was waited out (what a supervisor logs when it waited one out) is not a failure.
WAITED = re.compile(r"waiting for|retrying|waited")


def scan_logs(paths) -> tuple[list[str], int]:
    """One line per log that holds a traceback or failed on "database is locked"; and how many lines say a
    locked database was waited out."""
    problems, waited = [], 0
    for path in paths:
        try:
            text = Path(path).read_text(errors="replace")
        except OSError:
            continue
        match = TRACEBACK.search(text)
        if match:
            problems.append(f"traceback in {path}: {_raised(text, match.end())!r}")
        for match in LOCKED.finditer(text):
            end = text.find("\n", match.end())
            line = text[text.rfind("\n", 0, match.start()) + 1:end if end >= 0 else len(text)]
            if WAITED.search(line):
                waited += 1
            else:
                problems.append(f"database is locked in {path}: ...{_around(text, match)!r}")
                break
    return problems, waited


def _raised(text: str, after: int) -> str:
    """The exception line that ends the traceback starting at `after` (the line that says what went wrong)."""
    for line in text[after:].splitlines()[1:]:
        if line and not line[0].isspace():
            return line.strip()[:300]
    return "?"


def _around(text: str, match) -> str:
    line_end = text.find("\n", match.end())
    return text[max(0, match.start() - 200):line_end if line_end > 0 else None].strip()[-300:]


# -- time and the report ----------------------------------------------------------------------------------

class Deadline:
    def __init__(self, seconds: float):
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def passed(self) -> bool:
        return time.monotonic() >= self.at


def wait_until(predicate, deadline: Deadline, interval: float = 0.5):
    """Poll `predicate` until it is truthy (returned) or the deadline passes (then the last value)."""
    while True:
        value = predicate()
        if value or deadline.passed():
            return value
        time.sleep(min(interval, deadline.left()) or 0.01)


@dataclass
class PhaseReport:
    name: str
    attempted: int = 0                  # submissions tried
    jobs: int = 0                       # jobs accepted (an id came back, or the job is on record)
    faults: Counter = field(default_factory=Counter)
    outcomes: Counter = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0                # from the first submission until every job was terminal
    checks: dict = field(default_factory=dict)   # invariant -> number of things it looked at
    # stado: the strict counts (STRICT: each should be 0), the fault proxy's faults (fault -> request kind -> n),
    # agents killed and not restarted, seconds from the end of every fault until the queue drained
    strict: Counter = field(default_factory=Counter)
    injected: dict = field(default_factory=dict)
    gone: int = 0
    drain_after_faults: float | None = None
    regime: str = "none"

    def violate(self, invariant: str, text: str) -> None:
        self.violations.append(f"{invariant}: {text}")

    @property
    def throughput(self) -> float:
        return sum(self.outcomes.values()) / self.seconds if self.seconds else 0.0


FAULT_NAMES = {
    "supervisor_kill": "supervisor SIGKILL", "supervisor_stop": "supervisor SIGSTOP past its lease",
    "cli_kill": "submitting CLI SIGKILL", "db_lock": "write lock held on the database",
    "disk_full": "home's filesystem filled", "agent_kill": "agent SIGKILL (and restart)",
    "agent_stop": "agent SIGSTOP past its promise", "store_slow": "store slowed (throttled link)",
    "store_stall": "store stalled (no bytes move)", "conn_drop": "connections dropped", "cancel": "job cancelled",
    "agent_gone": "agent SIGKILL, not restarted", "store_burst": "fault proxy: 10 s burst at 100%",
    "store_storm": "fault proxy: storm of 503s",
}
# The stado checker's strict counts, each of which must be 0 (soak_stado_check).
STRICT = {"overlap": "overlapping runs of one job", "after_success": "runs started after the job's success record",
          "after_cancel": "starts after the job's cancel record", "contradicted": "commands whose answer contradicts "
          "the store", "lost": "jobs lost (accepted, no single terminal record)"}


def render_table(reports: list[PhaseReport]) -> str:
    """One column per phase: jobs, faults injected per kind, outcomes, invariant violations, throughput."""
    head = "| | " + " | ".join(r.name for r in reports) + " |"
    rows = [head, "|---" * (len(reports) + 1) + "|"]

    def row(label, values):
        rows.append(f"| {label} | " + " | ".join(str(v) for v in values) + " |")

    row("jobs submitted (accepted / tried)", [f"{r.jobs} / {r.attempted}" for r in reports])
    kinds = [k for k in FAULT_NAMES if any(r.faults.get(k) for r in reports)]
    for kind in kinds:
        row(f"fault: {FAULT_NAMES[kind]}", [r.faults.get(kind, 0) or "-" for r in reports])
    from soak_faults import describe

    if any(r.regime != "none" for r in reports):
        row("fault proxy regime (--faults)", [r.regime if r.injected else "-" for r in reports])
    labels: dict[str, dict[str, str]] = {}
    for r in reports:
        for label, text in describe(r.injected):
            labels.setdefault(label, {})[r.name] = text
    for label, by_report in labels.items():
        row(f"fault proxy: {label}", [by_report.get(r.name, "-") for r in reports])
    outcomes = sorted({o for r in reports for o in r.outcomes})
    for outcome in outcomes:
        row(f"outcome: {outcome}", [r.outcomes.get(outcome, 0) or "-" for r in reports])
    if any(r.strict or r.checks.get("commands checked against the store") for r in reports):
        for key, label in STRICT.items():
            row(label, [r.strict.get(key, 0) if r.name.startswith("stado") else "-" for r in reports])
    row("**invariant violations**", [f"**{len(r.violations)}**" for r in reports])
    if any(r.drain_after_faults is not None for r in reports):
        row("time to drain after the faults stopped", [f"{r.drain_after_faults:.1f} s" if r.drain_after_faults
                                                       is not None else "-" for r in reports])
    row("wall time, first submission to last job terminal", [f"{r.seconds:.0f} s" for r in reports])
    row("throughput (terminal jobs per second)", [f"{r.throughput:.1f}" for r in reports])
    return "\n".join(rows)
