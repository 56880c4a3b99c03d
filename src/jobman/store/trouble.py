"""Storage trouble is waited out, never fatal: the one retry layer around a supervisor's database calls.

Busy or locked (another process holds the write lock: a backup, `sqlite3` in a shell), disk full,
read-only, I/O errors: back off with jitter and try again for as long as it takes, while the caller
goes on supervising (it passes its own way of pausing). The log says what was waited for, and for how
long once it works again. A write refused as read-only is tried again on a connection opened anew: SQLite
opens a file it may not write read-only without a word, and such a connection stays so for its whole life,
also once the file is writable again. A database file replaced or deleted under us (another inode at its path,
or none) is different: whatever we would write there is not about our job any more, so DatabaseGone
is raised and the caller stops claiming to own anything. The file's identity is also checked on
every lease renewal, since SQLite goes on writing happily into a deleted file.
"""
import os
import time

from .sqlite import sqlite3

TYPE_CHECKING = False  # (typing's, without importing typing)
if TYPE_CHECKING:
    from runkit.core.clock import Clock

# SQLite's primary result codes that mean "not now" rather than "never", and what each one waits for.
TROUBLE = {5: "the database is busy (another process holds its write lock)", 6: "a table is locked",
           7: "out of memory", 8: "the database is read-only", 10: "an I/O error",
           11: "the database file looks damaged", 13: "the disk is full",
           14: "the database file cannot be opened", 15: "a locking protocol error",
           26: "the file is not a database"}
FIRST_BACKOFF = 0.05
MAX_BACKOFF = 5.0
STILL_WAITING_EVERY = 60.0
READ_ONLY = 8  # SQLITE_READONLY, whatever its extended code says (a read-only open, a file moved, no WAL index)


# SQLite's own busy wait (it sleeps and retries inside the call) covers the ordinary few milliseconds
# of another writer's transaction; longer trouble comes back to the retry layer, which logs it and
# lets the supervisor go on supervising meanwhile.
BUSY_TIMEOUT_MS = 1_000


def connect(path: str):
    """A supervisor's connection to an existing database (raises JobmanError): SQLite's busy wait short, its lone
    statements relaxed (its lease renewals: database.Connection.relax)."""
    from . import database

    conn = database.connect(path, create=False, busy_timeout_ms=BUSY_TIMEOUT_MS)
    conn.relax()
    trace = os.environ.get("JOBMAN_TEST_QUERY_LOG")
    if trace:  # the tests count what an idle supervisor asks of the database
        from runkit.core.clock import SYSTEM

        log = open(trace, "a", buffering=1)
        pid = os.getpid()
        conn.set_trace_callback(lambda sql: log.write(f"{SYSTEM.wall():.3f} {pid} {' '.join(sql.split())[:80]}\n"))
    return conn


class DatabaseGone(Exception):
    """The file at the database's path is no longer the one this process opened."""


class TroubleCaught:
    """The one translation of storage trouble met by a command's database call (the supervisor's calls wait it out
    instead: PatientDatabase). `with TroubleCaught(conn) as caught: ...`: a database error inside the block that is storage
    trouble (trouble() names what it waits for) is caught and the transaction it left open rolled back, with
    caught.reason and caught.error saying what it was; with `refusal`, it is raised instead as one JobmanError,
    "REFUSAL: REASON (ERROR)[; CONSEQUENCE]", whose cause is SQLite's error. Any other error goes through as it is."""

    __slots__ = ("conn", "refusal", "consequence", "reason", "error")

    def __init__(self, conn, refusal: str | None = None, consequence: str | None = None):
        self.conn, self.refusal, self.consequence = conn, refusal, consequence
        self.reason: str | None = None
        self.error: Exception | None = None

    def __enter__(self) -> "TroubleCaught":
        return self

    def __exit__(self, kind, error, traceback) -> bool:
        reason = trouble(error) if isinstance(error, Exception) else None
        if reason is None:
            return False
        rollback(self.conn)
        self.reason, self.error = reason, error
        if self.refusal is not None:
            from ..core.errors import JobmanError

            raise JobmanError(f"{self.refusal}: {reason} ({error})"
                              + (f"; {self.consequence}" if self.consequence else "")) from error
        return True


def rollback(conn) -> None:
    """End the transaction a failed statement left open (storage trouble leaves one behind), if it can be."""
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass


def trouble(error: BaseException | None) -> str | None:
    """What a database error waits for, or None when it is no storage trouble (a bug, a constraint)."""
    if not isinstance(error, (sqlite3.OperationalError, sqlite3.DatabaseError)) or isinstance(
            error, (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError)):
        return None
    return TROUBLE.get(getattr(error, "sqlite_errorcode", 0) & 0xFF)


def file_identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def jitter(seconds: float, low: float = 0.5, high: float = 1.5) -> float:
    """`seconds` scaled by a random factor in [low, high] (os.urandom: `random` costs an import)."""
    return seconds * (low + (high - low) * int.from_bytes(os.urandom(2), "big") / 65535)


class PatientDatabase:
    """A connection whose calls wait out storage trouble. fn(conn, *args) is the unit of work: one
    statement or one transaction, which SQLite rolled back if it failed."""

    def __init__(self, conn, path: str, log, clock: "Clock"):
        """clock: the supervisor's."""
        self.conn, self.path, self.log = conn, path, log
        self.clock: Clock = clock
        self.identity = file_identity(path)
        self.since: float | None = None  # when the current spell of trouble began (the clock's monotonic time)
        self.reason: str | None = None
        self.tries = 0
        self.backoff = FIRST_BACKOFF
        self.next_note = 0.0
        self.waits: list[dict] = []  # spells of trouble waited out, for the caller to record once it can
        self.reopened = False  # whether the current spell has made a new connection (read-only trouble)

    def check_file(self) -> None:
        """Raise DatabaseGone if the path no longer names the file we opened."""
        now = file_identity(self.path)
        if now != self.identity:
            how = ("deleted" if now is None else
                   f"replaced (inode {self.identity[1] if self.identity else None} is now {now[1]})")
            raise DatabaseGone(f"the database file {self.path} was {how}")

    def try_once(self, what: str, fn, *args, **kwargs):
        """Run fn once. Returns (True, its result), or (False, seconds to wait before trying again) on
        storage trouble. DatabaseGone if the file changed; any other error propagates."""
        started = self.clock.monotonic()  # a spell of trouble starts with the call that met it (SQLite waited too)
        try:
            result = fn(self.conn, *args, **kwargs)
        except sqlite3.Error as e:
            reason = trouble(e)
            if reason is None:
                raise
            rollback(self.conn)
            self.check_file()
            wait = self._failed(what, reason, e, started)
            if getattr(e, "sqlite_errorcode", 0) & 0xFF == READ_ONLY:
                self._reopen()
            return False, wait
        if self.since is not None:
            self._recovered(what)
        return True, result

    def call(self, what: str, fn, *args, pause=time.sleep, give_up_after: float | None = None, **kwargs):
        """Run fn until it works, pausing between tries with pause(seconds) (a supervisor passes one that
        keeps supervising). With give_up_after, return None once that many seconds have passed."""
        started = self.clock.monotonic()
        while True:
            ok, value = self.try_once(what, fn, *args, **kwargs)
            if ok:
                return value
            if give_up_after is not None and self.clock.monotonic() - started + value > give_up_after:
                self.log(f"gave up trying to {what} after {self.clock.monotonic() - started:.1f}s ({self.reason})")
                return None
            pause(value)

    def _reopen(self) -> None:
        """A connection in place of one whose write was refused as read-only. SQLite falls back to a read-only open,
        silently, when the file cannot be written at the moment it is opened (a supervisor back from its lean form
        opens it again; `chmod 0400`, a read-only remount), and that connection refuses every write for as long as
        it lives: without a new one, a supervisor would wait for ever, after the file is writable again too. While
        it still cannot be written, the new connection is read-only again and the next try makes another."""
        from ..core.errors import JobmanError

        try:
            fresh = connect(self.path)
        except (JobmanError, sqlite3.Error):
            return  # cannot be opened just now: the next try asks again
        if file_identity(self.path) != self.identity:
            fresh.close()  # another file at the path: the next try's check_file says so
            return
        old, self.conn = self.conn, fresh
        try:
            old.close()
        except sqlite3.Error:
            pass
        if not self.reopened:
            self.reopened = True
            self.log("opens the database again at each try: a connection opened while the file could not be "
                     "written stays read-only")

    def _failed(self, what: str, reason: str, error: Exception, started: float) -> float:
        now = self.clock.monotonic()
        if self.since is None:
            self.since, self.reason, self.tries, self.backoff = started, reason, 0, FIRST_BACKOFF
            self.next_note = now + STILL_WAITING_EVERY
            self.log(f"waiting for the database: could not {what}: {reason} ({error}); retrying with backoff")
        elif now >= self.next_note:
            self.next_note = now + STILL_WAITING_EVERY
            self.log(f"still waiting for the database after {now - self.since:.1f}s: {reason} ({self.tries} tries)")
        self.reason = reason
        self.tries += 1
        wait = jitter(self.backoff)
        self.backoff = min(self.backoff * 2, MAX_BACKOFF)
        return wait

    def _recovered(self, what: str) -> None:
        assert self.since is not None
        waited = self.clock.monotonic() - self.since
        self.log(f"the database works again after {waited:.1f}s of waiting ({self.reason}; {self.tries} tries); "
                 f"{what}: done")
        self.waits.append({"reason": self.reason, "seconds": round(waited, 1), "tries": self.tries})
        self.since = None
        self.reopened = False
