"""`jobman signal JOB SIG`, `jobman hold JOB` and `jobman release JOB`.

A signal goes to every process of the job's target tree, found as `jobman cancel` finds a lost job's
(the recorded root, its session and process group, and every process carrying the job's id in its
environment), each pinned to its start time, so a recycled pid is never signalled. The supervisor
is not part of the tree and is never signalled.
"""
import os
import time

from runkit.system import proc

from ..handoff import doorbell
from ..store import queries, transitions
from ..core.errors import BadInput

MAX_SIGNAL = 64  # SIGRTMAX on Linux


def parse_signal(text: str) -> int:
    """A signal by name (TERM, SIGTERM, sigterm) or number; BadInput otherwise."""
    import signal

    word = text.strip().upper()
    if word.isdigit():
        number = int(word)
        if 1 <= number <= MAX_SIGNAL:
            return number
    else:
        name = word if word.startswith("SIG") else "SIG" + word
        found = getattr(signal.Signals, name, None) if name.isidentifier() else None
        if found is not None:
            return int(found)
    raise BadInput(f"unknown signal {text!r}: give a name (TERM, HUP, USR1, STOP, CONT, ...) or a number "
                   f"from 1 to {MAX_SIGNAL}")


# What each command takes of the jobs a selection matches: those it can act on (store.selectors.choose).
SIGNALLABLE = ("s.phase = 'running' OR (s.outcome = 'lost' AND s.slot_held = 1)", "running job")
WAITING = ("s.phase IN ('submitting', 'starting', 'waiting')", "job that has not started")
HOLDABLE = ("s.phase IN ('submitting', 'starting', 'waiting') AND s.held_at IS NULL", "unheld job that has not started")
RELEASABLE = ("s.phase IN ('submitting', 'starting', 'waiting') AND s.held_at IS NOT NULL", "held job")


def send_signal(selectors: list[str], sig: int, environ=os.environ, selection=None) -> list[dict]:
    """Send sig to every process of each job's tree (the JOBs named, and the running jobs the selection matches).
    A JOB named that runs nothing refuses the whole command before anything is sent."""
    from .api import State

    st = State(environ, create=False)
    ids = st.choose(selectors, selection, SIGNALLABLE)
    st.reconcile()
    name = proc.signal_name(sig) or str(sig)
    for selector in selectors:  # each JOB named is checked before anything changes
        state = queries.load_state(st.conn, st.resolve(selector))
        if not _signallable(state):
            what = state["outcome"] or state["phase"]
            raise BadInput(f"job {selector} is {what}: it has no running process to send {name} to"
                           + (" (jobman cancel stops a waiting job)" if state["phase"] != "finished" else "")
                           + "; nothing was sent")
    return [_signal_one(st, job_id, sig, name) for job_id in ids]


def _signallable(state) -> bool:
    return state["phase"] == "running" or (state["outcome"] == "lost" and bool(state["slot_held"]))


def _signal_one(st, job_id: str, sig: int, name: str) -> dict:
    from . import targets

    handle = queries.handle_of(st.conn, job_id)
    state = queries.load_state(st.conn, job_id)
    if not _signallable(state):  # it ended between the choice and now
        return {"id": job_id, "handle": handle, "signal": name, "pids": [], "done": False,
                "message": f"not sent: it is {state['outcome'] or state['phase']} now"}
    attempt = queries.last_attempt(st.conn, job_id)
    found = targets.processes(job_id, attempt)
    # The command's process group (it leads one, jobman.supervisor.attempt) in one delivery: signalled one by one, a shell
    # that ends at the signal has the rest of its tree swept by its supervisor before they are sent it, or its
    # children end first and it leaves before its own turn. What left the group is signalled one by one.
    group = [st_ for st_ in found if st_.pgid == attempt["pid"]]
    if group and proc.signal_led_group(attempt["pid"], attempt["start_time"], sig):
        sent = [st_.pid for st_ in group]
        found = [st_ for st_ in found if st_.pgid != attempt["pid"]]
    else:
        sent = []
    sent += [st_.pid for st_ in found if proc.signal_exact(st_.pid, st_.start_time, sig)]
    transitions.add_attempt_note(st.conn, job_id, "signal_sent", time.time(), signal=name, processes=len(sent))
    if not sent:
        message = f"no process of its tree was found to send {name} to (it may be ending)"
    else:
        message = f"sent {name} to {len(sent)} process(es): pid {', '.join(map(str, sent))}"
    return {"id": job_id, "handle": handle, "signal": name, "pids": sent, "message": message, "done": True}


def set_priority(selectors: list[str], priority: int, environ=os.environ, selection=None) -> list[dict]:
    """Move jobs that have not started to another priority; each keeps its place by submission order within it.
    A JOB named that has started refuses the whole command before anything changes. Each group's line is rung:
    as many of its front as there are free slots, and the jobs moved."""
    from .api import State

    st = State(environ, create=False)
    ids = st.choose(selectors, selection, WAITING)
    st.reconcile()
    for selector in selectors:  # each JOB named is checked before anything changes
        state = queries.load_state(st.conn, st.resolve(selector))
        if state["phase"] not in transitions.HOLDABLE:
            raise BadInput(f"cannot change the priority of job {selector}: it is {state['outcome'] or state['phase']}; "
                           "only a job that has not started waits in line; nothing was changed")
    results: list[dict] = []
    rung: dict[str, list[str]] = {}
    for job_id in ids:
        what, state = transitions.set_priority(st.conn, job_id, priority, time.time())
        if what == "changed":
            rung.setdefault(queries.group_of(st.conn, job_id), []).append(job_id)
        message = {"changed": f"priority {priority}", "unchanged": f"priority {priority} already"}.get(
            what, f"not changed: it is {state['outcome'] or state['phase']} now")
        results.append({"id": job_id, "handle": queries.handle_of(st.conn, job_id), "priority": priority,
                        "changed": what == "changed", "done": what != "not_waiting", "message": message})
    for group, moved in rung.items():
        doorbell.ring_all(st.home, [*moved, *queries.able_waiters(st.conn, group, queries.free_slots(st.conn, group),
                                                                  proc.verify)])
    return results


def set_held(selectors: list[str], held: bool, environ=os.environ, selection=None) -> list[dict]:
    """Hold (or release) each job: the JOBs named, and the jobs the selection matches that can be held (released).
    Every JOB named is checked first: one that has started already is an error that changes nothing."""
    from .api import State

    st = State(environ, create=False)
    ids = st.choose(selectors, selection, HOLDABLE if held else RELEASABLE)
    st.reconcile()
    verb = "hold" if held else "release"
    for selector in selectors:  # each JOB named is checked before anything changes
        state = queries.load_state(st.conn, st.resolve(selector))
        if state["phase"] not in transitions.HOLDABLE:
            phase = state["outcome"] or state["phase"]
            hint = " (jobman signal JOB STOP pauses a running one)" if held and phase == "running" else ""
            raise BadInput(f"cannot {verb} job {selector}: it is {phase}; only a job that has not started "
                           f"can be held{hint}")
    results = []
    for job_id in ids:
        what, state = transitions.set_held(st.conn, job_id, held, time.time())
        if what == "changed":
            doorbell.ring(st.home, job_id)
        elif what == "not_waiting":  # it started between the check and the change
            what = f"not changed: it is {state['outcome'] or state['phase']} now"
        message = {"changed": "held: it will not start until jobman release" if held
                   else "released: it starts when it is eligible",
                   "unchanged": "already held" if held else "was not held"}.get(what, what)
        results.append({"id": job_id, "handle": queries.handle_of(st.conn, job_id), "held": held,
                        "changed": what == "changed", "done": what in ("changed", "unchanged"), "message": message})
    return results
