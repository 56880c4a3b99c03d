"""JOB selectors: an exact id, else the newest job with that display name, else a unique id prefix of 6+
characters (hyphens optional); everything else is refused with the reason."""
from runkit.core.clock import ManualClock
import pytest

from jobman.store import selectors
from jobman.core.errors import NotFound
from jobman.store import transitions

from .conftest import spec


def add(conn, job_id: str, name=None, now=1000.0) -> str:
    transitions.submit(conn, job_id=job_id, spec=spec(name=name), dependencies=[], credential_hash=b"h" * 32,
                       clock=ManualClock(now, 0.0))
    return job_id


A = "01900000-aaaa-7000-8000-000000000001"
B = "01900000-aaab-7000-8000-000000000002"


def test_an_exact_id_in_any_case(conn):
    add(conn, A)
    assert selectors.resolve(conn, A.upper()) == A
    assert selectors.resolve(conn, f"  {A} ") == A


def test_a_name_means_the_newest_job_with_it(conn):
    add(conn, A, name="build", now=1000.0)
    add(conn, B, name="build", now=2000.0)
    assert selectors.resolve(conn, "build") == B


def test_a_unique_prefix_with_or_without_hyphens(conn):
    add(conn, A)
    add(conn, B)
    assert selectors.resolve(conn, "01900000-aaaa") == A
    assert selectors.resolve(conn, "01900000aaab") == B


def test_an_ambiguous_prefix_lists_the_candidates(conn):
    add(conn, A, name="first")
    add(conn, B)
    with pytest.raises(NotFound, match=f"ambiguous: it matches {A} \\(handle 1, first\\), {B} \\(handle 2\\); give more characters or the handle"):
        selectors.resolve(conn, "01900000")


@pytest.mark.parametrize("text, reason", [
    ("", "empty job selector"),
    ("0190", "an id prefix needs at least 6 characters"),
    ("nothing-like-it", "no job matches 'nothing-like-it'"),
    ("01900000-ffff", "no job matches"),
    ("\udcff", "not valid UTF-8"),
])
def test_what_matches_nothing_is_refused_with_the_reason(conn, text, reason):
    add(conn, A)
    with pytest.raises(NotFound, match=reason):
        selectors.resolve(conn, text)
