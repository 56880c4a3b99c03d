"""Removing finished jobs (`jobman prune`): the one write that deletes rows, in one transaction."""
from .database import Transaction

# A job prune may remove (a selection takes only these): finished, holding no slot, no unfinished job depending on it.
PRUNABLE = ("s.phase = 'finished' AND s.slot_held = 0"
             " AND NOT EXISTS (SELECT 1 FROM dependencies d JOIN job_state ds ON ds.job_id = d.job_id"
             "                 WHERE d.depends_on = s.job_id AND ds.phase != 'finished')")


def prune(conn, cutoff: float, only_succeeded: bool = False, only: list[str] | None = None) -> tuple[list, list]:
    """Remove the jobs that finished at or before `cutoff` (only those that succeeded, if asked; only the jobs
    `only` names, if given), in one transaction. Never an unfinished job, nor one an unfinished job depends on,
    nor a lost job whose target still holds a slot. Returns ([(id, handle)] removed, []); with `only`, all or nothing:
    if one of them may not be removed, nothing is, and the second list has (id, phase, slot_held) of each."""
    with Transaction(conn):
        where, args = f"{PRUNABLE} AND s.finished_at <= ?", [cutoff]
        if only_succeeded:
            where += " AND s.outcome = 'succeeded'"
        if only is not None:
            where += f" AND s.job_id IN ({','.join('?' * len(only))})"
            args += only  # type: ignore[arg-type]  # (a list of ids and the cutoff: SQL's arguments)
        found = conn.execute(f"SELECT s.job_id, (SELECT handle FROM jobs WHERE id = s.job_id) FROM job_state s"
                             f" WHERE {where}", args).fetchall()
        ids = [r[0] for r in found]
        if only is not None and len(ids) < len(set(only)):
            kept = [tuple(r) for r in conn.execute(
                f"SELECT job_id, phase, slot_held FROM job_state WHERE job_id IN ({','.join('?' * len(only))})", only)
                if r[0] not in ids]
            return [], kept
        for job_id in ids:
            conn.execute("DELETE FROM dependencies WHERE depends_on = ?", (job_id,))
            conn.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
    return [(r[0], r[1]) for r in found], []
