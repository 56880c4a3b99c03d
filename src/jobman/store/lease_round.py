"""The lease round's SQL: who holds the round, the waiting jobs it keeps leased, and handing it on.

One waiting supervisor at a time holds the round (the single row of lease_round, until its expires_at) and
keeps, every renewal interval, the lease of each waiting job whose supervisor lives, so that the others sleep.
It keeps most of them by cover, not by rewriting them: it watches each such supervisor's end (a pidfd each,
runkit.system.deathwatch), marks the job covered once (lease_cover: its lease length), and then writes one
thing a round, verified_at, the time it last saw every covered supervisor alive. A covered job's lease runs out
at verified_at plus its length (queries.LEASE_END). So a round's writes follow what changed (jobs that start
waiting, supervisors that die), not how many wait. A job whose supervisor it cannot watch (no pidfds, no
descriptors left) is renewed as before, with the very statement a supervisor runs for its own lease
(transitions.RENEW: expected revision, phase and owner).

What keeps a cover true:
- Only the holder covers, in the transaction that holds the round, and only jobs it watches.
- A supervisor seen to end is uncovered before verified_at moves on: its lease becomes its own, as the last
  round left it (the lease it would have had, had the round renewed it then), and runs out.
- Any other change of a covered job ends its cover the same way (transitions._update): the round covers it
  again at its next look if it still waits.
- A holder that takes the round up, or has lost its watch, first watches every covered job; the round's term
  (counted by each change of holder) tells it when another holder may have covered jobs it does not watch,
  and those are uncovered before it moves verified_at.
- A holder that dies or stops moves verified_at no more: every cover lapses a lease after its last round, as
  the leases it renewed would have, and the waiter that takes the round up covers them again.
None of these writes is synced on its own: a lease outlives no boot.
"""
from .database import Transaction
from .queries import lease_end
from .transitions import RENEW

# Take the round if nobody holds it or its holder let it expire; keep it if it is ours. A new holder counts a term.
_HOLD = ("INSERT INTO lease_round (one, supervisor_id, expires_at, term) VALUES (1, ?, ?, 1)"
         " ON CONFLICT (one) DO UPDATE SET supervisor_id = excluded.supervisor_id, expires_at = excluded.expires_at,"
         " term = lease_round.term + (lease_round.supervisor_id != excluded.supervisor_id)"
         " WHERE lease_round.supervisor_id = excluded.supervisor_id OR lease_round.expires_at < ?")

# A job the round covers stops being covered: its lease becomes its own as the round last kept it. Run before
# verified_at moves on.
_UNCOVER = f"UPDATE job_state SET lease_expires_at = {lease_end('job_state')}, lease_cover = NULL" \
           " WHERE job_id = ? AND lease_cover IS NOT NULL"
# (lease length, job_id, revision, supervisor_id): only as read, waiting, and not covered yet.
_COVER = ("UPDATE job_state SET lease_cover = ? WHERE job_id = ? AND revision = ? AND supervisor_id = ?"
          " AND phase = 'waiting' AND lease_cover IS NULL")


def holder(conn) -> tuple[str, float] | None:
    """(supervisor id, held until) of the round, if anyone holds or held it."""
    held = state(conn)
    return None if held is None else (held[0], held[1])


def state(conn) -> tuple[str, float, int] | None:
    """(supervisor id, held until, term) of the round, if anyone holds or held it."""
    row = conn.execute("SELECT supervisor_id, expires_at, term FROM lease_round").fetchone()
    return tuple(row) if row else None


def covered(conn) -> list:
    """Every job the round covers, with its supervisor's identity: [(job_id, pid, start_time, boot_id)] (plain
    tuples: thousands)."""
    cursor = conn.cursor()
    cursor.row_factory = None
    return cursor.execute("SELECT job_id, supervisor_pid, supervisor_start_time, supervisor_boot_id"
                          " FROM job_state INDEXED BY job_state_covered WHERE lease_cover IS NOT NULL").fetchall()


def covered_ids(conn) -> set[str]:
    cursor = conn.cursor()
    cursor.row_factory = None
    return {r[0] for r in cursor.execute("SELECT job_id FROM job_state INDEXED BY job_state_covered"
                                         " WHERE lease_cover IS NOT NULL")}


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
    """The waiting jobs a round must look at: those not covered whose lease runs out before renew_before (or has
    none), and those whose reason to wait has gone or of which a cancel is asked. Each with its supervisor's
    identity, its windows and its lease: (job_id, revision, supervisor_id, pid, start_time, boot_id, lease,
    renew_interval, lease end (cover included), gone, cancel_asked, covered). The others are left out by SQLite before their
    windows are read. Plain tuples: at a sweep's start, thousands."""
    cursor = conn.cursor()
    cursor.row_factory = None
    return cursor.execute(
        "SELECT s.job_id, s.revision, s.supervisor_id, s.supervisor_pid, s.supervisor_start_time,"
        " s.supervisor_boot_id, j.lease_duration, j.renew_interval, " + lease_end("s") + ", " + _GONE + ","
        " s.cancel_requested_at IS NOT NULL, s.lease_cover IS NOT NULL"
        " FROM job_state s JOIN jobs j INDEXED BY jobs_windows ON j.id = s.job_id"
        " WHERE s.phase != 'finished' AND s.phase = 'waiting'"
        " AND ((s.lease_cover IS NULL AND (s.lease_expires_at IS NULL OR s.lease_expires_at < :renew_before))"
        " OR " + _GONE + ")",
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
    # From the groups, not from the waiting jobs' distinct groups: that was a pass over every waiting job.
    for (group,) in conn.execute("SELECT name FROM groups").fetchall():
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


def hold_and_renew(conn, supervisor_id: str, now: float, hold_until: float, renewals: list, watched, *, covers=(),
                   uncovers=(), term: int | None = None) -> int | None:
    """Hold the round until hold_until, in one transaction: uncover `uncovers` (job ids whose supervisor ended),
    write `renewals` [(expires_at, job_id, revision, supervisor_id)] and `covers` [(lease length, job_id, revision,
    supervisor_id)], and move verified_at to now: `watched` holds the job ids whose supervisor the holder has seen
    alive now. term: the round's term the holder's watch was made whole at (None: not yet); if the round's term is
    another, every covered job it does not watch is uncovered first. Returns the round's term, or None (and
    nothing written): another supervisor holds it."""
    with Transaction(conn, durable=False):
        if conn.execute(_HOLD, (supervisor_id, hold_until, now)).rowcount != 1:
            return None
        held_term = conn.execute("SELECT term FROM lease_round").fetchone()[0]
        uncover = set(uncovers)
        if held_term != term:
            uncover |= covered_ids(conn) - set(watched)
        if uncover:
            conn.executemany(_UNCOVER, [(job_id,) for job_id in uncover])
        conn.executemany(RENEW, renewals)
        if covers:
            conn.executemany(_COVER, covers)
        conn.execute("UPDATE lease_round SET verified_at = ?", (now,))
    return held_term


def release(conn, supervisor_id: str, job_id: str) -> list:
    """Give the round up (if it is still ours); returns a few waiting jobs whose supervisors may take it on:
    the newest, which tend to wait longest (a holder whose job starts hands the round on again), from the
    index of waiting jobs by submission time. [(job_id, pid, start_time, boot_id)]; the caller rings the
    first whose supervisor is alive and awake."""
    with Transaction(conn, durable=False):
        # The row stays, for its verified_at: the covers hold until the next holder moves it on.
        conn.execute("UPDATE lease_round SET expires_at = 0 WHERE supervisor_id = ?", (supervisor_id,))
        return conn.execute("SELECT job_id, supervisor_pid, supervisor_start_time, supervisor_boot_id FROM job_state"
                            " WHERE phase = 'waiting' AND job_id != ? ORDER BY line_at DESC, job_id DESC LIMIT 8",
                            (job_id,)).fetchall()
