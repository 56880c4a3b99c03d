"""runkit.core.records: the named tuples stado's documents and results are made of, held to collections.namedtuple's
behaviour (what they replace), without importing collections."""
import pickle
import subprocess
import sys
from collections import namedtuple

import pytest

from runkit.core.records import record

FIELDS = "etag generation size"
Mine = record("Mine", FIELDS, defaults=(None, 0))
Theirs = namedtuple("Theirs", FIELDS, defaults=(None, 0))


class Sub(record("Sub", "a b")):
    __slots__ = ()

    def total(self):
        return self.a + self.b


@pytest.mark.parametrize("args, kwargs", [
    (("e",), {}), (("e", "g"), {}), (("e", "g", 3), {}), ((), {"etag": "e"}), (("e",), {"size": 5}),
    ((), {"etag": "e", "generation": "g", "size": 1}),
])
def test_it_builds_and_reads_as_namedtuple_does(args, kwargs):
    mine, theirs = Mine(*args, **kwargs), Theirs(*args, **kwargs)
    assert tuple(mine) == tuple(theirs) and mine == theirs and hash(mine) == hash(theirs)
    assert (mine.etag, mine.generation, mine.size) == (theirs.etag, theirs.generation, theirs.size)
    assert mine._asdict() == theirs._asdict() and mine._fields == theirs._fields
    assert mine._replace(size=9) == theirs._replace(size=9) and type(mine._replace(size=9)) is Mine
    assert repr(mine) == repr(theirs).replace("Theirs", "Mine")


@pytest.mark.parametrize("args, kwargs", [((), {}), (("e", "g", 3, 4), {}), (("e",), {"etag": "f"}),
                                          (("e",), {"colour": 1})])
def test_it_refuses_what_namedtuple_refuses(args, kwargs):
    with pytest.raises(TypeError):
        Theirs(*args, **kwargs)
    with pytest.raises(TypeError):
        Mine(*args, **kwargs)


def test_replace_refuses_an_unknown_field_and_fields_cannot_be_set():
    with pytest.raises(ValueError):
        Mine("e")._replace(colour=1)
    with pytest.raises(AttributeError):
        Mine("e").etag = "f"  # type: ignore[misc]
    assert not hasattr(Mine("e"), "__dict__") and not hasattr(Sub(1, 2), "__dict__")


def test_a_subclass_keeps_its_methods_and_both_pickle():
    assert Sub(1, 2).total() == 3 and Sub(b=2, a=1) == (1, 2) and repr(Sub(1, 2)) == "Sub(a=1, b=2)"
    assert pickle.loads(pickle.dumps(Sub(1, 2))) == Sub(1, 2) and type(pickle.loads(pickle.dumps(Sub(1, 2)))) is Sub
    assert Mine.__module__ == __name__ and pickle.loads(pickle.dumps(Mine("e"))) == Mine("e")


def test_making_and_using_records_imports_no_collections():
    code = ("import sys; from runkit.core.records import record; R = record('R', 'a b', defaults=(1,)); "
            "r = R(0)._replace(b=2); print(r.a + r.b, 'collections' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["2", "False"], done.stderr
