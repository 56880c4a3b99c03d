"""jobman.store.sqlite: SQLite's C module loaded without functools (and collections behind it), its statement
cache still the one functools.lru_cache builds. Each case runs in a fresh interpreter, as a supervisor starts:
an import is process-wide state."""
import os
import subprocess
import sys

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "..", "src")


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-I", "-S", "-c", f"import sys; sys.path.insert(0, {SRC!r})\n" + code],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_c_module_is_loaded_without_functools_and_its_statement_cache_works():
    out = _python(
        "from jobman.store.sqlite import sqlite3\n"
        "import _sqlite3\n"
        "assert sqlite3 is _sqlite3\n"
        "print('functools' in sys.modules, 'collections' in sys.modules)\n"
        "c = sqlite3.connect(':memory:', cached_statements=8)\n"
        "c.execute('CREATE TABLE t (v)')\n"
        # More distinct statements than the cache holds, each run twice: evictions and hits both happen.
        "for rnd in range(2):\n"
        "    for i in range(40):\n"
        "        c.execute(f'INSERT INTO t VALUES ({i})')\n"
        "print(c.execute('SELECT count(*), sum(v) FROM t').fetchone())\n"
        "import functools\n"
        "print(functools.lru_cache.__module__, hasattr(functools, 'partial'))\n")
    assert out.splitlines() == ["False False", "(80, 1560)", "functools True"]


def test_functools_loaded_already_is_used_as_it_is():
    out = _python("import functools\n"
                  "from jobman.store.sqlite import sqlite3\n"
                  "print(sys.modules['functools'] is functools,"
                  " sqlite3.connect(':memory:').execute('SELECT 2').fetchone())\n")
    assert out == "True (2,)"


def test_a_c_module_that_wants_more_of_functools_gets_the_real_one():
    # A later Python whose _sqlite3 reads another name of functools at import: the lean stand-in fails that
    # import, and the module is imported again with the real functools.
    out = _python("import importlib.abc, importlib.machinery\n"
                  "real = importlib.machinery.PathFinder\n"
                  "class Picky(importlib.abc.MetaPathFinder):\n"
                  "    def find_spec(self, name, path=None, target=None):\n"
                  "        lean = sys.modules.get('functools')\n"
                  "        if name == '_sqlite3' and lean is not None and not hasattr(lean, 'partial'):\n"
                  "            raise ImportError('wants functools.partial')\n"
                  "        return None\n"
                  "sys.meta_path.insert(0, Picky())\n"
                  "del sys.modules['functools']\n"  # (importlib.abc brought it in)
                  "from jobman.store.sqlite import sqlite3\n"
                  "print(sqlite3.connect(':memory:').execute('SELECT 3').fetchone(), 'partial' in dir(sys.modules['functools']))\n")
    assert out == "(3,) True"
