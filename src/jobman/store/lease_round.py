"""The lease round's SQL: who holds the round, the waiting jobs it renews, and handing it on.

One waiting supervisor at a time holds the round (the single row of lease_round, until its
expires_at) and renews, every renewal interval, the lease of each waiting job whose supervisor it
has verified as alive; the other waiting supervisors sleep. Each renewal is the guarded update a
supervisor makes of its own lease (expected revision, phase and owner), so a job that moved on since
the round read it is left alone. None of these writes is synced on its own: a lease outlives no boot.
"""
from .schema import Transaction

# Take the round if nobody holds it or its holder let it expire; keep it if it is ours.
_HOLD = ("INSERT INTO lease_round (one, supervisor_id, expires_at) VALUES (1, ?, ?)"
         " ON CONFLICT (one) DO UPDATE SET supervisor_id = excluded.supervisor_id, expires_at = excluded.expires_at"
         " WHERE lease_round.supervisor_id = excluded.supervisor_id OR lease_round.expires_at < ?")

_RENEW = ("UPDATE job_state SET lease_expires_at = ?, revision = revision + 1 WHERE job_id = ? AND revision = ?"
          " AND phase = 'waiting' AND supervisor_id = ? AND lease_expires_at < ?")


def waiting(conn) -> list:
    """Every waiting job with its supervisor's identity and its windows."""
    return conn.execute(
        "SELECT s.job_id, s.revision, s.supervisor_id, s.supervisor_pid, s.supervisor_start_time,"
        " s.supervisor_boot_id, j.lease_duration, j.renew_interval"
        " FROM job_state s JOIN jobs j ON j.id = s.job_id WHERE s.phase = 'waiting'").fetchall()


def hold_and_renew(conn, supervisor_id: str, now: float, hold_until: float, renewals: list) -> bool:
    """Hold the round until hold_until and write its renewals [(expires_at, job_id, revision,
    supervisor_id)], in one transaction. False (and nothing written): another supervisor holds it."""
    with Transaction(conn, durable=False):
        if conn.execute(_HOLD, (supervisor_id, hold_until, now)).rowcount != 1:
            return False
        conn.executemany(_RENEW, [(*r, r[0]) for r in renewals])
    return True


def release(conn, supervisor_id: str, job_id: str) -> str | None:
    """Give the round up (if it is still ours); returns a waiting job whose supervisor may take it on."""
    with Transaction(conn, durable=False):
        conn.execute("DELETE FROM lease_round WHERE supervisor_id = ?", (supervisor_id,))
        row = conn.execute("SELECT job_id FROM job_state WHERE phase = 'waiting' AND job_id != ?"
                           " ORDER BY lease_expires_at LIMIT 1", (job_id,)).fetchone()
    return row[0] if row else None
