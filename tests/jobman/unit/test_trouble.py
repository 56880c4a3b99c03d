"""Storage trouble met by a command, translated once (jobman.store.trouble.TroubleCaught): caught and rolled back, or
refused as one line whose cause is SQLite's error; any other error goes through untouched."""
import pytest

from jobman.store.trouble import TroubleCaught
from jobman.core.errors import JobmanError
from jobman.store.sqlite import sqlite3


def disk_full():
    error = sqlite3.OperationalError("database or disk is full")
    error.sqlite_errorcode = 13
    raise error


def test_trouble_is_caught_and_its_transaction_rolled_back(conn):
    conn.execute("BEGIN IMMEDIATE")
    with TroubleCaught(conn) as caught:
        disk_full()
    assert caught.reason == "the disk is full" and isinstance(caught.error, sqlite3.OperationalError)
    assert not conn.in_transaction
    with TroubleCaught(conn) as fine:
        conn.execute("SELECT 1")
    assert fine.reason is None and fine.error is None


def test_trouble_is_refused_as_one_line_that_keeps_its_cause(conn):
    with pytest.raises(JobmanError) as refused:
        with TroubleCaught(conn, "cannot submit", "nothing was submitted"):
            disk_full()
    assert str(refused.value) == "cannot submit: the disk is full (database or disk is full); nothing was submitted"
    assert isinstance(refused.value.__cause__, sqlite3.OperationalError)


def test_any_other_error_goes_through(conn):
    with pytest.raises(sqlite3.IntegrityError):
        with TroubleCaught(conn, "cannot submit"):
            raise sqlite3.IntegrityError("UNIQUE constraint failed")
    with pytest.raises(KeyboardInterrupt):
        with TroubleCaught(conn):
            raise KeyboardInterrupt
