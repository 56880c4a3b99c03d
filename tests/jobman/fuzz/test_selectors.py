"""Job selectors (jobman/store/selectors.py) against a real database of jobs with clashing names and ids that share
long prefixes: whatever a user types resolves by the documented rule (an exact id; else the newest job with
that display name; else a unique id prefix of at least 6 characters) or is a one-line NotFound."""
from runkit.core.clock import ManualClock
import time

import pytest
from hypothesis import assume, given, strategies as st

from tests.fuzzing import examples

NAMES = ["build", "test", "a", "A", "01a2", "x y", "déjà", "0123456789ab", "build "]


@pytest.fixture(scope="module")
def jobs_db(tmp_path_factory):
    """A jobman database with 40 jobs submitted through jobman's own transition (names reused on purpose)."""
    from jobman.handoff import spec as specs
    from jobman.store import database as db, transitions
    from runkit.core.ids import uuid7

    conn = db.connect(str(tmp_path_factory.mktemp("selectors") / "jobman.db"))
    made = []
    for n in range(40):
        name = NAMES[n % len(NAMES)].strip() if n % 3 else None
        spec = specs.build(argv=["/bin/true"], cwd="/", env_policy="clean", env_pairs=[], environ={}, name=name,
                           group="default", priority=0, not_before=None, retry=specs.default_retry(), timeout=None,
                           kill_after=10.0, log_limit=1 << 20, separate_stderr=False, windows=specs.windows_from_env({}))
        job_id = uuid7()
        transitions.submit(conn, job_id=job_id, spec=spec, dependencies=[], credential_hash=b"\0" * 32,
                           clock=ManualClock(time.time() + n * 0.001, 0.0))
        made.append((job_id, spec["name"]))
    yield conn, made
    conn.close()


def _typed(made):
    """Selectors as typed: ids whole or cut short (with or without hyphens, any case), names, and anything."""
    ids = [job_id for job_id, _ in made]
    return st.one_of(
        st.sampled_from(ids).map(str.upper),
        st.tuples(st.sampled_from(ids), st.integers(1, 36)).map(lambda p: p[0][:p[1]]),
        st.tuples(st.sampled_from(ids), st.integers(1, 32)).map(lambda p: p[0].replace("-", "")[:p[1]]),
        st.sampled_from(NAMES + ["", " ", "-", "%", "_", "0" * 6, "%%%%%%", "______"]),
        st.integers(0, 60).map(str),
        st.text(max_size=40))


def _expected(made, text):
    """The documented rule, applied by hand: the id, or None for an error."""
    selector = text.strip()
    if not selector:
        return None
    ids = [job_id for job_id, _ in made]
    if selector.isascii() and selector.isdigit() and selector[0] != "0" and len(selector) <= 18:
        if int(selector) <= len(ids):
            return ids[int(selector) - 1]  # a handle: the home's jobs are numbered in submission order
    if selector.lower() in ids:
        return selector.lower()
    named = [job_id for job_id, name in made if name == selector]
    if named:
        return max(named)  # the newest: ids sort by submission time
    compact = selector.lower().replace("-", "")
    if len(compact) >= 6 and all(c in "0123456789abcdef" for c in compact):
        found = [job_id for job_id in ids if job_id.replace("-", "").startswith(compact)]
        return found[0] if len(found) == 1 else None
    return None


@examples(600)
@given(st.data())
def test_a_selector_resolves_by_the_documented_rule_or_is_one_clear_error(jobs_db, data):
    from jobman.core.errors import NotFound
    from jobman.store.selectors import resolve

    conn, made = jobs_db
    text = data.draw(_typed(made))
    assume(not any("\ud800" <= c <= "\udfff" for c in text))  # surrogates: the test below
    want = _expected(made, text)
    try:
        got = resolve(conn, text)
    except NotFound as e:
        assert want is None, (text, want, str(e))
        assert str(e) and "\n" not in str(e)
        return
    assert got == want, text


@examples(50)
@given(st.text(alphabet=st.characters(min_codepoint=0xDC80, max_codepoint=0xDCFF), min_size=1, max_size=8))
def test_a_selector_that_is_not_utf8_is_one_clear_error(jobs_db, text):
    """What a shell passes from a non-UTF-8 argument (Python's surrogateescape)."""
    from jobman.core.errors import NotFound
    from jobman.store.selectors import resolve

    with pytest.raises(NotFound):
        resolve(jobs_db[0], text)
