"""The take-over at start, the seed's restart check (seed 003; jobman's restart.py is another thing: it re-submits a
job): an agent that starts on a host runs nothing before it has settled every
running job whose record names this host's worker (instance_ref local@<host>) and whose agent is gone
(its lock on this host is free; a live sibling agent's jobs are never touched).

For each such job it asks which processes still have the job's directory open (as lsof would):
- none, and the job's shell recorded no exit status: settled at once as a lapsed lease is, requeued
  with `its worker was replaced while it ran` (failed on the same loss again);
- none, but the command's exit status was recorded: the job ran to its end; this agent takes it over,
  uploads what it left (artifacts, output) and records that result;
- some: the job keeps its lease; this agent takes it over and watches that process to its end.
A job that was being cancelled has what is left of it stopped, and its cancel settled.

And processes a gone agent left running for a job that is no longer its (requeued and run elsewhere,
cancelled, ended) are stopped: at start and on every reaper pass (stop_orphans), so a job never runs on
beside its successor.
"""
from collections.abc import Iterator

from .. import documents as d
from .. import jobs, keys
from ..cas import read
from ..errors import CorruptDocument
from ..jobs.common import running_records
from ..objectstore.base import StoreError
from ..reaper import lapse
from .context import AgentContext
from .processhost import of_attempt
from .runner import SlotRunner
from .slot import Slot, Stop
from .workroot import agent_gone, job_dir, left_by_gone_agents, read_exit_status

REPLACED = "its worker was replaced while it ran"


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
        if found is None or not _left_here(ctx, found[0]):
            continue
        try:
            slot = _settle_one(ctx, runner, *found)
        except (StoreError, CorruptDocument, OSError) as e:
            ctx.log(f"init: {job_id}: could not be settled now ({type(e).__name__}: {str(e)[:200]}); the reaper "
                    "settles it once its worker's promise has passed")
            continue
        if slot is not None:
            yield slot


def _left_here(ctx: AgentContext, doc: d.Job) -> bool:
    owner = doc.owner
    return (doc.instance_ref == ctx.instance_ref and owner is not None and owner != ctx.agent_id
            and (doc.running_phase or doc.cancelling) and agent_gone(ctx.cfg.work_root, owner))


def _settle_one(ctx: AgentContext, runner: SlotRunner, doc: d.Job, version) -> Slot | None:
    job_id = doc.id
    directory = job_dir(ctx.cfg.work_root, job_id, doc.started_at or "")
    users = ctx.host.users_of(directory)
    if users:
        ctx.log(f"init: {job_id}: left by the worker this one replaced, but still run here by pid {min(users)}; it "
                "keeps its lease")
        if doc.process is None:  # it died between the spawn and the renewal that records the process
            doc = doc.with_(process=ctx.host.found_process(users, job_id, doc.started_at))
        return _take_over(ctx, runner, doc, version, directory, ended=None)
    status = read_exit_status(directory)
    if doc.cancelling or status is not None:
        return _take_over(ctx, runner, doc, version, directory, ended=status or (None, None))
    now = ctx.clock.now()
    new = lapse(ctx.store, doc, version, writer=ctx.agent_id, reason=REPLACED, now=now)
    if new is None:
        return None  # moved meanwhile (a cancel, the reaper): theirs stands
    started = doc.started_at or doc.claimed_at
    how = "requeued" if new.state == "queued" else new.state
    ctx.log(f"init: {job_id}: {how} ({REPLACED}; started {started} by the worker this one replaced on "
            f"{doc.instance_ref}; restart {doc.requeues + 1})")
    return None


def _take_over(ctx: AgentContext, runner: SlotRunner, doc: d.Job, version, directory: str, *, ended) -> Slot | None:
    """Become the job's owner (a compare-and-swap on its running document) and give it a slot that watches
    (or has seen) its process rather than starting one."""
    now = ctx.clock.now()
    got = jobs.take_over(ctx.store, doc, version, agent_id=ctx.agent_id, lease_expires_at=ctx.lease.promise(now),
                         now=now)
    if got is None:
        return None
    ctx.workspace.take(directory)  # its directory is this agent's now: never taken for a gone agent's leftover
    slot = runner.adopt(*got, directory, ended=ended)
    if doc.cancelling:
        runner.stop(slot, Stop.CANCEL)
    elif ended is not None and ended != (None, None):
        code, sig = ended
        ctx.log(f"init: {doc.id}: its command had ended ({f'exit {code}' if sig is None else f'signal {sig}'}) "
                f"when the worker this one replaced died; recording it")
    return slot


def stop_orphans(ctx: AgentContext, mine: set[str]) -> None:
    """Stop what a gone agent left running on this host for a job whose record no longer names that agent
    (SIGTERM, then SIGKILL after --kill-after). A job whose running record still names it is left to the
    restart check above or to the reaper; a record that cannot be read leaves it alone this pass. `mine`: the
    jobs this agent's own slots hold."""
    from runkit.envfind import processes_with

    left = left_by_gone_agents(ctx.cfg.work_root, mine)
    if not left:
        return
    # The attempt's own processes only (they carry its WC_JOB_ID and WC_JOB_STARTED_AT; a setsid descendant
    # too): never the job's next attempt on this host, nor an agent that happens to hold a file of that
    # directory open, this one included.
    running = processes_with("WC_JOB_ID", [job_id for job_id, _, _, _ in left])
    for job_id, tag, _directory, owner in left:
        pids = [st.pid for st in running.get(job_id, []) if of_attempt(st.pid, tag)]
        if not pids:
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


def _stop_pids(pids: list[int], kill_after: float) -> None:
    """Real processes of this host, waited for on its own clock (they are no job of this agent's, so nothing of
    its clock's is theirs)."""
    import signal
    import time

    from runkit import proc

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
