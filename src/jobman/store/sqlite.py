"""SQLite's C module, without the `sqlite3` package around it: the package imports datetime and
collections.abc (about 2.5 ms of every submission and every supervisor start) to register date adapters
jobman never uses. Connection, Row and the exceptions are the very same objects either way, so code that
catches `sqlite3.Error` catches these."""
import _sqlite3 as sqlite3  # noqa: F401 (re-exported)
