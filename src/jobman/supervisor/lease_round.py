"""The lease round, as its holder runs it: a waiting supervisor renews the leases of the waiting jobs
whose supervisor verifies as alive and awake, in one write, so that the others need not wake.

Why: on this kind of machine a process that has slept for seconds costs 0.5-2 ms of CPU to wake,
whatever it then does, and a waiter in its lean form (jobman.lean) costs a Python start (~20 ms) to
wake; 2,000 waiting supervisors each waking every renewal interval cost a third of a core. The lease
keeps its meaning: it is renewed before it has less than a renewal interval to run, and only for a
supervisor seen alive and not stopped at that moment. A supervisor the round passes over (dead, stopped)
lets its lease run out, as it would have alone. A round's cost follows the leases it renews, not the jobs
that wait: SQLite passes over the others without reading their windows (docs/performance.md, "One lease
round").

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


def run(conn, supervisor_id: str, job_id: str, now: float, default_period: float, verify):
    """One round, if this supervisor holds it or may take it. verify(pid, start_time, boot, awake=False): whether
    that process lives (the supervisor's process layer). Returns (seconds until the next round, this job's new
    revision or None, a Look), or None when another supervisor holds the round."""
    held = lease_round.holder(conn)
    if held is not None and held[0] != supervisor_id and held[1] >= now:
        return None  # before reading every waiting job: whoever looks while the round is held pays nothing
    period = lease_round.shortest_renewal(conn) or default_period
    # A lease is renewed once fewer than two periods of it are left: the next round comes within one period, so
    # a live supervisor's lease never has less than a period to run, and with the default windows (a 15 s lease,
    # 5 s renewals) each is written every other round. Only the jobs renewed now, and those whose reason to wait
    # has gone or whose cancel is asked, are verified, plus the heads of lines with a free slot (awake, below).
    renew_before = now + 2 * period
    renewals, own_revision, gone, settle = [], None, set(), False
    seen: dict[str, bool] = {}
    for (waiting_id, revision, owner, pid, start_time, boot, lease, _, expires, is_gone, cancel) in \
            lease_round.waiting(conn, now, renew_before):
        seen[waiting_id] = up = verify(pid, start_time, boot, awake=True)
        if not up:
            if cancel or (expires is not None and expires < now and not verify(pid, start_time, boot)):
                # Dead, and its lease has run out: the pass finds it lost and wakes who it blocked. Or a cancel
                # asked of a supervisor that cannot answer (stopped, dead): the pass carries it out.
                settle = True
            continue
        if is_gone and waiting_id != job_id:
            gone.add(waiting_id)
        if expires is None or expires < renew_before:
            renewals.append((now + lease, waiting_id, revision, owner))
            if waiting_id == job_id:
                own_revision = revision + 1

    def awake(waiting_id: str, pid, start_time, boot) -> bool:
        if waiting_id not in seen:
            seen[waiting_id] = verify(pid, start_time, boot, awake=True)
        return seen[waiting_id]

    first, passed_to = lease_round.slot_waiters_to_wake(conn, awake)
    gone.update(w for w in first + passed_to if w != job_id)  # (passed_to: rung at once, and as any other after)
    others, lost_slots = lease_round.others_due(conn, now)
    # Held for two rounds: a holder that stops or dies is replaced by the first waiter to wake after
    # that, while the leases it renewed last still have a renewal interval to run.
    if not lease_round.hold_and_renew(conn, supervisor_id, now, now + 2 * period, renewals):
        return None
    return period, own_revision, Look(gone, settle or others, lost_slots, {w for w in passed_to if w != job_id})
