"""The lease round's SQL: who holds the round, the waiting jobs it renews, and handing it on.

One waiting supervisor at a time holds the round (the single row of lease_round, until its
expires_at) and renews, every renewal interval, the lease of each waiting job whose supervisor it
has verified as alive; the other waiting supervisors sleep. Each renewal is the very statement a
supervisor runs for its own lease (transitions.RENEW: expected revision, phase and owner), so a job that
moved on since the round read it is left alone. None of these writes is synced on its own: a lease outlives no boot.
"""
from .database import Transaction
from .transitions import RENEW

# Take the round if nobody holds it or its holder let it expire; keep it if it is ours.
_HOLD = ("INSERT INTO lease_round (one, supervisor_id, expires_at) VALUES (1, ?, ?)"
         " ON CONFLICT (one) DO UPDATE SET supervisor_id = excluded.supervisor_id, expires_at = excluded.expires_at"
         " WHERE lease_round.supervisor_id = excluded.supervisor_id OR lease_round.expires_at < ?")


def holder(conn) -> tuple[str, float] | None:
    """(supervisor id, held until) of the round, if anyone holds or held it."""
    row = conn.execute("SELECT supervisor_id, expires_at FROM lease_round").fetchone()
    return tuple(row) if row else None


# Whether a waiting job's reason to wait has gone, so that its supervisor should have been rung: a cancel
# asked for, a hold let go, a time gate passed, or dependencies that allow a decision now (all ended, or
# one ended so that its condition can never hold). A free slot is judged per group (slot_waiters_to_wake).
_GONE = """(s.cancel_requested_at IS NOT NULL
  OR (s.waiting_for = 'held' AND s.held_at IS NULL)
  OR (s.waiting_for IN ('not_before', 'retry') AND s.wait_until < :now)
  OR (s.waiting_for = 'dependencies' AND (
      NOT EXISTS (SELECT 1 FROM dependencies d JOIN job_state ds ON ds.job_id = d.depends_on
                   WHERE d.job_id = s.job_id AND ds.phase != 'finished')
      OR EXISTS (SELECT 1 FROM dependencies d JOIN job_state ds ON ds.job_id = d.depends_on
                  WHERE d.job_id = s.job_id AND ds.phase = 'finished'
                    AND ((d.condition = 'success' AND ds.outcome != 'succeeded')
                         OR (d.condition = 'failure' AND ds.outcome = 'succeeded'))))))"""


def shortest_renewal(conn) -> float | None:
    """The shortest renewal interval among waiting jobs: the round's period (None: nobody waits)."""
    return conn.execute("SELECT min(j.renew_interval) FROM job_state s JOIN jobs j INDEXED BY jobs_windows"
                        " ON j.id = s.job_id WHERE s.phase != 'finished' AND s.phase = 'waiting'").fetchone()[0]


def waiting(conn, now: float, renew_before: float) -> list:
    """The waiting jobs a round must look at: those whose lease runs out before renew_before (or has none), whose
    reason to wait has gone, or of which a cancel is asked. Each with its supervisor's identity, its windows and
    its lease: (job_id, revision, supervisor_id, pid, start_time, boot_id, lease, renew_interval, lease_expires_at,
    gone, cancel_asked). The others are left out by SQLite before their windows are read."""
    return conn.execute(
        "SELECT s.job_id, s.revision, s.supervisor_id, s.supervisor_pid, s.supervisor_start_time,"
        " s.supervisor_boot_id, j.lease_duration, j.renew_interval, s.lease_expires_at, " + _GONE + ","
        " s.cancel_requested_at IS NOT NULL"
        " FROM job_state s JOIN jobs j INDEXED BY jobs_windows ON j.id = s.job_id"
        " WHERE s.phase != 'finished' AND s.phase = 'waiting'"
        " AND (s.lease_expires_at IS NULL OR s.lease_expires_at < :renew_before OR " + _GONE + ")",
        {"now": now, "renew_before": renew_before}).fetchall()


def slot_waiters_to_wake(conn, awake) -> tuple[list[str], list[str]]:
    """The waiters that free slots are for: in each group with a line and a free slot, the first as many of its
    line as it has free slots among those whose supervisor is awake (awake(job_id, pid, start_time, boot): the
    round's verification, which remembers what it has seen). Returns (those first in line anyway, those first
    only because a stopped or dead waiter ahead of them was stepped over: nobody else may ring them, since a
    ringer rings the line as it was)."""
    from .queries import LINE, free_slots

    wake: list[str] = []
    passed_to: list[str] = []
    for (group,) in conn.execute("SELECT DISTINCT line_group FROM job_state WHERE phase != 'finished'"
                                 " AND phase = 'waiting' AND waiting_for = 'slot'").fetchall():
        free = free_slots(conn, group)
        if not free:
            continue
        cursor = conn.execute(f"SELECT job_id, supervisor_pid, supervisor_start_time, supervisor_boot_id {LINE}",
                              (group,))
        stepped = False
        for (job_id, pid, start_time, boot) in cursor:
            if free == 0:
                break
            if not awake(job_id, pid, start_time, boot):
                stepped = True
                continue
            (passed_to if stepped else wake).append(job_id)
            free -= 1
        cursor.close()
    return wake, passed_to


def others_due(conn, now: float) -> tuple[bool, bool]:
    """What a reconcile pass would find beside waiting jobs: (a submission past its claim deadline or a
    starting or running job past its lease; a finished job that still holds a slot). Small indexes only."""
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM job_state WHERE phase = 'submitting' AND claim_deadline < :now)"
        " OR EXISTS (SELECT 1 FROM job_state WHERE phase != 'finished' AND phase IN ('starting', 'running')"
        " AND lease_expires_at < :now),"
        " EXISTS (SELECT 1 FROM job_state WHERE slot_held = 1 AND phase = 'finished')", {"now": now}).fetchone()
    return bool(row[0]), bool(row[1])


def hold_and_renew(conn, supervisor_id: str, now: float, hold_until: float, renewals: list) -> bool:
    """Hold the round until hold_until and write its renewals [(expires_at, job_id, revision,
    supervisor_id)], in one transaction. False (and nothing written): another supervisor holds it."""
    with Transaction(conn, durable=False):
        if conn.execute(_HOLD, (supervisor_id, hold_until, now)).rowcount != 1:
            return False
        conn.executemany(RENEW, renewals)
    return True


def release(conn, supervisor_id: str, job_id: str) -> list:
    """Give the round up (if it is still ours); returns a few waiting jobs whose supervisors may take it on:
    the newest, which tend to wait longest (a holder whose job starts hands the round on again), from the
    index of waiting jobs by submission time. [(job_id, pid, start_time, boot_id)]; the caller rings the
    first whose supervisor is alive and awake."""
    with Transaction(conn, durable=False):
        conn.execute("DELETE FROM lease_round WHERE supervisor_id = ?", (supervisor_id,))
        return conn.execute("SELECT job_id, supervisor_pid, supervisor_start_time, supervisor_boot_id FROM job_state"
                            " WHERE phase = 'waiting' AND job_id != ? ORDER BY line_at DESC, job_id DESC LIMIT 8",
                            (job_id,)).fetchall()
