"""The take-over at start, the restart check (docs/stado.md, "Liveness"; jobman's restart.py is another thing: it
re-submits a job): an agent that starts on a host runs nothing before it has settled every
running job whose record names this host's worker (instance_ref local@<host>) and whose agent is known to be gone
(owner_gone: its lock on this work root is free, or the process its record names no longer runs on this machine;
a live sibling agent's jobs are never touched, whatever work root it uses, and an owner this host cannot judge,
one on another machine that uses the same host name, is left to the reaper).

For each such job it asks which processes still have the job's directory open (as lsof would):
- none, and the job's shell recorded no exit status: settled at once as a lapsed lease is, requeued
  with `its worker was replaced while it ran` (failed on the same loss again), unless the job's keeper still
  runs: it saw the command end, or will, and writes its status, so the job is taken over to record that;
- none, but the command's exit status was recorded: the job ran to its end; this agent takes it over,
  uploads what it left (artifacts, output) and records that result;
- some: the job keeps its lease; this agent takes it over and watches that process to its end.
A job that was being cancelled has what is left of it stopped, and its cancel settled.

And processes a gone agent left running for a job that is no longer its (requeued and run elsewhere,
cancelled, ended) are stopped: at start and on every reaper pass (stop_orphans), so a job never runs on
beside its successor; the directory of such an attempt, once nothing of it runs and its record no longer names
it, is removed (tidy), as its agent would have removed it.
"""
import os
from collections.abc import Iterator
from dataclasses import dataclass

from ..core.brief import brief
from ..core import documents as d
from .. import jobs
from ..core import keys
from ..store.cas import read
from ..core.errors import CorruptDocument
from ..jobs.common import running_records
from ..objectstore.base import StoreError
from ..jobs.reaper import LEASE_EXPIRED, lapse
from .context import AgentContext
from .processhost import of_attempt
from .runner import SlotRunner
from .slot import Slot, Stop
from .standin import KEPT
from .hostfiles import left_by_gone_agents

REPLACED = "its worker was replaced while it ran"


@dataclass(frozen=True)
class Voice:
    """How a settle says what it did: at start (the worker this agent replaced) or on a reaper pass (a sibling on
    this host that died while this agent ran), and the reason a job with nothing left of it is requeued with."""
    prefix: str
    left_by: str
    reason: str


AT_START = Voice("init", "the worker this one replaced", REPLACED)


def on_pass(doc: d.Job) -> Voice:
    return Voice("reaper", f"its agent {doc.owner}, gone from this host", LEASE_EXPIRED)


def settle_left_by_replaced(ctx: AgentContext, runner: SlotRunner, read: dict | None = None) -> Iterator[Slot]:
    """Run once before the agent's first tick (one LIST of running/). Yields a slot for each job it takes over, for
    the agent to record (a slot that watches the job's process, or has seen it end, rather than starting one).
    `read`: filled with each running document read (job id -> (document, version)), the reaper's Watch.read, so
    that its first pass reads again only what has been written since."""
    for job_id, found, corrupt, _ in running_records(ctx.store):
        if corrupt is not None:
            ctx.log(f"init: {corrupt}: skipped (`stado repair {job_id}` clears it)")
            continue
        if found is not None and read is not None:
            read[job_id] = found
        if found is None or not left_here(ctx, found[0]):
            continue
        slot = settle(ctx, runner, *found)
        if slot is not None:
            yield slot


def settle_here(ctx: AgentContext, runner: SlotRunner, doc: d.Job, version, record) -> bool:
    """The reaper pass's hand-over (reap's `here`): a running job whose promise has passed, held by an agent of this
    host that is gone (a sibling that died while this agent ran: no agent replaces it), is settled by the restart
    check, not lapsed by its promise: a job whose command ended, its status recorded or its keeper still alive to
    write it, is recorded and never run again; one whose process still runs is taken over. True when it was
    settled so (a slot it takes over goes to record(slot)); False leaves it to the promise."""
    if not left_here(ctx, doc):
        return False
    slot = settle(ctx, runner, doc, version, voice=on_pass(doc))
    if slot is not None:
        record(slot)
    return True


def settle(ctx: AgentContext, runner: SlotRunner, doc: d.Job, version, *, voice: Voice = AT_START) -> Slot | None:
    try:
        return _settle_one(ctx, runner, doc, version, voice)
    except (StoreError, CorruptDocument, OSError) as e:
        return _after_error(ctx, runner, doc, e, voice)


def _after_error(ctx: AgentContext, runner: SlotRunner, doc: d.Job, error: Exception, voice: Voice, *,
                 again: bool = True) -> Slot | None:
    """What a settle that met a store error left, read back: a move it made may have landed before the error (its
    answer lost), and the line says what the store holds, not what the settle feared. A take-over of this agent's
    that landed so is this agent's job: settled again from the record read back (once: a second error leaves it
    to the reaper), never left held by an agent that does not run it."""
    why = f"{type(error).__name__}: {brief(str(error), 200)}"
    unsettled = f"could not be settled now ({why})"
    later = "the reaper settles it once its worker's promise has passed"
    try:
        found = read(ctx.store, keys.running(doc.id), doc.id)
        if found is not None and found[0].claim == doc.claim and (found[0].running_phase or found[0].cancelling):
            if found[0].owner == ctx.agent_id and again:
                ctx.log(f"{voice.prefix}: {doc.id}: its take-over landed, though its answer was lost ({why}); "
                        "settling it again")
                try:
                    return _settle_one(ctx, runner, *found, voice)
                except (StoreError, CorruptDocument, OSError) as e:
                    return _after_error(ctx, runner, found[0], e, voice, again=False)
            ctx.log(f"{voice.prefix}: {doc.id}: {unsettled}; {later}")
            return None
        from ..core.errors import JobNotFound
        from ..queue.lookup import view

        try:
            now = view(ctx.store, doc.id)
        except JobNotFound:
            now = None
    except (StoreError, CorruptDocument) as e:
        ctx.log(f"{voice.prefix}: {doc.id}: {unsettled}, and the store does not say what stands "
                f"({type(e).__name__}); {later}")
        return None
    state = "with no record" if now is None else now.state
    ctx.log(f"{voice.prefix}: {doc.id}: settled, though an answer was lost ({why}): the store shows it {state}")
    return None


def left_here(ctx: AgentContext, doc: d.Job) -> bool:
    owner = doc.owner
    return (doc.instance_ref == ctx.instance_ref and owner is not None and owner != ctx.agent_id
            and (doc.running_phase or doc.cancelling) and owner_gone(ctx, doc))


def owner_gone(ctx: AgentContext, doc: d.Job) -> bool:
    """Whether the agent that holds `doc` is known to be gone from this host: its lock on this work root is free, or,
    with no lock of it here (it ran on another work root of this machine, or its lock went), the process its record
    names (owner_process) no longer runs, or ran before this machine's last boot. An owner that cannot be judged here
    (no process recorded, or one on another machine or pid namespace that uses this host name) is not gone: it is
    said once, and left to the reaper, which judges it by its promise."""
    lock = ctx.workspace.lock_state(doc.owner)
    if lock != "absent":
        return lock == "free"
    state = ctx.host.owner_state(doc.owner_process)
    if state == "unknown":
        where = ("records no process" if doc.owner_process is None else
                 "runs on another machine or in another pid namespace")
        ctx.log_once(f"foreign owner {doc.id}", doc.owner,
                     f"{doc.id}: its record names this host ({doc.instance_ref}), but its agent {doc.owner} "
                     f"{where}, with no lock on this work root: left to the reaper (its promise). If two machines "
                     "use one host name, give each its own --host")
    return state == "gone"


def _settle_one(ctx: AgentContext, runner: SlotRunner, doc: d.Job, version, voice: Voice) -> Slot | None:
    job_id = doc.id
    directory = ctx.workspace.directory_of(doc)
    users = ctx.host.users_of(directory)
    if users:
        ctx.log(f"{voice.prefix}: {job_id}: left by {voice.left_by}, but still run here by pid {min(users)}; it "
                "keeps its lease")
        if doc.process is None:  # it died between the spawn and the renewal that records the process
            doc = doc.with_(process=ctx.host.found_process(users, job_id, doc.started_at))
        return take_over(ctx, runner, doc, version, directory, voice, ended=None)
    status = ctx.workspace.exit_status(directory)
    kept = ctx.workspace.kept(directory)
    kept = kept is not None and kept.get("attempt") == doc.claim  # its keeper stopped it: a lost worker, not a signal
    if doc.cancelling or (status is not None and not kept):
        return take_over(ctx, runner, doc, version, directory, voice, ended=status or (None, None))
    if status is None and not kept and ctx.host.keeper_alive(directory):
        # Its command is gone and nothing recorded how it ended, but its keeper lives: it saw the end, or will
        # once it looks, and writes the status. Requeued now, a job that had ended would run again.
        ctx.log(f"{voice.prefix}: {job_id}: left by {voice.left_by}; its command no longer runs, but its keeper "
                "does: taken over, to record what the keeper saw")
        return take_over(ctx, runner, doc, version, directory, voice, ended=None)
    now = ctx.clock.wall()
    reason = KEPT if kept else voice.reason
    new = lapse(ctx.store, doc, version, writer=ctx.agent_id, reason=reason, now=now)
    if new is None:
        return None  # moved meanwhile (a cancel, the reaper): theirs stands
    started = doc.started_at or doc.claimed_at
    how = "requeued" if new.state == "queued" else new.state
    ctx.log(f"{voice.prefix}: {job_id}: {how} ({reason}; started {started} by {voice.left_by} on "
            f"{doc.instance_ref}; restart {doc.requeues + 1})")
    return None


def take_over(ctx: AgentContext, runner: SlotRunner, doc: d.Job, version, directory: str, voice: Voice, *,
               ended) -> Slot | None:
    """Become the job's owner (a compare-and-swap on its running document) and give it a slot that watches
    (or has seen) its process rather than starting one."""
    if doc.process is not None and not doc.process.get("work_dir"):
        # A process found by its users (its worker died before recording it) names no directory: the record says
        # where it runs, for this agent's successor, whose own work root may be another (the take-over makes this
        # agent's root the owner's).
        doc = doc.with_(process=dict(doc.process, work_dir=os.path.join(directory, "work")))
    got = None
    for _ in range(3):
        now = ctx.clock.wall()
        got = jobs.take_over(ctx.store, doc, version, agent_id=ctx.agent_id, lease_expires_at=ctx.lease.promise(now),
                             now=now, owner_process=ctx.identity)
        if got is not None:
            break
        # Refused: the job's keeper may have renewed the claim for the gone agent meanwhile (its bridge): take it
        # over at that version; any other writer's move stands.
        found = read(ctx.store, keys.running(doc.id), doc.id)
        if found is None or found[0].claim != doc.claim or found[0].owner != doc.owner or not (
                found[0].running_phase or found[0].cancelling):
            return None
        doc, version = found[0].with_(process=doc.process or found[0].process), found[1]
    if got is None:
        return None
    ctx.workspace.take(directory)  # its directory is this agent's now: never taken for a gone agent's leftover
    slot = runner.adopt(*got, directory, ended=ended)
    if doc.cancelling:
        runner.stop(slot, Stop.CANCEL)
    elif ended is not None and ended != (None, None):
        code, sig = ended
        ctx.log(f"{voice.prefix}: {doc.id}: its command had ended ({f'exit {code}' if sig is None else f'signal {sig}'}) "
                f"when {voice.left_by} died; recording it")
    return slot


def stop_orphans(ctx: AgentContext, mine: set[str]) -> None:
    """Stop what a gone agent left running on this host for a job whose record no longer names that agent
    (SIGTERM, then SIGKILL after --kill-after). A job whose running record still names it is left to the
    restart check above or to the reaper; a record that cannot be read leaves it alone this pass. `mine`: the
    jobs this agent's own slots hold."""
    from runkit.system.envfind import processes_with

    left = left_by_gone_agents(ctx.cfg.work_root, mine)
    if not left:
        return
    # The attempt's own processes only (they carry its WC_JOB_ID and WC_JOB_STARTED_AT; a setsid descendant
    # too): never the job's next attempt on this host, nor an agent that happens to hold a file of that
    # directory open, this one included.
    running = processes_with("WC_JOB_ID", [job_id for job_id, _, _, _ in left])
    for job_id, tag, directory, owner in left:
        pids = [st.pid for st in running.get(job_id, []) if of_attempt(st.pid, tag)]
        if not pids:
            tidy(ctx, job_id, tag, directory, owner)
            continue
        try:
            found = read(ctx.store, keys.running(job_id), job_id)
        except (StoreError, CorruptDocument):
            continue
        if found is not None and found[0].owner == owner:
            continue
        where = (f"now held by agent {found[0].owner} on {found[0].instance_ref}" if found is not None
                 else "no longer running under it")
        ctx.log(f"{job_id}: pid(s) {', '.join(map(str, sorted(pids)))} left running by agent {owner}, which is gone, "
                f"for a job {where}; stopping them")
        _stop_pids(pids, ctx.cfg.kill_after)


def tidy(ctx: AgentContext, job_id: str, tag: str, directory: str, owner: str) -> None:
    """Remove the directory a gone agent left for an attempt that is certainly over: no process of it runs (the
    caller looked), nothing has the directory open, its keeper no longer runs, and the job's running record no
    longer names that attempt (it was requeued, taken over elsewhere, or it ended). A running record that still
    names it is left to the restart check or the reaper, which settle it first; a directory its agent kept
    (--keep-work), or one whose record cannot be read this pass, is left alone."""
    import shutil

    from .hostfiles import KEEP_FILE, attempt_tag

    if os.path.exists(os.path.join(directory, KEEP_FILE)) or ctx.host.keeper_alive(directory):
        return
    if ctx.host.users_of(directory):
        return
    try:
        found = read(ctx.store, keys.running(job_id), job_id)
    except (StoreError, CorruptDocument):
        return
    if found is not None and attempt_tag(found[0].started_at) == tag:
        return  # this attempt is still the job's running one: its fate is not settled yet
    shutil.rmtree(directory, ignore_errors=True)
    if not os.path.exists(directory):
        ctx.log(f"{job_id}: removed the directory its attempt of {tag} left on this host: its agent {owner} is "
                "gone and that attempt has ended")


def _stop_pids(pids: list[int], kill_after: float) -> None:
    """Real processes of this host, waited for on its own clock (they are no job of this agent's, so nothing of
    its clock's is theirs)."""
    import signal
    import time

    from runkit.system import proc

    def alive(pid: int) -> bool:
        st = proc.stat(pid)
        return st is not None and st.alive

    known = {pid: st.start_time for pid in pids if (st := proc.stat(pid)) is not None}
    for pid, start in known.items():
        proc.signal_exact(pid, start, signal.SIGTERM)
    deadline = time.monotonic() + kill_after
    while time.monotonic() < deadline and any(alive(pid) for pid in known):
        time.sleep(0.05)
    for pid, start in known.items():
        proc.signal_exact(pid, start, signal.SIGKILL)
