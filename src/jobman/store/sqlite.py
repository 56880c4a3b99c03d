"""SQLite's C module, without the `sqlite3` package around it: the package imports datetime and
collections.abc (about 2.5 ms of every submission and every supervisor start) to register date adapters
jobman never uses. Connection, Row and the exceptions are the very same objects either way, so code that
catches `sqlite3.Error` catches these.

The C module itself imports functools at its initialisation, for one thing: `functools.lru_cache`, which
builds each connection's statement cache. functools pulls in collections and its friends: 2.4 ms of every
Python start that opens the database (measured: `python -I -S` importing _sqlite3 and running 300
statements, 10.3 ms of CPU against 7.9 ms), which for a batch of 10,000 supervisors is half a minute of a
core. So the C module is given, for the time of its import only, a `functools` that holds just the
lru_cache it asks for, built on the very C wrapper functools.lru_cache returns (`_lru_cache_wrapper`;
cache_info() is never called by SQLite). If functools is loaded already, or the module wants anything else
from it (a later Python), it is imported the ordinary way."""
import sys


def _import_c_module():
    if "functools" in sys.modules:
        import _sqlite3

        return _sqlite3
    import _functools  # type: ignore[import-not-found]  # (the C half of functools: no stubs)

    def lru_cache(maxsize=128, typed=False):
        return lambda function: _functools._lru_cache_wrapper(function, maxsize, typed, tuple)

    lean = type(sys)("functools")
    lean.lru_cache = lru_cache
    sys.modules["functools"] = lean
    try:
        import _sqlite3

        return _sqlite3
    except Exception:
        pass  # (a failed import leaves no module behind: imported again below, with the real functools)
    finally:
        del sys.modules["functools"]
    import _sqlite3

    return _sqlite3


TYPE_CHECKING = False  # (typing's, without importing typing)
if TYPE_CHECKING:
    import _sqlite3 as sqlite3
else:
    sqlite3 = _import_c_module()
