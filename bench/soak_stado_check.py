"""The stado soak's invariants, checked from the store's durable state (every prefix listed and every terminal
record read, with the store's own client) and from the jobs' ledger, once the queue drained (or time ran out):

- every accepted job (an id a submitting CLI printed, or any job found in the store) has exactly one
  terminal record and nothing left in queue/ or running/;
- no job's command ran twice at the same time, except as stado's liveness rule allows: the older run's agent was stopped
  (SIGSTOP) before the newer run started, so the job was reaped and run again; then the older (stale) copy
  must end within a poll (plus scheduling slack) of its agent resuming, when its fenced renewal stops it;
- no run started after its job's terminal record (for a cancel: after the cancel was recorded), and none
  ended after it, except a cancelled job's run (stopped within a poll plus --kill-after) and a stale copy
  under a stopped agent (the rule above);
- every requeue, `worker_lease_expired` failure, cancel and other outcome the plan does not give is explained
  by a recorded fault: a cancel of that job; a kill or stop of an agent that ran it (an attempt that never
  started a process: any agent fault in its lifetime); a store fault in its lifetime;
- what each `stado cancel` said holds: a job it said is cancelled ends cancelled, one it said had already
  finished ends as it said, and no run of either starts after the answer;
- every agent exited 0 on SIGTERM (those the chaos killed aside); no process of the soak left running; no
  traceback in any agent's log or CLI's output; `stado status` and `stado reap` agree nothing is left.

And strictly, with no allowance (the report's `strict` counts, each a violation too): no two runs of one job
overlap in time (ledger against ledger: one host's clock), no run starts after its job's success record, none
after its cancel record (`cancel.at`, the time the cancel was written), no accepted job lost (each has exactly
one terminal record and no queue or running entry), and no command's answer contradicts the store
(_answers: every `stado submit`, `stado cancel` and the watcher's `stado status --json --all`).
"""
import json
import os
import re
import time

from soak_common import overlaps, processes_mentioning, read_ledger, scan_logs
from soak_stado_chaos import KILL_AFTER, POLL, SETTLE

# The ledger's clock (the host's) against the times in the records (the agents' readings of the store's clock):
# the local directory's is the host's own, to the millisecond; SeaweedFS stamps whole seconds, so an agent's
# reading of it is good to a second at first (stado.store.storeclock narrows it as the agent runs).
SLACK = {"file": 0.05, "s3": 1.0}
RESUME_GRACE = 2.0  # scheduling slack on a loaded 2-core machine, on top of a poll
AGENT_FAULTS = ("agent_kill", "agent_gone", "agent_stop")
KILLS = ("agent_kill", "agent_gone")
# The fault proxy's regime (soak_faults): its whole span, a burst, a storm of 503s.
STORE_FAULTS = ("store_slow", "store_stall", "conn_drop", "store_faults", "store_burst", "store_storm")


def _records(store) -> tuple[dict, dict]:
    """job id -> {state: document} for terminal records; and job id -> [states] of queue/running entries."""
    from stado.core import keys
    from stado.core.documents import parse_iso

    terminal, moving = {}, {}
    for state in keys.TERMINAL_STATES:
        for entry in store.list(keys.STATE_PREFIXES[state]):
            job_id = keys.job_id_of(entry.key, keys.STATE_PREFIXES[state])
            doc = json.loads(store.get(entry.key).data)
            doc["_at"] = parse_iso(doc.get("finished_at"))
            terminal.setdefault(job_id, {})[state] = doc
    for state in ("queued", "running"):
        for entry in store.list(keys.STATE_PREFIXES[state]):
            moving.setdefault(keys.job_id_of(entry.key, keys.STATE_PREFIXES[state]), []).append(state)
    return terminal, moving


def check(soak, store, batches, fleet) -> None:
    r = soak.report
    slack = SLACK[soak.backend]
    if soak.regime != "none":
        # An answer held back widens an agent's measurement of the store's clock (storeclock: the write landed
        # between the request and its answer), and a record's time is the middle of what it allows: off by up to
        # half the hold. A start or end is judged against the time in a record with that much more slack; the
        # strict count of runs after a success record goes by when the fault proxy saw that record land, which
        # needs no clock but this host's.
        from soak_faults import DELAY_MAX

        slack += DELAY_MAX / 2
    planned = {j.key: j for batch in batches for j in batch}
    by_marker = {j.command.rsplit("/", 1)[1].strip("'"): j.key for j in planned.values()}
    terminal, moving = _records(store)
    key_of = dict(soak.accepted)
    for job_id, states in terminal.items():  # jobs a failed CLI wrote before it stopped count too
        doc = next(iter(states.values()))
        key_of.setdefault(job_id, by_marker.get(doc["spec"]["command"].rsplit("/", 1)[1].strip("'")))
    r.attempted = sum(len(b) for b in batches)
    r.jobs = len(key_of)
    for job_id in key_of:
        states = terminal.get(job_id, {})
        if len(states) != 1:
            r.violate("one terminal state", f"{job_id} has {sorted(states) or 'no'} terminal record(s)")
        if job_id in moving:
            r.violate("one terminal state", f"{job_id} still has {moving[job_id]} entries")
    for job_id in set(moving) - set(key_of):
        r.violate("one terminal state", f"{job_id} ({moving[job_id]}) was never accepted")
    final = {job_id: next(iter(states.values())) for job_id, states in terminal.items() if len(states) == 1}
    r.outcomes.update(_outcome(doc) for doc in final.values())
    runs, bad = read_ledger(soak.ledger)
    for line in bad:
        r.violate("ledger", f"unreadable line {line!r}")
    _ends_from_deaths(runs, soak.deaths)
    _ends_of_killed_orphans(runs, soak.faults, fleet)
    _runs(r, final, runs, soak.faults, slack)
    _explained(r, planned, key_of, final, runs, soak.faults, slack)
    _cancels_kept(r, final, runs, soak.faults, slack)
    _strict_runs(r, final, runs, slack, _landed(soak), soak.cancel_answers)
    r.strict["lost"] = sum(1 for job_id in key_of if len(terminal.get(job_id, {})) != 1 or job_id in moving)
    _answers(soak, r, terminal, moving, store)
    _leftovers(soak, r, fleet, runs)


_CANCELLED = ("cancelled_queued", "cancelled_running", "cancelled_finishing", "already_cancelling")
_ENDED = re.compile(r"already (?:finished \((\w+)\)|(\w+)(?: \((\w+)\))?)")


def _cancels_kept(r, final, runs, faults, slack) -> None:
    """A cancel that answered is kept to its word (see the module's docstring)."""
    kept = 0
    for f in faults.of("cancel"):
        kind, _, message = (f.detail or "").partition(": ")
        doc = final.get(f.job)
        if doc is None or kind.startswith("exit "):
            continue
        if kind in _CANCELLED or (kind == "already_terminal" and "already cancelled" in message):
            want = "cancelled"
        elif kind in ("finishing", "already_terminal"):
            m = _ENDED.search(message)
            outcome = m and (m.group(1) or m.group(3))
            want = {"succeeded": "completed", "failed": "failed", "timed_out": "failed"}.get(outcome, doc["state"])
        else:
            continue
        kept += 1
        if doc["state"] != want:
            r.violate("cancel kept", f"{f.job}: `stado cancel` answered {kind!r} ({message[:120]}) but the job ended "
                                     f"{doc['state']}")
        for run in runs.get(f.job, []):
            if run.start > f.t1 + slack:
                r.violate("cancel kept", f"{f.job}: a run started {run.start - f.t1:.2f} s after `stado cancel` "
                                         f"answered {kind!r}")
    r.checks["cancels kept to their word"] = kept


def _landed(soak) -> dict[str, float] | None:
    """job id -> when (this host's clock) the fault proxy had the server's answer to the write that made its
    success record (`completed/ID.json`): the record existed by then. None without a fault proxy."""
    proxy = getattr(soak, "fault_proxy", None)
    if proxy is None:
        return None
    from stado.core import keys

    offset = soak.proxy_clock  # time.time() - time.monotonic()
    landed: dict[str, float] = {}
    for e in proxy.exchanges():
        if e.key and e.key.startswith(keys.COMPLETED) and e.kind in ("create", "put", "cas") and e.committed \
                and e.done is not None:
            job_id = keys.job_id_of(e.key, keys.COMPLETED)
            if job_id and job_id not in landed:
                landed[job_id] = e.done + offset
    return landed


def _strict_runs(r, final, runs, slack, landed, cancels) -> None:
    """Overlaps, starts after a success record and after a cancel record, with no allowance at all. With a fault
    proxy, "after the success record" is after the proxy had the answer to the write that made it (no slack:
    this host's clock on both sides); without one, after the record's time (plus the clocks' slack). "After the
    cancel record": after its `cancel.at` (plus the slack), and after a `stado cancel` that answered it
    cancelled (exit 0) had returned (no slack)."""
    from stado.core.documents import parse_iso

    now = time.time()
    answered: dict[str, float] = {}
    for c in cancels:
        if c.code == 0:
            answered[c.job] = min(answered.get(c.job, c.t1), c.t1)
    for job_id, job_runs in runs.items():
        for a, b in overlaps(job_runs, now):
            r.strict["overlap"] += 1
            r.violate("strict: never twice at once", f"{job_id}: runs by pids {a.pid} (agent {a.owner}) and {b.pid} "
                                                     f"(agent {b.owner}) overlapped {_span(a, b, now):.2f} s; older "
                                                     f"one {_how_ended(a)}")
        doc = final.get(job_id)
        if doc is None:
            continue
        if doc["state"] == "completed":
            at = landed[job_id] if landed and job_id in landed else None
            for run in job_runs:
                if run.start > (at if at is not None else doc["_at"] + slack):
                    r.strict["after_success"] += 1
                    r.violate("strict: nothing after success", f"{job_id}: a run (pid {run.pid}) started "
                                                               f"{run.start - doc['_at']:.2f} s after its success "
                                                               f"record's time" + (f" ({run.start - at:.2f} s after "
                                                               "the proxy saw it land)" if at is not None else ""))
        cancel_at = parse_iso((doc.get("cancel") or {}).get("at")) if doc["state"] == "cancelled" else None
        if cancel_at is not None or job_id in answered:
            bound = min(cancel_at + slack if cancel_at is not None else float("inf"),
                        answered.get(job_id, float("inf")))
            for run in job_runs:
                if run.start > bound:
                    r.strict["after_cancel"] += 1
                    r.violate("strict: nothing after cancel", f"{job_id}: a run (pid {run.pid}) started "
                                                              f"{run.start - bound:.2f} s after its cancel record "
                                                              f"({(doc.get('cancel') or {}).get('at')}) or a "
                                                              "`stado cancel` that said it was cancelled")


def _marker(command: str) -> str:
    return command.rsplit("/", 1)[1].strip("'")


def _answers(soak, r, terminal, moving, store) -> None:
    """What every command said against what the store holds once the queue drained:

    - `stado submit`, per job it was given: an id printed as queued (exit 0, or before the job a batch stopped
      at) -> that job exists, with that job's command, and no other job has its command; an id printed with
      "could not tell" (exit 7) -> no job but that one has its command (it may not exist: counted apart); no id
      printed -> no job has its command (MARKER makes each planned job's command unique); exit 0 -> every job
      of it printed as queued;
    - `stado cancel`: exit 0 -> the job ended cancelled; exit 1 (it had already ended) -> it did not end
      cancelled, and ended as the answer said; exit 4 (nothing written) -> the job did not end cancelled unless
      another cancel of it may have landed (exit 0 or 7); any other exit is a contradiction (each cancelled
      job was accepted: it exists);
    - each watcher's `stado status --json --all` that answered: every job accepted before it began is shown,
      and none is counted corrupt.
    """
    from stado.core import keys

    jobs_of: dict[str, list[str]] = {}  # marker -> the ids of every job with that command
    for job_id, states in terminal.items():
        for doc in states.values():
            jobs_of.setdefault(_marker(doc["spec"]["command"]), []).append(job_id)
            break
    for job_id, states in moving.items():
        if job_id in terminal:
            continue
        try:
            doc = json.loads(store.get(keys.state_key(states[0], job_id)).data)
            jobs_of.setdefault(_marker(doc["spec"]["command"]), []).append(job_id)
        except Exception as e:
            r.violate("answers", f"{job_id} in {states}: unreadable ({type(e).__name__}: {e})")
    marker_of = {}
    for batch in soak.planned_batches:
        for j in batch:
            marker_of[j.key] = _marker(j.command)
    contradicted, unsure_absent, checked = [], 0, 0

    def contradict(text):
        contradicted.append(text)
        r.violate("strict: answer contradicts the store", text[:400])

    for sub in soak.submits:
        checked += 1
        said = f"`stado submit` ({len(sub.keys)} job(s), exit {sub.code}, {_clock(sub.t0)})"
        if sub.code == 0 and (len(sub.printed) != len(sub.keys) or not all(p.get("queued") for p in sub.printed)):
            contradict(f"{said} printed {len(sub.printed)} job(s), not every one queued")
        for i, key in enumerate(sub.keys):
            printed = sub.printed[i] if i < len(sub.printed) else None
            have = jobs_of.get(marker_of[key], [])
            if len(have) > 1:
                contradict(f"{said}: plan job {key} has {len(have)} jobs in the store: {have}")
            if printed is None:
                if have:
                    contradict(f"{said}: plan job {key} was not printed (not submitted), but the store holds {have}")
            elif printed.get("queued"):
                if printed["id"] not in have:
                    contradict(f"{said}: printed {printed['id']} for plan job {key} as queued; the store holds {have}")
            elif have and have != [printed["id"]]:
                contradict(f"{said}: could not tell about {printed['id']} (plan job {key}); the store holds {have}")
            elif not have:
                unsure_absent += 1
    final = {job_id: next(iter(states.values())) for job_id, states in terminal.items() if len(states) == 1}
    may_have_cancelled: dict[str, int] = {}
    for c in soak.cancel_answers:
        if c.code in (0, 7):
            may_have_cancelled[c.job] = may_have_cancelled.get(c.job, 0) + 1
    for c in soak.cancel_answers:
        checked += 1
        doc = final.get(c.job)
        state = doc["state"] if doc else None
        said = f"`stado cancel {c.job}` (exit {c.code}, {_clock(c.t0)}: {(c.answer or {}).get('result') or c.stderr.strip()[:160]})"
        if c.code == 0:
            if state != "cancelled":
                contradict(f"{said}: the job ended {state}")
        elif c.code == 1:
            m = _ENDED.search((c.answer or {}).get("message", ""))
            outcome = m and (m.group(1) or m.group(3))
            want = {"succeeded": "completed", "failed": "failed", "timed_out": "failed"}.get(outcome or "")
            if state == "cancelled" or (want and state != want):
                contradict(f"{said} ({(c.answer or {}).get('message', '')[:160]}): the job ended {state}")
        elif c.code == 4:
            if state == "cancelled" and not may_have_cancelled.get(c.job):
                contradict(f"{said}: it wrote nothing, yet the job ended cancelled and no other cancel of it landed")
        elif c.code != 7:
            contradict(f"{said}: an accepted job's cancel exited {c.code}")
    accepted_at = {}
    for sub in soak.submits:
        for p in sub.printed:
            if p.get("queued"):
                accepted_at[p["id"]] = sub.t1
    answered = 0
    for st in soak.statuses:
        if st.ids is None:
            continue
        answered += 1
        checked += 1
        dropped = sorted(job_id for job_id, t in accepted_at.items() if t < st.t0 and job_id not in st.ids)
        if dropped:
            contradict(f"`stado status --json --all` at {_clock(st.t0)} left out {len(dropped)} accepted job(s): "
                       f"{dropped[:5]}")
        if st.corrupt:
            contradict(f"`stado status --json --all` at {_clock(st.t0)} counted {st.corrupt} job(s) corrupt "
                       f"({st.problems} problem(s) listed)")
    r.strict["contradicted"] = len(contradicted)
    r.checks["commands checked against the store"] = checked
    if soak.statuses:
        r.notes.append(f"the watcher's `stado status --json --all`: {answered} of {len(soak.statuses)} answered "
                       f"(the others exited non-zero: {sorted({st.code for st in soak.statuses if st.ids is None})})")
    if unsure_absent:
        r.notes.append(f"{unsure_absent} job(s) a submit printed with \"could not tell\" (exit 7) are not in the "
                       "store: their create never landed, which the answer allowed")
    codes = {}
    for sub in soak.submits:
        codes[sub.code] = codes.get(sub.code, 0) + 1
    ccodes = {}
    for c in soak.cancel_answers:
        ccodes[c.code] = ccodes.get(c.code, 0) + 1
    r.notes.append(f"submits by exit code: {dict(sorted(codes.items()))}; cancels by exit code: "
                   f"{dict(sorted(ccodes.items()))}")


def _outcome(doc: dict) -> str:
    error = (doc.get("error") or {}).get("class")
    if doc["state"] == "failed" and error in ("worker_lease_expired", "input_unavailable"):
        return f"failed ({error})"
    return doc.get("outcome") or doc["state"]


def _ends_from_deaths(runs, path) -> None:
    """A run killed by SIGKILL writes no end; soak_deaths.py saw its process end (an upper bound of its end)."""
    gone: dict[int, tuple[float, str]] = {}
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        lines = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "G":
            gone.setdefault(int(parts[1]), (float(parts[2]), " ".join(parts[3:])))
    for job_runs in runs.values():
        for run in job_runs:
            if run.end is None and run.pid in gone:
                at, note = gone[run.pid]
                run.end, run.how = at, ("killed, no end written: found gone at its start" if note else
                                        "killed, no end written: its end as the watcher of deaths saw it")


_ORPHAN_STOP = re.compile(r"^(\S+) agent \S+: \S+: pid\(s\) ([\d, ]+) left running by agent \S+, which is gone")


def _ends_of_killed_orphans(runs, faults, fleet) -> None:
    """A run whose agent was SIGKILLed goes on alone (stado keeps it for the restart check); an agent of its host stops it later
    (restart.stop_orphans: SIGTERM, then SIGKILL after --kill-after), and one killed by SIGKILL never writes
    its end. Such a run, gone now, ended at the latest --kill-after past the line that agent logged: that
    bound stands for its end, so the rules below judge it like any other."""
    from stado.core.documents import parse_iso

    stopped_at: dict[int, float] = {}
    for agent in fleet.agents:
        for line in agent.log.read_text(errors="replace").splitlines():
            m = _ORPHAN_STOP.match(line)
            if m:
                for pid in m.group(2).split(", "):
                    stopped_at.setdefault(int(pid), parse_iso(m.group(1)))
    killed = {f.pid for f in faults.of(*KILLS)}
    for job_runs in runs.values():
        for run in job_runs:
            if run.end is None and run.owner in killed and run.pid in stopped_at and not os.path.exists(
                    f"/proc/{run.pid}"):
                run.end, run.how = stopped_at[run.pid] + KILL_AFTER, "stopped as a killed agent's orphan; no end " \
                    "written (SIGKILL): bounded by the stopping agent's log line plus --kill-after"


def _stops_of(faults, pid: int) -> list:
    return [f for f in faults.of("agent_stop") if f.pid == pid]


def _stale_copy_ok(a, b, faults, lags: list) -> bool:
    """The older run `a` and the newer `b` overlapped: allowed if a's agent was stopped before b started and
    `a` ended within a poll (plus slack) of that agent resuming, or a's agent was killed and its host's agents
    stopped `a` on their next pass."""
    for stop in _stops_of(faults, a.owner):
        if stop.t0 <= b.start and a.start <= stop.t1:
            if a.end is not None and a.end <= stop.t1 + POLL + RESUME_GRACE:
                lags.append(max(0.0, a.end - stop.t1))
                return True
    # A killed agent's process goes on (kept for the restart check); the job was requeued before `b`
    # started, and the host's agents stop the orphan on their next pass (see _late_end_ok).
    for kill in faults.of(*KILLS):
        if kill.pid == a.owner and a.start <= kill.t0 <= b.start and a.end is not None and \
                a.end <= b.start + SETTLE + POLL + KILL_AFTER + RESUME_GRACE:
            lags.append(max(0.0, a.end - b.start))
            return True
    return False


def _runs(r, final, runs, faults, slack) -> None:
    now, lags = time.time(), []
    for job_id, job_runs in runs.items():
        doc = final.get(job_id)
        if doc is None:
            r.violate("ran unrecorded", f"job {job_id} ran ({len(job_runs)} run(s)) with no single terminal record")
            continue
        for a, b in overlaps(job_runs, now):
            if not _stale_copy_ok(a, b, faults, lags):
                r.violate("never twice at once", f"{job_id}: runs by pids {a.pid} (agent {a.owner}) and "
                                                  f"{b.pid} (agent {b.owner}) overlapped {_span(a, b, now):.2f} s; "
                                                  f"older one {_how_ended(a)}{_killed(a, faults, now)}")
        at = doc["_at"]
        for run in job_runs:
            if run.start > at + slack:
                stopped = [f for f in _stops_of(faults, run.owner) if f.t1 <= run.start]
                context = (f"; its agent (pid {run.owner}) had been stopped from {_clock(stopped[-1].t0)} to "
                           f"{_clock(stopped[-1].t1)}" if stopped else "")
                r.violate("nothing after terminal", f"{job_id}: a run started {run.start - at:.2f} s after its "
                                                    f"{doc['state']} record{context}")
            elif run.end is None or run.end > at + slack:
                if not _late_end_ok(run, doc, faults, lags, slack):
                    r.violate("nothing after terminal", f"{job_id}: a run (pid {run.pid}, agent {run.owner}) "
                                                        f"{_how_ended(run)} after its {doc['state']} record at "
                                                        f"{doc.get('finished_at')}{_killed(run, faults, now)}")
    if lags:
        r.notes.append(f"{len(lags)} stale cop(ies) of reaped jobs (their agent stopped or killed) ran past the record "
                       f"and ended at most {max(lags):.2f} s after their agent resumed or the record was written (allowed: "
                       f"a poll, {POLL} s, plus {RESUME_GRACE} s; for a killed agent also the host's reaper pass, "
                       f"{SETTLE} s, and --kill-after, {KILL_AFTER} s)")
    r.checks["runs in the ledger"] = sum(len(v) for v in runs.values())


def _late_end_ok(run, doc, faults, lags, slack) -> bool:
    if run.end is None:
        return False
    if doc["state"] == "cancelled" and run.end <= doc["_at"] + POLL + KILL_AFTER + RESUME_GRACE:
        return True
    for stop in _stops_of(faults, run.owner):
        if stop.t0 <= doc["_at"] + slack and run.start <= stop.t1 and run.end <= stop.t1 + POLL + RESUME_GRACE:
            lags.append(max(0.0, run.end - stop.t1))
            return True
    # stado keeps a job's process alive when its agent dies (so that the agent restarting on the host can
    # watch it to its end): once its record is terminal, the host's agents stop it, the restarted one at its
    # start, its live sibling on its reaper pass. Allowed: that pass, a poll, --kill-after, and the slack.
    for kill in faults.of(*KILLS):
        if kill.pid == run.owner and run.start <= kill.t0 <= doc["_at"] + slack and \
                run.end <= doc["_at"] + SETTLE + POLL + KILL_AFTER + RESUME_GRACE:
            lags.append(max(0.0, run.end - doc["_at"]))
            return True
    return False


def _killed(run, faults, now) -> str:
    """Context for a violation: the run's agent was SIGKILLed while it ran (its process went on alone)."""
    for kill in faults.of(*KILLS):
        if kill.pid == run.owner and run.start <= kill.t0 <= (run.end or now):
            return f"; its agent (pid {run.owner}) was killed at {_clock(kill.t0)}, and it went on alone"
    return ""


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"


def _span(a, b, now) -> float:
    return min(a.end or now, b.end or now) - b.start


def _how_ended(run) -> str:
    return "never recorded its end" if run.end is None else f"ended ({run.how})"


def _expected(plan, final_by_key) -> str:
    if plan.own != "consumer":
        return {"completed": "succeeded", "failed": "failed", "timed_out": "timed_out"}[plan.own]
    producer = final_by_key.get(plan.producer)
    return "succeeded" if producer is not None and producer["state"] == "completed" else "failed (input_unavailable)"


def _explained(r, planned, key_of, final, runs, faults, slack) -> None:
    final_by_key = {key_of.get(job_id): doc for job_id, doc in final.items()}
    id_of = {k: i for i, k in key_of.items()}
    for job_id, doc in final.items():
        plan = planned.get(key_of.get(job_id))
        if plan is None:
            r.violate("explained", f"{job_id} is in the store but not in the plan")
            continue
        got, want = _outcome(doc), _expected(plan, final_by_key)
        life = (_submitted(doc), doc["_at"])
        why = _touching(job_id, runs.get(job_id, []), doc, faults, life)
        if doc["state"] == "cancelled":
            if not [f for f in faults.of("cancel") if f.job == job_id and f.t0 <= doc["_at"] + slack]:
                r.violate("explained", f"{job_id} was cancelled, but the soak never cancelled it")
            continue
        if doc.get("requeues", 0) and not why:
            r.violate("explained", f"{job_id} was requeued {doc['requeues']} time(s) with no fault to explain it")
        if got != want:
            producer = id_of.get(plan.producer) if plan.producer else None
            if producer and [f for f in faults.of("cancel") if f.job == producer]:
                continue
            if not why:
                r.violate("explained", f"{job_id} ended {got}, the plan says {want}, and no recorded fault explains it "
                                       f"({(doc.get('error') or {}).get('message', '')})"[:400])
    r.checks["outcomes checked against the plan"] = len(final)


def _submitted(doc) -> float:
    from stado.core.documents import parse_iso

    return parse_iso(doc.get("submitted_at")) or 0.0


def _touching(job_id, job_runs, doc, faults, life) -> list:
    """The recorded faults that could have changed this job's course."""
    t0, t1 = life
    agents = {run.owner for run in job_runs}
    first = min((run.start for run in job_runs), default=t1)
    why = [f for f in faults.of(*AGENT_FAULTS) if f.pid in agents and f.t1 >= first]
    attempts = 1 + doc.get("requeues", 0) + doc.get("failures", 0)
    if len({run.attempt for run in job_runs}) < attempts:  # an attempt claimed but never started: any agent
        why += faults.overlapping(AGENT_FAULTS, t0, t1, slack=1.0)
    why += faults.overlapping(STORE_FAULTS, t0, t1, slack=1.0)
    why += [f for f in faults.of("cancel") if f.job == job_id]
    return why


def _leftovers(soak, r, fleet, runs) -> None:
    by_group = {run.pgid: run for job_runs in runs.values() for run in job_runs}
    for p in processes_mentioning(str(soak.dir)):
        if p.argv and p.argv[0].endswith("weed"):
            continue
        run = by_group.get(_group_of(p.pid))
        context = f" (job {run.job}{_killed(run, soak.faults, time.time())})" if run else ""
        r.violate("left running", f"pid {p.pid}{context}: {' '.join(p.argv)[:160]}")
    for agent, code, at in fleet.died:
        near = soak.faults.overlapping(STORE_FAULTS, at - 10.0, at, slack=1.0)
        if code == 4 and near:
            r.notes.append(f"agent {agent.log.name} exited 4 while the store was failing ({near[-1].kind}); it was "
                           "started again (stado agent checks that it reaches the store before anything else)")
        else:
            r.violate("agents", f"agent {agent.log.name} exited {code} by itself: "
                                f"{agent.log.read_text(errors='replace').strip().splitlines()[-1:]}")
    logs = [a.log for a in fleet.agents]
    for problem in scan_logs(logs)[0]:
        r.violate("logs", problem)
    for failure in soak.cli_failures:
        if "Traceback" in failure or len(failure.splitlines()) > 1:
            r.violate("one-line errors", failure[:400])
    explained = [f for f in soak.cli_failures if _cli_failure_explained(f, soak.faults)]
    for failure in soak.cli_failures:
        if failure not in explained:
            r.violate("explained", f"a submission failed with no store fault at the time: {failure[:300]}")
    status = soak.stado("status", "--json", "--all", timeout=300)
    if status.returncode != 0:
        r.violate("status", f"stado status exited {status.returncode}: {status.stderr.strip()[:300]}")
    else:
        view = json.loads(status.stdout)
        if view.get("problems"):
            r.violate("status", f"stado status lists problems: {view['problems'][:5]}")
    reap = soak.stado("reap", "--json", timeout=300)
    if reap.returncode != 0 or json.loads(reap.stdout or "{}").get("reaped"):
        r.violate("reap", f"stado reap after the drain: exit {reap.returncode} {reap.stdout.strip()[:300]}")
    r.checks["agent logs scanned"] = len(logs)


def _group_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[3])
    except (OSError, ValueError, IndexError):
        return None


def _cli_failure_explained(line: str, faults) -> bool:
    t0, t1 = (float(x) for x in line.split()[:2])
    return bool(faults.overlapping(STORE_FAULTS, t0, t1, slack=1.0))
