"""The lease round, as its holder runs it: one waiting supervisor keeps the leases of the waiting jobs whose
supervisor lives, so that the others need not wake.

Why: on this kind of machine a process that has slept for seconds costs 0.5-2 ms of CPU to wake,
whatever it then does, and a waiter in its lean form (jobman.supervisor.lean) costs a Python start (~20 ms) to
wake; 2,000 waiting supervisors each waking every renewal interval cost a third of a core. Rewriting each
waiting job's lease every other round still cost the holder about 24 us per waiting job and round (a /proc
read and a guarded UPDATE each), 5% of a core at 10,000. So the holder watches the waiting supervisors' ends
(a pidfd each, in one epoll set) and covers their jobs: a job is written once when covered, and after that a
round writes one row, the time it last saw every covered supervisor alive (store.lease_round says what keeps
that true). A round's cost follows what changes (jobs that start or stop waiting, supervisors that die), not
the jobs that wait.

The lease keeps its meaning: it never has less than a renewal interval to run while its supervisor lives,
and it is kept only while it lives. A paused supervisor (SIGSTOP, a debugger, a laptop asleep) lives: its
lease is kept and it is never lost, but it answers no ring and takes no slot, so the line steps over it.
A supervisor that dies is seen at the next round, and its lease then runs out as it would have alone.

Since lean waiters sleep until rung, the holder also looks, from the same read, for what a waiter used to
find at its fallback poll: a waiter whose reason to wait has gone (a ring that never came: its ringer
died between its commit and the ring), and a peer that looks abandoned (a dead waiter past its lease, a
running job past its lease, a lost job's slot), which the reconciliation pass settles.
"""
from ..store import lease_round


class Look:
    """What a round saw beside the leases: `gone`, the waiting jobs (awake supervisors only) whose reason to
    wait has gone; `passed_to`, those a free slot is for only because a stopped or dead waiter ahead of them
    cannot take it (to be rung at once: nobody else rings them); `settle`, whether an abandoned job (or a cancel
    whose supervisor cannot answer) is due for the reconciliation pass; `lost_slots`, whether a finished job
    still holds a slot (its target may live)."""

    __slots__ = ("gone", "passed_to", "settle", "lost_slots")

    def __init__(self, gone: set[str], settle: bool, lost_slots: bool, passed_to: set[str] | None = None):
        self.gone, self.settle, self.lost_slots = gone, settle, lost_slots
        self.passed_to = passed_to or set()


def run(conn, supervisor_id: str, job_id: str, now: float, default_period: float, verify, watch, term=None,
        prune: bool = False, period: float | None = None):
    """One round, if this supervisor holds it or may take it. verify(pid, start_time, boot, awake=False): whether
    that process lives (the supervisor's process layer); watch: the holder's watch of supervisors' ends (its
    process layer's watcher, kept across its rounds: watch(key, pid, start_time, boot), ended(), forget(key),
    keys()); term: the round's term that watch was made whole at (None: a new watch); prune: forget the watched
    jobs the round no longer covers (they started, or finished), and read the round's period afresh; period: the
    period the last round returned (None: read it). Returns (seconds until the next round, this job's new revision
    or None, a Look, the round's term), or None when another supervisor holds the round."""
    held = lease_round.state(conn)
    if held is not None and held[0] != supervisor_id and held[1] >= now:
        return None  # before reading every waiting job: whoever looks while the round is held pays nothing
    _make_whole(conn, watch, term if held is not None and held[2] == term else None, prune)
    ended = watch.ended()
    # The shortest renewal interval of the waiting jobs, read only now and then (it is a pass over all of them):
    # in between, the last one, shortened by any job the round reads now. A job it does not read has more than
    # two such periods of lease left, so the period it would ask for can wait for the next reading.
    if period is None or prune or term is None:
        period = lease_round.shortest_renewal(conn) or default_period
    kept = _Kept(conn, job_id, now, period, verify, watch, ended)
    period = min(period, kept.shortest)

    def awake(waiting_id: str, pid, start_time, boot) -> bool:
        if waiting_id not in kept.seen:
            kept.seen[waiting_id] = verify(pid, start_time, boot, awake=True)
        return kept.seen[waiting_id]

    first, passed_to = lease_round.slot_waiters_to_wake(conn, awake)
    gone = kept.gone | {w for w in first + passed_to if w != job_id}  # (passed_to: rung at once, and as any other)
    others, lost_slots = lease_round.others_due(conn, now)
    # Held for two rounds: a holder that stops or dies is replaced by the first waiter to wake after
    # that, while the leases it kept last still have a renewal interval to run.
    held_term = lease_round.hold_and_renew(conn, supervisor_id, now, now + 2 * period, kept.renewals,
                                           set(watch.keys()) - ended, covers=kept.covers, uncovers=ended, term=term)
    if held_term is None:
        return None
    for key in ended:
        watch.forget(key)
    return (period, kept.own_revision,
            Look(gone, kept.settle or others, lost_slots, {w for w in passed_to if w != job_id}), held_term)


def _make_whole(conn, watch, term, prune: bool) -> None:
    """Taking the round up (or back: term None): watch every job the round covers, as the holder before did; those
    that cannot be watched (gone, or past the descriptor budget) are uncovered when the round is held. Else, with
    prune, forget the watched jobs no longer covered."""
    if term is None:
        for covered_id, pid, start_time, boot in lease_round.covered(conn):
            watch.watch(covered_id, pid, start_time, boot)
    elif prune:
        for stale in set(watch.keys()) - lease_round.covered_ids(conn):
            watch.forget(stale)


class _Kept:
    """What a round does with the waiting jobs it reads: the leases it covers or renews, the waiters to ring, and
    whether the reconciliation pass is due.

    A lease is kept once fewer than two periods of it are left: the next round comes within one period, so a
    live supervisor's lease never has less than a period to run. A job is covered when its supervisor can be
    watched, else renewed (each every other round, with the default windows: a 15 s lease, 5 s renewals).
    Only those jobs, and those whose reason to wait has gone or whose cancel is asked, are verified, plus the
    heads of lines with a free slot (awake, in run). A covered job is kept by the watch, which sees its supervisor
    end; it is looked at only for its reason to wait or its cancel (awake: a stopped supervisor answers neither).
    """

    def __init__(self, conn, job_id: str, now: float, period: float, verify, watch, ended: set):
        self.renewals: list = []
        self.covers: list = []
        self.own_revision: int | None = None
        self.gone: set[str] = set()
        self.settle = False
        self.seen: dict[str, bool] = {}
        self.shortest = period  # the shortest renewal interval among the jobs read
        renew_before = now + 2 * period
        for row in lease_round.waiting(conn, now, renew_before):
            self._look(row, job_id, now, renew_before, verify, watch, ended)

    def _look(self, row, job_id, now, renew_before, verify, watch, ended) -> None:
        (waiting_id, revision, owner, pid, start_time, boot, lease, renew, expires, is_gone, cancel, covered) = row
        if renew is not None and renew < self.shortest:
            self.shortest = renew
        if covered and waiting_id not in ended and not (is_gone or cancel):
            return  # (a job the round must look at only for its reason to wait: its supervisor lives)
        self.seen[waiting_id] = up = verify(pid, start_time, boot, awake=True)
        lives = up or (waiting_id not in ended and verify(pid, start_time, boot))
        if not up and (cancel or (expires is not None and expires < now and not lives)):
            # Dead, and its lease has run out: the pass finds it lost and wakes who it blocked. Or a cancel
            # asked of a supervisor that cannot answer (stopped, dead): the pass carries it out.
            self.settle = True
        if not lives:
            return
        if up and is_gone and waiting_id != job_id:
            self.gone.add(waiting_id)  # (a stopped one answers no ring: it looks when it is let go on)
        if covered or not (expires is None or expires < renew_before):
            return
        # Kept while it lives, stopped or not: a paused process is no sign of an abandoned job, and a lease is
        # what tells the two apart.
        if watch.watch(waiting_id, pid, start_time, boot):
            self.covers.append((lease, waiting_id, revision, owner))
        else:
            self.renewals.append((now + lease, waiting_id, revision, owner))
            if waiting_id == job_id:
                self.own_revision = revision + 1
