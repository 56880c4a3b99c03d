"""The lease round, as its holder runs it: a waiting supervisor renews the lease of every waiting job
whose supervisor verifies as alive and awake, in one write, so that the others need not wake.

Why: on this kind of machine a process that has slept for seconds costs 0.5-2 ms of CPU to wake,
whatever it then does; 2,000 waiting supervisors each waking every renewal interval cost a third of
a core (README, "A queue held and drained"). The lease keeps its meaning: it is renewed every
renewal interval, and only for a supervisor seen alive and not stopped at that moment. A supervisor
the round passes over (dead, stopped) lets its lease run out, as it would have alone.
"""
from runkit import proc

from .store import lease_round


def run(conn, supervisor_id: str, job_id: str, now: float, default_period: float):
    """One round, if this supervisor holds it or may take it. Returns (seconds until the next round,
    this job's new revision or None), or None when another supervisor holds the round."""
    renewals, period, own_revision = [], None, None
    for (waiting_id, revision, owner, pid, start_time, boot, lease, renew_every) in lease_round.waiting(conn):
        if not proc.verify(pid, start_time, boot, awake=True):
            continue
        renewals.append((now + lease, waiting_id, revision, owner))
        period = renew_every if period is None else min(period, renew_every)
        if waiting_id == job_id:
            own_revision = revision + 1
    period = period or default_period
    # Held for two rounds: a holder that stops or dies is replaced by the first waiter to wake after
    # that, while the leases it renewed last still have a renewal interval to run.
    if not lease_round.hold_and_renew(conn, supervisor_id, now, now + 2 * period, renewals):
        return None
    return period, own_revision
