"""What a stado job costs in object-store requests, counted on the wire: every request of a job's whole life,
from `stado submit` to a terminal record that a reader (`stado status ID`) has seen, on a real SeaweedFS
started here on 127.0.0.1, made by real `stado` processes (submit, agent, cancel, schedule, status).

    .venv/bin/python bench/stado_requests.py [--scenarios once,cancel-queued,...] [--jobs 200] [--json FILE]

Every process reaches SeaweedFS through a counting proxy (bench/s3wire.py), one listener per role, so each
request is counted as the server saw it (method, key, conditions, answer) and told apart by who sent it. What
each request is for comes from the stado code that made it: the processes run with bench/wiretrace on their
PYTHONPATH, which records each store call with its call stack (observation only), and each call is paired with
its request on the wire. Waiting for a state (a job running, a record gone) is done by this process on a
connection of its own, past the proxy, so it is never counted.

Scenarios (each in a prefix of its own; agents poll every --poll-seconds, default 1 s):
  once            `true`, submitted while a warmed agent runs
  cancel-queued   submitted and cancelled with no agent running; then an agent runs (it must find nothing)
  cancel-running  `sleep 30`, cancelled once it has run --run-seconds
  reaped          `sleep 2` claimed by agent A, whose host is lost while it runs (the agent, the job's keeper and
                  its processes SIGKILLed); agent B (another host, its reaper every --settle-seconds) requeues it
                  once the promise has passed and runs it again
  cron            `stado schedule add NAME "*/5 * * * * *" -- true`; the first job it fires
  idle            a warmed agent with nothing to do for --idle-seconds (what polls, records, reaper passes cost)
  batch           --jobs `true` jobs (one `stado submit --batch`), drained by one `stado agent --until-idle
                  --slots 4`: its whole life's requests amortised over the jobs, as `bench/stado_scale.py drain`
  bill-running    `sleep 3600` under an agent at its default cadences, counted for --bill-seconds once it runs
  bill-idle       an agent at its default cadences with nothing to do, for --bill-seconds

The report ends with the bill (bench/bill.py): dollars per million jobs that run once, per running job-hour and
per idle agent-month at S3, GCS and Azure list prices, then three lines for scripts, at S3's:

    dollars once: $X per million jobs
    dollars running: $Y per job-hour
    dollars idle: $Z per agent-month

A request is the job's when its key names the job (or, for a cron job, the schedule it fired from); the agent's
other requests in the job's window are its background (polls, its agents/ record, reaper passes, schedules),
reported apart. The bench reports numbers; it checks only that the scenario happened (the job ended as it
should) and that every request on the wire was paired with the stado call that made it.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bill  # noqa: E402
from s3wire import WireCounter, classify  # noqa: E402
from stado.core import keys  # noqa: E402
from stado.objectstore import NotFound, open_store  # noqa: E402

BIN = Path(sys.executable).parent
STADO = str(BIN / "stado")
TRACE_PATH = str(Path(__file__).resolve().parent / "wiretrace")
KINDS = ("PUT", "GET", "HEAD", "LIST", "DELETE", "POST")
VERB_KIND = {"get": "GET", "get_range": "GET", "head": "HEAD", "put": "PUT", "put_if_absent": "PUT",
             "put_if_match": "PUT", "put_chunks": "PUT", "delete": "DELETE", "delete_if_match": "DELETE",
             "list": "LIST", "list_page": "LIST"}
SCENARIOS = ("once", "cancel-queued", "cancel-running", "reaped", "cron", "idle", "batch", "bill-running", "bill-idle")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class BenchError(RuntimeError):
    pass


def wait_for(predicate, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise BenchError(f"{what}: not within {timeout:.0f} s")


# -- one scenario's world: its prefix, its roles, its processes ------------------------------------------------

class Scenario:
    def __init__(self, lab: "Lab", name: str):
        self.lab, self.name = lab, name
        self.prefix = f"req-{name}-{os.getpid()}-{time.time_ns() % 10**9}"
        self.dir = lab.tmp / name
        self.dir.mkdir(parents=True)
        # This process's own view of the store, past the proxy: waiting on it costs the scenario nothing.
        self.observer = open_store(f"s3://{lab.server.bucket}/{self.prefix}", lab.server.options, env=lab.server.env)
        self.t0 = self.t1 = None
        self.job_ids: list[str] = []
        self.job_keys: set[str] = set()  # other keys counted as the job's (the schedule a cron job fired from)
        self.keys_until: float | None = None  # ... until then (default: the window's end)
        self.notes: dict = {}
        self.agents: dict[str, subprocess.Popen] = {}

    def env(self, role: str) -> dict:
        config = self.dir / f"{role}.toml"
        options = {**self.lab.server.options, "endpoint": self.lab.wire.listen(role)}
        lines = ["[store]", f'url = "s3://{self.lab.server.bucket}/{self.prefix}"']
        lines += [f"{k} = {json.dumps(v)}" for k, v in sorted(options.items())]
        config.write_text("\n".join(lines) + "\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AZURE_", "GOOGLE_", "STADO_"))}
        env.update(self.lab.server.env, STADO_CONFIG=str(config), XDG_DATA_HOME=str(self.dir / "xdg"),
                   XDG_STATE_HOME=str(self.dir / "xdg-state"), STADO_WIRE_TRACE=str(self.dir / f"trace-{role}"),
                   PYTHONPATH=TRACE_PATH)
        return env

    def run(self, role: str, *args: str, ok=(0,)) -> str:
        done = subprocess.run([STADO, *args], env=self.env(role), capture_output=True, text=True, timeout=120)
        if done.returncode not in ok:
            raise BenchError(f"stado {' '.join(args)} ({role}) exited {done.returncode}: {done.stderr.strip()[-400:]}")
        return done.stdout

    def start_agent(self, role: str, host: str, *extra: str, defaults: bool = False) -> subprocess.Popen:
        """`defaults`: the agent's own cadences (what a user's agent costs), not the bench's --poll-seconds."""
        log = open(self.dir / f"{role}.log", "w")
        argv = [STADO, "agent", "--host", host, "--work-root", str(self.dir / f"work-{role}"),
                *(() if defaults else ("--poll-seconds", f"{self.lab.poll:g}")), *extra]
        proc = subprocess.Popen(argv, env=self.env(role), stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        self.agents[role] = proc
        return proc

    def warm(self, role: str, polls: int = 2) -> None:
        """Until the agent has polled the queue `polls` times: its start-up (store check, record, first reaper
        pass, index check, schedules) is behind it."""
        def polled():
            if self.agents[role].poll() is not None:
                raise BenchError(f"agent {role} exited {self.agents[role].returncode}: see {self.dir}/{role}.log")
            return sum(1 for r, kind, key in self.requests() if r.role == role and kind == "LIST"
                       and key == keys.READY) >= polls
        wait_for(polled, 60, f"agent {role} polling")

    def stop_agent(self, role: str, sig=signal.SIGTERM) -> None:
        proc = self.agents[role]
        if proc.poll() is None:
            proc.send_signal(sig)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def exists(self, key: str) -> bool:
        try:
            self.observer.head(key)
            return True
        except NotFound:
            return False

    def doc(self, key: str) -> dict | None:
        try:
            return json.loads(self.observer.get(key).data)
        except NotFound:
            return None

    def settled(self, job_id: str, state: str) -> bool:
        """Its terminal record is written and its running record gone: what `stado status` reports terminal."""
        return self.exists(keys.terminal(state, job_id)) and not self.exists(keys.running(job_id))

    def requests(self) -> list:
        """(request, kind, key) of every request on the wire inside this scenario's prefix."""
        out = []
        for request in list(self.lab.wire.requests):
            kind, key = classify(request, self.lab.server.bucket, self.prefix)
            if key is not None:
                out.append((request, kind, key))
        return out

    def close(self) -> None:
        for role in list(self.agents):
            self.stop_agent(role, signal.SIGKILL)
        self.observer.close()


class Lab:
    def __init__(self, server, tmp: Path, poll: float):
        self.server, self.tmp, self.poll = server, tmp, poll
        self.wire = WireCounter.for_endpoint(server.endpoint)


# -- the scenarios ---------------------------------------------------------------------------------------------

def submit(s: Scenario, command: str, *flags: str) -> str:
    job_id = s.run("submit", "submit", command, *flags).strip()
    s.job_ids.append(job_id)
    return job_id


def read_status(s: Scenario, job_id: str, state: str) -> dict:
    """The reader: one `stado status ID --json` that sees the job terminal in `state`."""
    seen = json.loads(s.run("status", "status", job_id, "--json"))
    if not seen.get("terminal") or seen.get("state") != state:
        raise BenchError(f"{s.name}: stado status {job_id} saw {seen.get('state')} terminal={seen.get('terminal')}")
    return seen


def scenario_once(s: Scenario, args) -> None:
    s.start_agent("agent", "host-a")
    s.warm("agent")
    s.t0 = time.monotonic()
    job = submit(s, "true")
    wait_for(lambda: s.settled(job, "completed"), 60, f"{job} completed")
    read_status(s, job, "completed")
    s.t1 = time.monotonic()
    s.stop_agent("agent")


def scenario_cancel_queued(s: Scenario, args) -> None:
    s.t0 = time.monotonic()
    job = submit(s, "true")
    s.run("cancel", "cancel", job)
    read_status(s, job, "cancelled")
    s.t1 = time.monotonic()
    # An agent started afterwards must find nothing of the job left to do (its requests naming it: none).
    s.start_agent("agent", "host-a", "--until-idle")
    s.agents["agent"].wait(60)


def scenario_cancel_running(s: Scenario, args) -> None:
    s.start_agent("agent", "host-a")
    s.warm("agent")
    s.t0 = time.monotonic()
    job = submit(s, "sleep 30")
    started = wait_for(lambda: (s.doc(keys.running(job)) or {}).get("process"), 60, f"{job} running")
    del started
    time.sleep(args.run_seconds)
    s.run("cancel", "cancel", job)
    wait_for(lambda: s.settled(job, "cancelled"), 60, f"{job} cancelled")
    read_status(s, job, "cancelled")
    s.t1 = time.monotonic()
    s.notes["ran for"] = f"{args.run_seconds:g} s"
    s.stop_agent("agent")


def scenario_reaped(s: Scenario, args) -> None:
    s.start_agent("agent-a", "host-a")
    s.warm("agent-a")
    s.t0 = time.monotonic()
    job = submit(s, "sleep 2")
    # Lost once its record names its process (its first renewal after the spawn): the whole host, mid-run. (With
    # only the agent killed, the job's keeper would have recorded its end, or stopped and requeued it itself.)
    process = wait_for(lambda: (s.doc(keys.running(job)) or {}).get("process"), 60, f"{job} running on agent A")
    keeper = json.loads((Path(process["work_dir"]).parent / "keeper.json").read_text())
    s.stop_agent("agent-a", signal.SIGKILL)
    os.kill(keeper["pid"], signal.SIGKILL)
    os.killpg(process["pgid"], signal.SIGKILL)
    killed = time.monotonic()
    s.start_agent("agent-b", "host-b", "--settle-seconds", f"{args.settle_seconds:g}")
    wait_for(lambda: s.settled(job, "completed"), 120, f"{job} requeued and completed by agent B")
    read_status(s, job, "completed")
    s.t1 = time.monotonic()
    done = s.doc(keys.terminal("completed", job))
    s.notes.update({"requeues": done.get("requeues"), "from the kill to the reader": f"{s.t1 - killed:.1f} s"})
    s.stop_agent("agent-b")


def scenario_cron(s: Scenario, args) -> None:
    name = "tick"
    s.run("schedule", "schedule", "add", name, args.cron, "--", "true")
    s.job_keys.add(keys.schedule(name))
    s.start_agent("agent", "host-a")
    fired = wait_for(lambda: [e.key for e in s.observer.list(keys.QUEUE)] + [e.key for e in s.observer.list(
        keys.COMPLETED)], 60, "the first fire")
    job = UUID.search(fired[0]).group(0)
    s.job_ids.append(job)
    wait_for(lambda: s.settled(job, "completed"), 60, f"{job} completed")
    read_status(s, job, "completed")
    s.t1 = time.monotonic()
    # The window opens with the fire (the agent may fire while it is still starting): its first request.
    mine = [(r.at, kind, key) for r, kind, key in s.requests() if job in key]
    s.t0 = min(at for at, _, _ in mine) - 1e-6
    # The schedule's own requests count as this job's from its fire to its claim: a later fire is another job's.
    s.keys_until = min(at for at, kind, key in mine if kind == "PUT" and key.startswith(keys.RUNNING))
    s.run("schedule", "schedule", "rm", name)
    s.stop_agent("agent")
    s.notes["cron"] = f"`{args.cron}`"


def scenario_idle(s: Scenario, args) -> None:
    s.start_agent("agent", "host-a")
    s.warm("agent")
    s.t0 = time.monotonic()
    time.sleep(args.idle_seconds)
    s.t1 = time.monotonic()
    s.stop_agent("agent")


def scenario_bill_running(s: Scenario, args) -> None:
    """A job running under an agent with its default cadences: its steady cost (renewals, pulses), counted over
    --bill-seconds once it runs, from its first renewal on."""
    s.start_agent("agent", "host-a", defaults=True)
    job = submit(s, "sleep 3600")
    wait_for(lambda: (s.doc(keys.running(job)) or {}).get("process"), 120, f"{job} running")
    s.t0 = time.monotonic()
    time.sleep(args.bill_seconds)
    s.t1 = time.monotonic()
    s.run("cancel", "cancel", job)
    wait_for(lambda: s.settled(job, "cancelled"), 120, f"{job} cancelled")
    s.stop_agent("agent")


def scenario_bill_idle(s: Scenario, args) -> None:
    """An agent with its default cadences and nothing to do, for --bill-seconds after its start-up."""
    s.start_agent("agent", "host-a", defaults=True)
    s.warm("agent", polls=1)
    s.t0 = time.monotonic()
    time.sleep(args.bill_seconds)
    s.t1 = time.monotonic()
    s.stop_agent("agent")


def scenario_batch(s: Scenario, args) -> None:
    batch = s.dir / "batch.txt"
    batch.write_text("".join(f"true # {n}\n" for n in range(args.jobs)))
    s.t0 = time.monotonic()
    out = s.run("submit", "submit", "--batch", str(batch))
    s.job_ids += out.split()
    s.start_agent("agent", "host-a", "--until-idle", "--slots", str(args.slots))
    if s.agents["agent"].wait(1800) != 0:
        raise BenchError(f"batch agent exited {s.agents['agent'].returncode}: see {s.dir}/agent.log")
    done = {keys.job_id_of(e.key, keys.COMPLETED) for e in s.observer.list(keys.COMPLETED)}
    if done != set(s.job_ids):
        raise BenchError(f"batch: {len(done)} of {len(s.job_ids)} jobs completed")
    read_status(s, s.job_ids[-1], "completed")
    s.t1 = time.monotonic()


RUNNERS = {"once": scenario_once, "cancel-queued": scenario_cancel_queued, "cancel-running": scenario_cancel_running,
           "reaped": scenario_reaped, "cron": scenario_cron, "idle": scenario_idle, "batch": scenario_batch,
           "bill-running": scenario_bill_running, "bill-idle": scenario_bill_idle}


# -- pairing the wire with the code ----------------------------------------------------------------------------

def traces(s: Scenario) -> dict[str, list[dict]]:
    """Per role, the store calls its processes made (in each process's order; processes one after another)."""
    out: dict[str, list[dict]] = {}
    for path in sorted(s.dir.glob("trace-*.*"), key=lambda p: p.stat().st_mtime):
        role = path.name[len("trace-"):].rsplit(".", 1)[0]
        out.setdefault(role, []).extend(json.loads(line) for line in path.read_text().splitlines() if line)
    return out


def _trace_key(verb: str, key: str) -> str:
    if verb.startswith("list"):
        return key if key.endswith("/") or not key else key + "/"
    return key


def pair(s: Scenario) -> list[dict]:
    """Every request of the scenario, in wire order, with what it was (kind, key, condition, answer) and the
    stado call that made it: the first unpaired call of the same role, kind and key."""
    calls = traces(s)
    used = {role: [False] * len(c) for role, c in calls.items()}
    rows = []
    for request, kind, key in s.requests():
        call = None
        for i, c in enumerate(calls.get(request.role, ())):
            if not used[request.role][i] and VERB_KIND[c["verb"]] == kind and _trace_key(c["verb"], c["key"]) == key:
                used[request.role][i] = True
                call = c
                break
        rows.append({"at": request.at, "role": request.role, "kind": kind, "key": key,
                     "condition": condition(request), "status": request.status,
                     "verb": call["verb"] if call else None, "stack": call["stack"] if call else None})
    s.notes["calls_without_request"] = [f"{role} {c['verb']} {c['key']} ({' < '.join(c['stack'][:3])})"
                                        for role, marks in used.items() for c, u in zip(calls[role], marks) if not u]
    return rows


def condition(request) -> str:
    h = request.headers
    if request.method == "POST":
        return "POST ?delete"  # obstore sends a plain delete as S3's DeleteObjects
    if h.get("if-none-match") == "*":
        return "If-None-Match: *"
    if "if-match" in h:
        return "If-Match"
    if "if-none-match" in h:
        return "If-None-Match"
    if "range" in h:
        return "Range"
    return ""



# -- what each request is for ----------------------------------------------------------------------------------

# Frames that only carry a request for their caller (the caller is where the request is made).
HELPERS = re.compile(r"^(cas\.py:.*|lookup\.py:(terminal_records|records|get)|jobs/common\.py:running_records"
                     r"|.*:<(dictcomp|genexpr|lambda|listcomp)>|agent/owner\.py:guard|storeclock\.py:measure)$")
TERMINAL = "completed|failed|cancelled"
# (where: the stado function that made it, kind, key's first segment (a regex), a frame the stack must hold or
# None, what it is for). The first rule that matches names the request; one that none names shows its function.
PURPOSES = [
    ("submission.py:submit", "PUT", "queue", None, "submit: create the ledger entry (create-if-absent)"),
    ("submission.py:submit", "PUT", "names", None, "submit: the name index entry (--name)"),
    ("readyindex.py:index", "PUT", "ready", "submission.py:submit",
     "submit: the claim-order index entry (a copy of the ledger entry)"),
    ("cli/agent.py:cmd_agent", "LIST", "ready", None, "start-up: reach the store once (a bad config fails here)"),
    ("guarantees.py:missing_guarantees", ".*", "control", None,
     "start-up: the store check (are conditional writes honoured on this path?)"),
    ("guarantees.py:ensure_safe", "PUT", "control", None, "start-up: the store check's verdict, for people"),
    ("agent/owner.py:_write_record", "PUT", "agents", None, "its agents/ record (at start, then every 6 polls, 1-30 s)"),
    ("agent/owner.py:_write_record", "HEAD", "agents", None,
     "the store's clock: the record's Last-Modified read back (until the reading is narrow)"),
    ("agent/owner.py:end", "DELETE", "agents", None, "exit: its agents/ record removed"),
    ("agent/fleet.py:refresh", "LIST", "agents", None,
     "claim spread: LIST agents/ for this agent's rank among the live ones (while its passes see work)"),
    ("agent/takeover.py:settle_left_by_replaced", "LIST", "running", None, "start-up: the restart check lists running/"),
    ("agent/takeover.py:settle_left_by_replaced", "GET", "running", None,
     "start-up: the restart check reads every running document"),
    ("reaper.py:reap", "LIST", "running", None, "reaper pass (every --settle-seconds): LIST running/"),
    ("reaper.py:reap", "GET", "running", None,
     "reaper pass: GET of each running document listed (unchanged ones and its own slots' too)"),
    ("reaper.py:evidence", "HEAD", "status", None, "reaper: the pulse's Last-Modified (the promise has passed)"),
    ("reaper.py:evidence", "LIST", "status", None, "reaper: a checkpoint newer than the promise? (LIST)"),
    ("reaper.py:lapse", "PUT", "running", None, "reaper: its verdict (requeue) on running/, put-if-match: its take"),
    ("jobs/moves.py:_requeue", "GET", "queue", None, "requeue: is a queue entry there already? (404)"),
    ("jobs/moves.py:_requeue", "PUT", "queue", None, "requeue: create the ledger entry again (create-if-absent, first)"),
    ("readyindex.py:index", "PUT", "ready", "jobs/moves.py:_requeue", "requeue: its claim-order index entry"),
    ("readyindex.py:reconcile", "LIST", "ready|queue", None, "index check (every 300 s): LIST {top}/"),
    ("schedules.py:tick", "LIST", "schedules", None, "schedules: LIST (every 30 s)"),
    ("schedules.py:_read", "GET", "schedules", None,
     "schedules: read a schedule (new or changed, or moved on by another agent's put-if-match)"),
    ("schedules.py:fire_one", "PUT", "queue", None,
     "cron fire: create the ledger entry (its id derived from the fire time: one job per fire)"),
    ("readyindex.py:index", "PUT", "ready", "schedules.py:fire_one", "cron fire: its claim-order index entry"),
    ("schedules.py:fire_one", "PUT", "names", None,
     "cron fire: the name index entry (the job carries the schedule's name: `stado status tick` finds it)"),
    ("schedules.py:fire_one", "PUT", "schedules", None, "cron fire: last_fired moved on (put-if-match)"),
    ("schedules.py:add", "PUT", "schedules", None, "schedule add: create the schedule (create-if-absent)"),
    ("schedules.py:get", "GET", "schedules", None, "schedule rm: read the schedule"),
    ("schedules.py:remove_schedule", "DELETE", "schedules", None, "schedule rm: delete it (if-match)"),
    ("agent/queue_knowledge.py:list_window", "LIST", "ready", None, "poll: one page of the claim-order index ready/"),
    ("agent/queue_knowledge.py:document", "GET", "ready", None, "claim pass: the index entry (its version is new to this agent)"),
    ("agent/queue_knowledge.py:document", "GET", "queue", None,
     "claim pass: the ledger entry (its index entry's version is new to this agent)"),
    ("agent/queue_knowledge.py:pause", "GET", "ready", None,
     "claim pass: the pause record, listed in ready/ (read once for each version of it)"),
    ("pause.py:adopt_legacy", "GET", "control", None,
     "index check (every 300 s): a pause record where an older stado kept it? (404)"),
    ("agent/claim_pass.py:_ledger", "GET", "queue", None, "claim pass: the ledger entry (the index is only a hint)"),
    ("jobs/claiming.py:claim", "PUT", "running", None, "claim: create running/ (create-if-absent: one winner)"),
    ("jobs/claiming.py:stale_claim", "GET", TERMINAL, None,
     "after creating running/: terminal-first check, GET {top}/ (did the job end meanwhile?)"),
    ("jobs/claiming.py:stale_claim", "GET", "queue", None,
     "after creating running/: the ledger entry again (requeued meanwhile?)"),
    ("jobs/claiming.py:verify_claim", "DELETE", "queue", None, "claim: delete the ledger entry (if-match, version read)"),
    ("jobs/claiming.py:verify_claim", "GET", TERMINAL, None,
     "after the claim's delete: terminal-first check, GET {top}/ (did the job end meanwhile?)"),
    ("readyindex.py:unindex", "GET", "ready", None, "unindex: the index entry read again, to delete it at its version"),
    ("readyindex.py:unindex", "DELETE", "ready", None, "unindex: delete the index entry (if-match)"),
    ("jobs/claiming.py:verify_claim", "GET", "running", None,
     "claim check: running/ read right after creating it (does the claim still stand?)"),
    ("jobs/moves.py:renew", "PUT", "running", None, "renewal: put-if-match of running/, a fresh promise (every poll)"),
    ("jobs/moves.py:renew", "GET", "running", None, "renewal refused (412): running/ read to learn who moved it"),
    ("jobs/moves.py:pulse", "PUT", "status", None, "the pulse status/<id>/heartbeat, after each renewal"),
    ("output.py:_flush_unsent", "PUT", "status", None, "an output chunk"),
    ("artifacts.py:upload_staged", "PUT", "status", None, "finish: the result manifest (empty: no artifacts)"),
    ("jobs/moves.py:finish", "PUT", "running", None,
     "finish: running/ to phase finishing with the outcome (put-if-match: the decision, the owner's take)"),
    ("jobs/moves.py:_terminate", "PUT", TERMINAL, None, "settle: create the terminal record {top}/ (create-if-absent)"),
    ("jobs/moves.py:_terminate", "GET", TERMINAL, "cas.py:_ours",
     "settle: {top}/ was there (412): read back, is it our own retried write? (nonce)"),
    ("jobs/moves.py:_terminate", "GET", TERMINAL, "lookup.py:terminal_records",
     "settle of a tombstone or a reaper's verdict: terminal-first GET of {top}/ (an existing one stands)"),
    ("jobs/moves.py:_terminate", "GET", TERMINAL, None, "settle: {top}/ was there: the record that stands, read again"),
    ("jobs/moves.py:_terminate", "GET", "queue", None, "settle: a queue entry left beside the terminal record?"),
    ("jobs/moves.py:_terminate", "DELETE", "queue", None, "settle: delete the queue entry (if-match)"),
    ("jobs/moves.py:_settle", "PUT", "running", None, "settle: take running/ (put-if-match)"),
    ("jobs/moves.py:_settle", "DELETE", "running", None, "settle: delete running/ (if-match on the version taken)"),
    ("jobs/moves.py:settle_own_cancel", "GET", "running", None,
     "settle of a cancel of its own attempt: running/ read again (the refused renewal had just read it)"),
    ("agent/slotend.py:_settle_cancel", "GET", "running", None,
     "settle of a cancel: running/ read again (the refused renewal had just read it)"),
    ("jobs/cancellation.py:_first_look", "GET", "queue", None,
     "cancel: its first look, queue/ alone (a queued job's cancel answers the rest with its own writes)"),
    ("jobs/cancellation.py:cancel", "GET", ".*", None, "cancel: every record of the job, {top}/ (lifecycle order)"),
    ("jobs/cancellation.py:_who_stops", "GET", "agents", None, "cancel: the owner's agents/ record (says who stops it)"),
    ("jobs/cancellation.py:_cancel_running", "PUT", "running", None, "cancel: running/ to phase cancelling (put-if-match)"),
    ("jobs/cancellation.py:_cancel_running", "PUT", "cancelled", None, "cancel: create cancelled/ (create-if-absent)"),
    ("jobs/cancellation.py:_cancel_queued", "PUT", "running", None,
     "cancel: a tombstone in running/ (create-if-absent: takes the claim slot)"),
    ("lookup.py:_deciding_records", "GET", ".*", None,
     "reader: {top}/ (terminal records first; it stops at the record that decides)"),
    ("lookup.py:view", "GET", ".*", None, "reader: {top}/ (every record, lifecycle order)"),
]


def where(stack: list[str] | None) -> str:
    """The stado function that made the request: the innermost frame that is not a mere carrier."""
    for frame in stack or ():
        if not HELPERS.match(frame):
            return frame
    return (stack or ["(no stado call: a client retry?)"])[-1]


def purpose(row: dict) -> str:
    top = (row["key"] or "").split("/", 1)[0]
    stack = " ".join(row["stack"] or ())
    for at, kind, tops, inside, text in PURPOSES:
        if at == row["where"] and re.fullmatch(kind, row["kind"]) and re.fullmatch(tops, top) and (
                inside is None or inside in stack):
            return text.format(top=top)
    return row["where"]


def shape(key: str, s: Scenario) -> str:
    """The key as a pattern: the job's id as <id>, other ids (agents, probes) as <agent>, <n>."""
    for job_id in s.job_ids:
        key = key.replace(job_id, "<id>")
    key = UUID.sub("<agent>", key)
    return re.sub(r"control/(probe|clock)/[0-9a-f]+", r"control/\1/<n>", key)


# -- whose request it is, and the tables -----------------------------------------------------------------------

WHO = {"submit": "`stado submit`", "cancel": "`stado cancel`", "status": "reader: `stado status ID`",
       "schedule": "`stado schedule add`/`rm`"}


def categorise(rows: list[dict], s: Scenario) -> None:
    """row["whose"]: "job" (a key that names the job, or a command run for it), "pass" (a claim pass's LIST and
    pause record in the window: shared by the jobs it claims), "background" (an agent's other requests in the
    window), "start-up" (an agent's, before the window) or "after" (an agent's, after it)."""
    ids = set(s.job_ids)
    for row in rows:
        names_job = bool(ids & set(UUID.findall(row["key"] or ""))) or row["key"] in s.job_keys
        agent = row["role"].startswith("agent")
        if not agent:
            row["whose"] = "command" if row["role"] == "schedule" else "job"
        elif names_job and (row["key"] not in s.job_keys or s.t0 <= row["at"] <= (s.keys_until or s.t1)):
            row["whose"] = "job"
        elif row["at"] < s.t0:
            row["whose"] = "start-up"
        elif row["at"] > s.t1:
            row["whose"] = "after"
        elif row["where"] in ("agent/queue_knowledge.py:list_window", "agent/queue_knowledge.py:pause"):
            row["whose"] = "pass"
        else:
            row["whose"] = "background"


def analyse(s: Scenario) -> dict:
    rows = pair(s)
    for row in rows:
        row["where"] = where(row["stack"])
        row["purpose"] = purpose(row)
        row["shape"] = shape(row["key"], s)
    categorise(rows, s)
    for row in rows:
        row["at"] = round(row["at"] - s.t0, 4)
    return {"scenario": s.name, "jobs": len(s.job_ids), "window_s": round(s.t1 - s.t0, 3), "notes": s.notes,
            "rows": rows}


def who_of(row: dict) -> str:
    if row["role"].startswith("agent"):
        label = "agent" if row["role"] == "agent" else f"agent {row['role'][-1].upper()}"
        return {"job": f"{label}: the job's keys", "pass": f"{label}: claim passes (shared)",
                "background": f"{label}: polls, record, reaper, schedules"}.get(row["whose"], f"{label}: {row['whose']}")
    return WHO.get(row["role"], row["role"])


def counts(rows) -> dict:
    c = Counter(row["kind"] for row in rows)
    return {k: c.get(k, 0) for k in KINDS}


def _cells(c: dict, per: float = 1.0, digits: int = 0) -> list[str]:
    total = sum(c.values())
    return [f"{c[k] / per:.{digits}f}" for k in KINDS[:5]] + [f"{total / per:.{digits}f}"]


def md_table(head: tuple, body: list[tuple]) -> str:
    rows = [head, tuple("---" for _ in head), *body]
    return "\n".join("| " + " | ".join(str(c) for c in row) + " |" for row in rows)


def summary_rows(result: dict) -> list[tuple]:
    """Per scenario: each kind of requester in the window, then the job's own total and everything in it."""
    rows = [r for r in result["rows"] if r["whose"] in ("job", "pass", "background")]
    order = []
    for row in rows:
        if who_of(row) not in order:
            order.append(who_of(row))
    out = [(result["scenario"], who, *_cells(counts(r for r in rows if who_of(r) == who))) for who in order]
    job = [r for r in rows if r["whose"] == "job"]
    out.append((result["scenario"], "**the job's requests**", *(f"**{c}**" for c in _cells(counts(job)))))
    out.append((result["scenario"], f"everything in the window ({result['window_s']:.1f} s)",
                *_cells(counts(rows))))
    return out


def batch_rows(result: dict) -> list[tuple]:
    """The batch, per job: each requester's whole-life requests divided by the jobs it drained."""
    n = result["jobs"]
    rows = result["rows"]
    parts = [("`stado submit --batch`", [r for r in rows if r["role"] == "submit"]),
             ("agent: the job's keys", [r for r in rows if r["role"] == "agent" and r["whose"] == "job"]),
             ("agent: everything else, start to exit (polls, record, reaper, start-up)",
              [r for r in rows if r["role"] == "agent" and r["whose"] != "job"])]
    out = [(label, *_cells(counts(part), n, 2)) for label, part in parts]
    reader = [r for r in rows if r["role"] == "status"]
    out.append(("reader: one `stado status ID`", *_cells(counts(reader), 1, 2)))
    total = Counter()
    for _, part in parts:
        total.update(counts(part))
    total = {k: total[k] / n + counts(reader)[k] for k in KINDS}
    out.append(("**per job, submit to a reader seeing it terminal**", *(f"**{c}**" for c in _cells(total, 1, 2))))
    return out


def detail_rows(result: dict, whose=("job",), per: float = 1.0) -> list[tuple]:
    """Each distinct request (who, method, key, condition, answer), in the order first seen, with how many."""
    groups: dict[tuple, list] = {}
    for row in result["rows"]:
        if row["whose"] not in whose:
            continue
        answer = f"{row['condition']} → {row['status']}" if row["condition"] else str(row["status"])
        key = (who_of(row), f"{row['kind']} `{row['shape']}`", answer, row["purpose"], row["where"])
        groups.setdefault(key, []).append(row)
    def n(found: list) -> str:  # a reader reads once per job: never divided
        return str(len(found)) if per == 1.0 or found[0]["role"] == "status" else f"{len(found) / per:.2f}"
    return [(i + 1, who, request, answer, n(found), what, f"`{at}`")
            for i, ((who, request, answer, what, at), found) in enumerate(groups.items())]


DETAIL_HEAD = ("#", "who", "request", "condition → answer", "n", "what it is for", "made in")
SUMMARY_HEAD = ("scenario", "who", "PUT", "GET", "HEAD", "LIST", "DELETE", "total")


def idle_rows(result: dict, poll: float) -> list[tuple]:
    window = result["window_s"]
    groups = Counter((r["kind"], r["shape"], r["purpose"], r["where"]) for r in result["rows"]
                     if r["whose"] in ("pass", "background"))
    return [(f"{kind} `{key}`", what, f"`{at}`", n, f"{n / (window / poll):.2f}", f"{n * 60 / window:.1f}")
            for (kind, key, what, at), n in groups.most_common()]


def report(results: list[dict], args) -> str:
    by = {r["scenario"]: r for r in results}
    out = [f"SeaweedFS {args.weed_version}, agents polling every {args.poll_seconds:g} s; counted on the wire "
           "(a plain delete reaches S3 as a DeleteObjects POST: counted as a DELETE)."]
    singles = [r for r in results if r["scenario"] not in ("idle", "batch") and not r["scenario"].startswith("bill-")]
    if singles:
        out += ["", "One job, submit to a reader seeing it terminal (the window); agents warmed up before it:", "",
                md_table(SUMMARY_HEAD, [row for r in singles for row in summary_rows(r)])]
    if "batch" in by:
        b = by["batch"]
        out += ["", f"Amortised: {b['jobs']} `true` jobs, one `stado agent --until-idle --slots {args.slots}` "
                f"(its whole life, {b['window_s']:.1f} s), per job:", "",
                md_table(("who", "PUT", "GET", "HEAD", "LIST", "DELETE", "total"), batch_rows(b))]
    if "idle" in by:
        out += ["", f"An idle agent ({by['idle']['window_s']:.0f} s, polling every {args.poll_seconds:g} s):", "",
                md_table(("request", "what it is for", "made in", "n", "per poll", "per minute"),
                         idle_rows(by["idle"], args.poll_seconds))]
    for r in singles:
        notes = {k: v for k, v in r["notes"].items() if k != "calls_without_request"}
        said = "; ".join(f"{k} {v}" for k, v in notes.items())
        out += ["", f"Scenario {r['scenario']}: the job's requests" + (f" ({said})" if said else ""), "",
                md_table(DETAIL_HEAD, detail_rows(r))]
    if "batch" in by:
        out += ["", "Scenario batch: every request, per job (the submitter's and the agent's divided by the jobs):", "",
                md_table(DETAIL_HEAD, detail_rows(by["batch"], ("job", "start-up", "after", "pass", "background"),
                                                  by["batch"]["jobs"]))]
    unpaired = {r["scenario"]: r["notes"]["calls_without_request"] for r in results
                if r["notes"].get("calls_without_request")}
    unknown = sum(1 for r in results for row in r["rows"] if row["stack"] is None)
    out += ["", f"Requests on the wire with no stado call paired: {unknown}; stado calls with no request on the "
            f"wire: {unpaired or 0}; connections the proxy could not parse: {args.unparsed}."]
    rows = bill_rows(by)
    if rows:
        out += ["", f"The bill at list prices ({bill.PRICES_AS_OF}; bench/bill.py), the job's and the agent's own "
                "requests, agents at their default cadences for the running job and the idle agent:", "",
                md_table(("figure", "unit", *KINDS[:5], *bill.PROVIDERS), bill.table(rows, KINDS[:5])), "",
                *bill.script_lines(rows)]
    return "\n".join(out)


def _in_window(rows: list[dict], window: float) -> list[dict]:
    return [r for r in rows if 0 <= r["at"] <= window]


def bill_rows(by: dict) -> list[dict]:
    """The bill's three figures from what the scenarios counted: one job (`once`: its requests, a reader's
    included), a running job (its own requests in the window) and an idle agent (all of its requests in the
    window)."""
    once = counts(r for r in by["once"]["rows"] if r["whose"] == "job") if "once" in by else None
    running = idle = None
    if "bill-running" in by:
        b = by["bill-running"]
        running = (counts(r for r in _in_window(b["rows"], b["window_s"]) if r["whose"] == "job"), b["window_s"])
    if "bill-idle" in by:
        b = by["bill-idle"]
        idle = (counts(r for r in _in_window(b["rows"], b["window_s"]) if r["role"].startswith("agent")),
                b["window_s"])
    return bill.bill(once, running, idle)


def weed_version() -> str:
    try:
        out = subprocess.run([str(BIN / "weed"), "version"], capture_output=True, text=True, timeout=30).stdout
    except OSError:
        return "?"
    found = re.search(r"version\s+\S+\s+(\S+)", out)  # "version 8000GB 4.48 pypi linux amd64"
    return found.group(1) if found else out.strip()[:40]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"any of {','.join(SCENARIOS)}")
    parser.add_argument("--jobs", type=int, default=200, help="batch: jobs drained (default 200)")
    parser.add_argument("--slots", type=int, default=4, help="batch: the agent's slots (default 4)")
    parser.add_argument("--poll-seconds", type=float, default=1.0, help="every agent's --poll-seconds (default 1)")
    parser.add_argument("--settle-seconds", type=float, default=1.0,
                        help="reaped: agent B's --settle-seconds, its reaper's pass (default 1)")
    parser.add_argument("--run-seconds", type=float, default=2.5, help="cancel-running: how long it runs first")
    parser.add_argument("--idle-seconds", type=float, default=31.0, help="idle: how long (default 31: a reaper pass)")
    parser.add_argument("--bill-seconds", type=float, default=120.0,
                        help="bill-running, bill-idle: how long each is counted (default 120)")
    parser.add_argument("--cron", default="*/5 * * * * *", help="cron: the schedule (six fields: seconds first)")
    parser.add_argument("--json", metavar="FILE", help="also write every request and the tables as JSON")
    args = parser.parse_args(argv)
    names = [n for n in args.scenarios.split(",") if n]
    unknown = set(names) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(sorted(unknown))}: choose from {', '.join(SCENARIOS)}")
    from tests.stado.servers import start_seaweedfs

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    args.weed_version = weed_version()
    tmp = Path(tempfile.mkdtemp(prefix="stado-requests-"))
    server = start_seaweedfs(tmp / "weed")  # fails (ServerError) when SeaweedFS is missing: never skipped
    lab = Lab(server, tmp, args.poll_seconds)
    results = []
    try:
        for name in names:
            s = Scenario(lab, name)
            try:
                RUNNERS[name](s, args)
                time.sleep(0.2)  # the last answers back through the proxy
                results.append(analyse(s))
            finally:
                s.close()
            print(f"{name}: {len(results[-1]['rows'])} requests on the wire", file=sys.stderr, flush=True)
    finally:
        lab.wire.close()
        server.stop()
    args.unparsed = lab.wire.unparsed
    text = report(results, args)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"weed": args.weed_version, "poll_seconds": args.poll_seconds,
                                               "scenarios": results, "bill": bill_rows({r["scenario"]: r for r in results}),
                                               "markdown": text}, indent=1))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
