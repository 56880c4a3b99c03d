"""Pausing a concurrency group and resuming it (`jobman group pause|resume`): the group keeps its limit, and a
paused one lends no slot (queries.OPEN_LIMIT), so its running jobs go on and its waiting ones stay in line."""
from .database import Transaction


def set_paused(conn, name: str, paused: bool, now: float) -> bool | None:
    """Pause a group or resume it. Whether it changed; None: no such group."""
    with Transaction(conn):
        if conn.execute("SELECT 1 FROM groups WHERE name = ?", (name,)).fetchone() is None:
            return None
        return conn.execute("UPDATE groups SET paused_at = ?, revision = revision + 1 WHERE name = ? AND "
                            + ("paused_at IS NULL" if paused else "paused_at IS NOT NULL"),
                            (now if paused else None, name)).rowcount == 1


def is_paused(conn, name: str) -> bool:
    row = conn.execute("SELECT paused_at FROM groups WHERE name = ?", (name,)).fetchone()
    return row is not None and row[0] is not None
